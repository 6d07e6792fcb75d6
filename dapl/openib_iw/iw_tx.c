/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP/DDP transmit: turns messages into DDP segments for the transport.
 *
 * One message is cut at a time, into equal segments (no runt at its end)
 * that fit the transport's largest ULPDU.  Each segment goes to the
 * transport (iw_llp.h) with a token saying what its end means; the
 * transport batches segments -- of one message or of several posted back
 * to back -- into as few system calls as it can, and reports in order
 * which are done (MPA: handed to the socket).  A message's last token
 * completes it: a Send or Write WR is then finished (iWARP's local
 * completion semantics), a Read WR once its responses are placed too.
 *
 * Choice of the next message, at message boundaries only (DDP forbids
 * interleaving the segments of untagged messages of one queue, and mixing
 * at segment granularity buys nothing on a byte stream): a pending
 * Terminate first, then the initiator's RTR, then Read Responses owed to
 * the peer (they unblock its reads), then the send queue in order.
 *
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iw_llp.h"
#include "iw_mpa.h"
#include "iw_qp.h"

void iwe_tx_init(struct iwe_qp_priv *q)
{
	struct iwe_tx_tok *tok = q->tx.tok;
	uint32_t cap = q->tx.tok_cap;

	memset(&q->tx, 0, sizeof(q->tx));
	q->tx.tok = tok;
	q->tx.tok_cap = cap;
	q->tx.msn_send = 1;
	q->tx.msn_rreq = 1;
}

/* ---------------------------------------------------------- tokens */

static int tok_push(struct iwe_qp_priv *q, int kind, int last, uint32_t idx)
{
	struct iwe_tx *t = &q->tx;
	uint32_t cap = t->tok_cap ? t->tok_cap * 2 : 64;
	struct iwe_tx_tok *n;

	if (t->tok_count == t->tok_cap) {
		if (!t->tok_cap)
			iwe_qp_idle_hold(q);
		/* Grow, keeping the order: unroll the ring into the copy. */
		n = iw_slab_zalloc(cap * sizeof(*n));
		if (!n)
			return ENOMEM;
		for (uint32_t i = 0; i < t->tok_count; i++)
			n[i] = t->tok[(t->tok_head + i) % t->tok_cap];
		iw_slab_free(t->tok, t->tok_cap * sizeof(*t->tok));
		t->tok = n;
		t->tok_cap = cap;
		t->tok_head = 0;
	}
	t->tok[(t->tok_head + t->tok_count) % t->tok_cap] =
		(struct iwe_tx_tok){ (uint8_t)kind, (uint8_t)last, idx };
	t->tok_count++;
	return 0;
}

/* A Send/Write WR is done when its segments are; a Read WR when all of
 * its Read Requests are out (and later, its responses are placed). */
static void sq_tok_done(struct iwe_qp_priv *q, uint32_t idx)
{
	struct iwe_swqe *w;

	if (q->state == IWE_QPS_ERROR || idx - q->sq_head >= q->sq_tail - q->sq_head)
		return;		/* flushed meanwhile */
	w = iwe_sq_slot(q, idx);
	if (w->opcode == IBV_WR_RDMA_READ) {
		uint32_t reqs = w->num_sge ? w->num_sge : 1;

		if (++w->rd_done_reqs < reqs)
			return;
	}
	w->tx_done = 1;
	iwe_wq_sq_retire(q);
}

/* The transport finished n more segments, oldest first. */
static void tok_retire(struct iwe_qp_priv *q, uint32_t n)
{
	struct iwe_tx *t = &q->tx;

	while (n-- && t->tok_count) {
		struct iwe_tx_tok k = t->tok[t->tok_head];

		t->tok_head = (t->tok_head + 1) % t->tok_cap;
		t->tok_count--;
		if (k.last && k.kind == IWE_TX_SQ)
			sq_tok_done(q, k.wqe_idx);
	}
}

/* ------------------------------------------------------- segments */

/* The DDP header of the next segment, then the RDMAP body. */
static unsigned put_hdr(struct iwe_tx *t, uint8_t *p, int last)
{
	const struct iwe_rdmap_op *op = &iwe_rdmap_ops[t->opcode];
	uint16_t ctrl = iw_ctrl_make(op->tagged, last, t->opcode);
	unsigned n;

	if (op->tagged) {
		struct iw_tagged_hdr h = {
			.ctrl_be = iw_be16(ctrl),
			.stag_be = iw_be32(t->stag),
			.to_be = iw_be64(t->to + t->msg_off),
		};
		memcpy(p, &h, sizeof(h));
		n = sizeof(h);
	} else {
		struct iw_untagged_hdr h = {
			.ctrl_be = iw_be16(ctrl),
			.inval_stag_be = iw_be32(t->inv_stag),
			.qn_be = iw_be32(t->qn),
			.msn_be = iw_be32(t->msn),
			.mo_be = iw_be32((uint32_t)t->msg_off),
		};
		memcpy(p, &h, sizeof(h));
		n = sizeof(h);
	}
	memcpy(p + n, t->body, t->body_len);
	return n + t->body_len;
}

/* Gather the next n payload bytes of the message into iov (at most
 * IWE_MAX_SGE + 1 pieces: one per SGE touched). */
static int gather(struct iwe_tx *t, uint32_t n, struct iovec *iov)
{
	int k = 0;

	while (n) {
		const struct iwe_sge_res *s = &t->src[t->src_idx];
		uint32_t take;

		if (s->length == t->src_off) {	/* empty or used up */
			t->src_idx++;
			t->src_off = 0;
			continue;
		}
		take = s->length - t->src_off;
		if (take > n)
			take = n;
		iov[k].iov_base = s->addr + t->src_off;
		iov[k].iov_len = take;
		k++;
		t->src_off += take;
		n -= take;
	}
	return k;
}

/* Payload bytes per segment: the largest that fits the transport, then
 * evened out over the segments needed. */
static void plan_segments(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	uint32_t hlen = iwe_rdmap_hdr_len(t->opcode) + t->body_len;
	uint32_t room = q->llp->max_ulpdu(q) - hlen;
	uint64_t nseg, per;

	if (t->msg_len <= room) {
		t->seg_len = room;
		return;
	}
	nseg = (t->msg_len + room - 1) / room;
	per = (t->msg_len + nseg - 1) / nseg;
	per = (per + 7) & ~(uint64_t)7;	/* keep segments word-aligned */
	t->seg_len = per < room ? (uint32_t)per : room;
}

static uint32_t next_seg_len(const struct iwe_tx *t)
{
	uint64_t left = t->msg_len - t->msg_off;

	return left < t->seg_len ? (uint32_t)left : t->seg_len;
}

static void msg_cut(struct iwe_qp_priv *q);

/* Hand the next segment of the current message to the transport. */
static int emit_segment(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	uint8_t hdr[IWE_SEG_HDR_MAX];
	struct iovec iov[IWE_MAX_SGE + 1];
	uint32_t n = next_seg_len(t);
	int last = t->msg_off + n == t->msg_len;
	struct iwe_llp_seg s = { .hdr = hdr, .pay = iov, .pay_len = n,
				 .more = !last };

	if (tok_push(q, t->kind, last, t->wqe_idx))
		return ENOMEM;
	s.hdr_len = put_hdr(t, hdr, last);
	s.npay = gather(t, n, iov);
	q->llp->tx_add(q, &s);
	q->stats.tx_segments++;
	/* The RTR is the connection's, not a consumer's message. */
	if (t->kind != IWE_TX_RTR) {
		q->stats.tx_bytes[t->opcode] += n;
		q->stats.tx_msgs[t->opcode] += (uint64_t)last;
	}
	t->msg_off += n;
	if (last)
		msg_cut(q);
	return 0;
}

/* ---------------------------------------------------- message starts */

static void start_msg(struct iwe_tx *t, int kind, uint8_t opcode)
{
	t->kind = kind;
	t->opcode = opcode;
	t->msg_off = t->msg_len = 0;
	t->src = NULL;
	t->nsrc = t->src_idx = t->src_off = 0;
	t->stag = t->inv_stag = t->qn = t->msn = 0;
	t->to = 0;
	t->body_len = 0;
	t->seg_len = 0;
}

static void set_source(struct iwe_qp_priv *q, const struct iwe_sge_res *sg,
		       uint32_t n, uint64_t len)
{
	q->tx.src = sg;
	q->tx.nsrc = n;
	q->tx.msg_len = len;
	plan_segments(q);
}

static uint8_t send_opcode(const struct iwe_swqe *w)
{
	if (w->opcode == IBV_WR_SEND_WITH_INV)
		return w->solicited ? IW_OP_SEND_SE_INV : IW_OP_SEND_INV;
	return w->solicited ? IW_OP_SEND_SE : IW_OP_SEND;
}

static void start_send_or_write(struct iwe_qp_priv *q, struct iwe_swqe *w)
{
	struct iwe_tx *t = &q->tx;

	if (w->opcode == IBV_WR_RDMA_WRITE) {
		start_msg(t, IWE_TX_SQ, IW_OP_WRITE);
		t->stag = w->rkey;
		t->to = w->remote_addr;
	} else {
		start_msg(t, IWE_TX_SQ, send_opcode(w));
		t->qn = IW_QN_SEND;
		t->msn = t->msn_send++;
		t->inv_stag = w->inv_rkey;
	}
	t->wqe_idx = q->sq_tx;
	set_source(q, w->sg, w->num_sge, w->total);
}

static void put_read_body(struct iwe_tx *t, const struct iwe_orq_ent *o)
{
	struct iw_read_req_body b = {
		.sink_stag_be = iw_be32(o->sink_stag),
		.sink_to_be = iw_be64(o->sink_to),
		.size_be = iw_be32(o->size),
		.src_stag_be = iw_be32(o->src_stag),
		.src_to_be = iw_be64(o->src_to),
	};

	t->qn = IW_QN_READ_REQ;
	t->msn = t->msn_rreq++;
	memcpy(t->body, &b, sizeof(b));
	t->body_len = sizeof(b);
}

/* One Read Request per sink SGE; SGE k reads the source bytes that
 * follow those of SGEs 0..k-1. */
static void start_read_req(struct iwe_qp_priv *q, struct iwe_swqe *w)
{
	struct iwe_orq_ent *o = iwe_orq_slot(q, q->orq_tail);
	uint64_t off = 0;
	uint32_t k = w->rd_issued, i;

	for (i = 0; i < k; i++)
		off += w->sg[i].length;
	memset(o, 0, sizeof(*o));
	o->wqe_idx = q->sq_tx;
	if (w->num_sge) {
		o->sink_stag = w->sg[k].lkey;
		o->sink_to = (uint64_t)(uintptr_t)w->sg[k].addr;
		o->size = w->sg[k].length;
	}
	o->src_stag = w->rkey;
	o->src_to = w->remote_addr + off;
	q->orq_tail++;
	w->rd_issued++;
	w->rd_pending++;
	start_msg(&q->tx, IWE_TX_SQ, IW_OP_READ_REQ);
	q->tx.wqe_idx = q->sq_tx;
	put_read_body(&q->tx, o);
	set_source(q, NULL, 0, 0);
}

static void start_read_resp(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	struct iwe_irq_ent *r = iwe_irq_slot(q, q->irq_head);

	start_msg(t, IWE_TX_READ_RESP, IW_OP_READ_RESP);
	t->stag = r->sink_stag;
	t->to = r->sink_to;
	t->one_src = (struct iwe_sge_res){ .addr = r->src,
					   .length = r->size };
	set_source(q, &t->one_src, 1, r->size);
}

/* Terminate body: control word, then what the error's layer lets us
 * echo of the offending segment (RFC 5040 4.8). */
static unsigned term_body(const struct iwe_term *tm, uint8_t *p)
{
	uint32_t hdrct = 0, ctrl_be;
	unsigned n = 4;

	if (tm->has_hdr) {
		uint16_t seglen_be = iw_be16(tm->seglen);

		hdrct = IW_TERM_HDRCT_M | IW_TERM_HDRCT_D;
		memcpy(p + n, &seglen_be, 2);
		n += 2;
		memcpy(p + n, tm->hdr, tm->hdr_len);
		n += tm->hdr_len;
		if (tm->has_rdmap) {
			hdrct |= IW_TERM_HDRCT_R;
			memcpy(p + n, tm->hdr + tm->hdr_len,
			       sizeof(struct iw_read_req_body));
			n += sizeof(struct iw_read_req_body);
		}
	}
	ctrl_be = iw_be32(iw_term_ctrl(tm->layer, tm->etype, tm->ecode,
				       hdrct));
	memcpy(p, &ctrl_be, 4);
	return n;
}

static void start_terminate(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;

	start_msg(t, IWE_TX_TERMINATE, IW_OP_TERMINATE);
	t->qn = IW_QN_TERMINATE;
	t->msn = 1;
	t->body_len = (uint8_t)term_body(&t->term, t->body);
	t->term_pending = 0;
	t->term_sent = 1;	/* nothing is sent after it */
	t->term_cur_soft = t->term_soft;
	t->term_soft = 0;
	set_source(q, NULL, 0, 0);
}

/* The initiator's Ready-To-Receive (RFC 6581 section 9): a zero-length
 * Write to STag 1, a zero-length Send, or a zero-length Read whose
 * response is consumed without a completion (orq entry marked rtr). */
static void start_rtr(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	unsigned rtr = t->rtr_pending;
	struct iwe_orq_ent *o;

	t->rtr_pending = 0;
	if (rtr == IW_RTR_READ) {
		o = iwe_orq_slot(q, q->orq_tail++);
		memset(o, 0, sizeof(*o));
		o->sink_stag = o->src_stag = IW_RTR_WRITE_STAG;
		o->rtr = 1;
		start_msg(t, IWE_TX_RTR, IW_OP_READ_REQ);
		put_read_body(t, o);
	} else if (rtr == IW_RTR_SEND) {
		start_msg(t, IWE_TX_RTR, IW_OP_SEND);
		t->qn = IW_QN_SEND;
		t->msn = t->msn_send++;	/* the consumer's Sends follow */
	} else {
		start_msg(t, IWE_TX_RTR, IW_OP_WRITE);
		t->stag = IW_RTR_WRITE_STAG;
	}
	set_source(q, NULL, 0, 0);
}

/* Fences wait for every earlier RDMA Read to complete. */
static int sq_may_start(const struct iwe_qp_priv *q, const struct iwe_swqe *w)
{
	uint32_t outstanding = q->orq_tail - q->orq_head;

	if (w->fence && outstanding)
		return 0;
	if (w->opcode == IBV_WR_RDMA_READ)
		return outstanding < q->ord;
	return 1;
}

/* A bind has no wire message: it takes effect when the transmit side
 * reaches it, so it is ordered with the WRs around it. */
static void run_bind(struct iwe_qp_priv *q, struct iwe_swqe *w)
{
	iwe_mw_bind_execute(w->bind_mw, w->bind_mr, w->bind_addr, w->bind_len,
			    w->bind_access, w->bind_rkey);
	w->bind_done = 1;
	w->tx_done = 1;
	q->sq_tx++;
	iwe_wq_sq_retire(q);
}

/* Start the next message (a bind runs at once and starts none).
 * Returns 0 when there is nothing to start. */
static int start_next(struct iwe_qp_priv *q)
{
	struct iwe_swqe *w;

	if (q->tx.term_pending) {
		start_terminate(q);
		return 1;
	}
	if (q->state == IWE_QPS_ERROR || q->tx.term_sent)
		return 0;
	if (q->tx.rtr_pending) {
		start_rtr(q);
		return 1;
	}
	if (q->irq_head != q->irq_tail) {
		start_read_resp(q);
		return 1;
	}
	if (q->state != IWE_QPS_RTS || q->sq_tx == q->sq_tail)
		return 0;
	w = iwe_sq_slot(q, q->sq_tx);
	if (!sq_may_start(q, w))
		return 0;
	if (w->opcode == IBV_WR_BIND_MW)
		run_bind(q, w);
	else if (w->opcode == IBV_WR_RDMA_READ)
		start_read_req(q, w);
	else
		start_send_or_write(q, w);
	return 1;
}

/* Every segment of the message went to the transport. */
static void msg_cut(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	struct iwe_swqe *w;

	switch (t->kind) {
	case IWE_TX_SQ:
		w = iwe_sq_slot(q, q->sq_tx);
		/* A Read WR issues one Read Request per SGE. */
		if (w->opcode != IBV_WR_RDMA_READ ||
		    w->rd_issued >= (w->num_sge ? w->num_sge : 1u))
			q->sq_tx++;
		break;
	case IWE_TX_READ_RESP:
		q->irq_head++;	/* the data is in the transport's hands */
		break;
	}
	t->kind = IWE_TX_IDLE;
}

/* Offer segments while the transport has room.  Returns how many. */
static int fill(struct iwe_qp_priv *q, int *err)
{
	struct iwe_tx *t = &q->tx;
	int n = 0;

	for (;;) {
		uint32_t pieces;

		if (t->kind == IWE_TX_IDLE && !start_next(q))
			break;
		if (t->kind == IWE_TX_IDLE)
			continue;	/* a bind ran */
		pieces = t->nsrc - t->src_idx;
		if (pieces > IWE_MAX_SGE + 1)
			pieces = IWE_MAX_SGE + 1;
		if (!q->llp->tx_room(q, next_seg_len(t), (int)pieces))
			break;
		*err = emit_segment(q);
		if (*err)
			break;
		n++;
	}
	return n;
}

int iwe_tx_progress_locked(struct iwe_qp_priv *q)
{
	uint32_t done;
	int err, added;

	IWE_QP_ASSERT_LOCKED(q);
	if (q->fd < 0 || !q->llp)
		return 0;
	if (q->tx_gate)		/* responder before the first segment */
		return 0;
	for (;;) {
		err = 0;
		added = fill(q, &err);
		if (err)
			return err;
		done = 0;
		err = q->llp->tx_write(q, &done);
		tok_retire(q, done);
		if (err)
			return err;
		if (!added && !done)
			return 0;
	}
}

/* ------------------------------------------------- errors and flushes */

void iwe_tx_queue_terminate(struct iwe_qp_priv *q, const struct iwe_term *tm)
{
	struct iwe_tx *t = &q->tx;

	IWE_QP_ASSERT_LOCKED(q);
	if (t->term_sent || (t->term_pending && !t->term_soft))
		return;		/* one Terminate per stream */
	t->term = *tm;
	t->term_pending = 1;
	t->term_soft = 0;
	q->stats.term_sent++;
	q->stats.term_sent_layer[tm->layer < 3 ? tm->layer : 2]++;
	iwe_term_count_add(q->stats.term_sent_code, (uint32_t)tm->layer << 12 |
			   (uint32_t)tm->etype << 8 | tm->ecode, 1);
	q->term_sent = (struct iwe_term_info){ .valid = 1,
					       .layer = tm->layer,
					       .etype = tm->etype,
					       .ecode = tm->ecode };
	iw_log_terminate(1, q->pub.qp_num, q->log_addrs, tm->layer, tm->etype,
			 tm->ecode);
}

void iwe_tx_queue_soft_terminate(struct iwe_qp_priv *q,
				 const struct iwe_term *tm)
{
	IWE_QP_ASSERT_LOCKED(q);
	if (q->tx.term_pending || q->tx.term_sent)
		return;
	iwe_tx_queue_terminate(q, tm);
	q->tx.term_soft = 1;
}

/* The transport keeps a copy of a started segment; the tokens of the
 * segments it dropped go, and so does the message being cut.  A dropped
 * Terminate is queued again: it must still go out. */
void iwe_tx_detach_wrs(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	uint32_t keep, i;

	IWE_QP_ASSERT_LOCKED(q);
	keep = q->llp && q->fd >= 0 ? q->llp->tx_detach(q) : 0;
	for (i = 0; i < t->tok_count; i++) {
		struct iwe_tx_tok *k = &t->tok[(t->tok_head + i) % t->tok_cap];

		if (i >= keep && k->kind == IWE_TX_TERMINATE) {
			t->term_pending = 1;
			t->term_sent = 0;
			t->term_soft = t->term_cur_soft;
		}
		if (k->kind != IWE_TX_TERMINATE)
			k->kind = IWE_TX_IDLE;
	}
	if (t->tok_count > keep)
		t->tok_count = keep;
	if (t->kind != IWE_TX_TERMINATE)
		t->kind = IWE_TX_IDLE;
}
