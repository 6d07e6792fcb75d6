/* The transmit state machine of a QP: turns messages into FPDUs.
 *
 * At most one message is being framed and at most one batch of its FPDUs
 * is in flight.  A batch is written with one sendmsg whose iovec is, per
 * FPDU,
 *   [length field + DDP/RDMAP header] [payload] [pad + CRC]
 * A message is cut into equal segments (no runt FPDU at its end), and up
 * to IWE_TX_BATCH of them go out per system call.
 *
 * The payload: without CRC it is sent straight from registered memory,
 * one iovec entry per SGE piece (zero copy; if the consumer writes to a
 * buffer in flight, the peer gets torn data, as with hardware).  With CRC
 * it is first copied to the QP's staging buffer, the CRC being computed
 * over each chunk of the copy right after copying it (one pass, in
 * cache), and sent from there: the CRC then always matches the bytes on
 * the wire, so a consumer scribbling over a source buffer cannot make
 * the peer see a CRC error and terminate the connection.
 *
 * A short write or EAGAIN leaves fpdu_sent where the socket stopped; the
 * next call resumes there.
 *
 * Choice of the next message, at message boundaries only (DDP forbids
 * interleaving the segments of untagged messages of one queue, and mixing
 * at FPDU granularity buys nothing on a byte stream): a pending Terminate
 * first, then Read Responses owed to the peer (they unblock its reads),
 * then the send queue in order.
 *
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "iw_crc32c.h"
#include "iw_mpa.h"
#include "iw_qp.h"

void iwe_tx_init(struct iwe_qp_priv *q)
{
	memset(&q->tx, 0, sizeof(q->tx));
	q->tx.msn_send = 1;
	q->tx.msn_rreq = 1;
}

void iwe_tx_fini(struct iwe_qp_priv *q)
{
	free(q->tx.bounce);
	q->tx.bounce = NULL;
	free(q->tx.stage);
	q->tx.stage = NULL;
}

int iwe_tx_busy(const struct iwe_qp_priv *q)
{
	return q->tx.kind != IWE_TX_IDLE || q->tx.fpdu_len != 0;
}

/* ------------------------------------------------------ FPDU framing */

/* Header bytes after the length field: DDP header plus, for Read
 * Requests and Terminates, their fixed RDMAP part (kept in hdr too). */
static unsigned put_ddp_hdr(struct iwe_tx *t, uint8_t *p, int last)
{
	int tagged = t->opcode == IW_OP_WRITE || t->opcode == IW_OP_READ_RESP;
	uint16_t ctrl = iw_ctrl_make(tagged, last, t->opcode);

	if (tagged) {
		struct iw_tagged_hdr h = {
			.ctrl_be = iw_be16(ctrl),
			.stag_be = iw_be32(t->stag),
			.to_be = iw_be64(t->to + t->msg_off),
		};
		memcpy(p, &h, sizeof(h));
		return sizeof(h);
	} else {
		struct iw_untagged_hdr h = {
			.ctrl_be = iw_be16(ctrl),
			.inval_stag_be = iw_be32(t->inv_stag),
			.qn_be = iw_be32(t->qn),
			.msn_be = iw_be32(t->msn),
			.mo_be = iw_be32((uint32_t)t->msg_off),
		};
		memcpy(p, &h, sizeof(h));
		return sizeof(h);
	}
}

/* The next run of at most n payload bytes of the gather list: its start
 * in *p, its length returned; the list position moves past it. */
static uint32_t src_next(struct iwe_tx *t, uint32_t n, char **p)
{
	const struct iwe_sge_res *s = &t->src[t->src_idx];
	uint32_t take;

	while (s->length == t->src_off) {	/* empty or used up */
		s = &t->src[++t->src_idx];
		t->src_off = 0;
	}
	take = s->length - t->src_off;
	if (take > n)
		take = n;
	*p = s->addr + t->src_off;
	t->src_off += take;
	return take;
}

/* Append up to n payload bytes from the gather list to the iovec. */
static void gather_payload(struct iwe_tx *t, uint32_t n)
{
	while (n) {
		char *p;
		uint32_t take = src_next(t, n, &p);

		t->iov[t->iovcnt].iov_base = p;
		t->iov[t->iovcnt].iov_len = take;
		t->iovcnt++;
		n -= take;
	}
}

/* Copy n payload bytes from the gather list to dst, returning the CRC
 * (chained from crc) of the copy. */
static uint32_t stage_payload(struct iwe_tx *t, char *dst, uint32_t n,
			      uint32_t crc)
{
	while (n) {
		char *p;
		uint32_t take = src_next(t, n, &p);

		crc = iw_crc32c_copy(crc, dst, p, take);
		dst += take;
		n -= take;
	}
	return crc;
}

static int msg_tagged(const struct iwe_tx *t)
{
	return t->opcode == IW_OP_WRITE || t->opcode == IW_OP_READ_RESP;
}

/* Payload bytes per segment for a message of the current kind: the
 * largest that fits MULPDU, then evened out over the segments needed. */
static void plan_segments(struct iwe_qp_priv *q, unsigned extra_len)
{
	struct iwe_tx *t = &q->tx;
	unsigned hlen = msg_tagged(t) ? IW_TAGGED_HDR_LEN : IW_UNTAGGED_HDR_LEN;
	uint32_t room = q->mulpdu - hlen - extra_len;
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

/* Frame the next segment of the current message and append it to the
 * batch.  'extra' bytes of RDMAP body (Read Request, Terminate) follow
 * the DDP header; they count against MULPDU like payload. */
static void build_fpdu(struct iwe_qp_priv *q, const uint8_t *extra,
		       unsigned extra_len)
{
	struct iwe_tx *t = &q->tx;
	struct iwe_tx_seg *sg = &t->seg[t->nseg];
	unsigned hlen = msg_tagged(t) ? IW_TAGGED_HDR_LEN : IW_UNTAGGED_HDR_LEN;
	uint64_t left = t->msg_len - t->msg_off;
	uint32_t n = left < t->seg_len ? (uint32_t)left : t->seg_len;
	int last = t->msg_off + n == t->msg_len;
	unsigned ulpdu = hlen + extra_len + n;
	unsigned hbytes = IW_FPDU_LEN_FIELD + hlen + extra_len;
	unsigned pad = iw_fpdu_pad(ulpdu);
	uint16_t len_be = iw_be16((uint16_t)ulpdu);
	uint32_t crc = 0;

	memcpy(sg->hdr, &len_be, IW_FPDU_LEN_FIELD);
	put_ddp_hdr(t, sg->hdr + IW_FPDU_LEN_FIELD, last);
	if (extra_len)
		memcpy(sg->hdr + IW_FPDU_LEN_FIELD + hlen, extra, extra_len);
	t->iov[t->iovcnt].iov_base = sg->hdr;
	t->iov[t->iovcnt].iov_len = hbytes;
	t->iovcnt++;
	memset(sg->trailer, 0, sizeof(sg->trailer));
	if (q->crc) {
		crc = iw_crc32c(0, sg->hdr, hbytes);
		if (n) {
			char *dst = t->stage + t->stage_used;

			crc = stage_payload(t, dst, n, crc);
			t->iov[t->iovcnt].iov_base = dst;
			t->iov[t->iovcnt].iov_len = n;
			t->iovcnt++;
			t->stage_used += n;
		}
		crc = iw_crc32c(crc, sg->trailer, pad);
	} else {
		gather_payload(t, n);
	}
	iw_fpdu_put_crc(sg->trailer + pad, crc);
	t->iov[t->iovcnt].iov_base = sg->trailer;
	t->iov[t->iovcnt].iov_len = pad + IW_FPDU_CRC_LEN;
	t->iovcnt++;
	t->msg_off += n;
	t->last_sent = (uint8_t)last;
	t->fpdu_len += iw_fpdu_len(ulpdu);
	sg->end = t->fpdu_len;
	t->nseg++;
}

/* Add more segments of the current message to the batch while they fit
 * (FPDU count, iovec entries, staging room). */
static void fill_batch(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;

	while (t->kind != IWE_TX_IDLE && !t->last_sent &&
	       t->nseg < IWE_TX_BATCH &&
	       t->iovcnt + (int)t->nsrc + 2 <= IWE_TX_IOV_MAX &&
	       t->fpdu_len < IWE_TX_BATCH_BYTES &&
	       (!q->crc || t->stage_used + t->seg_len <= IWE_TX_BATCH_BYTES))
		build_fpdu(q, NULL, 0);
}

/* ---------------------------------------------------- message starts */

static void start_msg(struct iwe_tx *t, int kind, uint8_t opcode)
{
	t->kind = kind;
	t->opcode = opcode;
	t->msg_off = 0;
	t->msg_len = 0;
	t->last_sent = 0;
	t->src = NULL;
	t->nsrc = t->src_idx = t->src_off = 0;
	t->stag = 0;
	t->to = 0;
	t->inv_stag = 0;
	t->qn = 0;
	t->msn = 0;
	t->seg_len = 0;
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
	t->src = w->sg;
	t->nsrc = w->num_sge;
	t->msg_len = w->total;
	plan_segments(q, 0);
	build_fpdu(q, NULL, 0);
}

/* One Read Request per sink SGE; SGE k reads the source bytes that
 * follow those of SGEs 0..k-1. */
static void start_read_req(struct iwe_qp_priv *q, struct iwe_swqe *w)
{
	struct iwe_tx *t = &q->tx;
	struct iwe_orq_ent *o = &q->orq[q->orq_tail % IWE_MAX_ORD];
	struct iw_read_req_body b;
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
	b = (struct iw_read_req_body){
		.sink_stag_be = iw_be32(o->sink_stag),
		.sink_to_be = iw_be64(o->sink_to),
		.size_be = iw_be32(o->size),
		.src_stag_be = iw_be32(o->src_stag),
		.src_to_be = iw_be64(o->src_to),
	};
	start_msg(t, IWE_TX_SQ, IW_OP_READ_REQ);
	t->qn = IW_QN_READ_REQ;
	t->msn = t->msn_rreq++;
	plan_segments(q, sizeof(b));
	build_fpdu(q, (const uint8_t *)&b, sizeof(b));
}

static void start_read_resp(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	struct iwe_irq_ent *r = &q->irq[q->irq_head % IWE_MAX_IRD];

	start_msg(t, IWE_TX_READ_RESP, IW_OP_READ_RESP);
	t->stag = r->sink_stag;
	t->to = r->sink_to;
	t->one_src = (struct iwe_sge_res){ .addr = r->src,
					   .length = r->size };
	t->src = &t->one_src;
	t->nsrc = 1;
	t->msg_len = r->size;
	plan_segments(q, 0);
	build_fpdu(q, NULL, 0);
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
	uint8_t body[IW_TERM_MAX_ULPDU];
	unsigned n = term_body(&t->term, body);

	start_msg(t, IWE_TX_TERMINATE, IW_OP_TERMINATE);
	t->qn = IW_QN_TERMINATE;
	t->msn = 1;
	t->term_pending = 0;
	plan_segments(q, n);
	build_fpdu(q, body, n);
}

/* The initiator's Ready-To-Receive (RFC 6581 section 9): a zero-length
 * Write to STag 1, a zero-length Send, or a zero-length Read whose
 * response is consumed without a completion (orq entry marked rtr). */
static void start_rtr(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	unsigned rtr = t->rtr_pending;
	struct iwe_orq_ent *o;
	struct iw_read_req_body b;

	t->rtr_pending = 0;
	if (rtr == IW_RTR_READ) {
		o = &q->orq[q->orq_tail++ % IWE_MAX_ORD];
		memset(o, 0, sizeof(*o));
		o->sink_stag = o->src_stag = IW_RTR_WRITE_STAG;
		o->rtr = 1;
		b = (struct iw_read_req_body){
			.sink_stag_be = iw_be32(IW_RTR_WRITE_STAG),
			.src_stag_be = iw_be32(IW_RTR_WRITE_STAG),
		};
		start_msg(t, IWE_TX_RTR, IW_OP_READ_REQ);
		t->qn = IW_QN_READ_REQ;
		t->msn = t->msn_rreq++;
		plan_segments(q, sizeof(b));
		build_fpdu(q, (const uint8_t *)&b, sizeof(b));
		return;
	}
	if (rtr == IW_RTR_SEND) {
		start_msg(t, IWE_TX_RTR, IW_OP_SEND);
		t->qn = IW_QN_SEND;
		t->msn = t->msn_send++;	/* the consumer's Sends follow */
	} else {
		start_msg(t, IWE_TX_RTR, IW_OP_WRITE);
		t->stag = IW_RTR_WRITE_STAG;
	}
	plan_segments(q, 0);
	build_fpdu(q, NULL, 0);
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
	iwe_qp_sq_retire(q);
}

/* Start the next message, or return 0 when there is none. */
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

/* ------------------------------------------------------ message ends */

static void sq_msg_done(struct iwe_qp_priv *q)
{
	struct iwe_swqe *w = iwe_sq_slot(q, q->sq_tx);
	uint32_t reqs = w->num_sge ? w->num_sge : 1;

	if (w->opcode == IBV_WR_RDMA_READ && w->rd_issued < reqs)
		return;		/* more Read Requests for this WR */
	w->tx_done = 1;
	q->sq_tx++;
	iwe_qp_sq_retire(q);
}

/* Forget the batch (written, or dropped). */
static void batch_reset(struct iwe_tx *t)
{
	t->fpdu_len = t->fpdu_sent = 0;
	t->nseg = 0;
	t->iovcnt = t->iov_first = 0;
	t->stage_used = 0;
	free(t->bounce);
	t->bounce = NULL;
}

/* The batch in flight is completely written. */
static void fpdu_done(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;

	batch_reset(t);
	if (t->kind == IWE_TX_IDLE || !t->last_sent)
		return;
	switch (t->kind) {
	case IWE_TX_SQ:
		sq_msg_done(q);
		break;
	case IWE_TX_READ_RESP:
		q->irq_head++;
		break;
	case IWE_TX_TERMINATE:
		t->term_sent = 1;
		break;
	}
	t->kind = IWE_TX_IDLE;
}

/* ---------------------------------------------------------- writing */

/* The socket took n more bytes: advance the iovec in place. */
static void iov_advance(struct iwe_tx *t, size_t n)
{
	t->fpdu_sent += n;
	while (n && t->iov_first < t->iovcnt) {
		struct iovec *v = &t->iov[t->iov_first];

		if (n < v->iov_len) {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= n;
			return;
		}
		n -= v->iov_len;
		t->iov_first++;
	}
}

/* Write what is left of the batch.  Returns 0 when it is all out, EAGAIN
 * when the socket is full, or the socket's errno. */
static int write_fpdu(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	/* More segments of this message follow at once: let TCP fill its
	 * segments across the calls. */
	int flags = MSG_DONTWAIT | MSG_NOSIGNAL |
		    (t->kind != IWE_TX_IDLE && !t->last_sent ? MSG_MORE : 0);

	while (t->fpdu_sent < t->fpdu_len) {
		struct msghdr m = {
			.msg_iov = t->iov + t->iov_first,
			.msg_iovlen = (size_t)(t->iovcnt - t->iov_first),
		};
		ssize_t n = sendmsg(q->fd, &m, flags);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EWOULDBLOCK ? EAGAIN : errno;
		iov_advance(t, (size_t)n);
	}
	return 0;
}

/* The staging buffer exists before a message is framed with CRC. */
static int stage_ready(struct iwe_qp_priv *q)
{
	if (!q->crc || q->tx.stage)
		return 1;
	q->tx.stage = malloc(IWE_TX_BATCH_BYTES);
	return q->tx.stage != NULL;
}

int iwe_tx_progress_locked(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	int err;

	if (q->fd < 0)
		return 0;
	if (q->tx_gate)		/* responder before the first FPDU */
		return q->state == IWE_QPS_ERROR ? q->stream_err : 0;
	for (;;) {
		if (t->fpdu_len) {
			err = write_fpdu(q);
			if (err == EAGAIN) {
				/* Whoever holds the socket must resume us
				 * when it drains (may be another thread). */
				if (q->tx_hook)
					q->tx_hook(q->tx_hook_arg);
				return 0;
			}
			if (err) {
				iwe_qp_fail(q, err);
				return err;
			}
			fpdu_done(q);
			continue;
		}
		if (!stage_ready(q)) {
			iwe_qp_fail(q, ENOMEM);
			return ENOMEM;
		}
		if (t->kind == IWE_TX_IDLE && !start_next(q))
			break;
		if (t->kind == IWE_TX_IDLE)
			continue;	/* a bind: nothing to write */
		if (!t->fpdu_len)
			build_fpdu(q, NULL, 0);	/* next segment */
		fill_batch(q);
	}
	return q->state == IWE_QPS_ERROR ? q->stream_err : 0;
}

/* ------------------------------------------------- errors and flushes */

void iwe_tx_queue_terminate(struct iwe_qp_priv *q, const struct iwe_term *tm)
{
	struct iwe_tx *t = &q->tx;

	if (t->term_pending || t->term_sent)
		return;		/* one Terminate per stream */
	t->term = *tm;
	t->term_pending = 1;
	q->term_sent = (struct iwe_term_info){ .valid = 1,
					       .layer = tm->layer,
					       .etype = tm->etype,
					       .ecode = tm->ecode };
}

/* A partly written FPDU must still be finished (the peer's framing
 * depends on it), but its payload may live in memory the consumer gets
 * back with the flush: copy the unsent rest of it aside.  The FPDUs of
 * the batch not started yet are dropped. */
void iwe_tx_detach_wrs(struct iwe_qp_priv *q)
{
	struct iwe_tx *t = &q->tx;
	size_t end = 0, rest, off = 0;
	char *b;
	int i;

	if (t->kind == IWE_TX_TERMINATE)
		return;
	t->kind = IWE_TX_IDLE;
	if (!t->fpdu_len || t->bounce)
		return;
	for (i = 0; i < t->nseg && !end; i++)
		if (t->seg[i].end > t->fpdu_sent)
			end = t->seg[i].end;
	rest = end - t->fpdu_sent;
	if (!t->fpdu_sent || !end || !(b = malloc(rest))) {
		/* Unstarted, or no memory: then the stream cannot be kept
		 * framed; drop the FPDU and let the peer see a bad one. */
		batch_reset(t);
		return;
	}
	for (i = t->iov_first; i < t->iovcnt && off < rest; i++) {
		size_t l = t->iov[i].iov_len;

		if (l > rest - off)
			l = rest - off;
		memcpy(b + off, t->iov[i].iov_base, l);
		off += l;
	}
	batch_reset(t);
	t->bounce = b;
	t->iov[0].iov_base = b;
	t->iov[0].iov_len = rest;
	t->iovcnt = 1;
	t->fpdu_len = rest;
}
