/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Posting work requests: checks, resolving SGEs against the STag table,
 * filling the queue slots.  A send in RTS goes out inline (iw_qp.c), so a
 * posting thread needs no thread hop on the fast path.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "iw_qp.h"

#define SEND_FLAGS_OK (IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | \
		       IBV_SEND_FENCE)

static int send_wr_valid(const struct iwe_qp_priv *q,
			 const struct ibv_send_wr *wr)
{
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->pub.cap.max_send_sge)
		return 0;
	if (wr->num_sge && !wr->sg_list)
		return 0;
	if (wr->send_flags & ~SEND_FLAGS_OK)
		return 0;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
		return 1;
	case IBV_WR_RDMA_READ:
		/* One Read Request per sink SGE must fit in ORD. */
		return wr->num_sge <= IWE_MAX_ORD;
	case IBV_WR_BIND_MW:
		return wr->num_sge == 0 &&
		       !(wr->send_flags & IBV_SEND_SOLICITED);
	default:
		return 0;
	}
}

/* Reserve the window (and MR) of a bind and learn its new STag; it is
 * written back to the WR for the poster (iw_engine.h). */
static int fill_bind(struct iwe_qp_priv *q, struct ibv_send_wr *wr,
		     struct iwe_swqe *w)
{
	const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;

	w->bind_mw = (struct iwe_mw *)(void *)wr->bind_mw.mw;
	w->bind_len = b->length;
	w->bind_mr = b->length ? (struct iwe_mr *)(void *)b->mr : NULL;
	w->bind_addr = b->addr;
	w->bind_access = (int)b->mw_access_flags;
	w->bind_done = 0;
	if (iwe_mw_bind_reserve(q->pub.pd, w->bind_mw, w->bind_mr,
				w->bind_addr, w->bind_len, w->bind_access,
				&w->bind_rkey))
		return EINVAL;
	wr->bind_mw.rkey = w->bind_rkey;
	return 0;
}

static int fill_swqe(struct iwe_qp_priv *q, struct ibv_send_wr *wr,
		     struct iwe_swqe *w)
{
	enum iwe_sge_use use = wr->opcode == IBV_WR_RDMA_READ ?
			       IWE_SGE_READ_SINK : IWE_SGE_SOURCE;

	if (iwe_sgl_resolve(q->pub.pd, wr->sg_list, wr->num_sge, use, w->sg,
			    &w->total))
		return EINVAL;
	/* Message sizes travel in 32-bit fields (Read size, MO). */
	if (w->total > UINT32_MAX)
		return EINVAL;
	w->wr_id = wr->wr_id;
	w->opcode = (uint8_t)wr->opcode;
	w->num_sge = (uint32_t)wr->num_sge;
	w->signaled = !!(wr->send_flags & IBV_SEND_SIGNALED);
	w->solicited = !!(wr->send_flags & IBV_SEND_SOLICITED);
	w->fence = !!(wr->send_flags & IBV_SEND_FENCE);
	w->remote_addr = wr->wr.rdma.remote_addr;
	w->rkey = wr->wr.rdma.rkey;
	w->inv_rkey = wr->opcode == IBV_WR_SEND_WITH_INV ?
		      wr->invalidate_rkey : 0;
	w->tx_done = 0;
	w->rd_issued = w->rd_pending = w->rd_done_reqs = 0;
	w->bind_mw = NULL;
	w->bind_done = 1;
	/* Last: nothing may fail after the reservation. */
	return wr->opcode == IBV_WR_BIND_MW ? fill_bind(q, wr, w) : 0;
}

/* A queue's slots, at its first post (iw_wq.c), held until the QP is
 * quiet.  0, or ENOMEM. */
static int sq_ready(struct iwe_qp_priv *q)
{
	if (q->sq)
		return 0;
	if (iwe_wq_sq_make(q))
		return ENOMEM;
	iwe_qp_idle_hold(q);
	return 0;
}

static int rq_ready(struct iwe_qp_priv *q)
{
	if (q->rq)
		return 0;
	if (iwe_wq_rq_make(q))
		return ENOMEM;
	iwe_qp_idle_hold(q);
	return 0;
}

static int post_send_one(struct iwe_qp_priv *q, struct ibv_send_wr *wr)
{
	struct iwe_swqe *w;

	if (!send_wr_valid(q, wr))
		return EINVAL;
	if (sq_ready(q))
		return ENOMEM;
	if (q->sq_tail - q->sq_head >= q->pub.cap.max_send_wr) {
		q->stats.queue_full++;
		return ENOMEM;
	}
	w = iwe_sq_slot(q, q->sq_tail);
	if (fill_swqe(q, wr, w))
		return EINVAL;
	q->sq_tail++;
	if (q->state == IWE_QPS_ERROR)
		iwe_wq_flush_sq(q);
	return 0;
}

/* The QP to post to, locked; NULL (nothing locked) for a call without
 * a QP or a place for the bad WR. */
static struct iwe_qp_priv *lock_for_post(struct iwe_qp *qp,
					 const void *bad_wr)
{
	struct iwe_qp_priv *q;

	if (!qp || !bad_wr)
		return NULL;
	q = iwe_qp_priv(qp);
	iwe_qp_lock_for_post(q);
	return q;
}

int iwe_post_send(struct iwe_qp *qp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr)
{
	struct iwe_qp_priv *q = lock_for_post(qp, bad_wr);
	uint64_t bytes = 0;
	int err;

	if (!q)
		return EINVAL;
	/* ERROR takes posts too: they complete flushed. */
	err = q->state == IWE_QPS_RTS || q->state == IWE_QPS_SQD ||
	      q->state == IWE_QPS_ERROR ? 0 : EINVAL;
	while (!err && wr && !(err = post_send_one(q, wr))) {
		const struct iwe_swqe *w = iwe_sq_slot(q, q->sq_tail - 1);

		/* Its payload, as fill_swqe summed it (a Read Request puts
		 * none worth counting on the wire). */
		if (w->opcode != IBV_WR_RDMA_READ)
			bytes += w->total;
		wr = wr->next;
	}
	if (err)
		*bad_wr = wr;
	/* Inline transmit: no thread hop when the path is idle. */
	iwe_qp_post_kick(q, bytes);
	iwe_qp_unlock(q);
	return err;
}

static int post_recv_one(struct iwe_qp_priv *q, const struct ibv_recv_wr *wr)
{
	struct iwe_rwqe *w;

	if (q->srq || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > q->pub.cap.max_recv_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if (rq_ready(q))
		return ENOMEM;
	if (q->rq_tail - q->rq_head >= q->pub.cap.max_recv_wr) {
		q->stats.queue_full++;
		return ENOMEM;
	}
	w = iwe_rq_slot(q, q->rq_tail);
	if (iwe_sgl_resolve(q->pub.pd, wr->sg_list, wr->num_sge, IWE_SGE_SINK,
			    w->sg, &w->total) || w->total > UINT32_MAX)
		return EINVAL;
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	q->rq_tail++;
	if (q->state == IWE_QPS_ERROR)
		iwe_wq_flush_rq(q);
	return 0;
}

int iwe_post_recv(struct iwe_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	struct iwe_qp_priv *q = lock_for_post(qp, bad_wr);
	int err;

	if (!q)
		return EINVAL;
	err = q->state == IWE_QPS_RESET ? EINVAL : 0;
	while (!err && wr && !(err = post_recv_one(q, wr)))
		wr = wr->next;
	if (err)
		*bad_wr = wr;
	iwe_qp_recv_posted(q);
	iwe_qp_unlock(q);
	return err;
}
