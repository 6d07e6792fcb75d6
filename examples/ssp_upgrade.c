/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* ssp_upgrade: talk over a plain socket first (TCP, or UDP with -u), then
 * turn that very connection into an RDMA connection with a Socket Service
 * Point when both sides can do RDMA; keep talking over the socket when
 * one side cannot.
 *
 *   ssp_upgrade [-u] -s [-p port]           server, on 127.0.0.1
 *   ssp_upgrade [-u] -c 127.0.0.1 [-p port] client
 *   ssp_upgrade [-u] --self-test            fork both, twice: once with
 *                                           RDMA on both sides, once with
 *                                           a client that cannot
 *                                           (IWDAPL_NO_RDMA=1)
 *
 * -u: the conversation runs over a connected UDP socket (one line per
 * datagram) and the upgrade needs a udp IA (IWDAPL_IA=iw-lo-udp): the
 * server takes the first datagram's sender as its peer.  Loopback does
 * not lose datagrams; over a real link the negotiation would need its own
 * retries, the RDMA connection has TRP's.
 *
 * Environment: DAT_OVERRIDE selects the dat.conf, IWDAPL_IA the IA (default
 * iw-lo), IWDAPL_NO_RDMA=1 makes this side say it cannot do RDMA.
 *
 * The line protocol, client first in each exchange:
 *   C: HELLO ssp_upgrade 1          S: HELLO ssp_upgrade 1
 *   C: RDMA yes|no                  S: RDMA yes|no
 * both "yes": S calls dat_iw_ssp_create with the final streaming message
 *   "UPGRADE-OK"; C reads that line, then calls dat_iw_socket_connect on
 *   the same socket; S accepts the connection request; RDMA from then on.
 * otherwise: C: MSG <n> <text>      S: ECHO <n> <text>     (three times)
 *            C: BYE                 S: BYE
 *
 * Exit status 0 when the conversation completed, in either mode. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "ssp_example.h"

#define DEFAULT_PORT	7471
#define PROTO_HELLO	"HELLO ssp_upgrade 1"
#define FINAL_MSG	"UPGRADE-OK\n"

enum mode { FAILED = -1, STREAMED = 0, UPGRADED = 1 };

static int sock_type = SOCK_STREAM;	/* -u: SOCK_DGRAM */

/* ------------------------------------------------------------ sockets */

static int listen_on(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1, fd = socket(AF_INET, sock_type, 0);

	if (fd < 0) {
		perror("socket");
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (sock_type == SOCK_STREAM && listen(fd, 1) < 0) ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("listen on 127.0.0.1");
		close(fd);
		return -1;
	}
	*bound = ntohs(a.sin_port);
	return fd;
}

/* UDP: the sender of the first datagram (left queued: it is the first
 * line) becomes the socket's peer; the caller gets its own descriptor. */
static int accept_dgram(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	char c;

	if (poll(&p, 1, 10000) != 1 ||
	    recvfrom(lfd, &c, 1, MSG_PEEK, (struct sockaddr *)&from, &len) < 0 ||
	    connect(lfd, (struct sockaddr *)&from, len) < 0) {
		perror("server: first datagram");
		return -1;
	}
	return dup(lfd);
}

static int accept_one(int lfd)
{
	int fd;

	if (sock_type == SOCK_DGRAM)
		return accept_dgram(lfd);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		perror("accept");
	return fd;
}

static int connect_to(const char *host, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "client: %s is not an IPv4 address\n", host);
		return -1;
	}
	fd = socket(AF_INET, sock_type, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "client: connect %s:%u: %s\n", host, port,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* ---------------------------------------------------- the negotiation */

/* Can this side do RDMA?  On yes, r holds an IA ready for the upgrade. */
static int local_rdma(struct ex_rdma *r, const char *who)
{
	const char *off = getenv("IWDAPL_NO_RDMA");

	memset(r, 0, sizeof(*r));
	if (off && !strcmp(off, "1")) {
		printf("%s: RDMA switched off (IWDAPL_NO_RDMA=1)\n", who);
		return 0;
	}
	if (ex_ia_open(r, who) < 0)
		return 0;
	if (ex_setup(r) < 0) {
		ex_close(r);
		return 0;
	}
	printf("%s: IA %s supports Socket Service Points\n", who, ex_ia_name());
	return 1;
}

/* Send our line, then read the peer's (client) or the other way round
 * (server), so the exchange never deadlocks. */
static int exchange(int fd, int first, const char *mine, char *theirs)
{
	if (first && ex_line_write(fd, "%s", mine) < 0)
		return -1;
	if (ex_line_read(fd, theirs, EX_LINE_MAX) < 0)
		return -1;
	if (!first && ex_line_write(fd, "%s", mine) < 0)
		return -1;
	return 0;
}

/* HELLO, then the RDMA capabilities; 1 when both sides can upgrade. */
static int negotiate(int fd, const char *who, int client, int can)
{
	char line[EX_LINE_MAX];
	int peer_can;

	if (exchange(fd, client, PROTO_HELLO, line) < 0 || strcmp(line, PROTO_HELLO)) {
		fprintf(stderr, "%s: bad or missing HELLO\n", who);
		return -1;
	}
	if (exchange(fd, client, can ? "RDMA yes" : "RDMA no", line) < 0 ||
	    strncmp(line, "RDMA ", 5)) {
		fprintf(stderr, "%s: bad or missing RDMA line\n", who);
		return -1;
	}
	peer_can = !strcmp(line + 5, "yes");
	printf("%s: we %s RDMA, the peer %s\n", who, can ? "can do" : "cannot do",
	       peer_can ? "can" : "cannot");
	return can && peer_can;
}

/* ---------------------------------------------------- streaming mode */

static enum mode server_stream(int fd)
{
	char line[EX_LINE_MAX];

	printf("server: staying in streaming mode over the socket\n");
	while (ex_line_read(fd, line, sizeof(line)) == 0) {
		printf("server: socket recv: %s\n", line);
		if (!strcmp(line, "BYE"))
			return ex_line_write(fd, "BYE") < 0 ? FAILED : STREAMED;
		if (strncmp(line, "MSG ", 4) || ex_line_write(fd, "ECHO %s", line + 4) < 0)
			break;
	}
	fprintf(stderr, "server: streaming conversation broken\n");
	return FAILED;
}

static enum mode client_stream(int fd)
{
	char line[EX_LINE_MAX];

	printf("client: staying in streaming mode over the socket\n");
	for (int n = 1; n <= 3; n++) {
		if (ex_line_write(fd, "MSG %d hello over the socket", n) < 0 ||
		    ex_line_read(fd, line, sizeof(line)) < 0)
			goto broken;
		printf("client: socket recv: %s\n", line);
	}
	if (ex_line_write(fd, "BYE") < 0 || ex_line_read(fd, line, sizeof(line)) < 0 ||
	    strcmp(line, "BYE"))
		goto broken;
	printf("client: socket recv: %s\n", line);
	return STREAMED;
broken:
	fprintf(stderr, "client: streaming conversation broken\n");
	return FAILED;
}

/* ---------------------------------------------------------- RDMA mode */

/* From dat_iw_ssp_create on, the socket is the provider's: it ends with
 * the EP (closed by ex_close), so the caller must not close it. */
static enum mode server_rdma(struct ex_rdma *r, int fd)
{
	int ok;

	printf("server: upgrading the socket (dat_iw_ssp_create)\n");
	ok = ex_upgrade_passive(r, fd, FINAL_MSG) == 0;
	if (ok)
		printf("server: RDMA connection established\n");
	ok = ok && ex_talk_server(r) == 0 && ex_finish(r, 0) == 0;
	ex_close(r);
	return ok ? UPGRADED : FAILED;
}

static enum mode client_rdma(struct ex_rdma *r, int fd)
{
	char line[EX_LINE_MAX];
	int ok;

	/* The server's final streaming message says its SSP is waiting:
	 * only now may the MPA request go out. */
	if (ex_line_read(fd, line, sizeof(line)) < 0 || strcmp(line, "UPGRADE-OK")) {
		fprintf(stderr, "client: no UPGRADE-OK from the server\n");
		ex_close(r);
		return FAILED;
	}
	printf("client: socket recv: %s; upgrading (dat_iw_socket_connect)\n", line);
	ok = ex_upgrade_active(r, fd) == 0;
	if (ok)
		printf("client: RDMA connection established\n");
	ok = ok && ex_talk_client(r) == 0 && ex_finish(r, 1) == 0;
	ex_close(r);
	return ok ? UPGRADED : FAILED;
}

/* ------------------------------------------------------------ the sides */

/* One side on a connected socket.  The socket is closed here only if it
 * stayed ours (streaming mode or a failed negotiation). */
static enum mode run_side(int fd, int client)
{
	const char *who = client ? "client" : "server";
	struct ex_rdma r;
	int can = local_rdma(&r, who);
	int both = negotiate(fd, who, client, can);
	enum mode m;

	if (both > 0)
		return client ? client_rdma(&r, fd) : server_rdma(&r, fd);
	if (can)
		ex_close(&r);
	m = both < 0 ? FAILED : client ? client_stream(fd) : server_stream(fd);
	close(fd);
	return m;
}

static const char *mode_name(enum mode m)
{
	return m == UPGRADED ? "RDMA" : m == STREAMED ? "streaming" : "failed";
}

static int serve(uint16_t port)
{
	uint16_t bound;
	int lfd = listen_on(port, &bound), fd;

	if (lfd < 0)
		return 1;
	printf("server: listening on 127.0.0.1:%u\n", bound);
	fflush(stdout);
	fd = accept_one(lfd);
	close(lfd);
	if (fd < 0)
		return 1;
	return run_side(fd, 0) == FAILED;
}

static int client(const char *host, uint16_t port)
{
	int fd = connect_to(host, port);

	return fd < 0 || run_side(fd, 1) == FAILED;
}

/* ---------------------------------------------------------- self-test */

/* One round: a forked client against this process as the server.  The
 * client process opens its own IA: DAT objects do not cross fork. */
static int self_round(int client_no_rdma, enum mode want)
{
	uint16_t port;
	int lfd = listen_on(0, &port), fd, status = 1;
	enum mode got;
	pid_t pid;

	if (lfd < 0)
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(lfd);
		if (client_no_rdma)
			setenv("IWDAPL_NO_RDMA", "1", 1);
		_exit(client("127.0.0.1", port));
	}
	fd = pid < 0 ? -1 : accept_one(lfd);
	close(lfd);
	got = fd < 0 ? FAILED : run_side(fd, 0);
	if (pid > 0)
		waitpid(pid, &status, 0);
	printf("self-test: %s mode, client exit %d (want %s)\n", mode_name(got),
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1, mode_name(want));
	return got != want || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

static int self_test(void)
{
	int fails;

	unsetenv("IWDAPL_NO_RDMA");
	printf("self-test: round 1, both sides can do RDMA\n");
	fails = self_round(0, UPGRADED);
	printf("self-test: round 2, the client cannot do RDMA\n");
	fails += self_round(1, STREAMED);
	printf("self-test: %s\n", fails ? "FAILED" : "passed");
	return fails != 0;
}

/* -------------------------------------------------------------- main */

static void usage(void)
{
	fprintf(stderr, "usage: ssp_upgrade [-u] -s [-p port]\n"
			"       ssp_upgrade [-u] -c <ipv4-address> [-p port]\n"
			"       ssp_upgrade [-u] --self-test\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *host = NULL;
	long port = DEFAULT_PORT;
	int opt, server = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "-u")) {
		sock_type = SOCK_DGRAM;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	if (argc == 2 && !strcmp(argv[1], "--self-test"))
		return self_test();
	while ((opt = getopt(argc, argv, "sc:p:")) != -1) {
		switch (opt) {
		case 's': server = 1; break;
		case 'c': host = optarg; break;
		case 'p': port = strtol(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (server == !!host || optind != argc || port <= 0 || port > 65535)
		usage();
	return server ? serve((uint16_t)port) : client(host, (uint16_t)port);
}
