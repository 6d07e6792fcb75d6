/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP/DDP receive: what a segment means, wherever it came from.
 *
 * A transport (iw_llp.h) delivers each segment in three steps: its header
 * (iwe_rx_begin: checks, and where the payload goes), its payload
 * (iwe_rx_place, or straight into rx.place by the transport), and its end
 * (iwe_rx_end: completions, queued Read Responses, a received Terminate).
 * Only intact segments get here -- the transport checks its own integrity
 * (MPA's CRC) first -- so an error found in a header is reported at once
 * and nothing of that segment is placed.  Errors are recorded in rx.term
 * (rx.term_out) and returned as EPROTO; the driver in iw_qp.c sends the
 * Terminate and fails the QP.
 *
 * The Terminates (layer/type/code, RFC 5040 7.1, 5041 7.2, 5044 8; every
 * one echoes M and the DDP header when it was read, and R with the body
 * for a Read Request):
 *   DDP version != 1                          DDP   1/2       4 / 6
 *   RDMAP version != 1                        RDMAP 2 op      5
 *   opcode unknown, T bit wrong, unexpected
 *     Read Response                           RDMAP 2 op      6
 *   Write: bad STag or key / other PD /
 *     bounds / TO wrap                        DDP   1 tagged  0 / 2 / 1 / 3
 *   Write without remote-write right          RDMAP 1 prot    2
 *   Read Response off its request             DDP   1 tagged  0 or 1
 *   QN / no receive / MSN or IRD / MO /
 *     too long for the receive                DDP   2 untag   1/2/3/4/5
 *   Read Request source: STag / bounds /
 *     rights / PD / TO wrap                   RDMAP 1 prot    0/1/2/3/4
 *   Read Request too short                    RDMAP 2 op      0xff
 *   Send with Invalidate of a non-window      RDMAP 2 op      9
 *   segment shorter than its DDP header       DDP   0 catastrophic 0
 * (the transport adds its own: a bad CRC is LLP 0 MPA 2).
 *
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <string.h>

#include "iw_guard.h"
#include "iw_mpa.h"
#include "iw_qp.h"

void iwe_rx_init(struct iwe_qp_priv *q)
{
	memset(&q->rx, 0, sizeof(q->rx));
	q->rx.msn_send = 1;
	q->rx.msn_rreq = 1;
}

/* --------------------------------------------------------- errors */

/* Record the first error of this segment, with what of its header the
 * Terminate may echo. */
static void rx_error(struct iwe_qp_priv *q, unsigned layer, unsigned etype,
		     unsigned ecode)
{
	struct iwe_rx *r = &q->rx;
	struct iwe_term *t = &r->term;
	unsigned hl = iw_ddp_hdr_len(r->ctrl);

	if (r->term_out)
		return;
	memset(t, 0, sizeof(*t));
	t->layer = (uint8_t)layer;
	t->etype = (uint8_t)etype;
	t->ecode = (uint8_t)ecode;
	if (r->hdr_len >= hl) {
		t->has_hdr = 1;
		t->seglen = (uint16_t)r->ulpdu_len;
		t->hdr_len = (uint8_t)hl;
		memcpy(t->hdr, r->hdr, hl);
		if (r->opcode == IW_OP_READ_REQ && !iw_ctrl_tagged(r->ctrl) &&
		    r->hdr_len >= sizeof(struct iw_read_req)) {
			t->has_rdmap = 1;
			memcpy(t->hdr + hl, r->hdr + hl,
			       sizeof(struct iw_read_req_body));
		}
	}
	r->term_out = 1;
}

static void untagged_error(struct iwe_qp_priv *q, unsigned ecode)
{
	rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_UNTAGGED, ecode);
}

static void tagged_error(struct iwe_qp_priv *q, enum iwe_access_error e)
{
	static const struct { uint8_t layer, etype, ecode; } map[] = {
		[IWE_ACCESS_BAD_STAG] = { IW_TERM_LAYER_DDP,
			IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_INV_STAG },
		[IWE_ACCESS_BAD_PD] = { IW_TERM_LAYER_DDP,
			IW_TERM_DDP_ETYPE_TAGGED,
			IW_TERM_DDP_TAG_STAG_NOT_ASSOC },
		/* DDP knows no rights: RDMAP reports them. */
		[IWE_ACCESS_BAD_RIGHTS] = { IW_TERM_LAYER_RDMAP,
			IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
			IW_TERM_RDMAP_ACCESS },
		[IWE_ACCESS_BAD_BOUNDS] = { IW_TERM_LAYER_DDP,
			IW_TERM_DDP_ETYPE_TAGGED,
			IW_TERM_DDP_TAG_BASE_BOUNDS },
	};

	if (e == IWE_ACCESS_OK || e > IWE_ACCESS_BAD_BOUNDS)
		e = IWE_ACCESS_BAD_STAG;
	rx_error(q, map[e].layer, map[e].etype, map[e].ecode);
}

void iwe_rx_forget_error(struct iwe_qp_priv *q)
{
	q->rx.term_out = 0;
	q->rx.bad_read_resp = 0;
}

int iwe_rx_llp_error(struct iwe_qp_priv *q, unsigned ecode)
{
	/* A damaged segment proves nothing about what it named. */
	q->rx.term_out = 0;
	q->rx.bad_read_resp = 0;
	q->rx.hdr_len = 0;
	rx_error(q, IW_TERM_LAYER_LLP, IW_TERM_LLP_ETYPE_MPA, ecode);
	return EPROTO;
}

/* Consumer memory the segment goes to is no longer mapped. */
int iwe_rx_local_error(struct iwe_qp_priv *q)
{
	rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_CATASTROPHIC,
		 IW_TERM_RDMAP_CATASTROPHIC);
	return EPROTO;
}

/* No telling what such a segment was: DDP catastrophic, no echo. */
int iwe_rx_short_segment(struct iwe_qp_priv *q, const uint8_t *ulpdu,
			 uint32_t ulpdu_len)
{
	(void)ulpdu;
	(void)ulpdu_len;
	q->rx.hdr_len = 0;
	rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_CATASTROPHIC,
		 IW_TERM_DDP_CATASTROPHIC);
	return EPROTO;
}

/* ----------------------------------------------------- placement */

static void place_one(struct iwe_rx *r, void *p, uint32_t len)
{
	r->place[0].iov_base = p;
	r->place[0].iov_len = len;
	r->nplace = len ? 1 : 0;
}

/* Map [mo, mo+len) of the receive's gather list onto place[]. */
static void place_rwqe(struct iwe_rx *r, const struct iwe_rwqe *w,
		       uint32_t mo, uint32_t len)
{
	uint32_t i;

	r->nplace = 0;
	for (i = 0; i < w->num_sge && len; i++) {
		uint32_t sl = w->sg[i].length, take;

		if (mo >= sl) {
			mo -= sl;
			continue;
		}
		take = sl - mo < len ? sl - mo : len;
		r->place[r->nplace].iov_base = w->sg[i].addr + mo;
		r->place[r->nplace].iov_len = take;
		r->nplace++;
		len -= take;
		mo = 0;
	}
}

int iwe_rx_place(struct iwe_qp_priv *q, uint32_t off, const void *src,
		 uint32_t len)
{
	const char *s = src;
	int i;

	for (i = 0; i < q->rx.nplace && len; i++) {
		struct iovec *v = &q->rx.place[i];
		uint32_t take;

		if (off >= v->iov_len) {
			off -= (uint32_t)v->iov_len;
			continue;
		}
		take = (uint32_t)v->iov_len - off;
		if (take > len)
			take = len;
		if (iwe_copy_guarded((char *)v->iov_base + off, s, take,
				     IWE_COPY_ORDERED, NULL))
			return EFAULT;
		s += take;
		len -= take;
		off = 0;
	}
	/* Bytes past the placement are dropped (a Terminate's tail). */
	return 0;
}

/* ------------------------------------------------ per-opcode begin */

static void hdr_tagged(const struct iwe_rx *r, uint32_t *stag, uint64_t *to)
{
	struct iw_tagged_hdr h;

	memcpy(&h, r->hdr, sizeof(h));
	*stag = iw_be32(h.stag_be);
	*to = iw_be64(h.to_be);
}

static void hdr_untagged(const struct iwe_rx *r, struct iw_untagged_hdr *h)
{
	memcpy(h, r->hdr, sizeof(*h));
}

/* RDMA Write: any STag of our PD with remote write, within bounds.  A
 * zero-length Write places nothing and is not checked: that is the MPA
 * Write RTR (STag 1). */
static void rx_write(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	uint32_t stag, len = r->payload_len;
	uint64_t to;
	enum iwe_access_error e;
	void *p = NULL;

	hdr_tagged(r, &stag, &to);
	if (len == 0)
		return;
	if (len > UINT64_MAX - to) {
		rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
			 IW_TERM_DDP_TAG_TO_WRAP);
		return;
	}
	e = iwe_mr_check_cached(q->pub.pd->dev, &r->wr_stag, q->pub.pd, stag,
				to, len, IBV_ACCESS_REMOTE_WRITE, &p);
	if (e)
		tagged_error(q, e);
	else
		place_one(r, p, len);
}

/* Read Response: must continue the oldest Read Request we issued,
 * exactly where the previous segment stopped. */
static void rx_read_resp(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	struct iwe_orq_ent *o;
	uint32_t stag, len = r->payload_len;
	uint64_t to;
	void *p = NULL;

	if (q->orq_head == q->orq_tail) {
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_UNEXP_OPCODE);
		return;
	}
	o = iwe_orq_slot(q, q->orq_head);
	hdr_tagged(r, &stag, &to);
	if (stag != o->sink_stag) {
		tagged_error(q, IWE_ACCESS_BAD_STAG);
		r->bad_read_resp = 1;
		return;
	}
	if (to != o->sink_to + o->done || len > o->size - o->done) {
		tagged_error(q, IWE_ACCESS_BAD_BOUNDS);
		r->bad_read_resp = 1;
		return;
	}
	if (len && iwe_read_sink_check(q->pub.pd->dev, q->pub.pd, stag, to,
				       len, &p)) {
		/* Our own sink went away under the read. */
		tagged_error(q, IWE_ACCESS_BAD_STAG);
		return;
	}
	place_one(r, p, len);
}

/* No receive posted for a Send.  RFC 5041 makes it fatal (and iWARP has
 * no receiver-not-ready retry on the wire), but a consumer written for
 * InfiniBand posts its receives when it sees ESTABLISHED, and its peer
 * may send first: within the grace the Send waits for a receive, and
 * the stream behind it waits with it (iw_qp.c starts the grace's timer
 * and resumes the QP; doc/semantics.md).  1 while it waits. */
static int rx_not_ready(struct iwe_qp_priv *q)
{
	if (!q->rnr_grace_ns || q->rnr_expired)
		return 0;
	if (!q->rnr_wait) {
		q->rnr_wait = 1;
		q->rnr_deadline = iwe_now_ns() + q->rnr_grace_ns;
		q->stats.rnr_waits++;
		if (q->srq)
			iwe_srq_wait(q->srq, &q->srq_waiter);
		iwe_prog_post(q->prog, &q->rnr_task);
		if (!q->rnr_logged++ && iw_log_on(IW_LOG_ERROR))
			iw_log(IW_LOG_ERROR, "qp %u %s: a Send came before any "
			       "receive was posted; it waits for one, %llu ms "
			       "at most (IWDAPL_RNR_MS)", q->pub.qp_num,
			       q->log_addrs, (unsigned long long)
			       (q->rnr_grace_ns / 1000000u));
	}
	q->rx.not_ready = 1;
	return 1;
}

/* Send family: into the head posted receive (or the SRQ's), in MSN/MO
 * order; with none posted, the receiver-not-ready grace, then the
 * RFC's Terminate. */
static void rx_send(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	struct iw_untagged_hdr h;
	const struct iwe_rwqe *w;
	uint32_t msn, mo, len = r->payload_len;

	hdr_untagged(r, &h);
	msn = iw_be32(h.msn_be);
	mo = iw_be32(h.mo_be);
	if (msn != r->msn_send) {
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_MSN);
		return;
	}
	if (q->rtr_expect == IW_RTR_SEND && !q->first_rx && len == 0 &&
	    mo == 0 && iw_ctrl_last(r->ctrl)) {
		/* The Send RTR: it must not take one of the consumer's
		 * receives, but it does use MSN 1. */
		r->rtr_send = 1;
		return;
	}
	w = iwe_wq_recv_wqe(q, mo, r->send_mo);
	if (!w) {
		if (mo == 0 && r->send_mo == 0 && rx_not_ready(q))
			return;
		untagged_error(q, IW_TERM_DDP_UNTAG_NO_BUF);
		return;
	}
	if (mo != r->send_mo) {
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_MO);
		return;
	}
	if (len > w->total - mo) {
		untagged_error(q, IW_TERM_DDP_UNTAG_TOO_LONG);
		return;
	}
	if (iwe_rdmap_ops[r->opcode].inv)
		r->inv_stag = iw_be32(h.inval_stag_be);
	place_rwqe(r, w, mo, len);
}

static void read_src_error(struct iwe_qp_priv *q, enum iwe_access_error e)
{
	static const uint8_t code[] = {
		[IWE_ACCESS_BAD_STAG] = IW_TERM_RDMAP_INV_STAG,
		[IWE_ACCESS_BAD_PD] = IW_TERM_RDMAP_STAG_NOT_ASSOC,
		[IWE_ACCESS_BAD_RIGHTS] = IW_TERM_RDMAP_ACCESS,
		[IWE_ACCESS_BAD_BOUNDS] = IW_TERM_RDMAP_BASE_BOUNDS,
	};

	rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
		 code[e]);
}

/* Read Request: one whole segment, in MSN order, within IRD; the source
 * must grant remote read.  Queued for the TX side at the segment's end. */
static void rx_read_req(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	struct iw_read_req rr;
	struct iwe_irq_ent *e = &r->rreq;
	enum iwe_access_error ae;
	uint64_t src_to;
	void *p = NULL;

	if (r->hdr_len < sizeof(rr)) {
		/* Too short to hold the Read Request body. */
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_UNSPECIFIED);
		return;
	}
	memcpy(&rr, r->hdr, sizeof(rr));
	if (!iw_ctrl_last(r->ctrl) || iw_be32(rr.hdr.mo_be) != 0) {
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_MO);
		return;
	}
	if (iw_be32(rr.hdr.msn_be) != r->msn_rreq ||
	    q->irq_tail - q->irq_head >= q->ird) {
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_MSN);
		return;
	}
	if (r->payload_len) {
		untagged_error(q, IW_TERM_DDP_UNTAG_TOO_LONG);
		return;
	}
	e->sink_stag = iw_be32(rr.body.sink_stag_be);
	e->sink_to = iw_be64(rr.body.sink_to_be);
	e->size = iw_be32(rr.body.size_be);
	e->src = NULL;
	src_to = iw_be64(rr.body.src_to_be);
	if (e->size == 0)
		return;		/* the Read RTR: nothing to check */
	if (e->size > UINT64_MAX - src_to || e->size > UINT64_MAX - e->sink_to) {
		rx_error(q, IW_TERM_LAYER_RDMAP,
			 IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
			 IW_TERM_RDMAP_TO_WRAP);
		return;
	}
	ae = iwe_mr_check(q->pub.pd->dev, q->pub.pd,
			  iw_be32(rr.body.src_stag_be), src_to, e->size,
			  IBV_ACCESS_REMOTE_READ, &p);
	if (ae)
		read_src_error(q, ae);
	e->src = p;
}

/* Bytes beyond the longest Terminate we understand are dropped. */
static void rx_terminate(struct iwe_qp_priv *q)
{
	if (!iw_ctrl_last(q->rx.ctrl))
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_MO);
}

/* -------------------------------------------------- per-opcode end */

static void rx_end_send(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	uint32_t inv = r->inv_stag;

	if (r->rtr_send) {
		r->msn_send++;
		return;
	}
	r->send_mo += r->payload_len;
	if (!iw_ctrl_last(r->ctrl))
		return;
	if (inv && iwe_stag_invalidate(q->pub.pd->dev, q->pub.pd, inv)) {
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_CANT_INVALIDATE);
		return;
	}
	iwe_wq_rq_complete(q, r->send_mo, iwe_rdmap_ops[r->opcode].se, inv);
	r->send_mo = 0;
	r->msn_send++;
}

static void rx_end_read_resp(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	struct iwe_orq_ent *o = iwe_orq_slot(q, q->orq_head);

	o->done += r->payload_len;
	if (!iw_ctrl_last(r->ctrl))
		return;
	if (o->done != o->size) {
		/* A short response: the read did not happen as asked. */
		rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
			 IW_TERM_DDP_TAG_BASE_BOUNDS);
		r->bad_read_resp = 1;
		return;
	}
	q->orq_head++;
	if (o->rtr)
		return;		/* our Read RTR: no WR, no completion */
	iwe_sq_slot(q, o->wqe_idx)->rd_pending--;
	iwe_wq_sq_retire(q);
}

static void rx_end_read_req(struct iwe_qp_priv *q)
{
	*iwe_irq_slot(q, q->irq_tail) = q->rx.rreq;
	q->irq_tail++;
	q->rx.msn_rreq++;
}

/* The echoed header of a received Terminate: M (2 bytes), D (DDP
 * header), R (Read Request body); b holds avail bytes after the control
 * word. */
static void term_echo(struct iwe_term *t, uint32_t ctrl, const uint8_t *b,
		      uint32_t avail)
{
	uint16_t c;
	unsigned hl;

	if (!(ctrl & IW_TERM_HDRCT_M) || !(ctrl & IW_TERM_HDRCT_D) ||
	    avail < 2 + 2)
		return;
	memcpy(&c, b + 2, 2);
	hl = iw_ddp_hdr_len(iw_be16(c));
	if (avail >= 2 + hl) {
		t->has_hdr = 1;
		t->hdr_len = (uint8_t)hl;
		memcpy(t->hdr, b + 2, hl);
	}
	if ((ctrl & IW_TERM_HDRCT_R) && hl == IW_UNTAGGED_HDR_LEN &&
	    avail >= 2 + hl + sizeof(struct iw_read_req_body)) {
		t->has_rdmap = 1;
		memcpy(t->hdr + hl, b + 2 + hl, sizeof(struct iw_read_req_body));
	}
}

/* The peer terminated: remember why; the driver fails the WR it names. */
static void rx_end_terminate(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	const uint8_t *b = r->hdr + IW_UNTAGGED_HDR_LEN;
	uint32_t avail = r->hdr_len - IW_UNTAGGED_HDR_LEN;
	struct iwe_term *t = &r->term_rcvd;
	uint32_t ctrl_be, ctrl;

	memset(t, 0, sizeof(*t));
	r->term_in = 1;
	q->stats.term_rcvd++;
	if (avail < 4) {
		/* No control word: recorded as layer/type/code all ones. */
		q->term_rcvd = (struct iwe_term_info){ .valid = 1,
			.layer = 0xF, .etype = 0xF, .ecode = 0xFF };
		iw_log_terminate(0, q->pub.qp_num, q->log_addrs, 0xF, 0xF,
				 0xFF);
		iwe_term_count_add(q->stats.term_rcvd_code, 0xFFFF, 1);
		return;
	}
	memcpy(&ctrl_be, b, 4);
	ctrl = iw_be32(ctrl_be);
	t->layer = (uint8_t)iw_term_layer(ctrl);
	t->etype = (uint8_t)iw_term_etype(ctrl);
	t->ecode = (uint8_t)iw_term_ecode(ctrl);
	t->has_hdr = 0;
	term_echo(t, ctrl, b + 4, avail - 4);
	q->stats.term_rcvd_layer[t->layer < 3 ? t->layer : 2]++;
	iwe_term_count_add(q->stats.term_rcvd_code, (uint32_t)t->layer << 12 |
			   (uint32_t)t->etype << 8 | t->ecode, 1);
	q->term_rcvd = (struct iwe_term_info){ .valid = 1, .layer = t->layer,
		.etype = t->etype, .ecode = t->ecode };
	iw_log_terminate(0, q->pub.qp_num, q->log_addrs, t->layer, t->etype,
			 t->ecode);
}

/* ----------------------------------------------------- the segment */

uint32_t iwe_rx_hdr_need(uint16_t ctrl, uint32_t ulpdu_len)
{
	unsigned op = iw_ctrl_opcode(ctrl);
	uint32_t n = iw_ddp_hdr_len(ctrl);

	if (!iw_ctrl_tagged(ctrl)) {
		if (op == IW_OP_TERMINATE)
			n = IWE_SEG_HDR_MAX;
		else
			n += iwe_rdmap_ops[op].body_len;
	}
	return n < ulpdu_len ? n : ulpdu_len;
}

/* Version, opcode and queue number: checks common to all segments. */
static void rx_check_common(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	const struct iwe_rdmap_op *op = &iwe_rdmap_ops[r->opcode];
	int tagged = iw_ctrl_tagged(r->ctrl);
	struct iw_untagged_hdr h;

	if (iw_ctrl_dv(r->ctrl) != IW_DDP_VERSION) {
		rx_error(q, IW_TERM_LAYER_DDP,
			 tagged ? IW_TERM_DDP_ETYPE_TAGGED :
				  IW_TERM_DDP_ETYPE_UNTAGGED,
			 tagged ? IW_TERM_DDP_TAG_INV_VERSION :
				  IW_TERM_DDP_UNTAG_INV_VERSION);
		return;
	}
	if (iw_ctrl_rv(r->ctrl) != IW_RDMAP_VERSION) {
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_INV_VERSION);
		return;
	}
	if (!op->rx_begin || op->tagged != tagged) {
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_UNEXP_OPCODE);
		return;
	}
	if (tagged)
		return;
	hdr_untagged(r, &h);
	if (iw_be32(h.qn_be) != op->qn)
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_QN);
}

int iwe_rx_begin(struct iwe_qp_priv *q, const uint8_t *hdr,
		 uint32_t hdr_len, uint32_t ulpdu_len)
{
	struct iwe_rx *r = &q->rx;
	uint16_t c;

	IWE_QP_ASSERT_LOCKED(q);
	memcpy(&c, hdr, 2);
	r->ctrl = iw_be16(c);
	r->opcode = (uint8_t)iw_ctrl_opcode(r->ctrl);
	r->ulpdu_len = ulpdu_len;
	r->hdr_len = hdr_len < sizeof(r->hdr) ? hdr_len : sizeof(r->hdr);
	memcpy(r->hdr, hdr, r->hdr_len);
	r->payload_len = ulpdu_len - hdr_len;
	r->nplace = 0;
	r->inv_stag = 0;
	r->rtr_send = 0;
	r->not_ready = 0;
	if (ulpdu_len < iw_ddp_hdr_len(r->ctrl))
		return iwe_rx_short_segment(q, hdr, ulpdu_len);
	rx_check_common(q);
	if (!r->term_out)
		iwe_rdmap_ops[r->opcode].rx_begin(q);
	if (r->not_ready)
		return IWE_RX_NOT_READY;
	return r->term_out ? EPROTO : 0;
}

int iwe_rx_end(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	void (*end)(struct iwe_qp_priv *q) = iwe_rdmap_ops[r->opcode].rx_end;

	IWE_QP_ASSERT_LOCKED(q);
	q->stats.rx_segments++;
	/* A responder that expects an RTR gets it first (one zero-length
	 * segment): not a consumer's message. */
	if (!q->rtr_expect || q->first_rx) {
		q->stats.rx_bytes[r->opcode] += r->payload_len;
		q->stats.rx_msgs[r->opcode] += (uint64_t)iw_ctrl_last(r->ctrl);
	}
	/* A responder may transmit once the first segment is in. */
	q->first_rx = 1;
	q->tx_gate = 0;
	if (end)
		end(q);
	return r->term_out || r->term_in ? EPROTO : 0;
}

/* ----------------------------------------------- the opcode table */

#define SEND_OP(nm, se_, inv_) { .name = nm, .qn = IW_QN_SEND, .se = se_, \
	.inv = inv_, .rx_begin = rx_send, .rx_end = rx_end_send }

const struct iwe_rdmap_op iwe_rdmap_ops[16] = {
	[IW_OP_WRITE] = { .name = "RDMA Write", .tagged = 1,
			  .rx_begin = rx_write },
	[IW_OP_READ_REQ] = { .name = "RDMA Read Request",
			     .qn = IW_QN_READ_REQ,
			     .body_len = sizeof(struct iw_read_req_body),
			     .rx_begin = rx_read_req,
			     .rx_end = rx_end_read_req },
	[IW_OP_READ_RESP] = { .name = "RDMA Read Response", .tagged = 1,
			      .rx_begin = rx_read_resp,
			      .rx_end = rx_end_read_resp },
	[IW_OP_SEND] = SEND_OP("Send", 0, 0),
	[IW_OP_SEND_INV] = SEND_OP("Send with Invalidate", 0, 1),
	[IW_OP_SEND_SE] = SEND_OP("Send with Solicited Event", 1, 0),
	[IW_OP_SEND_SE_INV] = SEND_OP("Send with SE and Invalidate", 1, 1),
	[IW_OP_TERMINATE] = { .name = "Terminate", .qn = IW_QN_TERMINATE,
			      .rx_begin = rx_terminate,
			      .rx_end = rx_end_terminate },
	/* RFC 7306: known names, not supported here (unexpected opcode). */
	[IW_OP_IMM_DATA] = { .name = "Immediate Data" },
	[IW_OP_IMM_DATA_SE] = { .name = "Immediate Data with SE" },
	[IW_OP_ATOMIC_REQ] = { .name = "Atomic Request" },
	[IW_OP_ATOMIC_RESP] = { .name = "Atomic Response" },
};
