/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The counters of a running process, for `iwinfo --stats <pid>`.
 *
 * While at least one IA is open, a thread of the provider listens on the
 * abstract unix socket "\0iwdapl-stats-<pid>" (no file: the name goes
 * with the process, or with the last IA).  Each client that connects gets
 * the text of every open IA and each of its EPs (dapl_stats_print_ia),
 * then end of file.  Abstract names are per network namespace and open to
 * any local user of that namespace, so nothing but counters is served.
 *
 * Locking: list_mx guards the list of open IAs and is held while they are
 * printed (an IA cannot be freed meanwhile: dapl_stats_ia_closing takes
 * it first); server_mx serializes starting and stopping the thread and
 * is taken before list_mx, never after.  The server takes only list_mx,
 * so a closing thread may join it under server_mx. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dapl.h"
#include "dapl_stats.h"
#include "iw_env.h"

#define SEND_TIMEOUT_S 2	/* a client that stops reading is dropped */

static pthread_mutex_t server_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t list_mx = PTHREAD_MUTEX_INITIALIZER;
static struct dapl_ia *open_ias;	/* list_mx */
static unsigned next_ia_id;		/* list_mx */

static struct stats_server {
	int running;
	pid_t pid;			/* the process that started it */
	int listen_fd, stop_fd;
	pthread_t thread;
} server = { .listen_fd = -1, .stop_fd = -1 };	/* server_mx */

void dapl_stats_socket_name(char *buf, size_t len)
{
	snprintf(buf, len, "@iwdapl-stats-%ld", (long)getpid());
}

/* The text of every open IA, in a malloc'd buffer. */
static char *render_all(size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	fprintf(f, "iwdapl-stats 1 pid %ld\n", (long)getpid());
	pthread_mutex_lock(&list_mx);
	for (struct dapl_ia *ia = open_ias; ia; ia = ia->stats_next)
		dapl_stats_print_ia(f, ia);
	pthread_mutex_unlock(&list_mx);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void serve_client(int fd)
{
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_S };
	size_t len = 0, off = 0;
	char *buf = render_all(&len);

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (buf && off < len) {
		ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(buf);
	close(fd);
}

static void *server_main(void *arg)
{
	struct pollfd p[2] = { { .fd = server.listen_fd, .events = POLLIN },
			       { .fd = server.stop_fd, .events = POLLIN } };

	(void)arg;
	for (;;) {
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(server.listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			serve_client(fd);
	}
	return NULL;
}

static int listen_socket(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char name[64];
	size_t n;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	dapl_stats_socket_name(name, sizeof(name));
	n = strlen(name);
	/* Abstract: a leading NUL instead of the '@' shown. */
	memcpy(a.sun_path + 1, name + 1, n - 1);
	if (bind(fd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) ||
	    listen(fd, 8)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* server_mx held.  Counters stay readable through the extension if the
 * socket cannot be had (a forked child whose parent holds the name). */
static void server_start(void)
{
	server.listen_fd = listen_socket();
	if (server.listen_fd < 0)
		return;
	server.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (server.stop_fd >= 0 &&
	    pthread_create(&server.thread, NULL, server_main, NULL) == 0) {
		server.running = 1;
		server.pid = getpid();
		return;
	}
	if (server.stop_fd >= 0)
		close(server.stop_fd);
	close(server.listen_fd);
	server.listen_fd = server.stop_fd = -1;
}

/* server_mx held, list_mx not. */
static void server_stop(void)
{
	uint64_t one = 1;

	if (!server.running)
		return;
	/* A forked child inherits the descriptors, not the thread. */
	if (server.pid == getpid()) {
		if (write(server.stop_fd, &one, sizeof(one)) != sizeof(one))
			abort();	/* an eventfd write of 1 cannot fail */
		pthread_join(server.thread, NULL);
	}
	close(server.stop_fd);
	close(server.listen_fd);
	server.listen_fd = server.stop_fd = -1;
	server.running = 0;
}

void dapl_stats_ia_opened(struct dapl_ia *ia)
{
	int first;

	pthread_mutex_lock(&server_mx);
	pthread_mutex_lock(&list_mx);
	ia->stats_id = ++next_ia_id;
	first = !open_ias;
	ia->stats_next = open_ias;
	open_ias = ia;
	pthread_mutex_unlock(&list_mx);
	if (server.running && server.pid != getpid())
		server_stop();	/* the parent's, inherited by fork */
	if (first && !server.running)
		server_start();
	pthread_mutex_unlock(&server_mx);
}

/* IWDAPL_STATS=1: the IA's counters on stderr when it closes (a table,
 * asked for, so not a line of the log). */
static void dump_at_close(struct dapl_ia *ia)
{
	if (!iw_env_bool("IWDAPL_STATS", 0))
		return;
	fprintf(stderr, "iwdapl: counters at dat_ia_close, pid %ld\n",
		(long)getpid());
	dapl_stats_print_ia(stderr, ia);
	fflush(stderr);
}

void dapl_stats_ia_closing(struct dapl_ia *ia)
{
	int last;

	pthread_mutex_lock(&server_mx);
	pthread_mutex_lock(&list_mx);
	for (struct dapl_ia **pp = &open_ias; *pp; pp = &(*pp)->stats_next)
		if (*pp == ia) {
			*pp = ia->stats_next;
			break;
		}
	last = !open_ias;
	pthread_mutex_unlock(&list_mx);
	if (last)
		server_stop();
	pthread_mutex_unlock(&server_mx);
	dump_at_close(ia);
}
