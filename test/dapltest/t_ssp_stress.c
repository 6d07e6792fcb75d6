/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* t_ssp_stress: Socket Service Point upgrades done concurrently.
 *
 * THREADS threads (default 8) each perform ITERS (default 50) complete
 * upgrades of a fresh loopback TCP connection: dat_iw_ssp_create with a
 * final streaming message on the accepted end, dat_iw_socket_connect on
 * the connecting end, dat_cr_accept, a per-iteration pattern sent each
 * way and checked, then disconnect and free.  Every upgrade must succeed.
 *
 * All threads share one server IA and one client IA (and one PZ on each):
 * the provider's SSP table, CR and EP handle tables, connection manager
 * and progress thread are then contended by every thread at once, which
 * one IA pair per thread would not do.  Each thread has its own EVDs,
 * registered buffers, sockets and EPs, so every event it waits for is its
 * own.  Ports come from the kernel (bind to port 0).
 *
 * Every wait is bounded and a watchdog alarm ends a hung run.  For slow
 * runs (valgrind) SSP_STRESS_THREADS and SSP_STRESS_ITERS lower the
 * counts; SSP_STRESS_TIMEOUT (seconds) moves the watchdog. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tside.h"
#include <dat2/dat_iw_extensions.h>

#define DEF_THREADS	8
#define DEF_ITERS	50
#define MAX_THREADS	64
#define MSG_LEN		1024		/* pattern bytes each way */
#define BUF_LEN		(4 * MSG_LEN)	/* recv slot, send slot */
#define WAIT_US		5000000		/* one event: 5 s at most */

/* One side's objects of one thread, on the shared IA and PZ. */
struct end {
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE req, rcv, conn, cr;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lctx;
	unsigned char *buf;
	DAT_EP_HANDLE ep;
};

struct worker {
	int id, iters;
	pthread_t thread;
	struct end s, c;	/* server (SSP) and client (socket_connect) */
	int lfd;		/* this thread's listener, 127.0.0.1:<kernel> */
	struct sockaddr_in addr;
	int ok;			/* upgrades done with data validated */
	char why[200];		/* the first failure, for the TAP output */
};

/* What one iteration holds, and whether the sockets are still ours. */
struct iter {
	int n;
	int c, s, c_ours, s_ours;
	DAT_IW_SSP_HANDLE ssp;
	DAT_CR_HANDLE cr;
};

static DAT_IA_HANDLE S_ia, C_ia;
static DAT_PZ_HANDLE S_pz, C_pz;

/* -------------------------------------------------------------- util */

static int env_count(const char *name, int def, int max)
{
	const char *v = getenv(name);
	int n = v ? atoi(v) : 0;

	return n > 0 && n <= max ? n : def;
}

/* Open sockets of this process.  Only sockets: the provider starts its
 * progress thread (an epoll and an eventfd per IA) at the first
 * connection, which is not a leak. */
static int open_sockets(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char target[64];
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t len;

		len = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
		if (len > 0 && !strncmp(target, "socket:", 7))
			n++;
	}
	closedir(d);
	return n;
}

/* Record the first failure of a thread; returns -1 for the caller. */
static int fail(struct worker *w, const struct iter *it, const char *what,
		DAT_RETURN r)
{
	if (!w->why[0])
		snprintf(w->why, sizeof(w->why), "iteration %d: %s (0x%08x)",
			 it->n, what, (unsigned)r);
	return -1;
}

/* The pattern of one direction of one iteration of one thread. */
static void pattern(unsigned char *p, int tid, int n, int dir)
{
	unsigned seed = ((unsigned)tid << 20) ^ ((unsigned)n << 4) ^ (unsigned)dir;

	for (int i = 0; i < MSG_LEN; i++)
		p[i] = (unsigned char)(seed * 2654435761u + (unsigned)i * 31u +
				       (unsigned)(i >> 8));
}

/* ------------------------------------------------------- setup, ends */

static void end_open(struct end *e, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz)
{
	DAT_REGION_DESCRIPTION rd;
	DAT_RMR_CONTEXT rctx;
	DAT_VLEN rsize;
	DAT_VADDR raddr;

	memset(e, 0, sizeof(*e));
	e->ia = ia;
	e->req = side_evd(ia, DAT_EVD_DTO_FLAG, 8);
	e->rcv = side_evd(ia, DAT_EVD_DTO_FLAG, 8);
	e->conn = side_evd(ia, DAT_EVD_CONNECTION_FLAG, 8);
	e->cr = side_evd(ia, DAT_EVD_CR_FLAG, 8);
	e->buf = aligned_alloc(4096, BUF_LEN);
	if (!e->buf)
		BAIL("out of memory");
	memset(e->buf, 0, BUF_LEN);
	rd.for_va = e->buf;
	if (dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, rd, BUF_LEN, pz,
			   DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &e->lmr,
			   &e->lctx, &rctx, &rsize, &raddr) != DAT_SUCCESS)
		BAIL("dat_lmr_create");
}

static void end_close(struct end *e)
{
	dat_lmr_free(e->lmr);
	dat_evd_free(e->req);
	dat_evd_free(e->rcv);
	dat_evd_free(e->conn);
	dat_evd_free(e->cr);
	free(e->buf);
}

static void listener_open(struct worker *w)
{
	socklen_t len = sizeof(w->addr);

	memset(&w->addr, 0, len);
	w->addr.sin_family = AF_INET;
	w->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (w->lfd < 0 || bind(w->lfd, (struct sockaddr *)&w->addr, len) < 0 ||
	    listen(w->lfd, 4) < 0 ||
	    getsockname(w->lfd, (struct sockaddr *)&w->addr, &len) < 0)
		BAIL("listener: %s", strerror(errno));
}

/* ------------------------------------------------------------ DTOs */

static DAT_RETURN post(struct end *e, int recv, size_t off)
{
	DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)(e->buf + off), MSG_LEN,
				e->lctx };
	DAT_DTO_COOKIE ck = { .as_64 = off };

	return recv ? dat_ep_post_recv(e->ep, 1, &iov, ck, DAT_COMPLETION_DEFAULT_FLAG)
		    : dat_ep_post_send(e->ep, 1, &iov, ck, DAT_COMPLETION_DEFAULT_FLAG);
}

static int dto_ok(DAT_EVD_HANDLE evd, size_t off)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev.event_data.dto_completion_event_data;

	return ev.event_number == DAT_DTO_COMPLETION_EVENT &&
	       d->status == DAT_DTO_SUCCESS && d->user_cookie.as_64 == off &&
	       d->transfered_length == MSG_LEN;
}

/* ---------------------------------------------------- one iteration */

/* Read exactly len bytes within WAIT_US. */
static int read_exact(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, WAIT_US / 1000) <= 0)
			return -1;
		n = recv(fd, (char *)buf + got, len - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* TCP pair, both EPs, the SSP with its final message, socket_connect. */
static int it_start(struct worker *w, struct iter *it)
{
	char final[32], got[32];
	int pd[2] = { w->id, it->n };
	DAT_RETURN r;
	int len;

	it->c = socket(AF_INET, SOCK_STREAM, 0);
	if (it->c < 0 || connect(it->c, (struct sockaddr *)&w->addr,
				 sizeof(w->addr)) < 0)
		return fail(w, it, "TCP connect", 0);
	it->c_ours = 1;
	it->s = accept(w->lfd, NULL, NULL);
	if (it->s < 0)
		return fail(w, it, "TCP accept", 0);
	it->s_ours = 1;
	if (dat_ep_create(S_ia, S_pz, w->s.rcv, w->s.req, w->s.conn, NULL, &w->s.ep) ||
	    dat_ep_create(C_ia, C_pz, w->c.rcv, w->c.req, w->c.conn, NULL, &w->c.ep))
		return fail(w, it, "dat_ep_create", 0);
	len = snprintf(final, sizeof(final), "GO %d %d\n", w->id, it->n);
	r = dat_iw_ssp_create(S_ia, it->s, w->s.ep, w->s.cr, final, len, &it->ssp);
	if (r != DAT_SUCCESS)
		return fail(w, it, "dat_iw_ssp_create", r);
	it->s_ours = 0;
	if (read_exact(it->c, got, (size_t)len) < 0 || memcmp(got, final, (size_t)len))
		return fail(w, it, "final streaming message", 0);
	r = dat_iw_socket_connect(w->c.ep, it->c, WAIT_US, sizeof(pd), pd);
	if (r != DAT_SUCCESS)
		return fail(w, it, "dat_iw_socket_connect", r);
	it->c_ours = 0;
	return 0;
}

/* The connection request: ours, with our private data; then accept. */
static int it_accept(struct worker *w, struct iter *it)
{
	DAT_EVENT ev = side_wait(w->s.cr, WAIT_US);
	const DAT_CR_ARRIVAL_EVENT_DATA *a = &ev.event_data.cr_arrival_event_data;
	int pd[2] = { w->id, it->n };
	DAT_CR_PARAM p;
	DAT_RETURN r;

	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    a->sp_handle.psp_handle != it->ssp)
		return fail(w, it, "no DAT_CONNECTION_REQUEST_EVENT", ev.event_number);
	it->cr = a->cr_handle;
	memset(&p, 0, sizeof(p));
	r = dat_cr_query(it->cr, DAT_CR_FIELD_ALL, &p);
	if (r != DAT_SUCCESS || p.private_data_size != (DAT_COUNT)sizeof(pd) ||
	    memcmp(p.private_data, pd, sizeof(pd)) || p.local_ep_handle != w->s.ep)
		return fail(w, it, "CR private data or EP", r);
	if (post(&w->s, 1, 0) || post(&w->c, 1, 0))
		return fail(w, it, "dat_ep_post_recv", 0);
	r = dat_cr_accept(it->cr, DAT_HANDLE_NULL, 0, NULL);
	if (r != DAT_SUCCESS)
		return fail(w, it, "dat_cr_accept", r);
	if (side_wait(w->s.conn, WAIT_US).event_number != DAT_CONNECTION_EVENT_ESTABLISHED ||
	    side_wait(w->c.conn, WAIT_US).event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
		return fail(w, it, "ESTABLISHED on both sides", 0);
	return 0;
}

/* One pattern from `from` to `to`, checked byte for byte. */
static int it_transfer(struct worker *w, struct iter *it, struct end *from,
		       struct end *to, int dir)
{
	unsigned char want[MSG_LEN];

	pattern(want, w->id, it->n, dir);
	memcpy(from->buf + 2 * MSG_LEN, want, MSG_LEN);
	memset(to->buf, 0, MSG_LEN);
	if (post(from, 0, 2 * MSG_LEN) != DAT_SUCCESS)
		return fail(w, it, "dat_ep_post_send", 0);
	if (!dto_ok(from->req, 2 * MSG_LEN) || !dto_ok(to->rcv, 0))
		return fail(w, it, dir ? "server->client DTO" : "client->server DTO", 0);
	if (memcmp(to->buf, want, MSG_LEN))
		return fail(w, it, dir ? "server->client data" : "client->server data", 0);
	return 0;
}

static int it_disconnect(struct worker *w, struct iter *it)
{
	DAT_RETURN r = dat_ep_disconnect(w->c.ep, DAT_CLOSE_GRACEFUL_FLAG);

	if (r != DAT_SUCCESS)
		return fail(w, it, "dat_ep_disconnect", r);
	if (side_wait(w->c.conn, WAIT_US).event_number != DAT_CONNECTION_EVENT_DISCONNECTED ||
	    side_wait(w->s.conn, WAIT_US).event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
		return fail(w, it, "DISCONNECTED on both sides", 0);
	return 0;
}

/* Free what the iteration made.  A socket given to the SSP or the EP is
 * theirs (freeing the EP closes it); only sockets still ours are closed
 * here, as another thread may already have reused a number we gave away. */
static int it_end(struct worker *w, struct iter *it, int ok)
{
	DAT_RETURN r = DAT_SUCCESS;

	if (w->c.ep && (r = dat_ep_free(w->c.ep)) != DAT_SUCCESS && ok)
		ok = fail(w, it, "dat_ep_free (client)", r) == 0;
	if (w->s.ep && (r = dat_ep_free(w->s.ep)) != DAT_SUCCESS && ok)
		ok = fail(w, it, "dat_ep_free (server)", r) == 0;
	if (it->ssp && (r = dat_iw_ssp_free(it->ssp)) != DAT_SUCCESS && ok)
		ok = fail(w, it, "dat_iw_ssp_free", r) == 0;
	if (it->c_ours && it->c >= 0)
		close(it->c);
	if (it->s_ours && it->s >= 0)
		close(it->s);
	w->s.ep = w->c.ep = DAT_HANDLE_NULL;
	return ok;
}

static int upgrade_once(struct worker *w, int n)
{
	struct iter it = { .n = n, .c = -1, .s = -1 };
	int ok = it_start(w, &it) == 0 && it_accept(w, &it) == 0 &&
		 it_transfer(w, &it, &w->c, &w->s, 0) == 0 &&
		 it_transfer(w, &it, &w->s, &w->c, 1) == 0 &&
		 it_disconnect(w, &it) == 0;

	return it_end(w, &it, ok);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int n = 0; n < w->iters; n++)
		w->ok += upgrade_once(w, n);
	return NULL;
}

/* ------------------------------------------------------------- main */

static void open_ia_pair(void)
{
	S_ia = test_open_ia(NULL);
	C_ia = test_open_ia(NULL);
	if (dat_pz_create(S_ia, &S_pz) != DAT_SUCCESS ||
	    dat_pz_create(C_ia, &C_pz) != DAT_SUCCESS)
		BAIL("dat_pz_create");
}

int main(void)
{
	static struct worker w[MAX_THREADS];
	int threads = env_count("SSP_STRESS_THREADS", DEF_THREADS, MAX_THREADS);
	int iters = env_count("SSP_STRESS_ITERS", DEF_ITERS, 100000);
	int total = 0, fds_before, fds_after;

	signal(SIGPIPE, SIG_IGN);
	test_watchdog((unsigned)env_count("SSP_STRESS_TIMEOUT", 300, 86400));
	open_ia_pair();
	for (int i = 0; i < threads; i++) {
		w[i].id = i;
		w[i].iters = iters;
		end_open(&w[i].s, S_ia, S_pz);
		end_open(&w[i].c, C_ia, C_pz);
		listener_open(&w[i]);
	}
	fds_before = open_sockets();
	for (int i = 0; i < threads; i++)
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]))
			BAIL("pthread_create");
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		CHECK(w[i].ok == iters, "thread %d: %d/%d upgrades with data validated%s%s",
		      i, w[i].ok, iters, w[i].why[0] ? "; first failure: " : "", w[i].why);
		total += w[i].ok;
	}
	CHECK(total == threads * iters, "total: %d/%d concurrent SSP upgrades succeeded",
	      total, threads * iters);
	fds_after = open_sockets();
	CHECK(fds_after == fds_before, "no socket leaked (%d sockets open before, %d after)",
	      fds_before, fds_after);
	for (int i = 0; i < threads; i++) {
		close(w[i].lfd);
		end_close(&w[i].s);
		end_close(&w[i].c);
	}
	test_close_ia(S_ia);
	test_close_ia(C_ia);
	return tap_done();
}
