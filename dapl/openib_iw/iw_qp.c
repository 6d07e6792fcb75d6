/* Queue pairs: the object, its send and receive queues, the verbs state
 * machine, posting, completions and flushing.  The wire work lives in
 * iw_tx.c and iw_rx.c; see iw_qp.h for the locking rules.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "iw_qp.h"

static atomic_uint qp_num_next = 1;

static void sq_drop_all(struct iwe_qp_priv *q);

/* ------------------------------------------------------------ create */

/* With an SRQ the receive caps are ignored (verbs). */
static int caps_valid(const struct iwe_qp_cap *c, int srq)
{
	return c->max_send_wr >= 1 && c->max_send_wr <= IWE_MAX_QP_WR &&
	       (srq || (c->max_recv_wr >= 1 &&
			c->max_recv_wr <= IWE_MAX_QP_WR &&
			c->max_recv_sge <= IWE_MAX_SGE)) &&
	       c->max_send_sge <= IWE_MAX_SGE;
}

static int qp_alloc_queues(struct iwe_qp_priv *q)
{
	const struct iwe_qp_cap *c = &q->pub.cap;
	/* At least one SGE slot per WR keeps the slot arithmetic simple. */
	size_t ss = c->max_send_sge ? c->max_send_sge : 1;
	size_t rs = c->max_recv_sge ? c->max_recv_sge : 1;
	/* With an SRQ the RQ stays empty; one slot keeps it allocated. */
	size_t rw = c->max_recv_wr ? c->max_recv_wr : 1;
	size_t cs = q->srq ? q->srq->max_sge : 1;
	uint32_t i;

	q->sq = calloc(c->max_send_wr, sizeof(*q->sq));
	q->sq_sge = calloc(c->max_send_wr * ss, sizeof(*q->sq_sge));
	q->rq = calloc(rw, sizeof(*q->rq));
	q->rq_sge = calloc(rw * rs, sizeof(*q->rq_sge));
	q->orq = calloc(IWE_MAX_ORD, sizeof(*q->orq));
	q->irq = calloc(IWE_MAX_IRD, sizeof(*q->irq));
	q->srq_cur.sg = calloc(cs, sizeof(*q->srq_cur.sg));
	if (!q->sq || !q->sq_sge || !q->rq || !q->rq_sge || !q->orq ||
	    !q->irq || !q->srq_cur.sg)
		return ENOMEM;
	for (i = 0; i < c->max_send_wr; i++)
		q->sq[i].sg = q->sq_sge + i * ss;
	for (i = 0; i < c->max_recv_wr; i++)
		q->rq[i].sg = q->rq_sge + i * rs;
	return 0;
}

static void qp_free(struct iwe_qp_priv *q)
{
	iwe_tx_fini(q);
	free(q->sq);
	free(q->sq_sge);
	free(q->rq);
	free(q->rq_sge);
	free(q->orq);
	free(q->irq);
	free(q->srq_cur.sg);
	free(q);
}

struct iwe_qp *iwe_create_qp(struct iwe_pd *pd,
			     const struct iwe_qp_init_attr *attr)
{
	struct iwe_qp_priv *q;

	if (!pd || !attr || !attr->send_cq || !attr->recv_cq ||
	    !caps_valid(&attr->cap, attr->srq != NULL) ||
	    (attr->srq && attr->srq->pd != pd)) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->pub = (struct iwe_qp){ .pd = pd, .send_cq = attr->send_cq,
				  .recv_cq = attr->recv_cq,
				  .qp_context = attr->qp_context,
				  .cap = attr->cap };
	q->handler = attr->event_handler;
	if (attr->srq) {
		q->srq = iwe_srq_priv(attr->srq);
		/* Receives are the SRQ's: report what it provides. */
		q->pub.cap.max_recv_wr = 0;
		q->pub.cap.max_recv_sge = q->srq->max_sge;
	}
	if (qp_alloc_queues(q)) {
		qp_free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->pub.qp_num = atomic_fetch_add(&qp_num_next, 1);
	q->sq_sig_all = !!attr->sq_sig_all;
	q->fd = -1;
	q->state = IWE_QPS_RESET;
	pthread_mutex_init(&q->lock, NULL);
	iwe_tx_init(q);
	iwe_rx_init(q);
	iwe_pd_get(pd);
	iwe_cq_get(attr->send_cq);
	iwe_cq_get(attr->recv_cq);
	iwe_cq_add_qp(attr->send_cq, &q->pub);
	if (attr->recv_cq != attr->send_cq)
		iwe_cq_add_qp(attr->recv_cq, &q->pub);
	if (q->srq)
		iwe_srq_attach(q->srq);
	return &q->pub;
}

int iwe_destroy_qp(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	/* First off the CQs' polling lists (waits for a poller in it). */
	iwe_cq_del_qp(qp->send_cq, qp);
	if (qp->recv_cq != qp->send_cq)
		iwe_cq_del_qp(qp->recv_cq, qp);
	sq_drop_all(q);
	if (q->srq)
		iwe_srq_detach(q->srq);
	iwe_cq_put(qp->send_cq);
	iwe_cq_put(qp->recv_cq);
	iwe_pd_put(qp->pd);
	pthread_mutex_destroy(&q->lock);
	qp_free(q);
	return 0;
}

/* ------------------------------------------------------- completions */

static enum ibv_wc_opcode wc_opcode(uint8_t wr_opcode)
{
	switch (wr_opcode) {
	case IBV_WR_RDMA_WRITE:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	default:
		return IBV_WC_SEND;
	}
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

/* Discard every WR of the send queue silently (reset, destroy). */
static void sq_drop_all(struct iwe_qp_priv *q)
{
	uint32_t i;

	for (i = q->sq_head; i != q->sq_tail; i++)
		swqe_drop(iwe_sq_slot(q, i));
}

static void push_send_wc(struct iwe_qp_priv *q, struct iwe_swqe *w,
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
	iwe_cq_push(q->pub.send_cq, &wc, 0);
}

/* A WR is finished once all of it is on the wire and, for a Read, every
 * response has been placed. */
static int swqe_finished(const struct iwe_swqe *w)
{
	return w->tx_done && w->rd_pending == 0;
}

void iwe_qp_sq_retire(struct iwe_qp_priv *q)
{
	while (q->sq_head != q->sq_tx) {
		struct iwe_swqe *w = iwe_sq_slot(q, q->sq_head);

		if (!swqe_finished(w))
			break;
		push_send_wc(q, w, IBV_WC_SUCCESS);
		q->sq_head++;
	}
}

void iwe_qp_rq_complete(struct iwe_qp_priv *q, uint32_t byte_len,
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

	if (inv_stag) {
		wc.wc_flags = IBV_WC_WITH_INV;
		wc.invalidated_rkey = inv_stag;
	}
	if (q->srq)
		q->srq_cur_valid = 0;
	else
		q->rq_head++;
	iwe_cq_push(q->pub.recv_cq, &wc, solicited);
}

const struct iwe_rwqe *iwe_qp_recv_wqe(struct iwe_qp_priv *q, uint32_t mo,
				       uint32_t msg_so_far)
{
	int hit;

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

/* The SRQ's WRs are not ours to flush: only the one taken for the Send
 * in progress is. */
static void flush_srq_cur(struct iwe_qp_priv *q)
{
	struct ibv_wc wc = { .wr_id = q->srq_cur.wr_id,
			     .status = IBV_WC_WR_FLUSH_ERR,
			     .opcode = IBV_WC_RECV,
			     .qp_num = q->pub.qp_num };

	if (!q->srq_cur_valid)
		return;
	q->srq_cur_valid = 0;
	iwe_cq_push(q->pub.recv_cq, &wc, 0);
}

static void flush_rq(struct iwe_qp_priv *q)
{
	if (q->srq) {
		flush_srq_cur(q);
		return;
	}
	while (q->rq_head != q->rq_tail) {
		struct iwe_rwqe *w = iwe_rq_slot(q, q->rq_head++);
		struct ibv_wc wc = { .wr_id = w->wr_id,
				     .status = IBV_WC_WR_FLUSH_ERR,
				     .opcode = IBV_WC_RECV,
				     .qp_num = q->pub.qp_num };

		iwe_cq_push(q->pub.recv_cq, &wc, 0);
	}
}

static void flush_sq(struct iwe_qp_priv *q)
{
	while (q->sq_head != q->sq_tail)
		push_send_wc(q, iwe_sq_slot(q, q->sq_head++),
			     IBV_WC_WR_FLUSH_ERR);
	q->sq_tx = q->sq_tail;
	q->orq_head = q->orq_tail;
	q->irq_head = q->irq_tail;
}

void iwe_qp_fail(struct iwe_qp_priv *q, int err)
{
	if (!q->stream_err && err)
		q->stream_err = err;
	if (q->state == IWE_QPS_ERROR)
		return;
	q->state = IWE_QPS_ERROR;
	iwe_tx_detach_wrs(q);
	flush_sq(q);
	flush_rq(q);
	if (q->srq)
		q->ev_pending |= IWE_QP_EV_LAST_WQE;
}

void iwe_qp_unlock(struct iwe_qp_priv *q)
{
	unsigned ev = q->ev_pending;
	struct iwe_async_event e = { .type = IWE_EVENT_QP_LAST_WQE_REACHED,
				     .element.qp = &q->pub,
				     .context = q->pub.qp_context };

	q->ev_pending = 0;
	pthread_mutex_unlock(&q->lock);
	/* The limit first: it is older than an error that stops the QP. */
	if (ev & IWE_QP_EV_SRQ_LIMIT)
		iwe_srq_report_limit(q->srq);
	if ((ev & IWE_QP_EV_LAST_WQE) && q->handler)
		q->handler(&e);
}

/* Does the Terminate's copy of our segment name this WR?  Tagged: a Write
 * to the same STag inside the WR's remote range.  Untagged with the Read
 * Request body: the Read Request's source STag and TO. */
static int term_names_wqe(const struct iwe_term *t, const struct iwe_swqe *w)
{
	const struct iw_tagged_hdr *th = (const void *)t->hdr;
	const struct iw_read_req *rr = (const void *)t->hdr;
	uint64_t to;

	if (!t->has_hdr)
		return 0;
	if (w->opcode == IBV_WR_RDMA_WRITE && t->hdr_len == IW_TAGGED_HDR_LEN) {
		to = iw_be64(th->to_be);
		return iw_be32(th->stag_be) == w->rkey &&
		       to >= w->remote_addr && to - w->remote_addr <= w->total;
	}
	if (w->opcode == IBV_WR_RDMA_READ && t->has_rdmap) {
		to = iw_be64(rr->body.src_to_be);
		return iw_be32(rr->body.src_stag_be) == w->rkey &&
		       to >= w->remote_addr && to - w->remote_addr <= w->total;
	}
	return 0;
}

/* Complete the SQ up to WR counter idx in order (finished ones as
 * successes, the rest flushed), then that WR with status. */
static void fail_wqe(struct iwe_qp_priv *q, uint32_t idx,
		     enum ibv_wc_status status)
{
	iwe_tx_detach_wrs(q);
	while (q->sq_head != idx) {
		struct iwe_swqe *p = iwe_sq_slot(q, q->sq_head++);

		push_send_wc(q, p, swqe_finished(p) ?
			     IBV_WC_SUCCESS : IBV_WC_WR_FLUSH_ERR);
	}
	push_send_wc(q, iwe_sq_slot(q, idx), status);
	q->sq_head++;
}

/* Before flushing, give the WR that provoked the peer's Terminate its
 * real status.  A Write that was fully sent has already completed
 * successfully (completion on hand-off to the stream), so only WRs still
 * outstanding can be matched. */
void iwe_qp_fail_matching(struct iwe_qp_priv *q, const struct iwe_term *t,
			  enum ibv_wc_status status)
{
	/* The WR being transmitted sits at sq_tx: include it. */
	uint32_t i, end = q->sq_tx + (q->tx.kind == IWE_TX_SQ);

	for (i = q->sq_head; i != end; i++) {
		if (term_names_wqe(t, iwe_sq_slot(q, i))) {
			fail_wqe(q, i, status);
			return;
		}
	}
}

/* The peer answered our oldest Read with a response that does not fit
 * it: that Read fails with a bad-response status, not a mere flush. */
void iwe_qp_fail_oldest_read(struct iwe_qp_priv *q)
{
	const struct iwe_orq_ent *o;

	if (q->orq_head == q->orq_tail)
		return;
	o = &q->orq[q->orq_head % IWE_MAX_ORD];
	if (!o->rtr && o->wqe_idx - q->sq_head < q->sq_tail - q->sq_head)
		fail_wqe(q, o->wqe_idx, IBV_WC_BAD_RESP_ERR);
}

/* ---------------------------------------------------- state machine */

static int transition_ok(int from, int to)
{
	if (to == IWE_QPS_ERROR || to == IWE_QPS_RESET)
		return 1;
	switch (from) {
	case IWE_QPS_RESET:
		return to == IWE_QPS_INIT;
	case IWE_QPS_INIT:
		return to == IWE_QPS_INIT || to == IWE_QPS_RTR;
	case IWE_QPS_RTR:
		return to == IWE_QPS_RTS;
	case IWE_QPS_RTS:
	case IWE_QPS_SQD:
		return to == IWE_QPS_RTS || to == IWE_QPS_SQD;
	default:
		return 0;
	}
}

/* Back to a fresh QP: queues emptied without completions, stream gone. */
static void qp_reset(struct iwe_qp_priv *q)
{
	iwe_tx_detach_wrs(q);
	sq_drop_all(q);
	q->srq_cur_valid = 0;	/* discarded, as the RQ's WRs are */
	q->sq_head = q->sq_tx = q->sq_tail = 0;
	q->rq_head = q->rq_tail = 0;
	q->orq_head = q->orq_tail = q->irq_head = q->irq_tail = 0;
	q->fd = -1;
	q->stream_err = 0;
	q->tx_hook = NULL;
	q->tx_hook_arg = NULL;
	q->tx_gate = q->first_rx = 0;
	q->rtr_expect = 0;
	memset(&q->term_sent, 0, sizeof(q->term_sent));
	memset(&q->term_rcvd, 0, sizeof(q->term_rcvd));
	iwe_tx_fini(q);
	iwe_tx_init(q);
	iwe_rx_init(q);
	q->state = IWE_QPS_RESET;
}

int iwe_modify_qp(struct iwe_qp *qp, enum iwe_qp_state state)
{
	struct iwe_qp_priv *q;
	int err = 0;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	pthread_mutex_lock(&q->lock);
	if (!transition_ok(q->state, (int)state))
		err = EINVAL;
	else if (state == IWE_QPS_ERROR)
		iwe_qp_fail(q, 0);	/* the consumer asked: no stream error */
	else if (state == IWE_QPS_RESET)
		qp_reset(q);
	else
		q->state = (int)state;
	/* Leaving SQD may release queued sends. */
	if (!err && state == IWE_QPS_RTS && q->fd >= 0)
		iwe_tx_progress_locked(q);
	iwe_qp_unlock(q);
	return err;
}

enum iwe_qp_state iwe_qp_get_state(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int s;

	pthread_mutex_lock(&q->lock);
	s = q->state;
	iwe_qp_unlock(q);
	return (enum iwe_qp_state)s;
}

/* ----------------------------------------------------------- posting */

/* Resolve a local SGE: the lkey must name memory of our PD covering the
 * range, with the rights its use needs. */
static int sge_resolve(const struct iwe_pd *pd, const struct ibv_sge *s,
		       enum iwe_sge_use use, struct iwe_sge_res *out)
{
	void *p = NULL;
	enum iwe_access_error e;

	out->length = s->length;
	out->lkey = s->lkey;
	out->addr = NULL;
	if (s->length == 0)
		return 0;
	if (use == IWE_SGE_READ_SINK)
		e = iwe_read_sink_check(pd->dev, pd, s->lkey, s->addr,
					s->length, &p);
	else
		e = iwe_mr_check(pd->dev, pd, s->lkey, s->addr, s->length,
				 use == IWE_SGE_SINK ? IBV_ACCESS_LOCAL_WRITE : 0,
				 &p);
	if (e)
		return EINVAL;
	out->addr = p;
	return 0;
}

int iwe_sgl_resolve(const struct iwe_pd *pd, const struct ibv_sge *sg,
		    int n, enum iwe_sge_use use, struct iwe_sge_res *out,
		    uint64_t *total)
{
	int i;

	*total = 0;
	for (i = 0; i < n; i++) {
		if (sge_resolve(pd, &sg[i], use, &out[i]))
			return EINVAL;
		*total += sg[i].length;
	}
	return 0;
}

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
	w->rd_issued = w->rd_pending = 0;
	w->bind_mw = NULL;
	w->bind_done = 1;
	/* Last: nothing may fail after the reservation. */
	return wr->opcode == IBV_WR_BIND_MW ? fill_bind(q, wr, w) : 0;
}

static int post_send_one(struct iwe_qp_priv *q, struct ibv_send_wr *wr)
{
	struct iwe_swqe *w;

	if (!send_wr_valid(q, wr))
		return EINVAL;
	if (q->sq_tail - q->sq_head >= q->pub.cap.max_send_wr)
		return ENOMEM;
	w = iwe_sq_slot(q, q->sq_tail);
	if (fill_swqe(q, wr, w))
		return EINVAL;
	q->sq_tail++;
	if (q->state == IWE_QPS_ERROR)
		flush_sq(q);
	return 0;
}

int iwe_post_send(struct iwe_qp *qp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr)
{
	struct iwe_qp_priv *q;
	int err = 0;

	if (!qp || !bad_wr)
		return EINVAL;
	q = iwe_qp_priv(qp);
	pthread_mutex_lock(&q->lock);
	if (q->state != IWE_QPS_RTS && q->state != IWE_QPS_SQD &&
	    q->state != IWE_QPS_ERROR) {
		*bad_wr = wr;
		wr = NULL;
		err = EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = post_send_one(q, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	/* Inline transmit: no thread hop when the path is idle. */
	if (q->state == IWE_QPS_RTS && q->fd >= 0 && !iwe_tx_busy(q))
		iwe_tx_progress_locked(q);
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
	if (q->rq_tail - q->rq_head >= q->pub.cap.max_recv_wr)
		return ENOMEM;
	w = iwe_rq_slot(q, q->rq_tail);
	if (iwe_sgl_resolve(q->pub.pd, wr->sg_list, wr->num_sge, IWE_SGE_SINK,
			    w->sg, &w->total) || w->total > UINT32_MAX)
		return EINVAL;
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	q->rq_tail++;
	if (q->state == IWE_QPS_ERROR)
		flush_rq(q);
	return 0;
}

int iwe_post_recv(struct iwe_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	struct iwe_qp_priv *q;
	int err = 0;

	if (!qp || !bad_wr)
		return EINVAL;
	q = iwe_qp_priv(qp);
	pthread_mutex_lock(&q->lock);
	if (q->state == IWE_QPS_RESET) {
		*bad_wr = wr;
		wr = NULL;
		err = EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = post_recv_one(q, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	iwe_qp_unlock(q);
	return err;
}

/* ------------------------------------------------------------ stream */

static int stream_params_valid(const struct iwe_stream_params *p)
{
	if (p->mulpdu && (p->mulpdu < IWE_MIN_MULPDU ||
			  p->mulpdu > IW_FPDU_MAX_ULPDU))
		return 0;
	return p->ird <= IWE_MAX_IRD && p->ord <= IWE_MAX_ORD &&
	       (p->mpa_rev == 1 || p->mpa_rev == 2);
}

int iwe_qp_attach_stream(struct iwe_qp *qp, int fd,
			 const struct iwe_stream_params *p)
{
	return iwe_qp_attach_cm(qp, fd, p, NULL);
}

static void apply_cm_opts(struct iwe_qp_priv *q, const struct iwe_qp_cm_opts *o)
{
	q->tx_hook = o->tx_hook;
	q->tx_hook_arg = o->tx_hook_arg;
	if (o->responder) {
		/* MPA: only the initiator may send the first FPDU. */
		q->tx_gate = 1;
		q->rtr_expect = o->rtr;
	} else {
		q->tx.rtr_pending = o->rtr;
	}
}

int iwe_qp_attach_cm(struct iwe_qp *qp, int fd,
		     const struct iwe_stream_params *p,
		     const struct iwe_qp_cm_opts *o)
{
	struct iwe_qp_priv *q;
	int err = 0;

	if (!qp || fd < 0 || !p || !stream_params_valid(p) ||
	    (o && (o->rtr & ~7u)))
		return EINVAL;
	q = iwe_qp_priv(qp);
	pthread_mutex_lock(&q->lock);
	if ((q->state != IWE_QPS_INIT && q->state != IWE_QPS_RTR) ||
	    q->fd >= 0) {
		err = EINVAL;
	} else {
		q->fd = fd;
		q->crc = !!p->crc;
		q->mulpdu = p->mulpdu ? p->mulpdu : IWE_DEFAULT_MULPDU;
		q->ird = p->ird ? p->ird : 1;
		q->ord = p->ord ? p->ord : 1;
		q->state = IWE_QPS_RTS;
		if (o)
			apply_cm_opts(q, o);
		/* Receives and sends may have been posted before; the
		 * initiator's RTR goes first. */
		iwe_tx_progress_locked(q);
	}
	iwe_qp_unlock(q);
	return err;
}

void iwe_qp_clear_tx_hook(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	pthread_mutex_lock(&q->lock);
	q->tx_hook = NULL;
	q->tx_hook_arg = NULL;
	iwe_qp_unlock(q);
}

int iwe_qp_tx_blocked(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int r;

	pthread_mutex_lock(&q->lock);
	r = q->fd >= 0 && q->tx.fpdu_len != 0;
	iwe_qp_unlock(q);
	return r;
}

int iwe_qp_first_rx(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int r;

	pthread_mutex_lock(&q->lock);
	r = q->first_rx;
	iwe_qp_unlock(q);
	return r;
}

int iwe_qp_tx_drained(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int r;

	pthread_mutex_lock(&q->lock);
	if (q->fd < 0 || q->state == IWE_QPS_ERROR)
		r = q->tx.fpdu_len == 0;
	else
		r = !iwe_tx_busy(q) && !q->tx.rtr_pending &&
		    !q->tx.term_pending && q->sq_tx == q->sq_tail &&
		    q->irq_head == q->irq_tail;
	iwe_qp_unlock(q);
	return r;
}

int iwe_qp_progress_tx(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q;
	int err;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	pthread_mutex_lock(&q->lock);
	err = q->fd >= 0 ? iwe_tx_progress_locked(q) : 0;
	iwe_qp_unlock(q);
	return err;
}

int iwe_qp_progress_rx(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q;
	int err = 0;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
	pthread_mutex_lock(&q->lock);
	if (q->fd >= 0) {
		err = iwe_rx_progress_locked(q);
		/* What RX queued (Read Responses, a Terminate) goes out
		 * now rather than at the next TX call. */
		if (iwe_tx_progress_locked(q) && !err)
			err = q->stream_err;
	}
	iwe_qp_unlock(q);
	return err;
}

/* A consumer polling an empty CQ drives the receive side itself (the
 * DESIGN's polling mode): no wait for the progress thread to wake up.
 * Only if the QP is free: whoever holds it is making progress already.
 * Events for the connection manager are not handled here: when this call
 * changed something it must act on (the stream failed, the first FPDU
 * arrived, async events wait to be delivered), it is kicked through the
 * TX hook and looks on its own thread. */
int iwe_qp_try_progress(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int first;

	if (pthread_mutex_trylock(&q->lock))
		return 0;
	if (q->fd < 0 || q->state == IWE_QPS_ERROR ||
	    q->state == IWE_QPS_RESET) {
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	first = q->first_rx;
	iwe_rx_progress_locked(q);
	iwe_tx_progress_locked(q);
	if ((q->state == IWE_QPS_ERROR || q->ev_pending ||
	     first != q->first_rx) && q->tx_hook)
		q->tx_hook(q->tx_hook_arg);
	/* Async events stay pending for the next iwe_qp_unlock (the kick
	 * above makes one happen): the caller may hold its own locks. */
	pthread_mutex_unlock(&q->lock);
	return 1;
}

void iwe_qp_terminate_info(struct iwe_qp *qp, struct iwe_term_info *sent,
			   struct iwe_term_info *rcvd)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	pthread_mutex_lock(&q->lock);
	if (sent)
		*sent = q->term_sent;
	if (rcvd)
		*rcvd = q->term_rcvd;
	iwe_qp_unlock(q);
}

uint32_t iwe_qp_srq_held(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	uint32_t n;

	pthread_mutex_lock(&q->lock);
	n = (uint32_t)q->srq_cur_valid;
	iwe_qp_unlock(q);
	return n;
}
