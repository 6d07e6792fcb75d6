/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What the connection-manager targets share (fuzz_cm, fuzz_cm_trp,
 * fuzz_cm_trp_active): the engine objects, a consumer that answers
 * CONNECT_REQUESTs and remembers them, QPs, the clock, and inputs cut
 * into datagrams. */
#ifndef IW_FUZZ_CM_UTIL_H
#define IW_FUZZ_CM_UTIL_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "fuzz_check.h"
#include "iw_engine.h"
#include "iw_mpa.h"

/* What the consumer saw of an input's request, and how it answered. */
struct fuzz_consumer {
	pthread_mutex_t lock;
	int accept;			/* its decision */
	struct iwe_qp *qp;		/* given to accept */
	struct iwe_conn *conn;
	int requests;
	int answer_err;
	uint64_t service;
	uint8_t pdata[IW_MPA_MAX_PRIVATE_DATA];
	size_t pdata_len;
};

static const uint8_t fuzz_accept_pd[] = "fuzz accept";
static const uint8_t fuzz_reject_pd[] = "fuzz reject";

/* Later events of an accepted connection: nothing to do, the main
 * thread ends it. */
static inline void fuzz_conn_handler(const struct iwe_cm_event *ev,
				     void *ctx)
{
	(void)ev;
	(void)ctx;
}

/* A CONNECT_REQUEST (s->lock held): remember it, then accept it with
 * s->qp or reject it, each with the consumer's private data. */
static inline void fuzz_consumer_answer(struct fuzz_consumer *s,
					const struct iwe_cm_event *ev)
{
	s->requests++;
	s->conn = ev->conn;
	s->service = ev->service;
	s->pdata_len = ev->pdata_len;
	FUZZ_CHECK(ev->pdata_len <= sizeof(s->pdata), "pdata_len %zu",
		   ev->pdata_len);
	if (ev->pdata_len)
		memcpy(s->pdata, ev->pdata, ev->pdata_len);
	if (s->accept)
		s->answer_err = iwe_cm_accept(ev->conn, s->qp, fuzz_accept_pd,
					      sizeof(fuzz_accept_pd),
					      fuzz_conn_handler, NULL);
	else
		s->answer_err = iwe_cm_reject(ev->conn, fuzz_reject_pd,
					      sizeof(fuzz_reject_pd));
}

static inline struct iwe_qp *fuzz_make_qp(struct iwe_pd *pd,
					  struct iwe_cq *cq);

/* Before an input: the consumer forgets the last one and will accept
 * (with a new QP) or reject the next request. */
static inline void fuzz_consumer_reset(struct fuzz_consumer *s, int accept,
				       struct iwe_pd *pd, struct iwe_cq *cq)
{
	pthread_mutex_lock(&s->lock);
	s->accept = accept;
	s->qp = accept ? fuzz_make_qp(pd, cq) : NULL;
	s->conn = NULL;
	s->requests = 0;
	s->answer_err = 0;
	pthread_mutex_unlock(&s->lock);
}

/* After the input (s->lock held): the consumer got one request with
 * exactly pdata when it should have, none otherwise. */
static inline void fuzz_consumer_check(const struct fuzz_consumer *s,
				       int expected, const uint8_t *pdata,
				       size_t len)
{
	if (!expected) {
		FUZZ_CHECK(s->requests == 0, "a request the CM should drop "
			   "or refuse reached the consumer");
		return;
	}
	FUZZ_CHECK(s->requests == 1, "%d CONNECT_REQUESTs", s->requests);
	FUZZ_CHECK(s->answer_err == 0, "accept/reject: %s",
		   strerror(s->answer_err));
	FUZZ_CHECK(s->pdata_len == len && !memcmp(s->pdata, pdata, len),
		   "private data changed on its way to the consumer");
}

/* After an input was judged: the consumer destroys the conn and the QP
 * it was given (not under s->lock: destroy waits for the progress
 * thread, whose handler takes that lock). */
static inline void fuzz_consumer_end(struct fuzz_consumer *s)
{
	struct iwe_conn *conn;
	struct iwe_qp *qp;

	pthread_mutex_lock(&s->lock);
	conn = s->conn;
	qp = s->qp;
	s->conn = NULL;
	s->qp = NULL;
	pthread_mutex_unlock(&s->lock);
	if (conn)
		iwe_cm_conn_destroy(conn);
	if (qp)
		iwe_destroy_qp(qp);
}

/* A device of the transport on addr, its PD and a CQ; the process ends
 * when one cannot be made.  An accepted QP posts no receive, so a Send
 * in an input waits out the receiver-not-ready grace before its
 * Terminate: kept short. */
static inline void fuzz_cm_open(const char *target, const char *addr,
				enum iwe_transport tr, struct iwe_device **dev,
				struct iwe_pd **pd, struct iwe_cq **cq)
{
	setenv("IWDAPL_RNR_MS", "50", 0);
	*dev = iwe_device_open(addr, tr);
	*pd = *dev ? iwe_alloc_pd(*dev) : NULL;
	*cq = *pd ? iwe_create_cq(*dev, 256, NULL, NULL) : NULL;
	if (!*cq) {
		fprintf(stderr, "%s: device %s, PD, CQ: %s\n", target, addr,
			strerror(errno));
		exit(1);
	}
}

/* The listeners' parameters: revision 2, no CRC, no RTR of our own. */
static inline struct iwe_cm_params fuzz_cm_params(int timeout_ms)
{
	struct iwe_cm_params p = { .mpa_rev = 2, .mpa_timeout_ms = timeout_ms,
				   .ird = 4, .ord = 4 };
	return p;
}

static inline struct iwe_qp *fuzz_make_qp(struct iwe_pd *pd,
					  struct iwe_cq *cq)
{
	struct iwe_qp_init_attr at = {
		.send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct iwe_qp *qp = iwe_create_qp(pd, &at);

	FUZZ_CHECK(qp && iwe_modify_qp(qp, IWE_QPS_INIT) == 0,
		   "QP setup: %s", strerror(errno));
	return qp;
}

static inline long fuzz_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

#define FUZZ_DGRAM_MAX 65507	/* the largest UDP payload */

/* The next datagram on fd within ms (its sender in *from, when given):
 * its length, or -1 when none came.  An ICMP error left on the socket
 * by an earlier user of its port is not one. */
static inline ssize_t fuzz_dgram_within(int fd, uint8_t *buf, size_t cap,
					int ms, struct sockaddr_in *from)
{
	long end = fuzz_now_ms() + ms;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		socklen_t fl = sizeof(*from);
		long left = end - fuzz_now_ms();
		ssize_t n;

		if (left <= 0)
			return -1;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = recvfrom(fd, buf, cap, MSG_DONTWAIT,
			     (struct sockaddr *)from, from ? &fl : NULL);
		if (n >= 0)
			return n;
		FUZZ_CHECK(errno == EAGAIN || errno == EINTR ||
			   errno == ECONNREFUSED, "recv: %s", strerror(errno));
	}
}

/* Cut d into datagrams, each a BE16 length and that many bytes (the
 * last one cut short by the end); at most max.  Returns their count. */
static inline int fuzz_split_dgrams(const uint8_t *d, size_t n,
				    const uint8_t **dg, size_t *len, int max)
{
	int k = 0;

	while (n >= 2 && k < max) {
		size_t l = (size_t)d[0] << 8 | d[1];

		if (l > n - 2)
			l = n - 2;
		dg[k] = d + 2;
		len[k++] = l < FUZZ_DGRAM_MAX ? l : FUZZ_DGRAM_MAX;
		d += 2 + l;
		n -= 2 + l;
	}
	return k;
}

#endif
