/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Work queues of a QP: WQE slots, completions, flushing, the receive a
 * Send is being placed into, and matching a peer's Terminate to the WR
 * that provoked it.  The bottom floor of the QP (see iw_qp.h): it calls
 * only the CQ, the SRQ, the STag table and the slab (the slots' memory).
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "iw_qp.h"
#include "iw_slab.h"

/* ------------------------------------------------------------ slots */

/* n WRs of wr_size bytes, each with its sg pointer (at sg_off) to nsge
 * SGE slots of its own (at least one: the slot arithmetic stays
 * simple).  From the slab: they come at a connection's first post, for
 * thousands of connections at once in an MPI job's first exchange. */
static size_t sges_of(uint32_t nsge)
{
	return nsge ? nsge : 1;
}

static int queue_make(void **wrs, struct iwe_sge_res **sges, uint32_t n,
		      size_t wr_size, size_t sg_off, uint32_t nsge)
{
	size_t per = sges_of(nsge), sg_bytes = n * per * sizeof(**sges);
	char *w = iw_slab_zalloc(n * wr_size);

	*sges = iw_slab_zalloc(sg_bytes);
	if (!w || !*sges) {
		iw_slab_free(w, n * wr_size);
		iw_slab_free(*sges, sg_bytes);
		*sges = NULL;
		return ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct iwe_sge_res *sg = *sges + i * per;

		memcpy(w + i * wr_size + sg_off, &sg, sizeof(sg));
	}
	*wrs = w;
	return 0;
}

static void queue_free(void *wrs, struct iwe_sge_res **sges, uint32_t n,
		       size_t wr_size, uint32_t nsge)
{
	iw_slab_free(wrs, n * wr_size);
	iw_slab_free(*sges, n * sges_of(nsge) * sizeof(**sges));
	*sges = NULL;
}

int iwe_wq_sq_make(struct iwe_qp_priv *q)
{
	const struct iwe_qp_cap *c = &q->pub.cap;
	void *wrs = NULL;
	int err = queue_make(&wrs, &q->sq_sge, c->max_send_wr,
			     sizeof(*q->sq), offsetof(struct iwe_swqe, sg),
			     c->max_send_sge);

	q->sq = wrs;
	return err;
}

int iwe_wq_rq_make(struct iwe_qp_priv *q)
{
	const struct iwe_qp_cap *c = &q->pub.cap;
	void *wrs = NULL;
	int err = queue_make(&wrs, &q->rq_sge, c->max_recv_wr,
			     sizeof(*q->rq), offsetof(struct iwe_rwqe, sg),
			     c->max_recv_sge);

	q->rq = wrs;
	return err;
}

void iwe_wq_sq_free(struct iwe_qp_priv *q)
{
	queue_free(q->sq, &q->sq_sge, q->pub.cap.max_send_wr, sizeof(*q->sq),
		   q->pub.cap.max_send_sge);
	q->sq = NULL;
}

void iwe_wq_rq_free(struct iwe_qp_priv *q)
{
	queue_free(q->rq, &q->rq_sge, q->pub.cap.max_recv_wr, sizeof(*q->rq),
		   q->pub.cap.max_recv_sge);
	q->rq = NULL;
}

/* ------------------------------------------------------- completions */

/* The completion opcode of each send WR opcode (verbs leaves the rest as
 * a Send). */
static const enum ibv_wc_opcode wc_opcode_of[] = {
	[IBV_WR_RDMA_WRITE] = IBV_WC_RDMA_WRITE,
	[IBV_WR_RDMA_WRITE_WITH_IMM] = IBV_WC_RDMA_WRITE,
	[IBV_WR_SEND] = IBV_WC_SEND,
	[IBV_WR_SEND_WITH_IMM] = IBV_WC_SEND,
	[IBV_WR_RDMA_READ] = IBV_WC_RDMA_READ,
	[IBV_WR_SEND_WITH_INV] = IBV_WC_SEND,
	[IBV_WR_BIND_MW] = IBV_WC_BIND_MW,
};

static enum ibv_wc_opcode wc_opcode(uint8_t wr_opcode)
{
	return wr_opcode < sizeof(wc_opcode_of) / sizeof(wc_opcode_of[0]) ?
	       wc_opcode_of[wr_opcode] : IBV_WC_SEND;
}

/* A WR leaves the send queue: a bind that never executed gives its
 * reservation back (and leaves its window unbound, see iw_engine.h). */
static void swqe_drop(struct iwe_swqe *w)
{
	if (w->opcode != IBV_WR_BIND_MW || w->bind_done)
		return;
	w->bind_done = 1;
	iwe_mw_bind_cancel(w->bind_mw, w->bind_mr);
}

void iwe_wq_drop_sq(struct iwe_qp_priv *q)
{
	uint32_t i;

	IWE_QP_ASSERT_LOCKED(q);
	for (i = q->sq_head; i != q->sq_tail; i++)
		swqe_drop(iwe_sq_slot(q, i));
}

void iwe_wq_push_send_wc(struct iwe_qp_priv *q, struct iwe_swqe *w,
			 enum ibv_wc_status status)
{
	struct ibv_wc wc = {
		.wr_id = w->wr_id,
		.status = status,
		.opcode = wc_opcode(w->opcode),
		.byte_len = (uint32_t)w->total,
		.qp_num = q->pub.qp_num,
	};

	swqe_drop(w);
	/* Unsignaled WRs retire silently; errors are always reported. */
	if (status == IBV_WC_SUCCESS && !w->signaled && !q->sq_sig_all)
		return;
	iwe_cq_push_from(q->pub.send_cq, &q->send_hook, &wc, 0);
}

/* A WR is finished once all of it is done in the transport and, for a
 * Read, every response has been placed. */
static int swqe_finished(const struct iwe_swqe *w)
{
	return w->tx_done && w->rd_pending == 0;
}

void iwe_wq_sq_retire(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	while (q->sq_head != q->sq_tx) {
		struct iwe_swqe *w = iwe_sq_slot(q, q->sq_head);

		if (!swqe_finished(w))
			break;
		iwe_wq_push_send_wc(q, w, IBV_WC_SUCCESS);
		q->sq_head++;
	}
}

void iwe_wq_rq_complete(struct iwe_qp_priv *q, uint32_t byte_len,
			int solicited, uint32_t inv_stag)
{
	struct iwe_rwqe *w = q->srq ? &q->srq_cur : iwe_rq_slot(q, q->rq_head);
	struct ibv_wc wc = {
		.wr_id = w->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = byte_len,
		.qp_num = q->pub.qp_num,
	};

	IWE_QP_ASSERT_LOCKED(q);
	if (inv_stag) {
		wc.wc_flags = IBV_WC_WITH_INV;
		wc.invalidated_rkey = inv_stag;
	}
	if (q->srq)
		q->srq_cur_valid = 0;
	else
		q->rq_head++;
	iwe_cq_push_from(q->pub.recv_cq, iwe_qp_recv_hook(q), &wc, solicited);
}

const struct iwe_rwqe *iwe_wq_recv_wqe(struct iwe_qp_priv *q, uint32_t mo,
				       uint32_t msg_so_far)
{
	int hit;

	IWE_QP_ASSERT_LOCKED(q);
	if (!q->srq)
		return q->rq_head == q->rq_tail ? NULL
						: iwe_rq_slot(q, q->rq_head);
	/* A WR is taken by the first segment of a message only: a stray
	 * later segment must not consume one of the other QPs' buffers. */
	if (!q->srq_cur_valid && mo == 0 && msg_so_far == 0 &&
	    iwe_srq_take(q->srq, &q->srq_cur, &hit) == 0) {
		q->srq_cur_valid = 1;
		if (hit)
			q->ev_pending |= IWE_QP_EV_SRQ_LIMIT;
	}
	return q->srq_cur_valid ? &q->srq_cur : NULL;
}

/* ---------------------------------------------------------- flushing */

static void push_recv_flush(struct iwe_qp_priv *q, uint64_t wr_id)
{
	struct ibv_wc wc = { .wr_id = wr_id,
			     .status = IBV_WC_WR_FLUSH_ERR,
			     .opcode = IBV_WC_RECV,
			     .qp_num = q->pub.qp_num };

	iwe_cq_push(q->pub.recv_cq, &wc, 0);
}

/* The SRQ's WRs are not ours to flush: only the one taken for the Send
 * in progress is. */
void iwe_wq_flush_rq(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	if (q->srq) {
		if (q->srq_cur_valid) {
			q->srq_cur_valid = 0;
			push_recv_flush(q, q->srq_cur.wr_id);
		}
		return;
	}
	while (q->rq_head != q->rq_tail)
		push_recv_flush(q, iwe_rq_slot(q, q->rq_head++)->wr_id);
}

void iwe_wq_flush_sq(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	while (q->sq_head != q->sq_tail)
		iwe_wq_push_send_wc(q, iwe_sq_slot(q, q->sq_head++),
				    IBV_WC_WR_FLUSH_ERR);
	q->sq_tx = q->sq_tail;
	q->orq_head = q->orq_tail;
	q->irq_head = q->irq_tail;
}

/* Does the Terminate's copy of our segment name this WR?  Tagged: a Write
 * to the same STag inside the WR's remote range.  Untagged with the Read
 * Request body: the Read Request's source STag and TO. */
static int term_names_wqe(const struct iwe_term *t, const struct iwe_swqe *w)
{
	struct iw_tagged_hdr th;
	struct iw_read_req rr;
	uint64_t to;

	if (!t->has_hdr)
		return 0;
	if (w->opcode == IBV_WR_RDMA_WRITE && t->hdr_len == IW_TAGGED_HDR_LEN) {
		memcpy(&th, t->hdr, sizeof(th));
		to = iw_be64(th.to_be);
		return iw_be32(th.stag_be) == w->rkey &&
		       to >= w->remote_addr && to - w->remote_addr <= w->total;
	}
	if (w->opcode == IBV_WR_RDMA_READ && t->has_rdmap) {
		memcpy(&rr, t->hdr, sizeof(rr));
		to = iw_be64(rr.body.src_to_be);
		return iw_be32(rr.body.src_stag_be) == w->rkey &&
		       to >= w->remote_addr && to - w->remote_addr <= w->total;
	}
	return 0;
}

/* Complete the SQ up to WR counter idx in order (finished ones as
 * successes, the rest flushed), then that WR with status. */
static void fail_wqe(struct iwe_qp_priv *q, uint32_t idx,
		     enum ibv_wc_status status)
{
	while (q->sq_head != idx) {
		struct iwe_swqe *p = iwe_sq_slot(q, q->sq_head++);

		iwe_wq_push_send_wc(q, p, swqe_finished(p) ?
				    IBV_WC_SUCCESS : IBV_WC_WR_FLUSH_ERR);
	}
	iwe_wq_push_send_wc(q, iwe_sq_slot(q, idx), status);
	q->sq_head++;
}

/* A Write that was fully sent has already completed successfully
 * (completion on hand-off to the stream), so only WRs still outstanding
 * can be matched: [sq_head, end). */
int iwe_wq_fail_matching(struct iwe_qp_priv *q, const struct iwe_term *t,
			 enum ibv_wc_status status, uint32_t end)
{
	uint32_t i;

	IWE_QP_ASSERT_LOCKED(q);
	for (i = q->sq_head; i != end; i++) {
		if (term_names_wqe(t, iwe_sq_slot(q, i))) {
			fail_wqe(q, i, status);
			return 1;
		}
	}
	return 0;
}

void iwe_wq_fail_oldest_read(struct iwe_qp_priv *q)
{
	const struct iwe_orq_ent *o;

	IWE_QP_ASSERT_LOCKED(q);
	if (q->orq_head == q->orq_tail)
		return;
	o = iwe_orq_slot(q, q->orq_head);
	if (!o->rtr && o->wqe_idx - q->sq_head < q->sq_tail - q->sq_head)
		fail_wqe(q, o->wqe_idx, IBV_WC_BAD_RESP_ERR);
}
