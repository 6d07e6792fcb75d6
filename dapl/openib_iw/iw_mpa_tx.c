/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA over TCP, transmit side (RFC 5044): DDP segments become FPDUs,
 *   ULPDU length (BE16) | DDP/RDMAP header | payload | pad | CRC32c
 * and a batch of them -- of one message or of several posted back to
 * back -- goes out with one sendmsg.
 *
 * Payload placement in the batch:
 *  - small payloads (up to MPA_INLINE bytes) are copied next to their
 *    header, so a small FPDU is one contiguous iovec entry;
 *  - without CRC, larger payloads are sent straight from registered
 *    memory (zero copy; a consumer writing to a buffer in flight sends
 *    torn data, as with hardware);
 *  - with CRC, larger payloads are copied to a staging buffer with the CRC
 *    computed over the copy (iw_crc32c_copy: one pass, in cache), so the
 *    CRC always matches the bytes on the wire even if the consumer
 *    scribbles over its buffer: the peer never sees a false CRC error.
 * A short write leaves the batch where the socket stopped; the next call
 * resumes there.  A segment is done once its last byte is in the socket.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>

#include "iw_crc32c.h"
#include "iw_guard.h"
#include "iw_llp.h"
#include "iw_qp.h"

#define MPA_TX_BATCH       16		/* FPDUs per sendmsg */
/* A batch is filled while under this.  16 FPDUs of 64 KiB: a 1 MiB Write
 * goes in one sendmsg.  Against 256 KiB (5 alternating runs, 2 CPUs):
 * CRC off 1 MiB 4.82 GB/s median, 4.65 before. */
#define MPA_TX_BATCH_BYTES (1u << 20)
/* CRC staging.  A QP starts with room for the largest FPDU's payload and
 * doubles the room, up to a whole batch, each time a batch ends for want
 * of it: a QP that streams large messages ends with 1 MiB, one that
 * sends small and mid-size ones keeps 64 KiB.  Fewer, larger sendmsg
 * calls are what makes CRC-on streams fast here (5 alternating runs of
 * 1 MiB / 4 MiB Writes: 64 KiB staged 3.61 / 3.61 GB/s, 256 KiB 4.05 /
 * 3.85, 1 MiB 4.12 / 4.43). */
#define MPA_TX_STAGE_MIN   (64u << 10)
#define MPA_TX_STAGE_MAX   MPA_TX_BATCH_BYTES
_Static_assert(MPA_TX_STAGE_MIN >= IW_FPDU_MAX_ULPDU,
	       "the largest payload fits the smallest stage");
#define MPA_INLINE         256		/* payload copied beside its header */
#define MPA_TRAILER        (3 + IW_FPDU_CRC_LEN)	/* pad + CRC */
#define MPA_IOV_PER_FPDU   (IWE_MAX_SGE + 3)
#define MPA_IOV_MAX        (MPA_TX_BATCH * MPA_IOV_PER_FPDU)

struct mpa_fpdu {
	/* Length field, header, inline payload, pad and CRC. */
	uint8_t head[IW_FPDU_LEN_FIELD + IWE_SEG_HDR_MAX + MPA_INLINE +
		     MPA_TRAILER];
	uint8_t trailer[MPA_TRAILER];	/* pad + CRC of a large payload */
	size_t end;			/* batch offset just past it */
};

/* A batch: what is on its way to the socket.  Taken when a batch starts
 * and given back once the socket took all of it (batch_give), so an idle
 * connection holds none of its 10 KiB, nor the CRC stage (64 KiB to 1
 * MiB once a message was staged). */
struct mpa_batch {
	struct mpa_fpdu f[MPA_TX_BATCH];
	int nf, nf_done;		/* FPDUs in the batch, reported done */
	struct iovec iov[MPA_IOV_MAX];
	int iovcnt, iov_first;		/* iov[iov_first..iovcnt) unwritten */
	size_t len, sent;		/* batch bytes, bytes written */
	int more;			/* the last FPDU's message goes on */
	char *stage;			/* CRC staging, allocated at its
					 * first use */
	size_t stage_cap, stage_used;
	int stage_short;		/* a batch ended for want of room */
	char *bounce;			/* a detached FPDU's unsent rest */
};

/* What a connection holds between batches. */
struct mpa_tx {
	struct mpa_batch *b;		/* the batch under way, or NULL */
	int fault;			/* EFAULT: a payload was not mapped;
					 * ENOMEM: no batch or staging buffer */
	int full;			/* the socket said EAGAIN last */
};

static struct mpa_tx *mtx(const struct iwe_qp_priv *q)
{
	return q->llp_tx;
}

static void batch_reset(struct mpa_batch *b)
{
	b->nf = b->nf_done = 0;
	b->iovcnt = b->iov_first = 0;
	b->len = b->sent = 0;
	b->stage_used = 0;
	free(b->bounce);
	b->bounce = NULL;
}

static void iov_push(struct mpa_batch *b, void *p, size_t len)
{
	b->iov[b->iovcnt].iov_base = p;
	b->iov[b->iovcnt].iov_len = len;
	b->iovcnt++;
}

/* ----------------------------------------------------- taking a batch */

/* Spare batches wait in the device's slots (iwe_device.tx_spare): the
 * next connection to send takes one, stage and all; a stream takes back
 * the one it gave at the end of its last batch, so nothing is allocated
 * per message. */
static void batch_free(struct mpa_batch *b)
{
	batch_reset(b);
	free(b->stage);
	free(b);
}

static struct mpa_batch *batch_take(struct iwe_qp_priv *q)
{
	struct iwe_device *dev = q->pub.pd->dev;
	struct mpa_batch *b;

	for (int i = 0; i < IWE_TX_SPARES; i++)
		if ((b = atomic_exchange(&dev->tx_spare[i], NULL)))
			return b;
	/* Not calloc: the FPDU and iovec arrays are written before they
	 * are read, and small batches never touch most of their pages. */
	b = malloc(sizeof(*b));
	if (b) {
		b->stage = b->bounce = NULL;
		b->stage_cap = 0;
		b->stage_short = 0;
		b->more = 0;
		batch_reset(b);
	}
	return b;
}

/* The socket took the batch (or it was dropped): the connection holds
 * none now. */
static void batch_give(struct iwe_qp_priv *q, struct mpa_tx *t)
{
	struct iwe_device *dev = q->pub.pd->dev;
	struct mpa_batch *b = t->b;

	t->b = NULL;
	batch_reset(b);
	b->more = 0;
	for (int i = 0; i < IWE_TX_SPARES; i++) {
		void *none = NULL;

		if (atomic_compare_exchange_strong(&dev->tx_spare[i], &none,
						   b))
			return;
	}
	batch_free(b);
}

void iwe_mpa_tx_spares_free(struct iwe_device *dev)
{
	for (int i = 0; i < IWE_TX_SPARES; i++) {
		struct mpa_batch *b = atomic_exchange(&dev->tx_spare[i], NULL);

		if (b)
			batch_free(b);
	}
}

/* ---------------------------------------------------------- batching */

static size_t stage_room(const struct mpa_batch *b)
{
	return b->stage ? b->stage_cap : MPA_TX_STAGE_MIN;
}

static int mpa_tx_room(const struct iwe_qp_priv *q, uint32_t pay_len,
		       int npay)
{
	struct mpa_batch *b = mtx(q)->b;

	if (!b)
		return 1;	/* a batch starts: the first FPDU fits */
	if (b->bounce || b->nf == MPA_TX_BATCH ||
	    b->iovcnt + npay + 2 > MPA_IOV_MAX)
		return 0;
	/* Under the limit, one more FPDU fits: a 1 MiB Write of 32 KiB
	 * FPDUs goes in 4 sendmsg, not 5 (0.87-0.92x the old engine's rate
	 * with 5, 0.95-1.10x with 4). */
	if (b->nf && b->len >= MPA_TX_BATCH_BYTES)
		return 0;
	if (q->crc && pay_len > MPA_INLINE &&
	    b->stage_used + pay_len > stage_room(b)) {
		b->stage_short = 1;	/* the next batch gets more */
		return 0;
	}
	return 1;
}

/* Room in the stage for the batch being started: allocated at first, and
 * doubled when the last batch ran out of it.  0, or ENOMEM. */
static int stage_ready(struct mpa_batch *b)
{
	size_t want = stage_room(b);
	char *p;

	if (b->stage && b->stage_short && want < MPA_TX_STAGE_MAX)
		want *= 2;
	b->stage_short = 0;
	if (b->stage && want == b->stage_cap)
		return 0;
	p = malloc(want);
	if (!p)
		return b->stage ? 0 : ENOMEM;	/* keep the one we have */
	free(b->stage);
	b->stage = p;
	b->stage_cap = want;
	return 0;
}

/* Copy the payload pieces to dst; with crc, chain the CRC over the copy.
 * 0, or EFAULT when the consumer unmapped them. */
static int copy_payload(const struct iwe_llp_seg *s, uint8_t *dst, int crc,
			uint32_t *c)
{
	for (int i = 0; i < s->npay; i++) {
		if (iwe_copy_guarded(dst, s->pay[i].iov_base,
				     s->pay[i].iov_len,
				     crc ? IWE_COPY_CRC : IWE_COPY_PLAIN, c))
			return EFAULT;
		dst += s->pay[i].iov_len;
	}
	return 0;
}

static void mpa_tx_add(struct iwe_qp_priv *q, const struct iwe_llp_seg *s)
{
	struct mpa_tx *t = mtx(q);
	struct mpa_batch *b;
	struct mpa_fpdu *f;
	uint32_t ulpdu = s->hdr_len + s->pay_len;
	unsigned pad = iw_fpdu_pad(ulpdu);
	size_t hbytes = IW_FPDU_LEN_FIELD + s->hdr_len;
	uint16_t len_be = iw_be16((uint16_t)ulpdu);
	uint8_t *trl;
	uint32_t crc = 0;
	int iov_mark, fault = EFAULT;

	if (t->fault)
		return;		/* the QP fails at the next write */
	if (!t->b && !(t->b = batch_take(q))) {
		t->fault = ENOMEM;
		return;
	}
	b = t->b;
	f = &b->f[b->nf];
	iov_mark = b->iovcnt;
	memcpy(f->head, &len_be, IW_FPDU_LEN_FIELD);
	memcpy(f->head + IW_FPDU_LEN_FIELD, s->hdr, s->hdr_len);
	if (s->pay_len <= MPA_INLINE) {
		/* One contiguous FPDU. */
		if (copy_payload(s, f->head + hbytes, 0, &crc))
			goto fault;
		trl = f->head + hbytes + s->pay_len;
		memset(trl, 0, pad);
		if (q->crc)
			crc = iw_crc32c(0, f->head, hbytes + s->pay_len + pad);
		iw_fpdu_put_crc(trl + pad, crc);
		iov_push(b, f->head, hbytes + s->pay_len + pad +
			 IW_FPDU_CRC_LEN);
	} else {
		iov_push(b, f->head, hbytes);
		if (q->crc) {
			char *dst;

			if (!b->stage_used && stage_ready(b)) {
				fault = ENOMEM;
				goto fault;
			}
			dst = b->stage + b->stage_used;
			crc = iw_crc32c(0, f->head, hbytes);
			if (copy_payload(s, (uint8_t *)dst, 1, &crc))
				goto fault;
			iov_push(b, dst, s->pay_len);
			b->stage_used += s->pay_len;
		} else {
			for (int i = 0; i < s->npay; i++)
				iov_push(b, s->pay[i].iov_base,
					 s->pay[i].iov_len);
		}
		memset(f->trailer, 0, pad);
		if (q->crc)
			crc = iw_crc32c(crc, f->trailer, pad);
		iw_fpdu_put_crc(f->trailer + pad, crc);
		iov_push(b, f->trailer, pad + IW_FPDU_CRC_LEN);
	}
	b->nf++;
	b->len += iw_fpdu_len(ulpdu);
	f->end = b->len;
	b->more = s->more;
	return;
fault:
	/* Not sent: the FPDUs before it go, then the QP fails. */
	b->iovcnt = iov_mark;
	t->fault = fault;
}

/* ---------------------------------------------------------- writing */

/* The socket took n more bytes: advance the iovec in place. */
static void iov_advance(struct mpa_batch *b, size_t n)
{
	b->sent += n;
	while (n && b->iov_first < b->iovcnt) {
		struct iovec *v = &b->iov[b->iov_first];

		if (n < v->iov_len) {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= n;
			return;
		}
		n -= v->iov_len;
		b->iov_first++;
	}
}

static uint32_t count_done(struct mpa_batch *b)
{
	uint32_t n = 0;

	while (b->nf_done < b->nf && b->f[b->nf_done].end <= b->sent) {
		b->nf_done++;
		n++;
	}
	return n;
}

/* After an EAGAIN, write again only once the socket has room by the
 * kernel's measure -- what makes it writable for poll() and wakes the
 * progress thread's watch (TCP: a third of its buffer free).  Every
 * drive runs the QP's transmit, and a consumer polling while the socket
 * was full wrote into the few KiB the peer had just read: Debian's dtest
 * -w -p (both sides streaming 4 MiB Writes) made up to 330,000 sendmsg a
 * side where about 5,000 carry it, at half the rate.  An error shows as
 * room: the write that follows reports it. */
static int mpa_socket_room(struct iwe_qp_priv *q, struct mpa_tx *t)
{
	struct pollfd p = { .fd = q->fd, .events = POLLOUT };

	if (!t->full)
		return 1;
	if (poll(&p, 1, 0) == 0)
		return 0;
	t->full = 0;
	return 1;
}

static int mpa_tx_write(struct iwe_qp_priv *q, uint32_t *done)
{
	struct mpa_tx *t = mtx(q);
	struct mpa_batch *b = t->b;
	int flags, err = 0;

	*done = 0;
	if (!b)
		goto out;
	if (!mpa_socket_room(q, t))
		return EAGAIN;
	/* More segments of this message follow at once: let TCP fill its
	 * segments across the calls. */
	flags = MSG_DONTWAIT | MSG_NOSIGNAL | (b->more ? MSG_MORE : 0);
	while (b->sent < b->len) {
		struct msghdr m = {
			.msg_iov = b->iov + b->iov_first,
			.msg_iovlen = (size_t)(b->iovcnt - b->iov_first),
		};
		/* One piece (a lone small FPDU) goes by send(), which
		 * skips the kernel's iovec import: a loop of 8-byte
		 * send+recv took 6.57 us a pair here, sendmsg+recvmsg
		 * 6.90. */
		ssize_t n = m.msg_iovlen == 1 ?
			send(q->fd, m.msg_iov->iov_base, m.msg_iov->iov_len,
			     flags) :
			sendmsg(q->fd, &m, flags);

		q->stats.tx_syscalls++;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno == EWOULDBLOCK ? EAGAIN : errno;
			q->stats.tx_blocked += err == EAGAIN;
			t->full = err == EAGAIN;
			break;
		}
		iov_advance(b, (size_t)n);
	}
	*done = count_done(b);
	if (b->sent == b->len)
		batch_give(q, t);
out:
	if (!err && t->fault) {
		err = t->fault;
		t->fault = 0;	/* said once: a Terminate may follow */
	}
	return err;
}

static int mpa_tx_blocked(const struct iwe_qp_priv *q)
{
	const struct mpa_tx *t = mtx(q);

	return t && t->b && t->b->sent < t->b->len;
}

/* A partly written FPDU must still be finished (the peer's framing
 * depends on it), but its payload may live in memory the consumer gets
 * back with the flush: copy its unsent rest aside.  The FPDUs not
 * started yet are dropped. */
static uint32_t mpa_tx_detach(struct iwe_qp_priv *q)
{
	struct mpa_tx *t = mtx(q);
	struct mpa_batch *b = t ? t->b : NULL;
	int i = b ? b->nf_done : 0;	/* oldest FPDU not fully written */
	size_t start, rest, off = 0;
	char *p;

	if (!b || b->bounce)
		return b && b->bounce ? 1 : 0;
	start = i ? b->f[i - 1].end : 0;
	if (i == b->nf || b->sent == start) {
		batch_give(q, t);	/* nothing started */
		return 0;
	}
	rest = b->f[i].end - b->sent;
	p = malloc(rest);
	if (!p) {
		/* Then the stream cannot be kept framed: drop it and let
		 * the peer see a bad FPDU. */
		batch_give(q, t);
		return 0;
	}
	for (i = b->iov_first; i < b->iovcnt && off < rest; i++) {
		size_t l = b->iov[i].iov_len;

		if (l > rest - off)
			l = rest - off;
		if (iwe_copy_guarded(p + off, b->iov[i].iov_base, l,
				     IWE_COPY_PLAIN, NULL)) {
			/* The consumer unmapped it: the FPDU is lost. */
			free(p);
			batch_give(q, t);
			return 0;
		}
		off += l;
	}
	batch_reset(b);
	b->bounce = p;
	b->nf = 1;
	b->f[0].end = rest;
	iov_push(b, p, rest);
	b->len = rest;
	return 1;
}

/* ------------------------------------------------------ attachment */

static uint32_t mpa_max_ulpdu(const struct iwe_qp_priv *q)
{
	return q->mulpdu;
}

static uint32_t mpa_max_inflight(const struct iwe_qp_priv *q)
{
	(void)q;
	return MPA_TX_BATCH;
}

static int mpa_attach(struct iwe_qp_priv *q)
{
	struct mpa_tx *t = iw_slab_zalloc(sizeof(*t));

	if (!t || iwe_mpa_rx_attach(q)) {
		iw_slab_free(t, sizeof(*t));
		return ENOMEM;
	}
	q->llp_tx = t;
	return 0;
}

static void mpa_detach(struct iwe_qp_priv *q)
{
	struct mpa_tx *t = mtx(q);

	if (t) {
		if (t->b)
			batch_give(q, t);
		iw_slab_free(t, sizeof(*t));
	}
	q->llp_tx = NULL;
	iwe_mpa_rx_detach(q);
}

static int mpa_attach_with(struct iwe_qp_priv *q, const void *start)
{
	const struct iwe_mpa_start *s = start;
	int err = mpa_attach(q);

	if (!err && iwe_mpa_rx_prefill(q, s->early, s->len)) {
		mpa_detach(q);
		err = ENOMEM;
	}
	return err;
}

const struct iwe_llp_ops iwe_llp_mpa = {
	.name = "MPA/TCP",
	.attach = mpa_attach,
	.attach_with = mpa_attach_with,
	.detach = mpa_detach,
	.max_ulpdu = mpa_max_ulpdu,
	.max_inflight = mpa_max_inflight,
	.tx_room = mpa_tx_room,
	.tx_add = mpa_tx_add,
	.tx_write = mpa_tx_write,
	.tx_blocked = mpa_tx_blocked,
	.tx_detach = mpa_tx_detach,
	.rx_progress = iwe_mpa_rx_progress,
	.trim = iwe_mpa_rx_trim,
};
