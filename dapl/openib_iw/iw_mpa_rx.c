/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA over TCP, receive side (RFC 5044): FPDUs off the byte stream.
 *
 * Bytes are read into a per-QP buffer, as many as the socket has (many
 * small FPDUs per recvmsg), and every whole FPDU found there is checked
 * -- length, CRC over the bytes exactly as they came off the wire --
 * before anything of it is delivered to RDMAP/DDP and placed.  So a
 * damaged FPDU never touches consumer memory, and a consumer that
 * rewrites a buffer the instant an RDMA Write filled it (MPI's eager fast
 * path does) cannot cause a false CRC error.  Placement goes through
 * iw_place_ordered: no byte of a segment's tail appears before the bytes
 * ahead of it.
 *
 * One exception saves a copy of bulk data: without CRC, when a large FPDU
 * (more than RX_ZC_MIN payload bytes still in the socket) has its header
 * in the buffer, its payload is read straight into its destination
 * (zero copy) -- all but its last RX_ZC_TAIL bytes, which come through
 * the buffer and are placed last, after a release fence, so a poller of
 * the last word still sees it after everything ahead of it.  With no CRC
 * there is nothing to check first.  (Not a Send on a QP with an SRQ:
 * see parse.)
 *
 * A segment too short for any DDP header is answered as soon as it is
 * whole (with CRC, once the CRC says it is what the peer sent).
 *
 * A buffer of RX_BUF_MIN or more is a mirrored ring (iw_vring.h): an FPDU
 * read in part at the end of a read goes on past the buffer's end and is
 * whole where it began.  A flat buffer moved that part to its front
 * before reading on: with CRC, 64 KiB Writes had 81 % of their bytes
 * moved so (4 KiB Writes 30 %).  Where the system refuses the mapping,
 * the buffer is flat memory and moves as before.
 *
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "iw_crc32c.h"
#include "iw_llp.h"
#include "iw_place.h"
#include "iw_qp.h"
#include "iw_slab.h"
#include "iw_vring.h"

/* A connection reads into RX_INLINE bytes of its own until a read fills
 * them or an FPDU needs more: then a page, RX_BUF_FIRST (see fill).  The
 * peer's RTR and the rare small message of an idle connection need no
 * allocation -- at setup, a page fault and a heap's growth per connection
 * and side, and 4 KiB of each connected EP until the idle give-back. */
#define RX_INLINE    64u
#define RX_BUF_FIRST (4u << 10)
#define RX_BUF_MIN  (16u << 10)
#define RX_BUF_MAX  (128u << 10)	/* two of the largest FPDUs */
#define RX_ZC_MIN   (8u << 10)		/* payload worth reading in place */
#define RX_ZC_TAIL  64u			/* placed last, through the buffer */
/* In a run of large FPDUs (CRC off), the buffer reads stop at the next
 * FPDU's header, so its payload too goes in place rather than through
 * the buffer (a copy more); small FPDUs end the run. */
#define RX_PEEK     (IW_FPDU_LEN_FIELD + IW_UNTAGGED_HDR_LEN)

struct mpa_rx {
	uint8_t *buf;
	uint32_t cap, rd, wr;		/* unconsumed bytes: buf[rd..wr) */
	int ring;			/* buf is mirrored (iw_vring.h): rd <
					 * cap, wr <= rd + cap */
	/* A large FPDU whose payload is read in place (CRC off). */
	int zc;
	uint32_t zc_off;		/* payload offset of the next byte */
	uint32_t zc_left;		/* bytes still to read in place */
	uint32_t zc_tail;		/* then this many through the buffer */
	uint32_t zc_trailer;		/* then pad + CRC */
	int zc_refused;			/* the next FPDU's header is bad: it
					 * is reported once it is whole */
	int bulk;			/* the last FPDU was a large one */
	int full;			/* a read filled the buffer it had (the
					 * inline bytes or a page): the next
					 * is larger */
	uint8_t inl[RX_INLINE];		/* buf before there is a page */
};

static struct mpa_rx *mrx(const struct iwe_qp_priv *q)
{
	return q->llp_rx;
}

static void buf_free(struct mpa_rx *m)
{
	if (m->ring)
		iw_vring_unmap(m->buf, m->cap);
	else if (m->buf != m->inl)
		iw_slab_free(m->buf, m->cap);
	m->buf = NULL;
}

/* The buffer is m's own bytes, or none yet: nothing allocated. */
static int buf_inline(const struct mpa_rx *m)
{
	return m->cap <= RX_INLINE;
}

/* Room to read into, contiguous from buf + wr. */
static uint32_t buf_room(const struct mpa_rx *m)
{
	return (m->ring ? m->rd + m->cap : m->cap) - m->wr;
}

/* n bytes of the buffer are done with. */
static void buf_consume(struct mpa_rx *m, uint32_t n)
{
	m->rd += n;
	if (m->ring && m->rd >= m->cap) {
		m->rd -= m->cap;
		m->wr -= m->cap;
	}
}

int iwe_mpa_rx_attach(struct iwe_qp_priv *q)
{
	q->llp_rx = iw_slab_zalloc(sizeof(struct mpa_rx));
	return q->llp_rx ? 0 : ENOMEM;
}

void iwe_mpa_rx_detach(struct iwe_qp_priv *q)
{
	struct mpa_rx *m = mrx(q);

	if (m)
		buf_free(m);
	iw_slab_free(m, sizeof(*m));
	q->llp_rx = NULL;
}

/* The buffer goes back when nothing is in it (a quiet connection's 4
 * KiB, or the ring of up to 128 KiB a bulk stream grew); the next read
 * starts again with the inline bytes. */
int iwe_mpa_rx_trim(struct iwe_qp_priv *q)
{
	struct mpa_rx *m = mrx(q);

	IWE_QP_ASSERT_LOCKED(q);
	if (!m || !m->buf)
		return 0;
	if (m->zc || m->rd != m->wr)
		return 1;
	buf_free(m);
	m->cap = m->rd = m->wr = 0;
	m->ring = m->full = m->bulk = 0;
	return 0;
}

/* Room for an FPDU of need bytes (0: none pending) and some to read
 * ahead, moving the unconsumed bytes of a flat buffer to the front when
 * that helps (*moved counts them).  0 or ENOMEM. */
static int buf_make_room(struct mpa_rx *m, uint32_t need, uint64_t *moved)
{
	uint32_t have = m->wr - m->rd, cap = m->cap;
	uint32_t free_want = need > have ? need - have : 0;
	uint8_t *n;

	if (buf_inline(m))
		cap = m->full || need > RX_INLINE ? RX_BUF_FIRST : RX_INLINE;
	else if (m->full && cap < RX_BUF_MIN)
		cap = RX_BUF_MIN;
	if (free_want < RX_BUF_MIN / 4)
		free_want = RX_BUF_MIN / 4;
	/* Room for two large FPDUs: a read then ends inside the second
	 * rather than right after the first (half the recv calls of a 64
	 * KiB or 1 MiB Write stream: 13-20 against 22-41 per MB). */
	while (cap < (need > RX_BUF_MIN ? 2 * need : need) && cap < RX_BUF_MAX)
		cap *= 2;
	if (cap != m->cap) {
		int ring = cap >= RX_BUF_MIN;

		n = ring ? iw_vring_map(cap) : NULL;
		if (cap == RX_INLINE) {
			n = m->inl;	/* from none: nothing to move */
		} else if (!n) {
			ring = 0;
			n = iw_slab_zalloc(cap);
		}
		if (!n)
			return ENOMEM;
		if (have)
			memcpy(n, m->buf + m->rd, have);
		buf_free(m);
		m->buf = n;
		m->ring = ring;
		m->cap = cap;
		m->full = 0;
		m->rd = 0;
		m->wr = have;
		return 0;
	}
	if (m->ring)
		return 0;	/* never moves: buf_room is all free */
	if (m->rd && (m->rd == m->wr || m->cap - m->wr < free_want)) {
		memmove(m->buf, m->buf + m->rd, have);
		*moved += have;
		m->rd = 0;
		m->wr = have;
	}
	return 0;
}

int iwe_mpa_rx_prefill(struct iwe_qp_priv *q, const uint8_t *b, uint32_t n)
{
	struct mpa_rx *m = mrx(q);

	if (!n)
		return 0;
	if (buf_make_room(m, n, &q->stats.rx_moved) || buf_room(m) < n)
		return ENOMEM;
	memcpy(m->buf + m->wr, b, n);
	m->wr += n;
	return 0;
}

/* ------------------------------------------------------- delivery */

static uint16_t be16_at(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return iw_be16(v);
}

static int crc_ok(const uint8_t *fpdu, uint32_t flen)
{
	return iw_crc32c(0, fpdu, flen - IW_FPDU_CRC_LEN) ==
	       iw_fpdu_get_crc(fpdu + flen - IW_FPDU_CRC_LEN);
}

/* A whole FPDU is in the buffer: check it, then hand it to DDP. */
static int deliver(struct iwe_qp_priv *q, const uint8_t *f, uint32_t ulpdu)
{
	const uint8_t *u = f + IW_FPDU_LEN_FIELD;
	uint32_t hl;
	int err;

	if (q->crc && !crc_ok(f, iw_fpdu_len(ulpdu))) {
		q->stats.crc_errors++;
		return iwe_rx_llp_error(q, IW_TERM_LLP_CRC);
	}
	if (ulpdu < IW_TAGGED_HDR_LEN)
		return iwe_rx_short_segment(q, u, ulpdu);
	hl = iwe_rx_hdr_need(be16_at(u), ulpdu);
	err = iwe_rx_begin(q, u, hl, ulpdu);
	if (err)
		return err;
	if (iwe_rx_place(q, 0, u + hl, ulpdu - hl))
		return iwe_rx_local_error(q);
	return iwe_rx_end(q);
}

/* Without CRC, read a large payload in place.  The FPDU's header is in
 * the buffer; everything after it there is payload.  Returns 0 or the
 * error of the header. */
static int zc_start(struct iwe_qp_priv *q, struct mpa_rx *m, uint32_t ulpdu,
		    uint32_t hl)
{
	const uint8_t *u = m->buf + m->rd + IW_FPDU_LEN_FIELD;
	uint32_t pay = ulpdu - hl;
	uint32_t have = m->wr - m->rd - IW_FPDU_LEN_FIELD - hl;
	int err = iwe_rx_begin(q, u, hl, ulpdu);

	if (err)
		return err;
	if (iwe_rx_place(q, 0, u + hl, have))
		return iwe_rx_local_error(q);
	m->zc = 1;
	m->bulk = 1;
	m->zc_off = have;
	m->zc_tail = RX_ZC_TAIL;
	m->zc_left = pay - have - RX_ZC_TAIL;
	m->zc_trailer = iw_fpdu_pad(ulpdu) + IW_FPDU_CRC_LEN;
	m->rd = m->wr = 0;
	return 0;
}

/* The in-place part is read; place the tail once it is in the buffer. */
static int zc_finish(struct iwe_qp_priv *q, struct mpa_rx *m)
{
	if (m->wr - m->rd < m->zc_tail + m->zc_trailer)
		return EAGAIN;
	iw_place_fence();
	if (iwe_rx_place(q, m->zc_off, m->buf + m->rd, m->zc_tail))
		return iwe_rx_local_error(q);
	buf_consume(m, m->zc_tail + m->zc_trailer);
	m->zc = 0;
	return iwe_rx_end(q);
}

/* Deliver every whole FPDU in the buffer.  Returns 0 (more bytes
 * needed, or held) or an error; *want: buffer bytes the next FPDU
 * needs. */
static int parse(struct iwe_qp_priv *q, struct mpa_rx *m, uint32_t *want)
{
	int err;

	*want = 0;
	while (iwe_rx_may_take(q) || m->zc) {
		uint32_t avail = m->wr - m->rd, ulpdu, flen, hl;
		const uint8_t *f;
		uint16_t ctrl;

		if (m->zc) {
			if (m->zc_left)
				return 0;
			err = zc_finish(q, m);
			if (err)
				return err == EAGAIN ? 0 : err;
			continue;
		}
		if (avail < IW_FPDU_LEN_FIELD)
			return 0;
		f = m->buf + m->rd;
		ulpdu = be16_at(f);
		flen = iw_fpdu_len(ulpdu);
		if (avail >= flen) {
			m->zc_refused = 0;
			m->bulk = ulpdu > RX_ZC_MIN;
			err = deliver(q, f, ulpdu);
			if (err == IWE_RX_NOT_READY)
				return 0;	/* it stays, and all after it */
			buf_consume(m, flen);
			if (err)
				return err;
			continue;
		}
		*want = flen;
		/* (Not from the inline bytes: the FPDU's need moves it to a
		 * page first.) */
		if (q->crc || buf_inline(m) || ulpdu < IW_TAGGED_HDR_LEN ||
		    avail < IW_FPDU_LEN_FIELD + 2)
			return 0;
		ctrl = be16_at(f + IW_FPDU_LEN_FIELD);
		hl = iwe_rx_hdr_need(ctrl, ulpdu);
		/* Only payload may still be missing, and plenty of it.  A
		 * bad header waits for its whole FPDU, as with CRC, so an
		 * error never depends on how the stream was cut -- and a
		 * Send on a QP with an SRQ is not read in place: its header
		 * check takes a receive from the SRQ, which a refused look
		 * could not give back (a stream that then ended would flush
		 * a receive that the same bytes in one piece leave alone). */
		if (!m->zc_refused && avail >= IW_FPDU_LEN_FIELD + hl &&
		    (iw_ctrl_tagged(ctrl) || !q->srq) &&
		    avail < IW_FPDU_LEN_FIELD + ulpdu &&
		    IW_FPDU_LEN_FIELD + ulpdu - avail > RX_ZC_MIN + RX_ZC_TAIL) {
			err = zc_start(q, m, ulpdu, hl);
			if (err == IWE_RX_NOT_READY)
				return 0;	/* nothing of it taken */
			if (err != EPROTO) {
				*want = 0;
				return err;
			}
			iwe_rx_forget_error(q);
			m->zc_refused = 1;
		}
		return 0;
	}
	return 0;
}

/* ---------------------------------------------------------- reading */

/* The in-place payload range as iovecs. */
static int zc_iov(struct iwe_qp_priv *q, struct mpa_rx *m, struct iovec *iov)
{
	uint32_t off = m->zc_off, left = m->zc_left;
	int k = 0;

	for (int i = 0; i < q->rx.nplace && left; i++) {
		uint32_t l = (uint32_t)q->rx.place[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > left)
			l = left;
		iov[k].iov_base = (char *)q->rx.place[i].iov_base + off;
		iov[k].iov_len = l;
		k++;
		left -= l;
		off = 0;
	}
	return k;
}

/* One recvmsg.  Returns bytes read, 0 for EAGAIN, or -errno (-ENODATA:
 * the peer closed); *asked: what was asked for. */
static ssize_t fill(struct iwe_qp_priv *q, struct mpa_rx *m, size_t *asked)
{
	struct iovec iov[IWE_MAX_SGE + 1];
	struct msghdr msg = { .msg_iov = iov };
	size_t pay = 0, room = buf_room(m);
	ssize_t n;
	int k = 0;

	if (m->zc) {
		k = zc_iov(q, m, iov);
		pay = m->zc_left;
		if (room > m->zc_tail + m->zc_trailer + RX_PEEK)
			room = m->zc_tail + m->zc_trailer + RX_PEEK;
	} else if (m->bulk && !q->crc && m->wr - m->rd < RX_PEEK) {
		room = RX_PEEK - (m->wr - m->rd);
	}
	iov[k].iov_base = m->buf + m->wr;
	iov[k].iov_len = room;
	k++;
	msg.msg_iovlen = (size_t)k;
	*asked = pay + room;
	do {
		/* One piece by recv(): a poller calls this between
		 * messages, and recvmsg's iovec import cost 0.44 us a call
		 * against 0.32 here. */
		n = k == 1 ? recv(q->fd, iov[0].iov_base, iov[0].iov_len,
				  MSG_DONTWAIT) :
			recvmsg(q->fd, &msg, MSG_DONTWAIT);
		q->stats.rx_syscalls++;
	} while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ENODATA;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	q->rx_reads++;
	q->rx_data++;
	/* A connection starts with its inline bytes, then a page: most
	 * stay idle or exchange a few small messages (a connected idle EP
	 * cost 76 KiB of heap with 16 KiB here); one that fills the page
	 * reads 16 KiB at a time from then on. */
	if ((size_t)n == pay + room && m->cap < RX_BUF_MIN)
		m->full = 1;
	if (pay) {
		size_t p = (size_t)n < pay ? (size_t)n : pay;

		m->zc_off += (uint32_t)p;
		m->zc_left -= (uint32_t)p;
		m->wr += (uint32_t)((size_t)n - p);
	} else {
		m->wr += (uint32_t)n;
	}
	return n;
}

/* The stream ended: between FPDUs it is the peer's close; inside one,
 * the stream was cut. */
static int stream_lost(struct iwe_qp_priv *q, const struct mpa_rx *m,
		       ssize_t n)
{
	if (n == -EFAULT)	/* the in-place destination is gone */
		return iwe_rx_local_error(q);
	if (n != -ENODATA)
		return (int)-n;
	return !m->zc && m->rd == m->wr ? ENOTCONN : ECONNABORTED;
}

int iwe_mpa_rx_progress(struct iwe_qp_priv *q)
{
	struct mpa_rx *m = mrx(q);
	uint32_t want;
	size_t asked;
	ssize_t n;
	int err;

	IWE_QP_ASSERT_LOCKED(q);
	for (;;) {
		err = parse(q, m, &want);
		if (err)
			return err;
		if (!iwe_rx_may_take(q) && !m->zc) {
			q->rx_left = 1;	/* bytes may stay in the socket */
			return 0;
		}
		if (buf_inline(m))
			iwe_qp_idle_hold(q);
		if (buf_make_room(m, want, &q->stats.rx_moved))
			return ENOMEM;
		n = fill(q, m, &asked);
		if (n == 0)
			return 0;
		if (n < 0) {
			/* Whole FPDUs read before the end still count. */
			err = parse(q, m, &want);
			return err ? err : stream_lost(q, m, n);
		}
		if ((size_t)n < asked && !atomic_load(&q->rx_hup)) {
			/* The socket is drained: no recv that could only say
			 * EAGAIN (epoll, or the next poll, reports more; a
			 * FIN already there was flagged in rx_hup).  Bytes
			 * the hold keeps in the buffer are left for its
			 * release. */
			err = parse(q, m, &want);
			if (!iwe_rx_may_take(q) && m->rd != m->wr)
				q->rx_left = 1;
			return err;
		}
	}
}
