/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwdtest --ssp: the two sides first talk over a plain socket (a one
 * line negotiation, as an application that may fall back to streaming
 * would), then upgrade that very socket to RDMA with the DAT iWARP
 * extension: the server with a Socket Service Point, the client with
 * dat_iw_socket_connect.  On a tcp IA the socket is TCP, and lines are
 * taken no further than their '\n' so that no byte of the MPA exchange is
 * ever read by the negotiation.  On a udp IA it is a connected UDP socket,
 * one line per datagram, and every step survives a lost datagram: see
 * dgram_dial and du_ssp_wait_cr. */
#include "dat_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dat2/dat_iw_extensions.h>

#define HELLO   "IWDTEST SSP 1\n"
#define UPGRADE "IWDTEST UPGRADE\n"
#define WELCOME "IWDTEST WELCOME\n"	/* udp only: the hello arrived */
#define READY   "IWDTEST READY\n"	/* udp only: no more hellos follow */
#define HELLO_EVERY_MS 100
/* Far longer than a hello's: a READY repeated while the offer is on its
 * way (not lost, only slow) draws a second offer, which reaches the
 * client after its TRP request went out, and its connect then fails
 * (NON_PEER_REJECTED).  Only a lost READY or offer should cost a repeat. */
#define READY_EVERY_MS 500
/* Strays the server takes out of the socket before it gives up. */
#define STRAYS_MAX 16

/* Reads one line, and not a byte past it: what follows belongs to the
 * upgrade.  It peeks at what came and takes the line's bytes only (on a
 * UDP socket a line is a whole datagram, and the rest of it is dropped). */
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

/* host:port as an IPv4 socket address, or -1 (printed). */
static int peer_addr(const char *host, unsigned port, struct sockaddr_in *sin)
{
	if (du_resolve(host, sin))
		return -1;
	sin->sin_port = htons((uint16_t)port);
	return 0;
}

/* TCP connect to host:port; retries for retry_ms while nobody listens
 * yet.  Returns the socket or -1. */
int du_tcp_dial(const char *host, unsigned port, int retry_ms)
{
	struct sockaddr_in to;
	int fd = -1;

	if (peer_addr(host, port, &to))
		return -1;
	for (int waited = 0; waited <= retry_ms; waited += 100) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof to) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(100 * 1000);
	}
	if (fd < 0)
		fprintf(stderr, "iwdtest: no TCP peer at %s:%u\n", host, port);
	return fd;
}

/* A UDP socket connected to host:port, or -1 (printed). */
static int dgram_connect(const char *host, unsigned port)
{
	struct sockaddr_in to;
	int fd;

	if (peer_addr(host, port, &to))
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof to)) {
		fprintf(stderr, "iwdtest: UDP connect %s:%u: %s\n", host, port,
			strerror(errno));
		close(fd);
		fd = -1;
	}
	return fd;
}

/* UDP client.  A hello sent before the server has bound its port is lost
 * (an ICMP port unreachable, seen as ECONNREFUSED), and any datagram may
 * be dropped on the way, so the hello is repeated until the server
 * welcomes it; READY (dgram_await_offer) then tells the server that no
 * further hello follows. */
static int dgram_dial(const char *host, unsigned port, int retry_ms)
{
	char line[64];
	int fd = dgram_connect(host, port);

	for (int left = retry_ms; fd >= 0 && left >= 0; left -= HELLO_EVERY_MS) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (write_all(fd, HELLO) == 0 && poll(&p, 1, HELLO_EVERY_MS) == 1 &&
		    read_line(fd, line, sizeof line, 0) == 0) {
			if (strcmp(line, WELCOME) == 0)
				return fd;
			continue;	/* not ours: ask again */
		}
		if (p.revents == 0)
			continue;	/* the poll's wait was the pause */
		usleep(HELLO_EVERY_MS * 1000);	/* refused: nobody there yet */
	}
	if (fd >= 0)
		close(fd);
	fprintf(stderr, "iwdtest: no iwdtest server on UDP port %u at %s\n", port, host);
	return -1;
}

/* Client: connect to host:port (TCP on a tcp IA, UDP on a udp IA) and say
 * hello.  Returns the socket or -1. */
int du_ssp_dial(struct du *d, const char *host, unsigned port, int retry_ms)
{
	int fd;

	if (du_ia_is_udp(d))
		return dgram_dial(host, port, retry_ms);
	fd = du_tcp_dial(host, port, retry_ms);
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

/* UDP server: the first hello's sender becomes the socket's peer; its
 * hellos are welcomed until its READY (see dgram_dial); a READY repeated
 * after that is du_ssp_wait_cr's. */
static int dgram_answer(unsigned port, int wait_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in from;
	socklen_t flen = sizeof from;
	struct pollfd p = { .events = POLLIN };
	char line[64];
	ssize_t n = -1;
	int one = 1, rc = -1;

	p.fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (p.fd < 0)
		return -1;
	setsockopt(p.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(p.fd, (struct sockaddr *)&a, sizeof a)) {
		fprintf(stderr, "iwdtest: cannot bind UDP port %u: %s\n", port,
			strerror(errno));
		close(p.fd);
		return -1;
	}
	if (poll(&p, 1, wait_ms) == 1)
		n = recvfrom(p.fd, line, sizeof line - 1, 0, (struct sockaddr *)&from, &flen);
	if (n > 0 && (line[n] = '\0', strcmp(line, HELLO) == 0) &&
	    connect(p.fd, (struct sockaddr *)&from, flen) == 0) {
		/* rc: a line of this round was read whole (a failed
		 * read may leave part of one in line). */
		do {
			rc = write_all(p.fd, WELCOME) ||
			     read_line(p.fd, line, sizeof line, wait_ms) ? -1 : 0;
		} while (rc == 0 && strcmp(line, HELLO) == 0);
		if (rc == 0 && strcmp(line, READY) == 0)
			return p.fd;
	}
	fprintf(stderr, "iwdtest: --ssp: no iwdtest client on UDP port %u\n", port);
	close(p.fd);
	return -1;
}

/* Server: take one client on port (TCP on a tcp IA, UDP on a udp IA) and
 * read its hello.  Returns the socket or -1. */
int du_ssp_answer(struct du *d, unsigned port, int wait_ms)
{
	char line[64];
	int l, fd;

	if (du_ia_is_udp(d))
		return dgram_answer(port, wait_ms);
	l = du_tcp_listen(port, 1);

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

/* A datagram the SSP left in the socket (it was not the TRP request):
 * taken out whole, 1 when it was READY.  -1 when nothing could be read. */
static int take_stray(int fd)
{
	char line[64];
	ssize_t n = recv(fd, line, sizeof line - 1, MSG_DONTWAIT);

	if (n < 0)
		return -1;
	line[n] = '\0';
	return strcmp(line, READY) == 0;
}

/* An SSP on fd for d->ep, its request to d->cr_evd; offer: the final
 * streaming message, or NULL for none. */
static int ssp_create(struct du *d, int fd, const char *offer, DAT_IW_SSP_HANDLE *ssp)
{
	return du_check(dat_iw_ssp_create(d->ia, fd, d->ep, d->cr_evd, (DAT_PVOID)offer,
					  offer ? (DAT_COUNT)strlen(offer) : 0, ssp),
			"dat_iw_ssp_create");
}

int du_ssp_offer(struct du *d, int fd, DAT_IW_SSP_HANDLE *ssp)
{
	return ssp_create(d, fd, UPGRADE, ssp);
}

/* Server: the SSP sends the final streaming message and produces the
 * request; the CR and its private data are returned as du_wait_cr does.
 * Over UDP the client repeats READY until the offer reaches it, so when
 * the offer (or READY) was lost, or a repeat crossed the offer, the SSP
 * finds a READY where the TRP request belongs and ends with
 * NON_PEER_REJECTED, the datagram left in the socket: take it out and
 * upgrade again, offering again when it was READY (the client has not
 * seen the offer yet). */
int du_ssp_wait_cr(struct du *d, int fd, DAT_TIMEOUT wait_us, DAT_CR_HANDLE *cr,
		   void *pd, int pdmax, int *pdlen)
{
	const char *offer = UPGRADE;

	for (int strays = 0;; strays++) {
		DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
		DAT_EVENT ev;
		int rc;

		if (ssp_create(d, fd, offer, &ssp))
			return -1;
		rc = du_wait_cr_event(d, wait_us, &ev);
		/* The CR owns the socket now; after NON_PEER_REJECTED the
		 * consumer does.  Freeing the SSP touches it in neither case. */
		dat_iw_ssp_free(ssp);
		if (rc)
			return -1;
		/* The event first: the transport is an IA query, kept out of
		 * the upgrade that bench/iwcm times. */
		if (ev.event_number != DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
		    strays == STRAYS_MAX || !du_ia_is_udp(d))
			return du_take_cr(&ev, cr, pd, pdmax, pdlen);
		rc = take_stray(fd);
		if (rc < 0)
			return -1;
		offer = rc ? UPGRADE : NULL;
	}
}

static int no_offer(int fd)
{
	fprintf(stderr, "iwdtest: --ssp: the server did not offer the upgrade\n");
	close(fd);
	return -1;
}

/* UDP client: READY, repeated until the offer comes (either may be lost;
 * see du_ssp_wait_cr); a welcome of a repeated hello may come first. */
static int dgram_await_offer(struct du *d, int fd)
{
	char line[64];

	for (int left = (int)(d->tmo_us / 1000); left >= 0; left -= READY_EVERY_MS) {
		if (write_all(fd, READY))
			break;
		while (read_line(fd, line, sizeof line, READY_EVERY_MS) == 0) {
			if (strcmp(line, UPGRADE) == 0)
				return 0;
			if (strcmp(line, WELCOME) != 0)
				return no_offer(fd);
		}
	}
	return no_offer(fd);
}

int du_ssp_await_offer(struct du *d, int fd)
{
	char line[64];

	if (du_ia_is_udp(d))
		return dgram_await_offer(d, fd);
	if (read_line(fd, line, sizeof line, (int)(d->tmo_us / 1000)) ||
	    strcmp(line, UPGRADE) != 0)
		return no_offer(fd);
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
