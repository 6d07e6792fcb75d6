/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* TRP over UDP, receive side (iw_trp.h).
 *
 * Datagrams are read in batches (recvmmsg): with GRO into a per-thread
 * area, whose in-sequence packets go to DDP from there (the others are
 * copied into packet buffers), else straight into packet buffers.
 * Each one's acknowledgement goes to the transmit side at once; a pure
 * ack's selective-ack blocks too.  A sequenced packet is kept in the
 * reorder buffer, a slot per PSN from the oldest undelivered one, bounded
 * by the credits we grant (so a packet beyond them cannot come from a
 * peer that keeps to them, and is dropped); a packet already received --
 * below the next expected PSN, or in an occupied slot -- is a duplicate,
 * dropped and answered with an ack.  Packets go to DDP strictly in PSN
 * order (RDMAP's ordering needs no more), each datagram's body one whole
 * segment through iwe_rx_begin / iwe_rx_place / iwe_rx_end, while the
 * QP's receive hold allows.  UDP's checksum covers the datagram: there is
 * no CRC.
 *
 * One exception to the order: a fatal Terminate that arrives early is
 * acted on at once (the peer sends nothing after it, so the gap in front
 * of it may never be filled).  Every batch is acknowledged with one pure
 * ack unless packets going out carry the acknowledgement already -- or,
 * with the delayed ack on, unless it is a lone packet that ended a Send:
 * its ack is held back a little (ack_hold), as the answer would carry
 * it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iw_trp.h"

/* The first socket with GRO on in the system turns a kernel static key
 * on and closing the last one turns it off: each is a code patch with a
 * call on every CPU, about a millisecond on a VM.  A process whose TRP
 * connections come and go one at a time paid it twice per connection
 * (bench/iwcm over udp on loopback: 257-274 setups/s, 724-1736 held). */
int trp_gro_key_hold(void)
{
	int one = 1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int trp_rx_attach(struct trp *t, int fd, uint32_t rx_psn)
{
	int one = 1;

	/* GRO (Linux 5.0): a run of equal datagrams -- a GSO send over
	 * loopback or a veth, or what a NIC coalesced -- comes as one,
	 * instead of one trip through the stack each. */
	t->gro = fd >= 0 &&
		 !setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	t->rx = iw_slab_zalloc(t->rx_cap * sizeof(*t->rx));
	t->rx_len = iw_slab_zalloc(t->rx_cap * sizeof(*t->rx_len));
	t->rcv_dlv = t->rcv_nxt = t->rcv_high = rx_psn;
	if (trp_bufs_init(&t->rx_pool, t->rx_cap + TRP_BATCH))
		return ENOMEM;
	return t->rx && t->rx_len ? 0 : ENOMEM;
}

void trp_rx_detach(struct trp *t, int fd)
{
	int zero = 0;

	/* The socket may go back to its owner (SSP): as it came. */
	if (t->gro && fd >= 0)
		setsockopt(fd, SOL_UDP, UDP_GRO, &zero, sizeof(zero));
	t->gro = 0;
	for (uint32_t i = 0; t->rx && i < t->rx_cap; i++)
		free(t->rx[i]);
	trp_bufs_free(&t->rx_pool);
	iw_slab_free(t->rx, t->rx_cap * sizeof(*t->rx));
	iw_slab_free(t->rx_len, t->rx_cap * sizeof(*t->rx_len));
	t->rx = NULL;
	t->rx_len = NULL;
}

static uint8_t *pool_get(struct trp *t)
{
	return trp_bufs_get(&t->rx_pool, t->pkt_max);
}

static void pool_put(struct trp *t, uint8_t *b)
{
	trp_bufs_put(&t->rx_pool, b);
}

static uint32_t rx_index(const struct trp *t, uint32_t psn)
{
	return psn & (t->rx_cap - 1);
}

/* --------------------------------------------------------- delivery */

static uint16_t be16_at(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return iw_be16(v);
}

/* The rest of a Write that failed with a non-fatal error is dropped:
 * its segments to the same STag, up to the one with L. */
static int skipped(struct trp *t, uint16_t ctrl, const uint8_t *u)
{
	struct iw_tagged_hdr h;

	if (!t->skip_write)
		return 0;
	memcpy(&h, u, sizeof(h));
	if (!iw_ctrl_tagged(ctrl) || iw_ctrl_opcode(ctrl) != IW_OP_WRITE ||
	    iw_be32(h.stag_be) != t->skip_stag) {
		t->skip_write = 0;
		return 0;
	}
	if (iw_ctrl_last(ctrl))
		t->skip_write = 0;
	return 1;
}

/* One DDP segment (the body of a data packet) to RDMAP/DDP. */
static int deliver_body(struct trp *t, struct iwe_qp_priv *q,
			const uint8_t *u, uint32_t len)
{
	uint16_t ctrl;
	uint32_t hl;
	int err;

	if (len < IW_TAGGED_HDR_LEN)
		return iwe_rx_short_segment(q, u, len);
	ctrl = be16_at(u);
	if (skipped(t, ctrl, u))
		return 0;
	t->term_in_quiet = 0;
	if (trp_term_incoming(u, len, &t->term_in_quiet) < 0)
		t->term_in_quiet = 0;
	hl = iwe_rx_hdr_need(ctrl, len);
	err = iwe_rx_begin(q, u, hl, len);
	if (err)
		return err;
	iwe_rx_place(q, 0, u + hl, len - hl);
	return iwe_rx_end(q);
}

/* The packet at rcv_dlv - 1, in sequence, to DDP. */
static int deliver_packet(struct trp *t, struct iwe_qp_priv *q,
			  const uint8_t *b, uint32_t len)
{
	struct iw_trp_fields f;
	int err = 0;

	iw_trp_get(b, &f);
	t->rcv_mid_msg = !(f.flags & (IW_TRP_F | IW_TRP_I)) &&
		len >= IW_TRP_HDR_LEN + 2 &&
		!iw_ctrl_last(be16_at(b + IW_TRP_HDR_LEN));
	if (f.flags & (IW_TRP_F | IW_TRP_I))
		t->ack_urgent = 1;
	if (f.flags & IW_TRP_F)
		err = ENOTCONN;		/* the peer's orderly end */
	else if (!(f.flags & IW_TRP_I))	/* I: after the exchange, ignored */
		err = deliver_body(t, q, b + IW_TRP_HDR_LEN,
				   len - IW_TRP_HDR_LEN);
	if (err == IWE_RX_NOT_READY)
		return err;	/* delivered again once a receive is posted */
	/* After the body: a Terminate in it fails its work first. */
	if (t->ngates)
		trp_done_release(t);
	return err;
}

/* Hand the in-order packets to DDP while the receive hold allows. */
static int deliver(struct trp *t, struct iwe_qp_priv *q)
{
	uint32_t before = trp_credits(t);
	int err = 0, n = 0;

	while (!err && t->rcv_dlv != t->rcv_nxt && iwe_rx_may_take(q)) {
		uint32_t i = rx_index(t, t->rcv_dlv);
		uint8_t *b = t->rx[i];

		t->rx[i] = NULL;
		t->rcv_dlv++;
		n++;
		err = deliver_packet(t, q, b, t->rx_len[i]);
		if (err == IWE_RX_NOT_READY) {
			/* A Send with no receive yet: it stays first in line,
			 * acknowledged (it is here) but holding its slot, so
			 * the credits shrink as the peer goes on. */
			t->rx[i] = b;
			t->rcv_dlv--;
			n--;
			err = 0;
			break;
		}
		pool_put(t, b);
	}
	/* Credits reopened after a hold: tell the peer. */
	if (n && before < t->rx_cap / 2)
		t->ack_due = t->ack_urgent = 1;
	return err;
}

/* ----------------------------------------------------------- packets */

/* rcv_nxt past the packets now in sequence; nxt: where it was. */
static void advance(struct trp *t, uint32_t nxt)
{
	while (t->rcv_nxt - t->rcv_dlv < t->rx_cap &&
	       t->rx[rx_index(t, t->rcv_nxt)])
		t->rcv_nxt++;
	t->rcv_unacked += t->rcv_nxt - nxt;
	if (iw_psn_lt(t->rcv_high, t->rcv_nxt))
		t->rcv_high = t->rcv_nxt;	/* never far behind */
}

/* A sequenced packet: keep it (returns 1: b is the slot's now) or drop
 * a duplicate or one beyond the window. */
static int rx_sequenced(struct trp *t, struct iwe_qp_priv *q, uint8_t *b,
			uint32_t len, uint32_t psn, int *err)
{
	uint32_t i = rx_index(t, psn), quiet, nxt = t->rcv_nxt;

	t->ack_due = 1;
	if (iw_psn_lt(psn, t->rcv_nxt) || t->rx[i]) {
		t->st.dup_rcvd++;
		t->ack_urgent = 1;
		return 0;
	}
	if (psn - t->rcv_dlv >= t->rx_cap) {
		t->ack_urgent = 1;
		return 0;	/* beyond the credits we granted */
	}
	t->rx[i] = b;
	t->rx_len[i] = len;
	if (psn != t->rcv_nxt) {
		t->ack_urgent = 1;	/* selective acks tell of a hole */
		t->st.ooo_rcvd++;
		if (!iw_psn_lt(psn, t->rcv_high))
			t->rcv_high = psn + 1;
		if (!(b[8] & 0xF0) && len > IW_TRP_HDR_LEN &&
		    trp_term_incoming(b + IW_TRP_HDR_LEN, len - IW_TRP_HDR_LEN,
				      &quiet) == 1) {
			/* A fatal Terminate ahead of a gap: act now. */
			*err = deliver_body(t, q, b + IW_TRP_HDR_LEN,
					    len - IW_TRP_HDR_LEN);
			return 1;
		}
	}
	advance(t, nxt);
	return 1;
}

/* A sequenced packet read with GRO, at d in the GRO area.  The next one
 * in sequence with nothing waiting ahead of it goes to DDP from there
 * (bulk data then crosses memory once, from the area into place); any
 * other is copied into a packet buffer and kept or dropped as usual. */
static void rx_from_area(struct trp *t, struct iwe_qp_priv *q,
			 const uint8_t *d, uint32_t len, uint32_t psn,
			 int *err)
{
	uint32_t nxt = t->rcv_nxt;
	uint8_t *b;

	if (psn == nxt && t->rcv_dlv == nxt && iwe_rx_may_take(q)) {
		t->ack_due = 1;
		t->rcv_nxt++;
		t->rcv_dlv++;
		advance(t, nxt);
		*err = deliver_packet(t, q, d, len);
		if (*err != IWE_RX_NOT_READY)
			return;
		/* No receive for this Send yet: keep it, first in line. */
		*err = 0;
		t->rcv_dlv--;
		b = pool_get(t);
		if (!b) {
			*err = ENOMEM;
			return;
		}
		memcpy(b, d, len);
		t->rx[rx_index(t, psn)] = b;
		t->rx_len[rx_index(t, psn)] = len;
		return;
	}
	b = pool_get(t);
	if (!b) {
		*err = ENOMEM;
		return;
	}
	memcpy(b, d, len);
	if (!rx_sequenced(t, q, b, len, psn, err))
		pool_put(t, b);
}

/* A packet at d: in a packet buffer (in_area 0; returns 1 when the
 * reorder buffer keeps it) or in the GRO area (returns 0). */
static int rx_packet(struct trp *t, struct iwe_qp_priv *q, uint8_t *d,
		     uint32_t len, int in_area, int *err)
{
	struct iw_trp_fields f;

	if (len < IW_TRP_HDR_LEN)
		return 0;
	iw_trp_get(d, &f);
	if (f.flags & IW_TRP_R) {
		/* Reserved bit set: a protocol error (fatal). */
		*err = iwe_rx_llp_error(q, IW_TERM_LLP_BAD_RR);
		return 0;
	}
	/* The ack went out after the peer's PSNs before f.psn (an A
	 * packet's PSN is the peer's next unused one). */
	trp_on_ack(t, q, f.ack, f.credits, f.psn);
	if (f.flags & IW_TRP_A) {
		trp_on_sack(t, d + IW_TRP_HDR_LEN, len - IW_TRP_HDR_LEN);
		return 0;
	}
	q->rx_data++;
	if (!in_area)
		return rx_sequenced(t, q, d, len, f.psn, err);
	rx_from_area(t, q, d, len, f.psn, err);
	return 0;
}

/* One recvmmsg, without waiting.  The datagrams read (0: none); *err
 * the socket's error.  ECONNREFUSED (an ICMP port unreachable: the peer
 * is gone) is kept in t->refused and the read retried: Linux reports a
 * pending socket error before the datagrams already queued, and the
 * peer's F may be among them -- its close is then DISCONNECTED, not
 * BROKEN.  Reporting clears the error, so the retry reads the queue. */
static int recv_batch(struct trp *t, struct iwe_qp_priv *q,
		      struct mmsghdr *mm, unsigned n, int *err)
{
	int r, refusals = 0;

	for (;;) {
		q->stats.rx_syscalls++;
		if (n == 1) {
			/* recvmsg: recvmmsg's wrapper costs a poller's
			 * round about 0.1 us more. */
			ssize_t l = recvmsg(q->fd, &mm->msg_hdr, MSG_DONTWAIT);

			r = l >= 0;
			if (r)
				mm->msg_len = (unsigned)l;
		} else {
			r = recvmmsg(q->fd, mm, n, MSG_DONTWAIT, NULL);
		}
		if (r > 0)
			q->rx_reads++;
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == ECONNREFUSED) {
			t->refused = 1;
			if (refusals++ < TRP_REFUSALS_READ)
				continue;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK)
			*err = errno;
		return 0;
	}
}

/* One recvmmsg into packet buffers.  Returns the datagrams read (0:
 * none), *err the socket's error or the first packet's error. */
static int rx_batch(struct trp *t, struct iwe_qp_priv *q, int *err)
{
	struct mmsghdr mm[TRP_BATCH];
	struct iovec iov[TRP_BATCH];
	uint8_t *b[TRP_BATCH];
	int n, r, i;

	memset(mm, 0, sizeof(mm));
	for (n = 0; n < (int)TRP_BATCH; n++) {
		b[n] = pool_get(t);
		if (!b[n])
			break;
		iov[n] = (struct iovec){ b[n], t->pkt_max };
		mm[n].msg_hdr.msg_iov = &iov[n];
		mm[n].msg_hdr.msg_iovlen = 1;
	}
	if (!n) {
		*err = ENOMEM;
		return 0;
	}
	r = recv_batch(t, q, mm, (unsigned)n, err);
	for (i = 0; i < n; i++) {
		int kept = 0;

		if (i < r && !*err &&
		    !(mm[i].msg_hdr.msg_flags & MSG_TRUNC))
			kept = rx_packet(t, q, b[i], mm[i].msg_len, 0, err);
		if (!kept)
			pool_put(t, b[i]);
	}
	return r;
}

/* The GRO receive area: per thread (whoever drives a QP reads into it),
 * so an idle connection carries none of it.  Its recvmmsg headers are
 * set up once: a poller's every round reads, mostly nothing. */
struct gro_area {
	struct mmsghdr mm[TRP_GRO_BUFS];
	struct iovec iov[TRP_GRO_BUFS];
	char cb[TRP_GRO_BUFS][CMSG_SPACE(sizeof(int))];
	uint8_t buf[TRP_GRO_BUFS][TRP_GRO_LEN];
};

static pthread_key_t gro_key;
static pthread_once_t gro_once = PTHREAD_ONCE_INIT;

static void gro_key_make(void)
{
	if (pthread_key_create(&gro_key, free))
		abort();	/* EAGAIN: out of keys at library load */
}

static struct gro_area *gro_area(void)
{
	struct gro_area *a;

	pthread_once(&gro_once, gro_key_make);
	a = pthread_getspecific(gro_key);
	if (a)
		return a;
	a = malloc(sizeof(*a));
	if (!a)
		return NULL;
	if (pthread_setspecific(gro_key, a)) {	/* frees it at exit */
		free(a);
		return NULL;
	}
	memset(a->mm, 0, sizeof(a->mm));
	for (unsigned i = 0; i < TRP_GRO_BUFS; i++) {
		a->iov[i] = (struct iovec){ a->buf[i], TRP_GRO_LEN };
		a->mm[i].msg_hdr.msg_iov = &a->iov[i];
		a->mm[i].msg_hdr.msg_iovlen = 1;
		a->mm[i].msg_hdr.msg_control = a->cb[i];
	}
	return a;
}

/* The segment size of a coalesced datagram, 0 if it is a plain one. */
static uint32_t gro_size(struct msghdr *h)
{
	struct cmsghdr *c;
	int v;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(v))) {
			memcpy(&v, CMSG_DATA(c), sizeof(v));
			return v > 0 ? (uint32_t)v : 0;
		}
	return 0;
}

/* One datagram as read with GRO: its packets (rx_packet from the area). */
static void rx_coalesced(struct trp *t, struct iwe_qp_priv *q,
			 uint8_t *d, uint32_t len, uint32_t seg, int *err)
{
	uint32_t off, n;

	if (!seg || seg > len)
		seg = len;
	else if (seg < len)
		t->st.gro_rcvd += (len + seg - 1) / seg;
	for (off = 0; off < len && !*err; off += n) {
		n = len - off < seg ? len - off : seg;
		if (n > t->pkt_max)
			return;	/* larger than we take: not a peer's */
		rx_packet(t, q, d + off, n, 1, err);
	}
}

/* One recvmmsg of up to n (<= TRP_GRO_BUFS) datagrams, coalesced or
 * not.  Returns the datagrams read, *err as rx_batch. */
static int rx_batch_gro(struct trp *t, struct iwe_qp_priv *q, unsigned n,
			int *err)
{
	struct gro_area *a = gro_area();
	int r, i;

	if (!a) {
		*err = ENOMEM;
		return 0;
	}
	/* The kernel wrote back the control length it used. */
	for (i = 0; i < (int)n; i++)
		a->mm[i].msg_hdr.msg_controllen = sizeof(a->cb[i]);
	r = recv_batch(t, q, a->mm, n, err);
	for (i = 0; i < r && !*err; i++)
		if (!(a->mm[i].msg_hdr.msg_flags & MSG_TRUNC))
			rx_coalesced(t, q, a->buf[i], a->mm[i].msg_len,
				     gro_size(&a->mm[i].msg_hdr), err);
	return r;
}

/* Delayed ack (doc/trp.md, "Acknowledging"): the ack of in-order
 * packets that end a message (fewer than a quarter of the credits) is
 * held for ack_delay_ns at most, for the answer that carries it -- no
 * datagram for the ack alone, and no wake-up of the peer's progress
 * thread to read it.  A pure ack costs the peer a wake-up of a user
 * thread, not a softirq as TCP's does: a 64 KiB Write (two packets)
 * acknowledged at once cost a ping-pong polling memory 75 us one way
 * against 33 held, and a hold of 50 us, shorter than a consumer's answer
 * on a busy 2-CPU machine often is, 49 us at 8 B against 10.  Whoever
 * read the packet, the connection's timer (on the progress thread)
 * bounds the hold; a consumer thread arms it on its own thread while
 * the loop is free (trp_timer_sync): a hold that woke the progress
 * thread to arm it took a blocking 8 B ping-pong from 17 to 37 us, and
 * acknowledging a consumer's reads at once cost both peers a datagram
 * each way (14-16 us one way against 8-9 held).
 * Held only while such packets get answers (ack_answered: one of ours
 * went out within the delay of the last one; a hold that runs out
 * unanswered clears it), so a receiver that does not answer is
 * acknowledged at once.
 * Anything else -- a hole, a duplicate, the F, reopened credits, held
 * data, a quarter of the credits unacknowledged -- is acknowledged at
 * once. */
static int read_by_thread(const struct trp *t, const struct iwe_qp_priv *q)
{
	/* A QP without a socket watch is driven by its owner alone (tests,
	 * fuzzers): TRP's timer bounds its holds all the same. */
	return !q->prog || iwe_prog_on_thread(t->prog);
}

/* What both holds ask: the delay is on, an ack is owed and not urgent,
 * everything read was delivered in order, and less than a quarter of
 * the credits is unacknowledged (the sender keeps three quarters). */
static int ack_may_wait(const struct trp *t)
{
	return t->ack_delay_ns && t->ack_due && !t->ack_urgent &&
	       t->rcv_dlv == t->rcv_nxt && t->rcv_unacked < t->rx_cap / 4;
}

/* A stream whose last packet read is in the middle of a message: its
 * next packets are on their way, and their read will ack it all.  One
 * pure ack per read woke the sender's progress thread about every 90
 * packets of 1 MiB Writes at a path MTU of 1500.  Held while in
 * sequence, for a quarter of the credits at most (the sender keeps
 * three quarters), and ack_delay_ns at most (the rest of the message
 * may be lost), by the progress thread only.  Returns 1 while it
 * holds. */
static int mid_msg_hold(struct trp *t, struct iwe_qp_priv *q, uint64_t now)
{
	if (!ack_may_wait(t) || !t->rcv_mid_msg || !read_by_thread(t, q))
		goto release;
	if (!t->ack_hold_ns) {
		t->ack_hold_ns = now + t->ack_delay_ns;
		t->ack_hold_mid = 1;
		t->st.acks_held++;
		iwe_qp_want_look(q, IWE_CQ_WANT_ARM);
		return 1;
	}
	if (t->ack_hold_mid && now < t->ack_hold_ns)
		return 1;
release:
	if (t->ack_hold_mid) {
		t->ack_hold_mid = 0;
		t->ack_hold_ns = 0;
	}
	return 0;
}

static void ack_hold(struct trp *t, struct iwe_qp_priv *q, int heard,
		     uint64_t now)
{
	if (heard && t->ack_due && !t->ack_urgent)
		t->rcv_heard_ns = now;
	if (mid_msg_hold(t, q, now))
		return;
	if (!ack_may_wait(t) || (!t->ack_hold_ns && !heard)) {
		t->ack_hold_ns = 0;
		return;
	}
	if (t->ack_hold_ns) {
		if (now >= t->ack_hold_ns) {
			t->ack_answered = 0;	/* no answer came */
			t->ack_hold_ns = 0;
		}
		return;
	}
	if (!t->ack_answered)
		return;
	t->ack_hold_ns = now + t->ack_delay_ns;
	t->st.acks_held++;
	iwe_qp_want_look(q, IWE_CQ_WANT_ARM);
}

void trp_rx_idle(struct iwe_qp_priv *q)
{
	struct trp *t = trp_of(q);

	IWE_QP_ASSERT_LOCKED(q);
	if (!t || !t->ack_hold_ns)
		return;
	t->ack_hold_ns = 0;
	t->ack_hold_mid = 0;
	if (t->ack_due && !t->quiet)
		trp_send_ack(t, q);
}

int trp_rx_progress(struct iwe_qp_priv *q)
{
	struct trp *t = trp_of(q);
	int err, n, ferr, heard = 0;
	uint64_t now;

	IWE_QP_ASSERT_LOCKED(q);
	if (t->quiet)
		return 0;
	err = deliver(t, q);
	while (!err) {
		unsigned want = t->gro ? TRP_GRO_BUFS : TRP_BATCH;

		n = t->gro ? rx_batch_gro(t, q, want, &err) :
			     rx_batch(t, q, &err);
		heard |= n > 0;
		if (!err)
			err = deliver(t, q);
		if (n < (int)want || want == 1)
			break;
	}
	/* The peer is gone: said once what came before is delivered (its
	 * F, read after the error, ends the QP as DISCONNECTED). */
	if (!err && t->refused && t->rcv_dlv == t->rcv_nxt)
		err = ECONNREFUSED;
	/* One clock read for the round's timers (a poller's empty round
	 * took three; 26 ns each here, next to 1.2 us for its recvmmsg). */
	now = iwe_now_ns();
	if (!err)
		err = trp_check_rto(t, q, now);
	if (!err)
		err = trp_check_idle(t, q, heard, now);
	ack_hold(t, q, heard, now);
	/* Acknowledge what came (also a bad segment or the peer's F, so it
	 * is not sent again) and send what is due.  A bad segment's ack
	 * rides on the Terminate it asks for (queued next, iw_qp.c): a pure
	 * ack first would let the peer complete the failed request before
	 * the Terminate could fail it. */
	t->ack_by_term = err == EPROTO && q->rx.term_out;
	ferr = trp_flush(t, q);
	t->ack_by_term = 0;
	trp_timer_sync(t, q);
	return err ? err : ferr == EAGAIN ? 0 : ferr;
}

uint32_t trp_sack_blocks(const struct trp *t, uint8_t *body)
{
	uint32_t n = 0, psn = t->rcv_nxt + 1, end = t->rcv_dlv + t->rx_cap;
	uint32_t max = (t->pkt_max - IW_TRP_HDR_LEN) / IW_TRP_SACK_BLOCK;

	/* Nothing held out of order (most acks): no scan of the window. */
	if (!iw_psn_lt(t->rcv_nxt, t->rcv_high))
		return 0;
	if (iw_psn_lt(t->rcv_high, end))
		end = t->rcv_high;

	/* Every hole of a full window at 10 % loss (about 100 in 1024
	 * packets): with 16 blocks the sender saw the lowest 160 PSNs only,
	 * found the rest of the holes an RTT (or a timeout) apiece, and took
	 * no RTT sample from new packets held above them. */
	if (max > IW_TRP_SACK_MAX)
		max = IW_TRP_SACK_MAX;
	while (psn != end && n < max) {
		uint32_t be[2];

		if (!t->rx[rx_index(t, psn)]) {
			psn++;
			continue;
		}
		be[0] = iw_be32(psn);
		while (psn + 1 != end && t->rx[rx_index(t, psn + 1)])
			psn++;
		be[1] = iw_be32(psn);
		memcpy(body + n * IW_TRP_SACK_BLOCK, be, sizeof(be));
		n++;
		psn++;
	}
	return n * IW_TRP_SACK_BLOCK;
}
