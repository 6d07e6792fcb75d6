/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Terminates over TRP (doc/trp.md "Terminate").
 *
 * Non-fatal: one request's user error -- a Write or a Read Request whose
 * STag, bounds, protection domain or rights are wrong (RDMAP remote
 * protection errors, DDP tagged buffer errors).  The receiver answers
 * with a Terminate whose quiet time is 0, drops the rest of that Write,
 * keeps its Read Request numbering in step, and goes on.  The initiator
 * fails the WR the Terminate names (IBV_WC_REM_ACCESS_ERR) and goes on.
 *
 * Fatal: everything else (protocol errors).  The Terminate carries our
 * quiet time, TRP_QUIET_MS, in the 13 low reserved bits of its control
 * word, goes out once, and then the sender is silent (iw_trp_tx.c); the
 * QP fails, the consumer sees BROKEN.  A received Terminate with a quiet
 * time is always fatal.
 *
 * The marker: whenever a non-fatal Terminate is sent or received, every
 * WR posted before that moment and not complete fails (the named one
 * with its access error, the others IBV_WC_WR_FLUSH_ERR), in order; a WR
 * not started then never goes on the wire; a Write or Read being cut
 * stops there.  Work posted afterwards runs.  Two limits, as documented:
 * a Send being cut is finished (its peer is mid-message) and the WRs
 * behind it are not failed; and messages already on the wire reach the
 * peer.  A Read failed so has its response (if the peer sends one)
 * consumed without a completion.
 */
#include <errno.h>
#include <string.h>

#include "iw_guard.h"
#include "iw_trp.h"

int trp_term_nonfatal(unsigned layer, unsigned etype, unsigned ecode)
{
	if (layer == IW_TERM_LAYER_RDMAP)
		return etype == IW_TERM_RDMAP_ETYPE_REMOTE_PROT;
	return layer == IW_TERM_LAYER_DDP &&
	       etype == IW_TERM_DDP_ETYPE_TAGGED &&
	       ecode != IW_TERM_DDP_TAG_INV_VERSION;
}

/* The control word of a Terminate segment: 0, or -1 for any other. */
static int term_ctrl_of(const uint8_t *u, uint32_t len, uint32_t *ctrl)
{
	struct iw_terminate_hdr h;
	uint16_t c;

	if (len < sizeof(h))
		return -1;
	memcpy(&h, u, sizeof(h));
	c = iw_be16(h.hdr.ctrl_be);
	if (iw_ctrl_tagged(c) || iw_ctrl_opcode(c) != IW_OP_TERMINATE)
		return -1;
	*ctrl = iw_be32(h.term_ctrl_be);
	return 0;
}

int trp_term_incoming(const uint8_t *ulpdu, uint32_t len,
		      uint32_t *quiet_ms)
{
	uint32_t c;

	if (term_ctrl_of(ulpdu, len, &c))
		return -1;
	*quiet_ms = c & IW_TERM_QUIET_MS_MASK;
	return *quiet_ms || !trp_term_nonfatal(iw_term_layer(c),
					       iw_term_etype(c),
					       iw_term_ecode(c));
}

int trp_term_outgoing(struct iwe_qp_priv *q, uint8_t *ulpdu, uint32_t len)
{
	uint32_t c, be;

	if (term_ctrl_of(ulpdu, len, &c))
		return 0;
	if (q->tx.term_cur_soft) {
		/* The connection goes on: RDMAP may send (and terminate)
		 * again. */
		q->tx.term_cur_soft = 0;
		q->tx.term_sent = 0;
		return 0;
	}
	be = iw_be32((c & ~IW_TERM_QUIET_MS_MASK) | TRP_QUIET_MS);
	memcpy(ulpdu + offsetof(struct iw_terminate_hdr, term_ctrl_be), &be,
	       sizeof(be));
	return 1;
}

/* ------------------------------------------------------- the marker */

/* The Read Request a Terminate names was never answered: its entry
 * leaves the outstanding reads (the later ones are answered in order). */
static void drop_named_read(struct iwe_qp_priv *q, const struct iwe_term *tm)
{
	struct iw_read_req rr;
	uint32_t i;

	if (!tm->has_rdmap)
		return;
	memcpy(&rr, tm->hdr, sizeof(rr));
	for (i = q->orq_head; i != q->orq_tail; i++) {
		struct iwe_orq_ent *o = iwe_orq_slot(q, i);

		if (o->done || o->src_stag != iw_be32(rr.body.src_stag_be) ||
		    o->src_to != iw_be64(rr.body.src_to_be))
			continue;
		for (; i + 1 != q->orq_tail; i++)
			*iwe_orq_slot(q, i) = *iwe_orq_slot(q, i + 1);
		q->orq_tail--;
		return;
	}
}

/* The Reads of WRs [from, to) completed early: a response still due is
 * consumed without touching them (as the Read RTR's is). */
static void orphan_reads(struct iwe_qp_priv *q, uint32_t from, uint32_t to)
{
	for (uint32_t i = q->orq_head; i != q->orq_tail; i++) {
		struct iwe_orq_ent *o = iwe_orq_slot(q, i);

		if (!o->rtr && o->wqe_idx - from < to - from)
			o->rtr = 1;
	}
}

/* A Write or Read whose cutting started stops: the peer drops a Write's
 * rest, and a Read Request not yet out gives back its slot. */
static void stop_cutting(struct iwe_qp_priv *q)
{
	struct iwe_tx *tx = &q->tx;
	struct iwe_swqe *w;

	if (tx->kind != IWE_TX_SQ)
		return;
	w = iwe_sq_slot(q, tx->wqe_idx);
	if (w->opcode != IBV_WR_RDMA_WRITE && w->opcode != IBV_WR_RDMA_READ)
		return;
	if (w->opcode == IBV_WR_RDMA_READ)
		q->orq_tail--;
	tx->kind = IWE_TX_IDLE;
	q->sq_tx++;
}

/* WRs are about to complete before the peer acknowledged them: every
 * payload still sent from registered memory (iw_trp_tx.c) is copied into
 * the ring, so a retransmission never reads memory the consumer got
 * back.  Unmapped memory fails the QP (tx_write reports the fault). */
static void own_payloads(struct trp *t)
{
	for (uint32_t psn = t->snd_una; psn != t->snd_nxt; psn++) {
		struct trp_txp *p = trp_slot(t, psn);

		if (!p->zc_len)
			continue;
		if (iwe_copy_guarded(p->buf + p->len - p->zc_len, p->zc,
				     p->zc_len, IWE_COPY_PLAIN, NULL))
			t->fault = EFAULT;
		p->zc = NULL;
		p->zc_len = 0;
	}
}

static void marker(struct iwe_qp_priv *q, const struct iwe_term *named)
{
	uint32_t head = q->sq_head, stop;

	own_payloads(trp_of(q));
	if (named)
		drop_named_read(q, named);
	stop_cutting(q);
	if (named) {
		int access = (named->layer == IW_TERM_LAYER_RDMAP &&
			      named->etype == IW_TERM_RDMAP_ETYPE_REMOTE_PROT) ||
			     (named->layer == IW_TERM_LAYER_DDP &&
			      named->etype == IW_TERM_DDP_ETYPE_TAGGED);

		iwe_wq_fail_matching(q, named, access ? IBV_WC_REM_ACCESS_ERR :
				     IBV_WC_REM_OP_ERR,
				     q->sq_tx + (q->tx.kind == IWE_TX_SQ));
	}
	stop = q->tx.kind == IWE_TX_SQ ? q->sq_tx : q->sq_tail;
	while (q->sq_head != stop)
		iwe_wq_push_send_wc(q, iwe_sq_slot(q, q->sq_head++),
				    IBV_WC_WR_FLUSH_ERR);
	orphan_reads(q, head, stop);
	if ((int32_t)(stop - q->sq_tx) > 0)
		q->sq_tx = stop;	/* not started: never sent */
}

/* The stream ends: segments the peer acknowledged in the same batch
 * complete their WRs (successfully) before the QP fails and flushes the
 * rest -- but for acks still held behind the peer's undelivered packets
 * (trp_done_release), whose WRs are flushed with the rest.  Nothing new
 * goes out meanwhile. */
static int fatal(struct iwe_qp_priv *q, struct trp *t)
{
	if (t->done) {
		t->ending = 1;
		iwe_tx_progress_locked(q);
	}
	return 0;
}

int iwe_trp_rx_failed(struct iwe_qp_priv *q)
{
	struct trp *t = trp_of(q);
	struct iwe_rx *r = &q->rx;
	struct iw_tagged_hdr th;

	if (!t)
		return 0;
	if (r->term_in) {
		const struct iwe_term *tm = &r->term_rcvd;

		if (t->term_in_quiet ||
		    !trp_term_nonfatal(tm->layer, tm->etype, tm->ecode))
			return fatal(q, t);
		r->term_in = 0;
		marker(q, tm);
	} else {
		if (!r->term_out || r->bad_read_resp ||
		    (r->opcode != IW_OP_WRITE && r->opcode != IW_OP_READ_REQ) ||
		    !trp_term_nonfatal(r->term.layer, r->term.etype,
				       r->term.ecode))
			return fatal(q, t);
		if (r->opcode == IW_OP_READ_REQ) {
			r->msn_rreq++;	/* it took its MSN */
		} else if (!iw_ctrl_last(r->ctrl)) {
			memcpy(&th, r->hdr, sizeof(th));
			t->skip_write = 1;
			t->skip_stag = iw_be32(th.stag_be);
		}
		r->term_out = 0;
		iwe_tx_queue_soft_terminate(q, &r->term);
		marker(q, NULL);
	}
	/* Packets behind this one may be waiting: the lock holder runs the
	 * receive side again before letting go. */
	atomic_store(&q->kick, 1);
	return 1;
}
