/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The pair under test of t_cm and t_cm_trp: an active and a passive
 * side connected through the engine's connection manager, with their
 * event logs, and what connects, exercises and ends them.  Header-only,
 * after cm_harness.h. */
#ifndef IW_TEST_CPAIR_H
#define IW_TEST_CPAIR_H

#include <string.h>

#include "cm_harness.h"
#include "iw_qp.h"

struct cpair {
	struct side a, b;		/* a: active, b: passive */
	struct evlog la, lp, lb;	/* active, listener, passive conn */
	struct evlog *lpp;		/* listener's log if not lp */
	struct iwe_listener *l;
	struct iwe_conn *ca, *cb;
	struct iwe_cm_params ap, bp;
	uint8_t rep[IWE_MAX_PRIVATE_DATA];
	size_t rep_len;
	uint64_t service;		/* t_cm_trp: the listener's port */
};

static inline void cpair_open(struct cpair *p)
{
	memset(p, 0, sizeof(*p));
	evlog_init(&p->la);
	evlog_init(&p->lp);
	evlog_init(&p->lb);
	side_fresh(&p->a);
	side_fresh(&p->b);
}

static inline void cpair_close(struct cpair *p)
{
	if (p->ca)
		iwe_cm_conn_destroy(p->ca);
	if (p->cb)
		iwe_cm_conn_destroy(p->cb);
	if (p->l)
		iwe_cm_listen_destroy(p->l);
	side_close(&p->a);
	side_close(&p->b);
	evlog_fini(&p->la);
	evlog_fini(&p->lp);
	evlog_fini(&p->lb);
	memset(p, 0, sizeof(*p));
}

/* Connect a to b's listener; returns 1 once both are ESTABLISHED. */
static inline int cpair_connect(struct cpair *p, uint64_t service,
				size_t req_len, size_t rep_len, const char *tag)
{
	uint8_t req[IWE_MAX_PRIVATE_DATA];
	struct sockaddr_in dst = lo_addr(0);
	struct evlog *lp = p->lpp ? p->lpp : &p->lp;
	struct rec *r;
	int ok;

	fill((char *)req, req_len, 17);
	fill((char *)p->rep, rep_len, 91);
	p->rep_len = rep_len;
	int err, base = evlog_count(lp);

	if (!p->l && (err = iwe_cm_listen(g_dev, service, &p->bp, 0,
					  on_event, lp, &p->l))) {
		printf("#   listen: %s\n", strerror(err));
		return 0;
	}
	if ((err = iwe_cm_connect(p->a.qp, &dst, service, req, req_len, 2000,
				  &p->ap, on_event, &p->la, &p->ca))) {
		printf("#   connect: %s\n", strerror(err));
		return 0;
	}
	r = wait_ev(lp, base, WAIT_MS);
	if (!r || r->type != IWE_CM_CONNECT_REQUEST) {
		r = wait_ev(&p->la, 0, 10);
		printf("#   no CONNECT_REQUEST; active side: %d %s\n",
		       r ? r->type : -1, r ? r->reason : "");
		return 0;
	}
	CHECK(r->pdata_len == req_len && !memcmp(r->pdata, req, req_len) &&
	      r->service == service &&
	      r->remote.sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
	      r->local.sin_port == htons(service > 65535 ?
			IWE_CM_SERVICE_PORT_BASE + service % 1000 : service),
	      "%s: CONNECT_REQUEST with %zu bytes of private data, service "
	      "and addresses", tag, req_len);
	p->cb = r->conn;
	post_recv1(&p->b, 1, 0, 4096);
	post_recv1(&p->b, 2, 4096, 4096);
	ok = iwe_cm_accept(p->cb, p->b.qp, p->rep, rep_len, on_event,
			   &p->lb) == 0;
	ok = ok && wait_type(&p->la, 0, IWE_CM_ESTABLISHED);
	ok = ok && p->la.r[0].pdata_len == rep_len &&
	     !memcmp(p->la.r[0].pdata, p->rep, rep_len);
	return ok && wait_type(&p->lb, 0, IWE_CM_ESTABLISHED);
}

/* The usual parameters: MPA revision 2 without CRC, the initiator's RTR
 * a zero-length Write. */
static inline void cpair_std_params(struct cpair *p)
{
	p->ap = cm_params(2, 0, IW_RTR_WRITE);
	p->bp = cm_params(2, 0, 0);
}

/* The usual pair: the usual parameters, 4 bytes of private data each
 * way. */
static inline int cpair_std_connect(struct cpair *p, uint64_t service,
				    const char *tag)
{
	cpair_std_params(p);
	return cpair_connect(p, service, 4, 4, tag);
}

/* The initiator disconnects gracefully; the passive side must see it. */
static inline void cpair_disconnect_close(struct cpair *p, const char *tag)
{
	CHECK(iwe_cm_disconnect(p->ca, 1) == 0 &&
	      wait_type(&p->lb, 1, IWE_CM_DISCONNECTED),
	      "%s: disconnected", tag);
	cpair_close(p);
}

/* Sends both ways (the passive side posts first: with no RTR it must
 * wait for the initiator's first FPDU), then an RDMA Write and Read. */
static inline void cpair_traffic(struct cpair *p, const char *tag)
{
	struct ibv_wc wc;
	int other;

	fill(p->a.buf + 8192, 100, 3);
	fill(p->b.buf + 8192, 200, 4);
	post_recv1(&p->a, 7, 0, 4096);
	CHECK(post_send1(&p->b, 8, IBV_WR_SEND, 8192, 200, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      post_send1(&p->a, 9, IBV_WR_SEND, 8192, 100, 0, 0,
			 IBV_SEND_SIGNALED) == 0, "%s: post sends both ways",
	      tag);
	CHECK(wait_cq(p->b.rcq, 1) && poll1(p->b.rcq, &wc) && wc.wr_id == 1 &&
	      wc.status == IBV_WC_SUCCESS && wc.byte_len == 100 &&
	      !memcmp(p->b.buf, p->a.buf + 8192, 100),
	      "%s: passive receives the Send in its first receive "
	      "(RTR took none)", tag);
	CHECK(wait_cq(p->a.rcq, 1) && poll1(p->a.rcq, &wc) && wc.wr_id == 7 &&
	      wc.byte_len == 200 && !memcmp(p->a.buf, p->b.buf + 8192, 200),
	      "%s: active receives the passive side's Send", tag);
	fill(p->a.buf + 65536, 65536, 5);
	fill(p->b.buf + 200000, 4096, 6);
	post_send1(&p->a, 10, IBV_WR_RDMA_WRITE, 65536, 65536,
		   (uintptr_t)(p->b.buf + 131072), p->b.mr->rkey,
		   IBV_SEND_SIGNALED);
	post_send1(&p->a, 11, IBV_WR_RDMA_READ, 300000, 4096,
		   (uintptr_t)(p->b.buf + 200000), p->b.mr->rkey,
		   IBV_SEND_SIGNALED);
	CHECK(wait_cq(p->a.scq, 3) &&
	      count_status(p->a.scq, IBV_WC_SUCCESS, &other) == 3 &&
	      other == 0 && wait_cq(p->b.scq, 1) &&
	      count_status(p->b.scq, IBV_WC_SUCCESS, &other) == 1,
	      "%s: sends, Write and Read complete, no stray completion", tag);
	CHECK(!memcmp(p->b.buf + 131072, p->a.buf + 65536, 65536) &&
	      !memcmp(p->a.buf + 300000, p->b.buf + 200000, 4096),
	      "%s: Write and Read data correct", tag);
}

/* Graceful disconnect from one side; DISCONNECTED on both, and b's
 * second receive flushed. */
static inline void cpair_disconnect(struct cpair *p, int from_passive,
				    const char *tag)
{
	struct ibv_wc wc;

	CHECK(iwe_cm_disconnect(from_passive ? p->cb : p->ca, 1) == 0,
	      "%s: graceful disconnect from the %s side", tag,
	      from_passive ? "passive" : "active");
	CHECK(wait_type(&p->la, 1, IWE_CM_DISCONNECTED) &&
	      wait_type(&p->lb, 1, IWE_CM_DISCONNECTED),
	      "%s: DISCONNECTED on both sides", tag);
	CHECK(wait_cq(p->b.rcq, 1) && poll1(p->b.rcq, &wc) && wc.wr_id == 2 &&
	      wc.status == IBV_WC_WR_FLUSH_ERR &&
	      iwe_qp_get_state(p->b.qp) == IWE_QPS_ERROR,
	      "%s: outstanding receive flushed, QP in ERROR", tag);
}

/* What a QP's queues hold, looked at under its lock (the progress
 * thread gives them back): bit 0 the send queue, bit 1 the receive
 * queue, bit 2 the list of segments in the transport. */
static inline int cpair_queues_held(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int held;

	iwe_qp_lock(q);
	held = (q->sq != NULL) | (q->rq != NULL) << 1 |
	       (q->tx.tok != NULL) << 2;
	iwe_qp_unlock(q);
	return held;
}

static inline int cpair_wait_held(struct iwe_qp *qp, int want, int ms)
{
	long end = now_ms() + ms;

	while (cpair_queues_held(qp) != want && now_ms() < end)
		sleep_ms(10);
	return cpair_queues_held(qp);
}

/* A used connection gives back its queues once quiet (about a second,
 * iw_qp_idle.c), except a receive queue with a receive posted ahead, and
 * takes new ones at its next post: traffic goes on as before.  The side
 * that gave back everything tells its owner (IWE_EVENT_QP_IDLE: the DAT
 * layer then frees its work slots); the one with a receive posted does
 * not. */
static inline void cpair_idle_case(uint16_t port, const char *tag)
{
	struct ibv_wc wc;
	struct cpair p;
	int a, b, other;

	/* (Not checked: that the queues are still there right after the
	 * traffic -- under valgrind the traffic's last step can take the
	 * whole idle period.) */
	cpair_open(&p);
	CHECK(cpair_std_connect(&p, port, tag), "%s: connected", tag);
	cpair_traffic(&p, tag);
	a = cpair_wait_held(p.a.qp, 0, 10000);
	b = cpair_wait_held(p.b.qp, 2, 10000);
	CHECK(a == 0 && b == 2,
	      "%s: quiet, the active side holds no queue (%d), "
	      "the passive side only its receive queue, a receive posted "
	      "(%d)", tag, a, b);
	for (int i = 0; i < 500 && !atomic_load(&p.a.idle_events); i++)
		sleep_ms(10);
	CHECK(atomic_load(&p.a.idle_events) == 1 &&
	      atomic_load(&p.b.idle_events) == 0,
	      "%s: the owner of the side that gave back all heard "
	      "it once (%d), the side holding a receive heard nothing (%d)",
	      tag, atomic_load(&p.a.idle_events), atomic_load(&p.b.idle_events));
	fill(p.a.buf + 8192, 300, 8);
	CHECK(post_send1(&p.a, 20, IBV_WR_SEND, 8192, 300, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      wait_cq(p.b.rcq, 1) && poll1(p.b.rcq, &wc) && wc.wr_id == 2 &&
	      wc.status == IBV_WC_SUCCESS && wc.byte_len == 300 &&
	      !memcmp(p.b.buf + 4096, p.a.buf + 8192, 300),
	      "%s: a Send after it lands in the receive posted "
	      "before it, data intact", tag);
	fill(p.b.buf + 8192, 65536, 9);
	post_recv1(&p.a, 21, 0, 4096);
	CHECK(post_send1(&p.b, 22, IBV_WR_RDMA_WRITE, 8192, 65536,
			 (uintptr_t)(p.a.buf + 131072), p.a.mr->rkey, 0) == 0 &&
	      post_send1(&p.b, 23, IBV_WR_SEND, 8192, 64, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      wait_cq(p.a.rcq, 1) && poll1(p.a.rcq, &wc) && wc.wr_id == 21 &&
	      wc.status == IBV_WC_SUCCESS &&
	      !memcmp(p.a.buf + 131072, p.b.buf + 8192, 65536) &&
	      wait_cq(p.a.scq, 1) &&
	      count_status(p.a.scq, IBV_WC_SUCCESS, &other) == 1 && !other &&
	      wait_cq(p.b.scq, 1) &&
	      count_status(p.b.scq, IBV_WC_SUCCESS, &other) == 1 && !other,
	      "%s: a 64 KiB Write and Sends both ways on new "
	      "queues, data intact", tag);
	cpair_disconnect_close(&p, tag);
}

#endif
