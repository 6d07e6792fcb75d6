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

/* ------------------------------------------------------------ create */

static int caps_valid(const struct iwe_qp_cap *c)
{
	return c->max_send_wr >= 1 && c->max_send_wr <= IWE_MAX_QP_WR &&
	       c->max_recv_wr >= 1 && c->max_recv_wr <= IWE_MAX_QP_WR &&
	       c->max_send_sge <= IWE_MAX_SGE &&
	       c->max_recv_sge <= IWE_MAX_SGE;
}

static int qp_alloc_queues(struct iwe_qp_priv *q)
{
	const struct iwe_qp_cap *c = &q->pub.cap;
	/* At least one SGE slot per WR keeps the slot arithmetic simple. */
	size_t ss = c->max_send_sge ? c->max_send_sge : 1;
	size_t rs = c->max_recv_sge ? c->max_recv_sge : 1;
	uint32_t i;

	q->sq = calloc(c->max_send_wr, sizeof(*q->sq));
	q->sq_sge = calloc(c->max_send_wr * ss, sizeof(*q->sq_sge));
	q->rq = calloc(c->max_recv_wr, sizeof(*q->rq));
	q->rq_sge = calloc(c->max_recv_wr * rs, sizeof(*q->rq_sge));
	q->orq = calloc(IWE_MAX_ORD, sizeof(*q->orq));
	q->irq = calloc(IWE_MAX_IRD, sizeof(*q->irq));
	if (!q->sq || !q->sq_sge || !q->rq || !q->rq_sge || !q->orq ||
	    !q->irq)
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
	free(q);
}

struct iwe_qp *iwe_create_qp(struct iwe_pd *pd,
			     const struct iwe_qp_init_attr *attr)
{
	struct iwe_qp_priv *q;

	if (!pd || !attr || !attr->send_cq || !attr->recv_cq ||
	    !caps_valid(&attr->cap)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->srq) {
		errno = EOPNOTSUPP;
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
	return &q->pub;
}

int iwe_destroy_qp(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q;

	if (!qp)
		return EINVAL;
	q = iwe_qp_priv(qp);
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
	default:
		return IBV_WC_SEND;
	}
}

static void push_send_wc(struct iwe_qp_priv *q, const struct iwe_swqe *w,
			 enum ibv_wc_status status)
{
	struct ibv_wc wc = {
		.wr_id = w->wr_id,
		.status = status,
		.opcode = wc_opcode(w->opcode),
		.byte_len = (uint32_t)w->total,
		.qp_num = q->pub.qp_num,
	};

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
	struct iwe_rwqe *w = iwe_rq_slot(q, q->rq_head);
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
	q->rq_head++;
	iwe_cq_push(q->pub.recv_cq, &wc, solicited);
}

static void flush_rq(struct iwe_qp_priv *q)
{
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
		struct iwe_swqe *w = iwe_sq_slot(q, i);

		if (!term_names_wqe(t, w))
			continue;
		iwe_tx_detach_wrs(q);
		/* Complete everything before it (finished or flushed) in
		 * order, then this one with its error. */
		while (q->sq_head != i) {
			struct iwe_swqe *p = iwe_sq_slot(q, q->sq_head++);

			push_send_wc(q, p, swqe_finished(p) ?
				     IBV_WC_SUCCESS : IBV_WC_WR_FLUSH_ERR);
		}
		push_send_wc(q, w, status);
		q->sq_head++;
		return;
	}
}

/* ------------------------------------------------------- invalidation */

/* Only memory windows of this QP's PD may be invalidated remotely: an MR
 * from iwe_reg_mr is not remotely invalidatable (as in verbs). */
int iwe_qp_invalidate_stag(struct iwe_qp_priv *q, uint32_t stag)
{
	struct iwe_device *dev = q->pub.pd->dev;
	uint32_t idx = IWE_STAG_INDEX(stag);
	struct iwe_stag_entry *e;
	struct iwe_mw_priv *w;
	int r = IWE_ACCESS_BAD_STAG;

	pthread_mutex_lock(&dev->lock);
	if (idx == 0 || idx >= dev->stags.next_fresh)
		goto out;
	e = &dev->stags.ent[idx];
	if (!e->valid || e->key != IWE_STAG_KEY(stag))
		goto out;
	r = IWE_ACCESS_BAD_PD;
	if (e->pd != q->pub.pd)
		goto out;
	r = IWE_ACCESS_BAD_RIGHTS;
	if (e->kind != IWE_STAG_MW)
		goto out;
	w = e->obj;
	e->valid = 0;
	e->host = NULL;
	if (w->mr)
		w->mr->binds--;
	w->mr = NULL;
	w->pub.rkey = 0;
	r = IWE_ACCESS_OK;
out:
	pthread_mutex_unlock(&dev->lock);
	return r;
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
	pthread_mutex_unlock(&q->lock);
	return err;
}

enum iwe_qp_state iwe_qp_get_state(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int s;

	pthread_mutex_lock(&q->lock);
	s = q->state;
	pthread_mutex_unlock(&q->lock);
	return (enum iwe_qp_state)s;
}

/* ----------------------------------------------------------- posting */

/* Resolve a local SGE: the lkey must name memory of our PD covering the
 * range, with local write for a sink. */
static int sge_resolve(struct iwe_qp_priv *q, const struct ibv_sge *s,
		       int sink, struct iwe_sge_res *out)
{
	void *p = NULL;

	out->length = s->length;
	out->lkey = s->lkey;
	out->addr = NULL;
	if (s->length == 0)
		return 0;
	if (iwe_mr_check(q->pub.pd->dev, q->pub.pd, s->lkey, s->addr,
			 s->length, sink ? IBV_ACCESS_LOCAL_WRITE : 0, &p))
		return EINVAL;
	out->addr = p;
	return 0;
}

static int sgl_resolve(struct iwe_qp_priv *q, const struct ibv_sge *sg,
		       int n, int sink, struct iwe_sge_res *out,
		       uint64_t *total)
{
	int i;

	*total = 0;
	for (i = 0; i < n; i++) {
		if (sge_resolve(q, &sg[i], sink, &out[i]))
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
	default:
		return 0;
	}
}

static int fill_swqe(struct iwe_qp_priv *q, const struct ibv_send_wr *wr,
		     struct iwe_swqe *w)
{
	int sink = wr->opcode == IBV_WR_RDMA_READ;

	if (sgl_resolve(q, wr->sg_list, wr->num_sge, sink, w->sg, &w->total))
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
	return 0;
}

static int post_send_one(struct iwe_qp_priv *q, const struct ibv_send_wr *wr)
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
	pthread_mutex_unlock(&q->lock);
	return err;
}

static int post_recv_one(struct iwe_qp_priv *q, const struct ibv_recv_wr *wr)
{
	struct iwe_rwqe *w;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->pub.cap.max_recv_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if (q->rq_tail - q->rq_head >= q->pub.cap.max_recv_wr)
		return ENOMEM;
	w = iwe_rq_slot(q, q->rq_tail);
	if (sgl_resolve(q, wr->sg_list, wr->num_sge, 1, w->sg, &w->total) ||
	    w->total > UINT32_MAX)
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
	pthread_mutex_unlock(&q->lock);
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
	pthread_mutex_unlock(&q->lock);
	return err;
}

void iwe_qp_clear_tx_hook(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	pthread_mutex_lock(&q->lock);
	q->tx_hook = NULL;
	q->tx_hook_arg = NULL;
	pthread_mutex_unlock(&q->lock);
}

int iwe_qp_tx_blocked(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int r;

	pthread_mutex_lock(&q->lock);
	r = q->fd >= 0 && q->tx.fpdu_len != 0;
	pthread_mutex_unlock(&q->lock);
	return r;
}

int iwe_qp_first_rx(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	int r;

	pthread_mutex_lock(&q->lock);
	r = q->first_rx;
	pthread_mutex_unlock(&q->lock);
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
	pthread_mutex_unlock(&q->lock);
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
	pthread_mutex_unlock(&q->lock);
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
	pthread_mutex_unlock(&q->lock);
	return err;
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
	pthread_mutex_unlock(&q->lock);
}
