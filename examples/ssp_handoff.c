/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* ssp_handoff: hand a connected TCP socket to a child process, which turns
 * that connection into an RDMA connection.  A process can pass a socket to
 * another (here by fork, or over a UNIX socket with SCM_RIGHTS) but never
 * an RDMA endpoint; Socket Service Points close that gap.
 *
 *   ssp_handoff [-u] [--self-test]   (both: the same run)
 *
 * -u: the connection is a pair of connected UDP sockets instead, for a
 * udp IA (IWDAPL_IA=iw-lo-udp).
 *
 * What happens:
 *   1. The parent makes one TCP connection over 127.0.0.1 (it listens on a
 *      port the kernel picks, connects and accepts, so it holds both ends)
 *      and exchanges a streaming message over it.
 *   2. It forks two workers and closes its own copies of both ends:
 *      - the server worker inherits the accepted end, opens its own IA
 *        and upgrades it: dat_iw_ssp_create (final streaming message
 *        "UPGRADE-OK"), then dat_cr_accept;
 *      - the client worker, the peer, inherits the connecting end, opens
 *        its own IA, reads "UPGRADE-OK" and calls dat_iw_socket_connect.
 *   3. The workers talk over RDMA (send/recv and one RDMA write) and
 *      disconnect; the parent waits for both.
 *
 * Environment: DAT_OVERRIDE selects the dat.conf, IWDAPL_IA the IA
 * (default iw-lo).  Exit status 0 when both workers succeeded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "ssp_example.h"

#define FINAL_MSG "UPGRADE-OK\n"

/* ------------------------------------------------------------ the pair */

/* Two UDP sockets on loopback, each connected to the other. */
static int udp_pair(int *c, int *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in b = a;
	socklen_t la = sizeof(a), lb = sizeof(b);

	*c = socket(AF_INET, SOCK_DGRAM, 0);
	*s = socket(AF_INET, SOCK_DGRAM, 0);
	if (*c < 0 || *s < 0 ||
	    bind(*c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    bind(*s, (struct sockaddr *)&b, sizeof(b)) < 0 ||
	    getsockname(*c, (struct sockaddr *)&a, &la) < 0 ||
	    getsockname(*s, (struct sockaddr *)&b, &lb) < 0 ||
	    connect(*c, (struct sockaddr *)&b, lb) < 0 ||
	    connect(*s, (struct sockaddr *)&a, la) < 0) {
		perror("parent: loopback UDP pair");
		if (*c >= 0)
			close(*c);
		if (*s >= 0)
			close(*s);
		return -1;
	}
	return 0;
}

/* One TCP connection over loopback, both ends here: *c connected, *s
 * accepted.  Port 0: the kernel picks a free port. */
static int tcp_pair(int *c, int *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	*c = *s = -1;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 1) < 0 || getsockname(l, (struct sockaddr *)&a, &len) < 0)
		goto fail;
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (*c < 0 || connect(*c, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto fail;
	*s = accept(l, NULL, NULL);
	if (*s < 0)
		goto fail;
	close(l);
	return 0;
fail:
	perror("parent: loopback TCP connection");
	if (l >= 0)
		close(l);
	if (*c >= 0)
		close(*c);
	return -1;
}

/* Streaming mode before the handoff: one line each way. */
static int parent_talk(int c, int s)
{
	char line[EX_LINE_MAX];

	if (ex_line_write(c, "HELLO from the client end") < 0 ||
	    ex_line_read(s, line, sizeof(line)) < 0)
		return -1;
	printf("parent: server end read: %s\n", line);
	if (ex_line_write(s, "WELCOME, a worker process takes over") < 0 ||
	    ex_line_read(c, line, sizeof(line)) < 0)
		return -1;
	printf("parent: client end read: %s\n", line);
	return 0;
}

/* ------------------------------------------------------------ workers */

/* Show that the child holds the very connection the parent made. */
static void show_socket(const char *who, int fd)
{
	struct sockaddr_in me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	char a[INET_ADDRSTRLEN] = "?", b[INET_ADDRSTRLEN] = "?";

	if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0)
		inet_ntop(AF_INET, &me.sin_addr, a, sizeof(a));
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) == 0)
		inet_ntop(AF_INET, &peer.sin_addr, b, sizeof(b));
	printf("%s (pid %d): inherited fd %d, %s:%u -> %s:%u\n", who,
	       (int)getpid(), fd, a, ntohs(me.sin_port), b, ntohs(peer.sin_port));
}

/* Runs in the child.  The IA is opened here, after fork: DAT handles,
 * registrations and the provider's progress thread do not survive a
 * fork, so the parent never opens one. */
static int server_worker(int fd)
{
	struct ex_rdma r;
	int ok;

	show_socket("server worker", fd);
	if (ex_ia_open(&r, "server worker") < 0 || ex_setup(&r) < 0) {
		ex_close(&r);
		close(fd);	/* never given to the provider: still ours */
		return 1;
	}
	printf("server worker: dat_iw_ssp_create on fd %d\n", fd);
	/* From here the socket is the provider's; ex_close ends it. */
	ok = ex_upgrade_passive(&r, fd, FINAL_MSG) == 0;
	if (ok)
		printf("server worker: RDMA connection established\n");
	ok = ok && ex_talk_server(&r) == 0 && ex_finish(&r, 0) == 0;
	ex_close(&r);
	return !ok;
}

static int client_worker(int fd)
{
	char line[EX_LINE_MAX];
	struct ex_rdma r;
	int ok;

	show_socket("client worker", fd);
	if (ex_ia_open(&r, "client worker") < 0 || ex_setup(&r) < 0 ||
	    ex_line_read(fd, line, sizeof(line)) < 0 || strcmp(line, "UPGRADE-OK")) {
		fprintf(stderr, "client worker: no upgrade\n");
		ex_close(&r);
		close(fd);
		return 1;
	}
	printf("client worker: socket recv: %s; dat_iw_socket_connect on fd %d\n",
	       line, fd);
	ok = ex_upgrade_active(&r, fd) == 0;
	if (ok)
		printf("client worker: RDMA connection established\n");
	ok = ok && ex_talk_client(&r) == 0 && ex_finish(&r, 1) == 0;
	ex_close(&r);
	return !ok;
}

/* Fork a worker for `keep`; the child closes `other`, the end it must
 * not hold (else that end would outlive its own worker's close). */
static pid_t spawn(int (*worker)(int), int keep, int other)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		perror("fork");
	if (pid == 0) {
		close(other);
		_exit(worker(keep));
	}
	return pid;
}

static int reap(pid_t pid, const char *who)
{
	int status = 0;

	if (pid <= 0 || waitpid(pid, &status, 0) < 0)
		return 1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	fprintf(stderr, "parent: %s failed (status 0x%x)\n", who, status);
	return 1;
}

int main(int argc, char **argv)
{
	pid_t srv, cli;
	int c, s, fails, udp = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-u")) {
			udp = 1;
		} else if (strcmp(argv[i], "--self-test")) {
			fprintf(stderr, "usage: ssp_handoff [-u] [--self-test]\n");
			return 2;
		}
	}
	if ((udp ? udp_pair(&c, &s) : tcp_pair(&c, &s)) < 0 ||
	    parent_talk(c, s) < 0) {
		fprintf(stderr, "parent: streaming exchange failed\n");
		return 1;
	}
	srv = spawn(server_worker, s, c);
	cli = spawn(client_worker, c, s);
	/* The workers own the connection now.  The parent's copies must go:
	 * a descriptor left open here would keep the TCP connection alive
	 * after the worker's EP closed it, and bytes the parent might read
	 * or write would corrupt the MPA and RDMA traffic. */
	close(c);
	close(s);
	fails = reap(srv, "server worker") + reap(cli, "client worker");
	printf("ssp_handoff: %s\n", fails ? "FAILED" : "passed");
	return fails != 0;
}
