/* The receive state machine of a QP: takes FPDUs off the stream.
 *
 * Stages: HDR (length field, DDP header and the fixed RDMAP body of Read
 * Requests and Terminates), PAYLOAD (straight into its destination),
 * TRAILER (pad and CRC).  Any split of the stream -- down to one byte per
 * read -- is handled.
 *
 * System calls: once the header has told where the payload goes, one
 * recvmsg takes the rest of the payload (into its destination: zero
 * copy), the trailer, and up to IWE_RX_RA bytes that follow into a
 * read-ahead buffer: the next FPDU's header, or several whole small
 * FPDUs.  Bytes in the read-ahead buffer are consumed before the socket
 * is asked again.  A read that returns less than it asked for means the
 * socket is drained: the call returns without another recv that could
 * only say EAGAIN (epoll, or the next poll, reports new data).
 *
 * Errors found in a header are not reported at once: the segment is read
 * to its end into a scratch buffer so that its CRC decides first.  A
 * corrupted header then shows up as the CRC error it is, not as a bad
 * STag.  Side effects that must not happen on a corrupted segment (a Read
 * Response queued, a receive completed, a Terminate acted on) also wait
 * for the CRC.  Payload itself is placed as it arrives (zero copy), so a
 * bad CRC can leave garbage in the target buffer -- but the QP is then in
 * ERROR and the WR completes in error, never successfully.
 *
 * The Terminates it sends (layer/type/code, RFC 5040 7.1, 5041 7.2,
 * 5044 8; every one echoes M and the DDP header when it was read, and R
 * with the body for a Read Request):
 *   bad CRC                                   LLP   0 MPA     2
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
 *
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "iw_crc32c.h"
#include "iw_mpa.h"
#include "iw_qp.h"

/* Length field plus the shortest DDP header: read before anything else
 * can be decided. */
#define RX_FIRST_NEED (IW_FPDU_LEN_FIELD + IW_TAGGED_HDR_LEN)

static void rx_next_fpdu(struct iwe_rx *r)
{
	r->stage = IWE_RX_HDR;
	r->hdr_have = 0;
	r->hdr_need = RX_FIRST_NEED;
	r->payload_len = r->payload_have = 0;
	r->trailer_have = r->trailer_need = 0;
	r->crc = 0;
	r->nplace = 0;
	r->discard = 0;
	r->err_pending = 0;
	r->bad_read_resp = 0;
	r->inv_stag = 0;
	r->rtr_send = 0;
}

void iwe_rx_init(struct iwe_qp_priv *q)
{
	memset(&q->rx, 0, offsetof(struct iwe_rx, ra));
	q->rx.msn_send = 1;
	q->rx.msn_rreq = 1;
	rx_next_fpdu(&q->rx);
}

/* --------------------------------------------------------- errors */

static unsigned rx_ddp_hdr_len(const struct iwe_rx *r)
{
	return iw_ddp_hdr_len(r->ctrl);
}

/* Record the first error of this segment; it is reported when the
 * segment has been read and its CRC checked. */
static void rx_error(struct iwe_qp_priv *q, unsigned layer, unsigned etype,
		     unsigned ecode)
{
	struct iwe_rx *r = &q->rx;
	struct iwe_term *t = &r->term;
	unsigned hl = rx_ddp_hdr_len(r);

	if (r->err_pending)
		return;
	memset(t, 0, sizeof(*t));
	t->layer = (uint8_t)layer;
	t->etype = (uint8_t)etype;
	t->ecode = (uint8_t)ecode;
	if (r->hdr_have >= IW_FPDU_LEN_FIELD + hl) {
		t->has_hdr = 1;
		t->seglen = r->ulpdu_len;
		t->hdr_len = (uint8_t)hl;
		memcpy(t->hdr, r->hdr + IW_FPDU_LEN_FIELD, hl);
		if (r->opcode == IW_OP_READ_REQ && !iw_ctrl_tagged(r->ctrl) &&
		    r->hdr_have >= IW_FPDU_LEN_FIELD + sizeof(struct iw_read_req)) {
			t->has_rdmap = 1;
			memcpy(t->hdr + hl, r->hdr + IW_FPDU_LEN_FIELD + hl,
			       sizeof(struct iw_read_req_body));
		}
	}
	r->err_pending = 1;
	r->discard = 1;
}

/* Report the recorded error: Terminate out, QP to ERROR, stream dead. */
static int rx_fatal(struct iwe_qp_priv *q)
{
	q->tx_gate = 0;		/* the peer did send: it may hear why */
	if (q->rx.bad_read_resp)
		iwe_qp_fail_oldest_read(q);
	iwe_tx_queue_terminate(q, &q->rx.term);
	q->rx.stage = IWE_RX_DEAD;
	iwe_qp_fail(q, EPROTO);
	return EPROTO;
}

/* ----------------------------------------------- per-opcode checks */

static void tagged_error(struct iwe_qp_priv *q, enum iwe_access_error e)
{
	switch (e) {
	case IWE_ACCESS_BAD_PD:
		rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
			 IW_TERM_DDP_TAG_STAG_NOT_ASSOC);
		break;
	case IWE_ACCESS_BAD_RIGHTS:
		/* DDP knows no rights: RDMAP reports them. */
		rx_error(q, IW_TERM_LAYER_RDMAP,
			 IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
			 IW_TERM_RDMAP_ACCESS);
		break;
	case IWE_ACCESS_BAD_BOUNDS:
		rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
			 IW_TERM_DDP_TAG_BASE_BOUNDS);
		break;
	default:
		rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
			 IW_TERM_DDP_TAG_INV_STAG);
		break;
	}
}

static void place_one(struct iwe_rx *r, void *p, uint32_t len)
{
	r->place[0].iov_base = p;
	r->place[0].iov_len = len;
	r->nplace = len ? 1 : 0;
}

static void rx_hdr_tagged(const struct iwe_rx *r, uint32_t *stag,
			  uint64_t *to)
{
	struct iw_tagged_hdr h;

	memcpy(&h, r->hdr + IW_FPDU_LEN_FIELD, sizeof(h));
	*stag = iw_be32(h.stag_be);
	*to = iw_be64(h.to_be);
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

	rx_hdr_tagged(r, &stag, &to);
	if (len == 0)
		return;
	if (len > UINT64_MAX - to) {
		rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
			 IW_TERM_DDP_TAG_TO_WRAP);
		return;
	}
	e = iwe_mr_check(q->pub.pd->dev, q->pub.pd, stag, to, len,
			 IBV_ACCESS_REMOTE_WRITE, &p);
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
	o = &q->orq[q->orq_head % IWE_MAX_ORD];
	rx_hdr_tagged(r, &stag, &to);
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

static void rx_hdr_untagged(const struct iwe_rx *r, struct iw_untagged_hdr *h)
{
	memcpy(h, r->hdr + IW_FPDU_LEN_FIELD, sizeof(*h));
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

static void untagged_error(struct iwe_qp_priv *q, unsigned ecode)
{
	rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_UNTAGGED, ecode);
}

/* Send family: into the head posted receive (or the SRQ's), in MSN/MO
 * order.  iWARP has no receiver-not-ready retry: no receive posted is
 * fatal. */
static void rx_send(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	struct iw_untagged_hdr h;
	const struct iwe_rwqe *w;
	uint32_t msn, mo, len = r->payload_len;

	rx_hdr_untagged(r, &h);
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
	w = iwe_qp_recv_wqe(q, mo, r->send_mo);
	if (!w) {
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
	if (r->opcode == IW_OP_SEND_INV || r->opcode == IW_OP_SEND_SE_INV)
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

	if (r->hdr_have < IW_FPDU_LEN_FIELD + sizeof(rr)) {
		/* Too short to hold the Read Request body. */
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_UNSPECIFIED);
		return;
	}
	memcpy(&rr, r->hdr + IW_FPDU_LEN_FIELD, sizeof(rr));
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

static void rx_terminate(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;

	/* Bytes beyond the longest Terminate we understand are skipped. */
	r->discard = 1;
	if (!iw_ctrl_last(r->ctrl))
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_MO);
}

/* ---------------------------------------------------- header stage */

static int opcode_tagged(unsigned op)
{
	return op == IW_OP_WRITE || op == IW_OP_READ_RESP;
}

static uint32_t opcode_qn(unsigned op)
{
	if (op == IW_OP_READ_REQ)
		return IW_QN_READ_REQ;
	if (op == IW_OP_TERMINATE)
		return IW_QN_TERMINATE;
	return IW_QN_SEND;
}

static int opcode_known(unsigned op)
{
	return op <= IW_OP_TERMINATE;
}

/* Version, opcode and queue number: checks common to all segments. */
static void rx_check_common(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
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
	if (!opcode_known(r->opcode) || opcode_tagged(r->opcode) != tagged) {
		rx_error(q, IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			 IW_TERM_RDMAP_UNEXP_OPCODE);
		return;
	}
	if (tagged)
		return;
	rx_hdr_untagged(r, &h);
	if (iw_be32(h.qn_be) != opcode_qn(r->opcode))
		untagged_error(q, IW_TERM_DDP_UNTAG_INV_QN);
}

static void rx_dispatch(struct iwe_qp_priv *q)
{
	rx_check_common(q);
	if (q->rx.err_pending)
		return;
	switch (q->rx.opcode) {
	case IW_OP_WRITE:
		rx_write(q);
		break;
	case IW_OP_READ_RESP:
		rx_read_resp(q);
		break;
	case IW_OP_READ_REQ:
		rx_read_req(q);
		break;
	case IW_OP_TERMINATE:
		rx_terminate(q);
		break;
	default:
		rx_send(q);
		break;
	}
}

/* Header bytes this segment needs, once the control word is known. */
static uint32_t rx_hdr_total(const struct iwe_rx *r)
{
	uint32_t n = IW_FPDU_LEN_FIELD + rx_ddp_hdr_len(r);
	uint32_t end = IW_FPDU_LEN_FIELD + r->ulpdu_len;

	if (iw_ctrl_tagged(r->ctrl))
		return n;
	if (r->opcode == IW_OP_READ_REQ)
		n += sizeof(struct iw_read_req_body);
	else if (r->opcode == IW_OP_TERMINATE)
		n = end < IWE_RX_HDR_MAX ? end : IWE_RX_HDR_MAX;
	/* A short Read Request keeps its header inside its FPDU; the
	 * length check then reports it. */
	return n < end ? n : end;
}

/* A segment shorter than its DDP header cannot be framed past: there is
 * no telling what it was, so report it at once (DDP catastrophic). */
static int rx_bad_length(struct iwe_qp_priv *q)
{
	rx_error(q, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_CATASTROPHIC,
		 IW_TERM_DDP_CATASTROPHIC);
	return rx_fatal(q);
}

/* All of hdr_need is in.  Returns 0 to go on, or a fatal errno. */
static int rx_hdr_step(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	uint16_t v;
	uint32_t total;

	if (r->hdr_have == RX_FIRST_NEED) {
		memcpy(&v, r->hdr, 2);
		r->ulpdu_len = iw_be16(v);
		memcpy(&v, r->hdr + 2, 2);
		r->ctrl = iw_be16(v);
		r->opcode = (uint8_t)iw_ctrl_opcode(r->ctrl);
		if (r->ulpdu_len < rx_ddp_hdr_len(r))
			return rx_bad_length(q);
	}
	total = rx_hdr_total(r);
	if (total > r->hdr_have) {
		r->hdr_need = total;
		return 0;
	}
	if (q->crc)
		r->crc = iw_crc32c(0, r->hdr, r->hdr_have);
	r->payload_len = IW_FPDU_LEN_FIELD + r->ulpdu_len - r->hdr_have;
	r->trailer_need = iw_fpdu_pad(r->ulpdu_len) + IW_FPDU_CRC_LEN;
	rx_dispatch(q);
	r->stage = r->payload_len ? IWE_RX_PAYLOAD : IWE_RX_TRAILER;
	return 0;
}

/* ----------------------------------------------------- segment end */

static void rx_end_send(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	int se = r->opcode == IW_OP_SEND_SE || r->opcode == IW_OP_SEND_SE_INV;
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
	iwe_qp_rq_complete(q, r->send_mo, se, inv);
	r->send_mo = 0;
	r->msn_send++;
}

static void rx_end_read_resp(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	struct iwe_orq_ent *o = &q->orq[q->orq_head % IWE_MAX_ORD];

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
	iwe_qp_sq_retire(q);
	/* An ORD slot is free: the next Read may go. */
}

static void rx_end_read_req(struct iwe_qp_priv *q)
{
	q->irq[q->irq_tail % IWE_MAX_IRD] = q->rx.rreq;
	q->irq_tail++;
	q->rx.msn_rreq++;
}

/* The peer terminated: remember why, fail the WR it names (if still
 * outstanding) with the matching status, flush the rest. */
static int rx_end_terminate(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	const uint8_t *b = r->hdr + IW_FPDU_LEN_FIELD + IW_UNTAGGED_HDR_LEN;
	uint32_t avail = r->hdr_have - IW_FPDU_LEN_FIELD - IW_UNTAGGED_HDR_LEN;
	struct iwe_term t = { 0 };
	uint32_t ctrl_be, ctrl;
	enum ibv_wc_status st = IBV_WC_REM_OP_ERR;

	if (avail >= 4) {
		memcpy(&ctrl_be, b, 4);
		ctrl = iw_be32(ctrl_be);
		t.layer = (uint8_t)iw_term_layer(ctrl);
		t.etype = (uint8_t)iw_term_etype(ctrl);
		t.ecode = (uint8_t)iw_term_ecode(ctrl);
		q->term_rcvd = (struct iwe_term_info){ .valid = 1,
			.layer = t.layer, .etype = t.etype, .ecode = t.ecode };
		/* Echoed header: M (2 bytes), D (DDP header), R (body). */
		if ((ctrl & IW_TERM_HDRCT_M) && (ctrl & IW_TERM_HDRCT_D) &&
		    avail >= 4 + 2 + 2) {
			uint16_t c;
			unsigned hl;

			memcpy(&c, b + 6, 2);
			hl = iw_ddp_hdr_len(iw_be16(c));
			if (avail >= 6 + hl) {
				t.has_hdr = 1;
				t.hdr_len = (uint8_t)hl;
				memcpy(t.hdr, b + 6, hl);
			}
			if ((ctrl & IW_TERM_HDRCT_R) && hl == IW_UNTAGGED_HDR_LEN &&
			    avail >= 6 + hl + sizeof(struct iw_read_req_body)) {
				t.has_rdmap = 1;
				memcpy(t.hdr + hl, b + 6 + hl,
				       sizeof(struct iw_read_req_body));
			}
		}
	}
	if ((t.layer == IW_TERM_LAYER_RDMAP &&
	     t.etype == IW_TERM_RDMAP_ETYPE_REMOTE_PROT) ||
	    (t.layer == IW_TERM_LAYER_DDP &&
	     t.etype == IW_TERM_DDP_ETYPE_TAGGED))
		st = IBV_WC_REM_ACCESS_ERR;
	iwe_qp_fail_matching(q, &t, st);
	q->tx.term_sent = 1;	/* never answer a Terminate with one */
	r->stage = IWE_RX_DEAD;
	iwe_qp_fail(q, EPROTO);
	return EPROTO;
}

static int crc_ok(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	unsigned pad = r->trailer_need - IW_FPDU_CRC_LEN;
	uint32_t crc;

	if (!q->crc)
		return 1;
	crc = iw_crc32c(r->crc, r->trailer, pad);
	return crc == iw_fpdu_get_crc(r->trailer + pad);
}

/* The FPDU is complete.  Returns 0, or EPROTO when the stream ended. */
static int rx_fpdu_end(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;

	/* A responder may transmit once the first FPDU is in. */
	q->first_rx = 1;
	q->tx_gate = 0;

	if (!crc_ok(q)) {
		r->err_pending = 0;
		r->bad_read_resp = 0;	/* a damaged segment proves nothing */
		rx_error(q, IW_TERM_LAYER_LLP, IW_TERM_LLP_ETYPE_MPA,
			 IW_TERM_LLP_CRC);
		return rx_fatal(q);
	}
	if (!r->err_pending) {
		switch (r->opcode) {
		case IW_OP_WRITE:
			break;
		case IW_OP_READ_RESP:
			rx_end_read_resp(q);
			break;
		case IW_OP_READ_REQ:
			rx_end_read_req(q);
			break;
		case IW_OP_TERMINATE:
			return rx_end_terminate(q);
		default:
			rx_end_send(q);
			break;
		}
	}
	if (r->err_pending)
		return rx_fatal(q);
	rx_next_fpdu(r);
	return 0;
}

/* --------------------------------------------------------- reading */

/* Where the next payload byte goes, and how many may go there. */
static void *payload_target(struct iwe_rx *r, size_t *len)
{
	uint32_t left = r->payload_len - r->payload_have, off = r->payload_have;
	int i;

	if (r->discard) {
		*len = left < sizeof(r->scratch) ? left : sizeof(r->scratch);
		return r->scratch;
	}
	for (i = 0; i < r->nplace; i++) {
		if (off < r->place[i].iov_len) {
			*len = r->place[i].iov_len - off;
			if (*len > left)
				*len = left;
			return (char *)r->place[i].iov_base + off;
		}
		off -= (uint32_t)r->place[i].iov_len;
	}
	*len = 0;	/* cannot happen: placement covers the payload */
	return NULL;
}

/* Whether the current stage has all its bytes. */
static int stage_complete(const struct iwe_rx *r)
{
	switch (r->stage) {
	case IWE_RX_HDR:
		return r->hdr_have == r->hdr_need;
	case IWE_RX_PAYLOAD:
		return r->payload_have == r->payload_len;
	default:
		return r->trailer_have == r->trailer_need;
	}
}

/* Feed the current stage from the read-ahead buffer.  Payload is copied
 * to its destination with the CRC taken over the private copy. */
static int rx_consume_ra(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	uint32_t avail = r->ra_len - r->ra_off, n;
	const uint8_t *src = r->ra + r->ra_off;
	size_t len;
	void *p;

	switch (r->stage) {
	case IWE_RX_HDR:
		n = r->hdr_need - r->hdr_have;
		n = n < avail ? n : avail;
		memcpy(r->hdr + r->hdr_have, src, n);
		r->hdr_have += n;
		break;
	case IWE_RX_PAYLOAD:
		p = payload_target(r, &len);
		if (!p)
			return EFAULT;
		n = len < avail ? (uint32_t)len : avail;
		if (q->crc)
			r->crc = iw_crc32c_copy_src(r->crc, p, src, n);
		else
			memcpy(p, src, n);
		r->payload_have += n;
		break;
	default:
		n = r->trailer_need - r->trailer_have;
		n = n < avail ? n : avail;
		memcpy(r->trailer + r->trailer_have, src, n);
		r->trailer_have += n;
		break;
	}
	r->ra_off += n;
	if (r->ra_off == r->ra_len)
		r->ra_off = r->ra_len = 0;
	return 0;
}

/* recvmsg: >0 bytes, 0 would block, <0 -errno; EOF is -ENODATA. */
static ssize_t rx_recvmsg(struct iwe_qp_priv *q, struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
	ssize_t k;

	do {
		k = recvmsg(q->fd, &m, MSG_DONTWAIT);
	} while (k < 0 && errno == EINTR);
	if (k > 0)
		return k;
	if (k == 0)
		return -ENODATA;
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

/* One read for the current stage (the read-ahead buffer is empty): what
 * the stage misses, then the read-ahead buffer.  Returns bytes read, 0
 * for EAGAIN, or -errno (-ENODATA for EOF); *asked: bytes asked for. */
static ssize_t rx_fill(struct iwe_qp_priv *q, size_t *asked)
{
	struct iwe_rx *r = &q->rx;
	struct iovec iov[IWE_MAX_SGE + 2];
	size_t pay = 0, trl = 0, got, len;
	ssize_t n;
	int k = 0, i;
	uint32_t off;

	if (r->stage == IWE_RX_PAYLOAD) {
		/* The rest of the payload, piece by piece. */
		uint32_t left = r->payload_len - r->payload_have;

		off = r->payload_have;
		if (r->discard) {
			pay = left < sizeof(r->scratch) ? left
							: sizeof(r->scratch);
			iov[k++] = (struct iovec){ r->scratch, pay };
		} else {
			for (i = 0; i < r->nplace && pay < left; i++) {
				len = r->place[i].iov_len;
				if (off >= len) {
					off -= (uint32_t)len;
					continue;
				}
				len -= off;
				if (len > left - pay)
					len = left - pay;
				iov[k++] = (struct iovec){
					(char *)r->place[i].iov_base + off, len };
				pay += len;
				off = 0;
			}
			if (pay < left)
				return -EFAULT;	/* placement covers it */
		}
	}
	if (r->stage == IWE_RX_TRAILER ||
	    (r->stage == IWE_RX_PAYLOAD &&
	     r->payload_have + pay == r->payload_len)) {
		trl = r->trailer_need - r->trailer_have;
		iov[k++] = (struct iovec){ r->trailer + r->trailer_have, trl };
	}
	if (r->stage == IWE_RX_HDR || trl) {
		/* What follows: the next header, small FPDUs. */
		iov[k++] = (struct iovec){ r->ra, sizeof(r->ra) };
	}
	*asked = pay + trl + (r->stage == IWE_RX_HDR || trl ? sizeof(r->ra) : 0);
	n = rx_recvmsg(q, iov, k);
	if (n <= 0)
		return n;
	got = (size_t)n;
	if (pay) {
		size_t pgot = got < pay ? got : pay, c = pgot;

		for (i = 0; q->crc && c; i++) {
			len = iov[i].iov_len < c ? iov[i].iov_len : c;
			r->crc = iw_crc32c(r->crc, iov[i].iov_base, len);
			c -= len;
		}
		r->payload_have += (uint32_t)pgot;
		got -= pgot;
	}
	if (trl) {
		size_t tgot = got < trl ? got : trl;

		r->trailer_have += (uint32_t)tgot;
		got -= tgot;
	}
	r->ra_off = 0;
	r->ra_len = (uint32_t)got;
	return n;
}

/* Move to the next stage; the current one is complete. */
static int rx_advance(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;

	switch (r->stage) {
	case IWE_RX_HDR:
		return rx_hdr_step(q);
	case IWE_RX_PAYLOAD:
		r->stage = IWE_RX_TRAILER;
		return 0;
	default:
		return rx_fpdu_end(q);
	}
}

static int rx_stream_lost(struct iwe_qp_priv *q, ssize_t n)
{
	struct iwe_rx *r = &q->rx;
	int between = r->stage == IWE_RX_HDR && r->hdr_have == 0 &&
		      r->ra_len == r->ra_off;
	int err = n == -ENODATA ? (between ? ENOTCONN : ECONNABORTED) :
		  (int)-n;

	r->stage = IWE_RX_DEAD;
	iwe_qp_fail(q, err);
	return err;
}

int iwe_rx_progress_locked(struct iwe_qp_priv *q)
{
	struct iwe_rx *r = &q->rx;
	int drained = 0, err;
	size_t asked;
	ssize_t n;

	if (q->fd < 0 || q->state == IWE_QPS_RESET)
		return 0;
	while (r->stage != IWE_RX_DEAD && q->state != IWE_QPS_ERROR) {
		if (stage_complete(r)) {
			err = rx_advance(q);
			if (err)
				return err;
			continue;
		}
		if (r->ra_off < r->ra_len) {
			err = rx_consume_ra(q);
			if (err)
				return rx_stream_lost(q, -err);
			continue;
		}
		if (drained)
			return 0;
		n = rx_fill(q, &asked);
		if (n == 0)
			return 0;
		if (n < 0)
			return rx_stream_lost(q, n);
		if ((size_t)n < asked)
			drained = 1;
	}
	return q->stream_err;
}
