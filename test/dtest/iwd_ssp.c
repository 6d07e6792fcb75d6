/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest --ssp: the two sides first talk over a plain TCP socket (a one
 * line negotiation, as an application that may fall back to streaming
 * would), then upgrade that very socket to RDMA with the DAT iWARP
 * extension: the server with a Socket Service Point, the client with
 * dat_iw_socket_connect.  Lines are read a byte at a time so that no byte
 * of the MPA exchange is ever taken by the negotiation. */
#include "dat_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dat2/dat_iw_extensions.h>

#define HELLO   "IWDTEST SSP 1\n"
#define UPGRADE "IWDTEST UPGRADE\n"

/* Reads one line, and not a byte past it: what follows belongs to the
 * upgrade.  It peeks at what came and takes the line's bytes only. */
static int read_line(int fd, char *buf, size_t max, int wait_ms)
{
	size_t n = 0;

	while (n + 1 < max) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t got;
		char *nl;

		if (poll(&p, 1, wait_ms) <= 0)
			return -1;
		got = recv(fd, buf + n, max - 1 - n, MSG_PEEK);
		if (got <= 0)
			return -1;
		nl = memchr(buf + n, '\n', (size_t)got);
		if (nl)
			got = nl - (buf + n) + 1;
		if (recv(fd, buf + n, (size_t)got, 0) != got)
			return -1;
		n += (size_t)got;
		if (nl)
			break;
	}
	buf[n] = '\0';
	return 0;
}

static int write_all(int fd, const char *s)
{
	size_t len = strlen(s), done = 0;

	while (done < len) {
		ssize_t w = write(fd, s + done, len - done);

		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

/* TCP connect to host:port; retries for retry_ms while nobody listens
 * yet.  Returns the socket or -1. */
int du_tcp_dial(const char *host, unsigned port, int retry_ms)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	char svc[16];
	int fd = -1;

	snprintf(svc, sizeof svc, "%u", port);
	if (getaddrinfo(host, svc, &hints, &res)) {
		fprintf(stderr, "iwdtest: cannot resolve %s\n", host);
		return -1;
	}
	for (int waited = 0; waited <= retry_ms; waited += 100) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(100 * 1000);
	}
	freeaddrinfo(res);
	if (fd < 0)
		fprintf(stderr, "iwdtest: no TCP peer at %s:%u\n", host, port);
	return fd;
}

/* Client: TCP connect to host:port and say hello.  Returns the socket or -1. */
int du_ssp_dial(const char *host, unsigned port, int retry_ms)
{
	int fd = du_tcp_dial(host, port, retry_ms);

	if (fd >= 0 && write_all(fd, HELLO)) {
		close(fd);
		return -1;
	}
	return fd;
}

int du_tcp_listen(unsigned port, int backlog)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int l, one = 1;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		return -1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, backlog)) {
		fprintf(stderr, "iwdtest: cannot listen on TCP port %u: %s\n",
			port, strerror(errno));
		close(l);
		return -1;
	}
	return l;
}

int du_tcp_accept(int lfd, int wait_ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	return poll(&p, 1, wait_ms) == 1 ? accept(lfd, NULL, NULL) : -1;
}

/* Server: accept one TCP client on port and read its hello. */
int du_ssp_answer(unsigned port, int wait_ms)
{
	char line[64];
	int l = du_tcp_listen(port, 1), fd;

	if (l < 0)
		return -1;
	fd = du_tcp_accept(l, wait_ms);
	close(l);
	if (fd < 0 || read_line(fd, line, sizeof line, wait_ms) ||
	    strcmp(line, HELLO) != 0) {
		fprintf(stderr, "iwdtest: --ssp: no iwdtest client on TCP port %u\n", port);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Server: the SSP sends the final streaming message and produces the
 * request; the CR and its private data are returned as du_wait_cr does. */
int du_ssp_wait_cr(struct du *d, int fd, DAT_TIMEOUT wait_us, DAT_CR_HANDLE *cr,
		   void *pd, int pdmax, int *pdlen)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	int rc;

	if (du_check(dat_iw_ssp_create(d->ia, fd, d->ep, d->cr_evd, (DAT_PVOID)UPGRADE,
				       (DAT_COUNT)strlen(UPGRADE), &ssp),
		     "dat_iw_ssp_create"))
		return -1;
	rc = du_wait_cr(d, wait_us, cr, pd, pdmax, pdlen);
	/* The CR owns the socket now: freeing the SSP does not touch it. */
	dat_iw_ssp_free(ssp);
	return rc;
}

int du_ssp_await_offer(struct du *d, int fd)
{
	char line[64];

	if (read_line(fd, line, sizeof line, (int)(d->tmo_us / 1000)) ||
	    strcmp(line, UPGRADE) != 0) {
		fprintf(stderr, "iwdtest: --ssp: the server did not offer the upgrade\n");
		close(fd);
		return -1;
	}
	return 0;
}

int du_ssp_upgrade(struct du *d, int fd, const void *pd, int pdlen)
{
	if (du_check(dat_iw_socket_connect(d->ep, fd, d->tmo_us, pdlen, pd),
		     "dat_iw_socket_connect")) {
		close(fd);
		return -1;
	}
	return du_wait_established(d);
}

/* Client: wait for the server's upgrade line, then turn the socket into an
 * RDMA connection; the EP owns it from then on. */
int du_ssp_connect(struct du *d, int fd, const void *pd, int pdlen)
{
	return du_ssp_await_offer(d, fd) || du_ssp_upgrade(d, fd, pd, pdlen) ? -1 : 0;
}
