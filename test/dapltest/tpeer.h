/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A peer process for the DAT fault and limit tests: the test program
 * forks and execs itself with "--peer ROLE ARGS..." so the peer is a
 * fresh process with no DAT state copied from its parent (a child that
 * only forks must not use DAT: doc/semantics.md), which the test can
 * stop, kill or starve.  The two talk over a SOCK_SEQPACKET socketpair,
 * fd PEER_CTL_FD in the peer, one struct peer_msg per packet.  The peer's
 * stdout goes to stderr so it never disturbs the parent's TAP stream.
 *
 * Also here: what the tests measure about themselves (open descriptors,
 * resident set, a monotonic clock) and the accounting of posted work
 * requests against their completions.  Header-only, like tside.h. */
#ifndef IW_TPEER_H
#define IW_TPEER_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "tside.h"

#define PEER_CTL_FD  3
#define PEER_MAX_ARGS 6
#define PEER_ALARM_S 60		/* a forgotten peer dies by itself */

enum peer_msg_type {
	PM_READY = 1,		/* v0: a qualifier the peer listens on */
	PM_ESTABLISHED,		/* the peer's EP is connected */
	PM_RMR,			/* v0 rmr context, v1 address, v2 length */
	PM_REQUEST,		/* the peer got a connection request */
	PM_GO,			/* parent -> peer: do the next step */
	PM_DONE,		/* the step is done; arg: a result */
	PM_EVENT,		/* arg: a DAT event number the peer saw */
	PM_FAIL,		/* arg: where the peer failed */
};

struct peer_msg {
	int32_t type;
	int32_t arg;
	uint64_t v[3];
};

struct peer {
	pid_t pid;
	int ctl;
};

/* A role: what the peer does, with its arguments after the role name. */
struct peer_role {
	const char *name;
	int (*run)(int argc, char **argv);
};

static char peer_self_path[4096];

/* ------------------------------------------------------- measurements */

static inline uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Open descriptors of a process (pid 0: this one), -1 if unreadable. */
static inline int fd_count_of(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - (pid == 0);	/* not the directory's own descriptor */
}

static inline int fd_count(void)
{
	return fd_count_of(0);
}

/* Descriptors are closed by the progress thread after the call that
 * ends their object returns: wait (bounded) for the count to settle. */
static inline int fd_count_settled(int want, unsigned ms)
{
	int n = fd_count();

	for (unsigned i = 0; n > want && i < ms / 10; i++) {
		usleep(10000);
		n = fd_count();
	}
	return n;
}

static inline long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Whether valgrind runs this process (its preload is in LD_PRELOAD). */
static inline int under_valgrind(void)
{
	const char *pre = getenv("LD_PRELOAD");

	return pre && strstr(pre, "vgpreload");
}

/* Growth of RSS only means something without a sanitizer or valgrind:
 * ASan's quarantine holds freed memory, valgrind has its own allocator. */
static inline int rss_meaningful(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return 0;
#else
	return !under_valgrind();
#endif
}

/* ---------------------------------------------------------- messages */

static inline int peer_send(int fd, int type, int arg, uint64_t a,
			    uint64_t b, uint64_t c)
{
	struct peer_msg m = { type, arg, { a, b, c } };

	return send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m);
}

/* The next message within ms; 0 on time-out, end or a short packet. */
static inline int peer_recv(int fd, struct peer_msg *m, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	ssize_t k;

	memset(m, 0, sizeof(*m));
	if (poll(&p, 1, ms) != 1)
		return 0;
	do
		k = recv(fd, m, sizeof(*m), 0);
	while (k < 0 && errno == EINTR);
	return k == (ssize_t)sizeof(*m);
}

/* A message of the given type; reports what came instead. */
static inline int peer_expect(const struct peer *p, int type,
			      struct peer_msg *m, int ms)
{
	struct peer_msg tmp;

	if (!m)
		m = &tmp;
	if (!peer_recv(p->ctl, m, ms)) {
		printf("#   peer %d: no message %d within %d ms\n", (int)p->pid,
		       type, ms);
		return 0;
	}
	if (m->type != type) {
		printf("#   peer %d: message %d (arg %d), want %d\n",
		       (int)p->pid, m->type, m->arg, type);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------ the process */

/* Call first in main: the path to exec for a peer. */
static inline void peer_init(void)
{
	ssize_t n = readlink("/proc/self/exe", peer_self_path,
			     sizeof(peer_self_path) - 1);

	if (n <= 0)
		BAIL("readlink /proc/self/exe");
	peer_self_path[n] = 0;
}

/* Fork and exec this program as a peer in the given role.  Between fork
 * and exec only async-signal-safe calls: the parent may have threads. */
static inline int peer_spawn(struct peer *p, const char *role,
			     const char *const args[])
{
	char *argv[PEER_MAX_ARGS + 4];
	int sv[2], n = 0;

	argv[n++] = peer_self_path;
	argv[n++] = (char *)"--peer";
	argv[n++] = (char *)role;
	for (int i = 0; args && args[i] && i < PEER_MAX_ARGS; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	p->pid = 0;
	p->ctl = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	fflush(stdout);
	p->pid = fork();
	if (p->pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	if (p->pid == 0) {
		/* dup2 onto another number clears close-on-exec. */
		if (sv[1] == PEER_CTL_FD)
			fcntl(PEER_CTL_FD, F_SETFD, 0);
		else
			dup2(sv[1], PEER_CTL_FD);
		dup2(2, 1);
		execv(peer_self_path, argv);
		_exit(127);
	}
	close(sv[1]);
	p->ctl = sv[0];
	return 1;
}

/* Wait up to ms for the peer to end; its wait status in *st.  Returns 1
 * if it ended, 0 if still running. */
static inline int peer_wait(struct peer *p, int ms, int *st)
{
	for (int i = 0; i <= ms / 5; i++) {
		pid_t r = waitpid(p->pid, st, WNOHANG);

		if (r == p->pid || (r < 0 && errno == ECHILD))
			return 1;
		usleep(5000);
	}
	return 0;
}

static inline void peer_close_ctl(struct peer *p)
{
	if (p->ctl >= 0)
		close(p->ctl);
	p->ctl = -1;
}

/* SIGSTOP; 1 once waitpid reports the peer stopped (only then is it). */
static inline int peer_stop(struct peer *p)
{
	return p->pid > 0 && kill(p->pid, SIGSTOP) == 0 &&
	       waitpid(p->pid, NULL, WUNTRACED) == p->pid;
}

/* SIGKILL and reap; 1 if the peer died of it (was alive until then). */
static inline int peer_kill(struct peer *p)
{
	int st = 0;

	if (p->pid <= 0)
		return 0;
	kill(p->pid, SIGKILL);
	if (waitpid(p->pid, &st, 0) != p->pid)
		st = 0;
	p->pid = 0;
	peer_close_ctl(p);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

/* Reap a peer that should exit by itself: its exit status, or -1 when
 * it had to be killed or died of a signal (named in a diagnostic). */
static inline int peer_finish(struct peer *p, int ms)
{
	int st = 0;

	if (p->pid <= 0)
		return -1;
	if (!peer_wait(p, ms, &st)) {
		printf("#   peer %d still running after %d ms: killed\n",
		       (int)p->pid, ms);
		peer_kill(p);
		return -1;
	}
	p->pid = 0;
	peer_close_ctl(p);
	if (WIFSIGNALED(st)) {
		printf("#   peer died of signal %d\n", WTERMSIG(st));
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* In main: run the role named by "--peer ROLE" and exit, or return if
 * this is the test itself. */
static inline void peer_dispatch(int argc, char **argv,
				 const struct peer_role *roles)
{
	if (argc < 3 || strcmp(argv[1], "--peer"))
		return;
	signal(SIGALRM, SIG_DFL);
	alarm(PEER_ALARM_S);
	for (; roles->name; roles++)
		if (!strcmp(roles->name, argv[2]))
			exit(roles->run(argc - 3, argv + 3));
	fprintf(stderr, "peer: no role %s\n", argv[2]);
	exit(2);
}

/* An EP of side s with room for dtos requests and receives (side_ep
 * has the provider's default depth). */
static inline DAT_EP_HANDLE side_ep_deep(struct side *s, int dtos)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_EP_ATTR a;

	memset(&a, 0, sizeof(a));
	a.service_type = DAT_SERVICE_TYPE_RC;
	a.qos = DAT_QOS_BEST_EFFORT;
	a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.max_recv_dtos = dtos;
	a.max_request_dtos = dtos;
	a.max_recv_iov = 1;
	a.max_request_iov = 1;
	a.max_rdma_read_in = 8;
	a.max_rdma_read_out = 8;
	a.srq_soft_hw = DAT_HW_DEFAULT;
	if (dat_ep_create(s->ia, s->pz, s->rcv, s->req, s->conn, &a, &ep) !=
	    DAT_SUCCESS)
		BAIL("dat_ep_create (%d deep)", dtos);
	return ep;
}

/* ------------------------------------------- the peer's DAT helpers */

static inline struct sockaddr_in peer_loopback(void)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* dat_ep_connect to qualifier q on 127.0.0.1, no private data. */
static inline DAT_RETURN connect_lo(DAT_EP_HANDLE ep, DAT_CONN_QUAL q)
{
	struct sockaddr_in a = peer_loopback();

	return dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&a, q, TSIDE_WAIT_US, 0,
			      NULL, DAT_QOS_BEST_EFFORT,
			      DAT_CONNECT_DEFAULT_FLAG);
}

/* Connect s->ep (created here unless it exists) to qualifier q on
 * 127.0.0.1 and wait for ESTABLISHED: 1 on success. */
static inline int peer_connect(struct side *s, DAT_CONN_QUAL q)
{
	if (!s->ep)
		s->ep = side_ep(s);
	if (connect_lo(s->ep, q) != DAT_SUCCESS)
		return 0;
	return side_wait(s->conn, TSIDE_WAIT_US).event_number ==
	       DAT_CONNECTION_EVENT_ESTABLISHED;
}

static inline DAT_CONN_QUAL arg_qual(const char *s)
{
	return (DAT_CONN_QUAL)strtoull(s, NULL, 0);
}

/* A TAP point skipped, with the reason. */
static inline void tap_skip(const char *what, const char *why)
{
	printf("ok %d - %s # SKIP %s\n", ++tap_count, what, why);
}

/* In the peer: wait up to ms for the parent's PM_GO. */
static inline int peer_wait_go(int ms)
{
	struct peer_msg m;

	return peer_recv(PEER_CTL_FD, &m, ms) && m.type == PM_GO;
}

static inline int peer_tell(int type, int arg, uint64_t a, uint64_t b,
			    uint64_t c)
{
	return peer_send(PEER_CTL_FD, type, arg, a, b, c);
}

/* In the peer: open a side listening on a free qualifier, and tell the
 * parent which (PM_READY).  0 when it cannot listen. */
static inline int peer_listen(struct side *s, DAT_PSP_HANDLE *psp)
{
	DAT_CONN_QUAL q = 0;

	side_open(s);
	if (dat_psp_create_any(s->ia, &q, s->cr, DAT_PSP_CONSUMER_FLAG, psp) !=
	    DAT_SUCCESS)
		return 0;
	return peer_tell(PM_READY, 0, q, 0, 0);
}

/* Block until the parent kills this process (events are not read). */
static inline int peer_park(void)
{
	for (;;)
		pause();
	return 0;
}

/* ------------------------------------- work requests and completions */

#define WRC_MAX 4096

/* Cookies base..base+posted-1 were posted; each must complete once. */
struct wr_count {
	uint64_t base;
	unsigned posted, completed, ok, flushed, errors, strays;
	unsigned char seen[WRC_MAX];
};

static inline void wrc_init(struct wr_count *w, uint64_t base)
{
	memset(w, 0, sizeof(*w));
	w->base = base;
}

static inline uint64_t wrc_next(const struct wr_count *w)
{
	return w->base + w->posted;
}

/* Account one event; 0 if it is not a DTO completion. */
static inline int wrc_take(struct wr_count *w, const DAT_EVENT *ev)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev->event_data.dto_completion_event_data;
	uint64_t i = d->user_cookie.as_64 - w->base;

	if (ev->event_number != DAT_DTO_COMPLETION_EVENT)
		return 0;
	if (d->user_cookie.as_64 < w->base || i >= w->posted || i >= WRC_MAX ||
	    w->seen[i]) {
		w->strays++;
		return 1;
	}
	w->seen[i] = 1;
	w->completed++;
	if (d->status == DAT_DTO_SUCCESS)
		w->ok++;
	else if (d->status == DAT_DTO_ERR_FLUSHED)
		w->flushed++;
	else
		w->errors++;
	return 1;
}

/* Take completions until none comes for quiet_us (or total_us passed). */
static inline void wrc_drain(struct wr_count *w, DAT_EVD_HANDLE evd,
			     DAT_TIMEOUT quiet_us, uint64_t total_us)
{
	uint64_t end = now_us() + total_us;
	DAT_EVENT ev;

	while (now_us() < end && w->completed < w->posted) {
		ev = side_wait(evd, quiet_us);
		if (!wrc_take(w, &ev))
			break;
	}
	/* Anything beyond the count is a stray (a second completion). */
	while (side_wait(evd, 0).event_number == DAT_DTO_COMPLETION_EVENT)
		w->strays++;
}

static inline void wrc_diag(const char *what, const struct wr_count *w)
{
	printf("#   %s: posted %u, completed %u (ok %u, flushed %u, other "
	       "errors %u), strays %u\n", what, w->posted, w->completed, w->ok,
	       w->flushed, w->errors, w->strays);
}

static inline int wrc_balanced(const struct wr_count *w)
{
	return w->completed == w->posted && !w->strays;
}

#endif
