/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared harness of the connection-manager tests (t_cm.c, t_cm_ssp.c):
 * event logs filled by CM handlers on the progress thread and waited on
 * with bounded waits, loopback TCP helpers, and a raw MPA peer.
 * Header-only (static inline), like qp_harness.h. */
#ifndef IW_TEST_CM_HARNESS_H
#define IW_TEST_CM_HARNESS_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <time.h>

#include "qp_harness.h"
#include "iw_mpa.h"

#define WAIT_MS 3000	/* every wait is bounded */

struct rec {
	int type;
	struct iwe_conn *conn;
	uint64_t service;
	uint8_t pdata[IWE_MAX_PRIVATE_DATA];
	size_t pdata_len;
	int status;
	char reason[128];
	struct sockaddr_in local, remote;
};

struct evlog {
	pthread_mutex_t m;
	struct rec r[16];
	int n;
	/* Answer CONNECT_REQUEST from inside the handler when set. */
	int (*on_request)(struct evlog *l, const struct iwe_cm_event *ev);
	void *arg;
};

static inline void evlog_init(struct evlog *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->m, NULL);
}

static inline void evlog_fini(struct evlog *l)
{
	pthread_mutex_destroy(&l->m);
}

static inline void on_event(const struct iwe_cm_event *ev, void *ctx)
{
	struct evlog *l = ctx;
	struct rec *r;

	pthread_mutex_lock(&l->m);
	if (l->n < (int)(sizeof(l->r) / sizeof(l->r[0]))) {
		r = &l->r[l->n];
		memset(r, 0, sizeof(*r));
		r->type = ev->type;
		r->conn = ev->conn;
		r->service = ev->service;
		r->pdata_len = ev->pdata_len;
		if (ev->pdata_len)
			memcpy(r->pdata, ev->pdata, ev->pdata_len);
		r->status = ev->status;
		if (ev->reason)
			snprintf(r->reason, sizeof(r->reason), "%s",
				 ev->reason);
		r->local = ev->local;
		r->remote = ev->remote;
	}
	pthread_mutex_unlock(&l->m);
	if (ev->type == IWE_CM_CONNECT_REQUEST && l->on_request)
		l->on_request(l, ev);
	/* Published after the answer, so a waiter sees both. */
	pthread_mutex_lock(&l->m);
	l->n++;
	pthread_mutex_unlock(&l->m);
}

/* Conns of g_dev whose next event only the loop makes (iw_cm_conn.c). */
static inline int cm_awaited_now(void)
{
	return atomic_load(&g_dev->cm_awaited);
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static inline long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static inline long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000L + ts.tv_nsec / 1000L;
}

static inline int evlog_count(struct evlog *l)
{
	int n;

	pthread_mutex_lock(&l->m);
	n = l->n;
	pthread_mutex_unlock(&l->m);
	return n;
}

/* The idx-th event, waiting up to ms for it; NULL if it did not come. */
static inline struct rec *wait_ev(struct evlog *l, int idx, int ms)
{
	long end = now_ms() + ms;

	while (evlog_count(l) <= idx) {
		if (now_ms() > end)
			return NULL;
		sleep_ms(1);
	}
	return &l->r[idx];
}

static inline int wait_type(struct evlog *l, int idx, int type)
{
	struct rec *r = wait_ev(l, idx, WAIT_MS);

	if (r && r->type != type)
		printf("#   event %d: type %d, want %d (status %d, %s)\n", idx,
		       r->type, type, r->status, r->reason);
	return r && r->type == type;
}

/* The QP's receive system calls so far. */
static inline uint64_t rx_calls(struct iwe_qp *qp)
{
	struct iwe_qp_stats st;

	iwe_qp_query_stats(qp, &st);
	return st.rx_syscalls;
}

/* Wait until cq has n completions. */
static inline int wait_cq(struct iwe_cq *cq, int n)
{
	long end = now_ms() + WAIT_MS;

	while (iwe_cq_count(cq) < n) {
		if (now_ms() > end)
			return 0;
		sleep_ms(1);
	}
	return 1;
}

/* Wait until n bytes at got equal those at want (an RDMA Write's
 * arrival, seen as its target sees it). */
static inline int wait_bytes(const void *got, const void *want, size_t n)
{
	long end = now_ms() + WAIT_MS;

	while (memcmp(got, want, n)) {
		if (now_ms() > end)
			return 0;
		sleep_ms(1);
	}
	return 1;
}

static inline struct iwe_cm_params cm_params(int rev, int crc, unsigned rtr)
{
	struct iwe_cm_params p = { .mpa_rev = rev, .crc = crc, .rtr = rtr,
				   .mpa_timeout_ms = 2000, .ird = 4,
				   .ord = 4 };
	return p;
}

static inline struct sockaddr_in lo_addr(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* both: as side_init_on. */
static inline void side_fresh_on(struct side *s, struct iwe_cq *both)
{
	memset(s, 0, sizeof(*s));
	side_init_on(s, 0, ALL_ACCESS, both);
	s->fd = -1;		/* the CM owns the socket */
	if (iwe_modify_qp(s->qp, IWE_QPS_INIT))
		BAIL("qp init");
}

static inline void side_fresh(struct side *s)
{
	side_fresh_on(s, NULL);
}

/* ------------------------------------------------------ raw sockets */

static inline void set_timeouts(int fd)
{
	struct timeval tv = { 2, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* The ends of a connection whose connect went out before anyone
 * listened (test_refused_then_listening, t_cm_trp's late listener). */
struct late_pair {
	struct iwe_qp *qp;		/* the passive QP */
	struct evlog *la, *lp, *lb;	/* active, listener, passive conn */
	struct iwe_listener **l;
	struct iwe_conn **cb;
};

/* 20 ms after the connect, listen on port and accept: two test points,
 * the request reaching the late listener (the refused connect went
 * again) and ESTABLISHED on both sides. */
static inline void late_listen_accept(struct iwe_device *dev, uint16_t port,
				      const struct iwe_cm_params *bp,
				      const struct late_pair *lp,
				      const char *tag)
{
	struct rec *r;

	sleep_ms(20);
	r = iwe_cm_listen(dev, port, bp, 0, on_event, lp->lp, lp->l) ? NULL
	    : wait_ev(lp->lp, 0, WAIT_MS);
	CHECK(r && r->type == IWE_CM_CONNECT_REQUEST && !evlog_count(lp->la),
	      "%s: a listener 20 ms after the connect gets the request (the "
	      "refused connect went again)", tag);
	if (!r || r->type != IWE_CM_CONNECT_REQUEST)
		return;
	*lp->cb = r->conn;
	CHECK(iwe_cm_accept(r->conn, lp->qp, NULL, 0, on_event, lp->lb) == 0 &&
	      wait_type(lp->la, 0, IWE_CM_ESTABLISHED) &&
	      wait_type(lp->lb, 0, IWE_CM_ESTABLISHED),
	      "%s: ESTABLISHED on both sides", tag);
}

/* A blocking loopback listener on an ephemeral port. */
static inline int raw_listen(uint16_t *port)
{
	struct sockaddr_in a = lo_addr(0);
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(fd, 16) || getsockname(fd, (struct sockaddr *)&a, &len))
		BAIL("raw listen: %s", strerror(errno));
	*port = ntohs(a.sin_port);
	return fd;
}

static inline int raw_connect(uint16_t port)
{
	struct sockaddr_in a = lo_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	set_timeouts(fd);
	return fd;
}

static inline int raw_accept(int lfd)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd >= 0)
		set_timeouts(fd);
	return fd;
}

/* A connected loopback TCP pair (both blocking, with timeouts). */
static inline void tcp_pair(int *x, int *y)
{
	uint16_t port;
	int l = raw_listen(&port);

	*x = raw_connect(port);
	*y = raw_accept(l);
	close(l);
	if (*x < 0 || *y < 0)
		BAIL("tcp pair");
}

static inline int read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got, 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Read one MPA frame from a blocking socket: 0 and *f, or -1. */
static inline int raw_read_frame(int fd, uint8_t *buf, struct iw_mpa_frame *f)
{
	size_t have = 0, need = 0;
	int st;

	for (;;) {
		st = iw_mpa_parse(buf, have, IW_MPA_EXPECT_ANY, f, &need);
		if (st == IW_MPA_OK)
			return 0;
		if (st != IW_MPA_NEED_MORE)
			return -1;
		if (read_full(fd, buf + have, need))
			return -1;
		have += need;
	}
}

static inline int raw_send_frame(int fd, int is_reply,
				 const struct iw_mpa_params *p)
{
	uint8_t b[IW_MPA_MAX_RR_LEN];
	ssize_t n = iw_mpa_build(b, sizeof(b), is_reply, p);

	return n > 0 && send(fd, b, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Frame one ULPDU as an FPDU (CRC off unless crc). */
static inline int raw_send_fpdu(int fd, const void *ulpdu, size_t n, int crc)
{
	uint8_t f[512];
	uint16_t len_be = iw_be16((uint16_t)n);
	size_t pad = iw_fpdu_pad((unsigned)n), tot = 2 + n + pad;

	memcpy(f, &len_be, 2);
	memcpy(f + 2, ulpdu, n);
	memset(f + 2 + n, 0, pad);
	iw_fpdu_put_crc(f + tot, crc ? iw_crc32c(0, f, tot) : 0);
	return send(fd, f, tot + 4, MSG_NOSIGNAL) == (ssize_t)(tot + 4) ? 0
									 : -1;
}

/* How the peer ended fd within ms: 1 a close (EOF), 0 an error (a
 * reset), -1 not yet. */
static inline int fd_end_within(int fd, int ms)
{
	char c;
	long end = now_ms() + ms;

	while (now_ms() < end) {
		ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);

		if (r == 0)
			return 1;
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return 0;
		sleep_ms(5);
	}
	return -1;
}

static inline int fd_readable_eof(int fd, int ms)
{
	return fd_end_within(fd, ms) >= 0;
}

#endif
