/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Engine shared receive queues: two QPs of one PD take their receives from
 * one SRQ, each fed by its own sender over a socket pair (the qp_harness.h
 * model, without connection manager or progress thread).  Covers order of
 * consumption, completions on each QP's own CQ, the limit event, resize,
 * destroy while in use, the flush rules and an empty SRQ.  TAP output. */
#include <pthread.h>

#include "qp_harness.h"

#define NQ 2

struct ev_log {
	int limit, last_wqe;
	void *limit_ctx;
	struct iwe_qp *last_qp;
};
static struct ev_log g_ev;

static void on_event(const struct iwe_async_event *ev)
{
	if (ev->type == IWE_EVENT_SRQ_LIMIT_REACHED) {
		g_ev.limit++;
		g_ev.limit_ctx = ev->context;
	} else if (ev->type == IWE_EVENT_QP_LAST_WQE_REACHED) {
		g_ev.last_wqe++;
		g_ev.last_qp = ev->element.qp;
	}
}

/* Receivers b[i] share pd/mr/srq; sender a[i] talks to b[i]. */
struct rig {
	struct side a[NQ];
	struct iwe_pd *pd;
	char *buf;
	struct iwe_mr *mr;
	struct iwe_srq *srq;
	struct iwe_cq *scq[NQ], *rcq[NQ];
	struct iwe_qp *qp[NQ];
	int fd[NQ];
};

static struct iwe_qp *srq_qp(struct rig *r, int i)
{
	struct iwe_qp_init_attr at = {
		.send_cq = r->scq[i], .recv_cq = r->rcq[i], .srq = r->srq,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
		.qp_context = r, .event_handler = on_event,
	};

	return iwe_create_qp(r->pd, &at);
}

static void rig_open(struct rig *r, uint32_t max_wr, int sndbuf)
{
	struct iwe_srq_init_attr sa = {
		.attr = { .max_wr = max_wr, .max_sge = 2 },
		.srq_context = &g_ev, .event_handler = on_event,
	};
	struct iwe_stream_params sp = { .crc = 1, .mulpdu = 1024,
					.mpa_rev = 2 };
	int i;

	memset(r, 0, sizeof(*r));
	memset(&g_ev, 0, sizeof(g_ev));
	r->pd = iwe_alloc_pd(g_dev);
	r->buf = calloc(1, BIG);
	r->mr = iwe_reg_mr(r->pd, r->buf, BIG, ALL_ACCESS);
	r->srq = iwe_create_srq(r->pd, &sa);
	if (!r->pd || !r->buf || !r->mr || !r->srq)
		BAIL("rig: %s", strerror(errno));
	for (i = 0; i < NQ; i++) {
		side_init(&r->a[i], 0, ALL_ACCESS);
		r->scq[i] = iwe_create_cq(g_dev, 64, NULL, NULL);
		r->rcq[i] = iwe_create_cq(g_dev, 64, NULL, NULL);
		r->qp[i] = srq_qp(r, i);
		if (!r->qp[i])
			BAIL("srq qp: %s", strerror(errno));
		sock_pair(&r->a[i].fd, &r->fd[i]);
		if (sndbuf)
			setsockopt(r->a[i].fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
				   sizeof(sndbuf));
		if (iwe_modify_qp(r->a[i].qp, IWE_QPS_INIT) ||
		    iwe_modify_qp(r->qp[i], IWE_QPS_INIT) ||
		    iwe_qp_attach_stream(r->a[i].qp, r->a[i].fd, &sp) ||
		    iwe_qp_attach_stream(r->qp[i], r->fd[i], &sp))
			BAIL("attach");
	}
}

static void rig_close(struct rig *r)
{
	int i;

	for (i = 0; i < NQ; i++) {
		if (r->qp[i])
			iwe_destroy_qp(r->qp[i]);
		iwe_destroy_cq(r->scq[i]);
		iwe_destroy_cq(r->rcq[i]);
		close(r->fd[i]);
		side_close(&r->a[i]);
	}
	if (r->srq)
		iwe_destroy_srq(r->srq);
	iwe_dereg_mr(r->mr);
	iwe_dealloc_pd(r->pd);
	free(r->buf);
}

static void rig_step(struct rig *r)
{
	int i;

	for (i = 0; i < NQ; i++) {
		iwe_qp_progress_tx(r->a[i].qp);
		iwe_qp_progress_rx(r->qp[i]);
		iwe_qp_progress_tx(r->qp[i]);
		iwe_qp_progress_rx(r->a[i].qp);
	}
}

static int rig_pump(struct rig *r, struct iwe_cq *cq, int n)
{
	int i;

	for (i = 0; i < 100000 && iwe_cq_count(cq) < n; i++)
		rig_step(r);
	return iwe_cq_count(cq) >= n;
}

/* Post receive 'id' of len bytes at offset id * 4096 of the shared MR. */
static int srq_post(struct rig *r, uint64_t id, uint32_t len)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(r->buf + id * 4096),
			      .length = len, .lkey = r->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;

	return iwe_post_srq_recv(r->srq, &wr, &bad);
}

static int send_from(struct rig *r, int i, uint32_t len, unsigned seed)
{
	fill(r->a[i].buf, len, seed);
	return post_send1(&r->a[i], seed, IBV_WR_SEND, 0, len, 0, 0, 0);
}

/* ------------------------------------------------------------ tests */

static void test_validation(void)
{
	struct iwe_pd *pd = iwe_alloc_pd(g_dev), *pd2 = iwe_alloc_pd(g_dev);
	struct iwe_cq *cq = iwe_create_cq(g_dev, 8, NULL, NULL);
	struct iwe_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct iwe_srq_attr qa;
	struct iwe_srq *srq;
	struct iwe_qp_init_attr at = { .send_cq = cq, .recv_cq = cq,
				       .cap = { .max_send_wr = 1 } };
	struct iwe_qp *qp;

	sa.attr.max_wr = 0;
	CHECK(!iwe_create_srq(pd, &sa) && errno == EINVAL,
	      "create: max_wr 0 -> EINVAL");
	sa.attr = (struct iwe_srq_attr){ .max_wr = 4, .max_sge = 1,
					 .srq_limit = 5 };
	CHECK(!iwe_create_srq(pd, &sa) && errno == EINVAL,
	      "create: limit above max_wr -> EINVAL");
	sa.attr = (struct iwe_srq_attr){ .max_wr = 4, .max_sge = 0 };
	CHECK(!iwe_create_srq(pd, &sa) && errno == EINVAL,
	      "create: max_sge 0 -> EINVAL");
	sa.attr = (struct iwe_srq_attr){ .max_wr = 4, .max_sge = 3,
					 .srq_limit = 2 };
	srq = iwe_create_srq(pd, &sa);
	CHECK(srq && srq->pd == pd && iwe_query_srq(srq, &qa) == 0 &&
	      qa.max_wr == 4 && qa.max_sge == 3 && qa.srq_limit == 2 &&
	      iwe_srq_count(srq) == 0, "create and query an SRQ");
	CHECK(iwe_dealloc_pd(pd) == EBUSY, "the SRQ holds its PD");
	at.srq = srq;
	CHECK(!iwe_create_qp(pd2, &at) && errno == EINVAL,
	      "QP of another PD cannot use the SRQ");
	qp = iwe_create_qp(pd, &at);
	CHECK(qp && qp->cap.max_recv_wr == 0 && qp->cap.max_recv_sge == 3,
	      "QP with SRQ: receive caps ignored, SRQ's SGE count reported");
	CHECK(iwe_destroy_srq(srq) == EBUSY, "destroy while a QP uses it -> EBUSY");
	iwe_modify_qp(qp, IWE_QPS_INIT);
	{
		struct ibv_recv_wr wr = { .wr_id = 1 }, *bad = NULL;

		CHECK(iwe_post_recv(qp, &wr, &bad) == EINVAL && bad == &wr,
		      "post_recv on a QP with an SRQ -> EINVAL");
	}
	qa.srq_limit = 9;
	CHECK(iwe_modify_srq(srq, &qa, IWE_SRQ_LIMIT) == EINVAL,
	      "modify: limit above max_wr -> EINVAL");
	qa.max_wr = IWE_MAX_SRQ_WR + 1;
	CHECK(iwe_modify_srq(srq, &qa, IWE_SRQ_MAX_WR) == EINVAL,
	      "modify: max_wr above the device limit -> EINVAL");
	CHECK(iwe_destroy_qp(qp) == 0 && iwe_destroy_srq(srq) == 0,
	      "destroy succeeds once no QP uses it");
	iwe_destroy_cq(cq);
	iwe_dealloc_pd(pd);
	iwe_dealloc_pd(pd2);
}

static void test_shared_order(void)
{
	struct rig r;
	struct ibv_wc wc;
	uint64_t id;
	int ok = 1;

	rig_open(&r, 8, 0);
	for (id = 0; id < 4; id++)
		ok &= srq_post(&r, id, 4096) == 0;
	CHECK(ok && iwe_srq_count(r.srq) == 4, "four receives posted");
	/* a0, a1, a0: the SRQ hands out its WRs in posting order. */
	send_from(&r, 0, 100, 1);
	CHECK(rig_pump(&r, r.rcq[0], 1), "first Send arrives at QP 0");
	send_from(&r, 1, 200, 2);
	CHECK(rig_pump(&r, r.rcq[1], 1), "second Send arrives at QP 1");
	send_from(&r, 0, 300, 3);
	CHECK(rig_pump(&r, r.rcq[0], 2), "third Send arrives at QP 0");
	CHECK(poll1(r.rcq[0], &wc) && wc.wr_id == 0 && wc.byte_len == 100 &&
	      wc.qp_num == r.qp[0]->qp_num && wc.opcode == IBV_WC_RECV &&
	      wc.status == IBV_WC_SUCCESS,
	      "QP 0 completes WR 0 on its own CQ with its qp_num");
	CHECK(poll1(r.rcq[1], &wc) && wc.wr_id == 1 && wc.byte_len == 200 &&
	      wc.qp_num == r.qp[1]->qp_num,
	      "QP 1 completes WR 1 on its own CQ with its qp_num");
	CHECK(poll1(r.rcq[0], &wc) && wc.wr_id == 2 && wc.byte_len == 300,
	      "QP 0 then completes WR 2");
	fill(r.a[0].buf, 300, 3);
	CHECK(memcmp(r.buf + 2 * 4096, r.a[0].buf, 300) == 0,
	      "payload placed in WR 2's buffer");
	CHECK(iwe_srq_count(r.srq) == 1 && iwe_qp_srq_held(r.qp[0]) == 0,
	      "one WR left, none held");
	CHECK(g_ev.limit == 0 && g_ev.last_wqe == 0, "no events so far");
	rig_close(&r);
}

static void test_limit(void)
{
	struct iwe_srq_attr qa = { .srq_limit = 2 };
	struct rig r;
	int i;

	rig_open(&r, 8, 0);
	for (i = 0; i < 4; i++)
		srq_post(&r, (uint64_t)i, 4096);
	CHECK(iwe_modify_srq(r.srq, &qa, IWE_SRQ_LIMIT) == 0,
	      "arm the limit at 2 with 4 posted");
	send_from(&r, 0, 10, 1);
	rig_pump(&r, r.rcq[0], 1);
	CHECK(g_ev.limit == 0, "3 left: no event");
	send_from(&r, 1, 10, 2);
	rig_pump(&r, r.rcq[1], 1);
	CHECK(g_ev.limit == 0, "2 left (not below 2): no event");
	send_from(&r, 0, 10, 3);
	rig_pump(&r, r.rcq[0], 2);
	CHECK(g_ev.limit == 1 && g_ev.limit_ctx == &g_ev,
	      "1 left: SRQ_LIMIT_REACHED once, with srq_context");
	iwe_query_srq(r.srq, &qa);
	CHECK(qa.srq_limit == 0, "the SRQ is disarmed after the event");
	send_from(&r, 1, 10, 4);
	rig_pump(&r, r.rcq[1], 2);
	CHECK(g_ev.limit == 1, "no second event without re-arming");
	qa.srq_limit = 1;
	iwe_modify_srq(r.srq, &qa, IWE_SRQ_LIMIT);
	srq_post(&r, 10, 4096);
	srq_post(&r, 11, 4096);
	send_from(&r, 0, 10, 5);
	rig_pump(&r, r.rcq[0], 3);
	CHECK(g_ev.limit == 1, "re-armed at 1: 1 left is not below");
	send_from(&r, 0, 10, 6);
	rig_pump(&r, r.rcq[0], 4);
	CHECK(g_ev.limit == 2, "0 left: the re-armed limit fires");
	rig_close(&r);
}

static void test_resize(void)
{
	struct iwe_srq_attr qa = { .max_wr = 2 };
	struct ibv_wc wc;
	struct rig r;
	int i, ok = 1;

	rig_open(&r, 4, 0);
	for (i = 0; i < 3; i++)
		srq_post(&r, (uint64_t)i, 4096);
	CHECK(iwe_modify_srq(r.srq, &qa, IWE_SRQ_MAX_WR) == EINVAL,
	      "resize below the 3 posted -> EINVAL");
	/* Consume one so the ring has wrapped state when it grows. */
	send_from(&r, 0, 10, 1);
	rig_pump(&r, r.rcq[0], 1);
	poll1(r.rcq[0], &wc);
	srq_post(&r, 3, 4096);
	srq_post(&r, 4, 4096);
	CHECK(srq_post(&r, 5, 4096) == ENOMEM, "full at 4 -> ENOMEM");
	qa.max_wr = 8;
	CHECK(iwe_modify_srq(r.srq, &qa, IWE_SRQ_MAX_WR) == 0 &&
	      iwe_query_srq(r.srq, &qa) == 0 && qa.max_wr == 8 &&
	      iwe_srq_count(r.srq) == 4, "grow to 8 keeps the 4 posted");
	for (i = 5; i < 9; i++)
		ok &= srq_post(&r, (uint64_t)i, 4096) == 0;
	CHECK(ok && iwe_srq_count(r.srq) == 8, "4 more fit after growing");
	for (i = 0; i < 8; i++) {
		send_from(&r, i & 1, 16, 10u + (unsigned)i);
		rig_pump(&r, r.rcq[i & 1], 1);
		ok &= poll1(r.rcq[i & 1], &wc) && wc.wr_id == (uint64_t)i + 1 &&
		      wc.status == IBV_WC_SUCCESS;
	}
	CHECK(ok, "the kept and new WRs complete in posting order");
	qa.max_wr = 1;
	CHECK(iwe_modify_srq(r.srq, &qa, IWE_SRQ_MAX_WR) == 0 &&
	      iwe_query_srq(r.srq, &qa) == 0 && qa.max_wr == 1,
	      "shrink an empty SRQ to 1");
	rig_close(&r);
}

static void test_flush(void)
{
	struct rig r;
	struct ibv_wc wc;
	int i, got;

	/* A small send buffer: a 64 KiB Send reaches the receiver in parts. */
	rig_open(&r, 8, 4096);
	for (i = 0; i < 4; i++)
		srq_post(&r, (uint64_t)i, i == 0 ? 65536 : 4096);
	send_from(&r, 0, 65536, 1);
	for (i = 0; i < 3; i++)
		iwe_qp_progress_rx(r.qp[0]);
	CHECK(iwe_qp_srq_held(r.qp[0]) == 1 && iwe_cq_count(r.rcq[0]) == 0 &&
	      iwe_srq_count(r.srq) == 3,
	      "mid-message: QP 0 holds WR 0, 3 left in the SRQ");
	CHECK(iwe_modify_qp(r.qp[0], IWE_QPS_ERROR) == 0, "QP 0 to ERROR");
	CHECK(poll1(r.rcq[0], &wc) && wc.wr_id == 0 &&
	      wc.status == IBV_WC_WR_FLUSH_ERR && wc.qp_num == r.qp[0]->qp_num &&
	      !poll1(r.rcq[0], &wc),
	      "only the WR QP 0 held is flushed, on its CQ");
	CHECK(iwe_srq_count(r.srq) == 3, "the SRQ keeps its 3 WRs");
	CHECK(g_ev.last_wqe == 1 && g_ev.last_qp == r.qp[0],
	      "LAST_WQE_REACHED for QP 0, once");
	iwe_modify_qp(r.qp[0], IWE_QPS_ERROR);
	CHECK(g_ev.last_wqe == 1, "no second LAST_WQE while already in ERROR");
	send_from(&r, 1, 50, 2);
	got = rig_pump(&r, r.rcq[1], 1) && poll1(r.rcq[1], &wc);
	CHECK(got && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS,
	      "QP 1 goes on with the SRQ's next WR");
	/* Reset and destroy do not touch the SRQ either. */
	iwe_modify_qp(r.qp[1], IWE_QPS_RESET);
	CHECK(iwe_srq_count(r.srq) == 2 && g_ev.last_wqe == 1,
	      "RESET of QP 1: SRQ untouched, no event");
	iwe_destroy_qp(r.qp[0]);
	r.qp[0] = NULL;
	CHECK(iwe_srq_count(r.srq) == 2, "destroying QP 0 leaves the SRQ's WRs");
	rig_close(&r);
}

static void test_empty(void)
{
	struct iwe_term_info ts;
	struct rig r;

	rig_open(&r, 4, 0);
	send_from(&r, 0, 10, 1);
	rig_pump(&r, r.a[0].scq, 1);
	for (int i = 0; i < 50; i++)
		rig_step(&r);
	iwe_qp_terminate_info(r.qp[0], &ts, NULL);
	CHECK(ts.valid && ts.layer == IW_TERM_LAYER_DDP &&
	      ts.etype == IW_TERM_DDP_ETYPE_UNTAGGED &&
	      ts.ecode == IW_TERM_DDP_UNTAG_NO_BUF &&
	      iwe_qp_get_state(r.qp[0]) == IWE_QPS_ERROR,
	      "empty SRQ: DDP untagged 'no buffer' Terminate, QP in ERROR");
	CHECK(g_ev.last_wqe == 1, "and LAST_WQE_REACHED");
	rig_close(&r);
}

/* Posting to the SRQ while the other QP's receives drain it. */
struct poster {
	struct rig *r;
	int n, fails;
};

static void *post_thread(void *arg)
{
	struct poster *p = arg;
	int i;

	for (i = 0; i < p->n; i++) {
		while (srq_post(p->r, (uint64_t)(i % 16), 64) == ENOMEM)
			sched_yield();
	}
	return NULL;
}

static void test_threads(void)
{
	struct poster ps;
	struct ibv_wc wc;
	pthread_t t;
	struct rig r;
	int got = 0, i, bad = 0;

	rig_open(&r, 16, 0);
	ps = (struct poster){ .r = &r, .n = 400 };
	pthread_create(&t, NULL, post_thread, &ps);
	for (i = 0; i < 400; i++) {
		while (iwe_srq_count(r.srq) == 0)
			sched_yield();
		send_from(&r, i & 1, 8, (unsigned)i);
		if (!rig_pump(&r, r.rcq[i & 1], 1))
			break;
		while (poll1(r.rcq[i & 1], &wc)) {
			got++;
			bad += wc.status != IBV_WC_SUCCESS;
		}
	}
	pthread_join(t, NULL);
	CHECK(got == 400 && bad == 0,
	      "400 Sends over 2 QPs while another thread posts (%d, %d bad)",
	      got, bad);
	rig_close(&r);
}

int main(void)
{
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_validation();
	test_shared_order();
	test_limit();
	test_resize();
	test_flush();
	test_empty();
	test_threads();
	iwe_device_close(g_dev);
	return tap_done();
}
