/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* TRP over UDP, transmit side and the transport's table (iw_trp.h).
 *
 * Every sequenced packet (a DDP segment, our I reply, an F) stays in
 * the transmit ring until the peer's cumulative ack covers it.  A DDP
 * segment is reported done (its token, iw_tx.c) only once acknowledged:
 * a non-fatal Terminate must still find its WR (iw_trp_term.c), and a
 * Send that completed must reach the peer even if the QP fails right
 * after (an abrupt close retransmits nothing).  So the payload of a Send
 * or Write (TRP_ZC_MIN bytes or more, one piece) need not be copied: its
 * WR cannot complete while the packet may go again, and it is sent from
 * registered memory (sendmmsg gathers header and payload; EFAULT if the
 * consumer unmapped it).  The one way such a WR ends early, the marker,
 * first copies the payloads into the ring (iw_trp_term.c); a QP that fails
 * retransmits nothing.  Everything else is copied when queued.  The
 * ack PSN and credits of a packet are written each time it goes out, so
 * every packet carries the newest acknowledgement.
 *
 * Retransmission: one timer per QP (RFC 6298: SRTT/RTTVAR, Karn's rule
 * -- no sample from a retransmitted packet --, bounds TRP_RTO_MIN_US and
 * TRP_RTO_MAX_US, doubling on expiry).  On expiry the unacknowledged,
 * unsacked packets go again (a batch at most); a packet above which
 * TRP_FAST_RETX_GAP packets were selectively acked goes again at once,
 * once per timeout.  A packet retransmitted TRP_MAX_RETX times means the
 * peer is gone: a best-effort Terminate, then ETIMEDOUT.
 *
 * The timer lives on the device's progress thread, which never blocks on
 * the QP lock: it try-locks and otherwise leaves a kick for the holder
 * (as iw_qp.c's socket watch does); the deadline is checked by the receive
 * side (trp_check_rto), which every kick runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include "iw_env.h"
#include "iw_guard.h"
#include "iw_log.h"
#include "iw_trp.h"

static int in_flight(const struct trp *t, uint32_t psn)
{
	return psn - t->snd_una < t->snd_sent - t->snd_una;
}

uint32_t trp_credits(const struct trp *t)
{
	uint32_t room = t->rcv_dlv + t->rx_cap - t->rcv_nxt;

	if (room > t->credit_cap)
		room = t->credit_cap;
	return room > IW_TRP_CREDITS_MASK ? IW_TRP_CREDITS_MASK : room;
}

/* ------------------------------------------------------- test aid */

static uint32_t rng_next(struct trp *t)
{
	uint64_t x = t->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static int roll(struct trp *t, unsigned pct)
{
	return pct && rng_next(t) % 100 < pct;
}

/* ---------------------------------------------------------- sending */

/* The packets of one sendmmsg, in order; is_new marks first sends. */
struct txvec {
	struct trp_txp *p[3 * TRP_BATCH];
	uint8_t is_new[3 * TRP_BATCH];
	int n;
};

static void vec_push(struct txvec *v, struct trp_txp *p, int is_new)
{
	v->p[v->n] = p;
	v->is_new[v->n++] = (uint8_t)is_new;
}

/* Queue p for this batch, through the test aid: dropped, held back
 * until the next packet, or doubled. */
static void vec_add(struct trp *t, struct txvec *v, struct trp_txp *p,
		    uint32_t psn, int is_new)
{
	if (roll(t, t->test.drop)) {
		t->st.hook_drop++;
	} else if (!t->held && roll(t, t->test.reorder)) {
		t->st.hook_reorder++;
		t->held = 1;
		t->held_psn = psn;
		return;
	} else {
		vec_push(v, p, is_new);
		if (roll(t, t->test.dup)) {
			t->st.hook_dup++;
			vec_push(v, p, 0);
		}
	}
	if (t->held && t->held_psn != psn) {
		t->held = 0;
		if (in_flight(t, t->held_psn))
			vec_push(v, trp_slot(t, t->held_psn), 0);
	}
}

/* Write the current ack and credits into a packet about to go out. */
static void stamp(struct trp *t, struct trp_txp *p)
{
	struct iw_trp_fields f;

	iw_trp_get(p->buf, &f);
	iw_trp_put(p->buf, f.psn, t->rcv_nxt - 1, f.flags, trp_credits(t));
}

/* The packets from v->p[i] that one UDP GSO send can carry: equal
 * sizes (the last may be shorter), at most TRP_GSO_MAX of them and
 * TRP_GSO_BYTES in all. */
static int gso_run(const struct txvec *v, int i)
{
	uint32_t len = v->p[i]->len, total = len;
	int j = i + 1;

	while (j < v->n && j - i < TRP_GSO_MAX && v->p[j]->len <= len &&
	       v->p[j - 1]->len == len &&
	       total + v->p[j]->len <= TRP_GSO_BYTES)
		total += v->p[j++]->len;
	return j - i;
}

/* The batch as sendmmsg messages: one per packet, or with gso one per
 * run of packets that the kernel cuts back into datagrams
 * (UDP_SEGMENT).  Returns the message count; npk[k]: packets in k. */
static int build_msgs(const struct txvec *v, int gso, struct mmsghdr *mm,
		      struct iovec *iov, char (*cm)[CMSG_SPACE(2)], int *npk)
{
	int k = 0, first[3 * TRP_BATCH + 1], n = 0;

	memset(mm, 0, sizeof(*mm) * (size_t)v->n);
	for (int i = 0; i < v->n; i++) {
		const struct trp_txp *p = v->p[i];

		first[i] = n;
		iov[n].iov_base = p->buf;
		iov[n++].iov_len = p->len - p->zc_len;
		if (p->zc_len) {
			iov[n].iov_base = (void *)p->zc;
			iov[n++].iov_len = p->zc_len;
		}
	}
	first[v->n] = n;
	for (int i = 0; i < v->n; i += npk[k++]) {
		struct msghdr *m = &mm[k].msg_hdr;

		npk[k] = gso ? gso_run(v, i) : 1;
		m->msg_iov = &iov[first[i]];
		m->msg_iovlen = (size_t)(first[i + npk[k]] - first[i]);
		if (npk[k] > 1) {
			uint16_t seg = (uint16_t)v->p[i]->len;
			struct cmsghdr *c;

			/* Its padding goes to the kernel too. */
			memset(cm[k], 0, sizeof(cm[k]));
			m->msg_control = cm[k];
			m->msg_controllen = sizeof(cm[k]);
			c = CMSG_FIRSTHDR(m);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(c), &seg, sizeof(seg));
		}
	}
	return k;
}

/* sendmmsg, or send() for one plain datagram (a request or an answer
 * of a ping-pong: sendmmsg's and sendmsg's message copy cost it 0.1-0.2
 * us here). */
static int send_msgs(int fd, struct mmsghdr *mm, unsigned n)
{
	const struct msghdr *m = &mm->msg_hdr;
	ssize_t r;

	if (n != 1 || m->msg_iovlen != 1 || m->msg_controllen)
		return sendmmsg(fd, mm, n, MSG_DONTWAIT);
	r = send(fd, m->msg_iov->iov_base, m->msg_iov->iov_len, MSG_DONTWAIT);
	if (r < 0)
		return -1;
	mm->msg_len = (unsigned)r;
	return 1;
}

/* sendmmsg the batch: 0, or the error that stopped it (*sent: how many
 * packets went).  A kernel or socket without UDP GSO refuses it once;
 * the QP then sends datagram by datagram. */
static int vec_send(struct trp *t, struct iwe_qp_priv *q,
		    const struct txvec *v, int *sent)
{
	struct mmsghdr mm[3 * TRP_BATCH];
	struct iovec iov[2 * 3 * TRP_BATCH];
	char cm[3 * TRP_BATCH][CMSG_SPACE(2)];
	int npk[3 * TRP_BATCH];
	int nmsg, off = 0, r, err = 0;

	nmsg = build_msgs(v, t->gso, mm, iov, cm, npk);

	*sent = 0;
	while (off < nmsg) {
		q->stats.tx_syscalls++;
		r = send_msgs(q->fd, mm + off, (unsigned)(nmsg - off));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && t->gso && (errno == EINVAL || errno == EIO ||
					errno == EOPNOTSUPP)) {
			/* No GSO here: the rest one datagram at a time. */
			struct txvec rest = { .n = v->n - *sent };
			int more = 0;

			memcpy(rest.p, v->p + *sent, sizeof(rest.p[0]) *
			       (size_t)rest.n);
			t->gso = 0;
			err = vec_send(t, q, &rest, &more);
			*sent += more;
			return err;
		}
		if (r < 0) {
			/* EFAULT: a payload's registered memory is gone
			 * (the consumer unmapped it under a pending WR). */
			err = errno == EWOULDBLOCK ? EAGAIN : errno;
			break;
		}
		while (r--) {
			t->st.gso_sends += npk[off] > 1;
			*sent += npk[off++];
		}
	}
	return err;
}

/* The socket took only the first 'sent' packets: what did not go is
 * sent again later (new ones stay unsent, retransmissions stay due). */
static void vec_unsent(struct trp *t, const struct txvec *v, int sent,
		       uint32_t *newc)
{
	for (int i = v->n - 1; i >= sent; i--) {
		struct trp_txp *p = v->p[i];

		if (v->is_new[i] && *newc) {
			(*newc)--;
			p->sent_ns = 0;
		} else if (!v->is_new[i] && !p->want_retx) {
			p->want_retx = 1;
			t->nretx++;
		}
	}
}

/* Packets going out carried our ack: nothing is owed now. */
static void ack_sent(struct trp *t)
{
	t->ack_due = 0;
	t->ack_urgent = 0;
	t->rcv_unacked = 0;
	t->ack_hold_ns = 0;
	t->ack_hold_mid = 0;
}

/* The retransmission timer.  While no loss is known, it first runs
 * as a probe timeout (RFC 8985, 7.2): PTO = 2 SRTT plus twice the ack
 * delay, 1 ms at least.  The peer may hold its ack that long for an
 * answer to carry, on a timer that may fire late: a probe that came
 * just before the held ack would cut every hold short with a duplicate
 * (a 5 ms hold's ack came after 5.3 ms in a test, past a PTO of one
 * delay).  On a LAN that is about 2 ms, where the RTO is 20 ms.  A
 * lost packet that ends a flight -- a ping-pong's request or answer --
 * has nothing behind it whose selective ack would show the hole, and
 * used to wait for the RTO: at 1 % loss the 8 B ping-pong's mean was
 * 10-14 times its median. */
static int pto_allowed(const struct trp *t)
{
	return t->have_rtt && !t->tlp_pending && !t->recover_ns &&
	       !t->nretx;
}

static void timer_arm(struct trp *t, uint64_t now)
{
	uint64_t rto = (uint64_t)t->rto_us * 1000u, pto;

	t->pto_armed = 0;
	if (t->snd_una == t->snd_sent) {
		t->deadline_ns = 0;
		return;
	}
	t->deadline_ns = now + rto;
	if (!pto_allowed(t))
		return;
	pto = 2 * (t->srtt_us * 1000u + t->ack_delay_ns);
	if (pto < (uint64_t)TRP_PTO_MIN_US * 1000u)
		pto = (uint64_t)TRP_PTO_MIN_US * 1000u;
	if (pto < rto) {
		t->deadline_ns = now + pto;
		t->pto_armed = 1;
	}
}

/* One batch of due packets: retransmissions first, then new ones. */
static int flush_batch(struct trp *t, struct iwe_qp_priv *q, int *any)
{
	struct txvec v;		/* not zeroed: 1.7 KiB, each poll round */
	uint64_t now;
	uint32_t newc = 0, psn;
	unsigned npk = 0, nre;
	int sent = 0, err, quiet = 0;

	/* A poller's empty round comes here too: no clock read for it. */
	*any = 0;
	if (!t->nretx && t->snd_sent == t->snd_nxt)
		return 0;
	now = iwe_now_ns();
	v.n = 0;
	for (psn = t->snd_una; t->nretx && psn != t->snd_sent &&
	     npk < TRP_BATCH; psn++) {
		struct trp_txp *p = trp_slot(t, psn);

		if (!p->want_retx)
			continue;
		p->want_retx = 0;
		t->nretx--;
		stamp(t, p);
		p->sent_ns = now;
		vec_add(t, &v, p, psn, 0);
		npk++;
	}
	nre = npk;		/* the retransmissions lead the batch */
	while (npk < TRP_BATCH && t->snd_sent + newc != t->snd_nxt) {
		struct trp_txp *p = trp_slot(t, t->snd_sent + newc);

		stamp(t, p);
		p->sent_ns = now;
		quiet |= p->fatal_term;
		vec_add(t, &v, p, t->snd_sent + newc, 1);
		newc++;
		npk++;
	}
	*any = npk != 0;
	if (!npk)
		return 0;
	err = v.n ? vec_send(t, q, &v, &sent) : 0;
	if (err == EFAULT) {
		/* Told by tx_write; what did not go stays unsent. */
		t->fault = EFAULT;
		err = EAGAIN;
	}
	if (err == EAGAIN && !t->test.drop && !t->test.reorder &&
	    !t->test.dup)
		vec_unsent(t, &v, sent, &newc);
	t->snd_sent += newc;
	t->st.sent += (uint64_t)sent;
	q->stats.retransmits += (unsigned)sent < nre ? (unsigned)sent : nre;
	if (sent)
		ack_sent(t);		/* every packet carries the ack */
	/* A packet of ours soon after the peer's lone one: its next are
	 * worth holding the ack for (ack_hold). */
	if (sent > (int)nre && t->rcv_heard_ns &&
	    now - t->rcv_heard_ns <= t->ack_delay_ns)
		t->ack_answered = 1;
	/* The timer starts with the first packet outstanding (RFC 6298
	 * 5.1); a probe timeout moves with every new packet (RFC 8985
	 * 7.2), so it waits from the newest. */
	if (!t->deadline_ns || (t->pto_armed && (int)nre < sent))
		timer_arm(t, now);
	if (quiet && !err) {
		/* A fatal Terminate is sent once; then nothing goes out. */
		t->quiet = 1;
		t->deadline_ns = 0;
	}
	return err;
}

int trp_flush(struct trp *t, struct iwe_qp_priv *q)
{
	int err = 0, any = 1;

	if (q->fd < 0 || t->quiet)
		return 0;
	while (any && !err && !t->quiet && !t->fault)
		err = flush_batch(t, q, &any);
	if (t->ack_due && !t->ack_hold_ns && !t->ack_by_term && !err &&
	    !t->quiet)
		trp_send_ack(t, q);
	t->blocked = err == EAGAIN;
	return err;
}

void trp_send_ack(struct trp *t, struct iwe_qp_priv *q)
{
	uint8_t b[IW_TRP_HDR_LEN + IW_TRP_SACK_MAX * IW_TRP_SACK_BLOCK];
	uint32_t n = trp_sack_blocks(t, b + IW_TRP_HDR_LEN);

	/* Not sequenced: its PSN is the next one we will use. */
	iw_trp_put(b, t->snd_nxt, t->rcv_nxt - 1, IW_TRP_A, trp_credits(t));
	q->stats.tx_syscalls++;
	if (send(q->fd, b, IW_TRP_HDR_LEN + n, MSG_DONTWAIT) >= 0) {
		ack_sent(t);
		t->st.acks_sent++;
		if (n / IW_TRP_SACK_BLOCK > t->st.sack_blocks_max)
			t->st.sack_blocks_max = n / IW_TRP_SACK_BLOCK;
	}
}

/* ------------------------------------------------------ acknowledging */

static void rtt_sample(struct trp *t, uint64_t r_us)
{
	uint64_t d;

	if (!t->have_rtt) {
		t->srtt_us = r_us;
		t->rttvar_us = r_us / 2;
		t->have_rtt = 1;
	} else {
		d = t->srtt_us > r_us ? t->srtt_us - r_us : r_us - t->srtt_us;
		t->rttvar_us = (3 * t->rttvar_us + d) / 4;
		t->srtt_us = (7 * t->srtt_us + r_us) / 8;
	}
	t->rto_us = t->srtt_us + 4 * t->rttvar_us;
	if (t->rto_us < TRP_RTO_MIN_US)
		t->rto_us = TRP_RTO_MIN_US;
	if (t->rto_us > TRP_RTO_MAX_US)
		t->rto_us = TRP_RTO_MAX_US;
}

/* Send packet psn again at the next flush. */
static void queue_retx(struct trp *t, uint32_t psn)
{
	struct trp_txp *p = trp_slot(t, psn);

	if (t->ending)
		return;		/* the QP failed: its WRs are flushed */
	p->retx++;
	if (!p->want_retx) {
		p->want_retx = 1;
		t->nretx++;
	}
}

/* After a timeout, an ack that leaves packets sent before it
 * unacknowledged: the oldest of them is lost too (NewReno's partial
 * ack). */
static void partial_ack(struct trp *t)
{
	struct trp_txp *p;

	if (!t->recover_ns || !iw_psn_lt(t->snd_una, t->recover)) {
		t->recover_ns = 0;
		return;
	}
	p = trp_slot(t, t->snd_una);
	if (!p->sacked && !p->want_retx && p->sent_ns &&
	    p->sent_ns <= t->recover_ns)
		queue_retx(t, t->snd_una);
}

/* The newest send time of a packet the peer has (RACK, RFC 8985). */
static void rack_update(struct trp *t, const struct trp_txp *p)
{
	if (p->sent_ns > t->rack_ns)
		t->rack_ns = p->sent_ns;
}

/* Nothing of the peer's before heard waits for delivery: heard is not
 * ahead of rcv_dlv, or further ahead than the peer may send (not a PSN
 * it can have used). */
static int heard_all(const struct trp *t, uint32_t heard)
{
	uint32_t ahead = heard - t->rcv_dlv;

	return !iw_psn_gt(heard, t->rcv_dlv) || ahead > t->rx_cap + 1;
}

/* tokens acknowledged by a packet sent after the peer's PSNs before
 * heard.  Reported in order: behind any held ones. */
static void done_add(struct trp *t, uint32_t tokens, uint32_t heard)
{
	struct trp_done_gate *g;

	if (!tokens)
		return;
	if (!t->ngates && heard_all(t, heard)) {
		t->done += tokens;
		return;
	}
	g = t->ngates ? &t->gates[t->ngates - 1] : NULL;
	if (g && (t->ngates == TRP_DONE_GATES || !iw_psn_gt(heard, g->psn))) {
		g->tokens += tokens;
		if (iw_psn_gt(heard, g->psn))
			g->psn = heard;
		return;
	}
	t->gates[t->ngates++] = (struct trp_done_gate){ heard, tokens };
}

void trp_done_release(struct trp *t)
{
	uint32_t i = 0;

	while (i < t->ngates && heard_all(t, t->gates[i].psn))
		t->done += t->gates[i++].tokens;
	if (!i)
		return;
	t->ngates -= i;
	memmove(t->gates, t->gates + i, t->ngates * sizeof(t->gates[0]));
}

/* The oldest packet is acknowledged: free its slot.  *clean stays 1
 * while no packet of the range was sent twice; *tokens counts the
 * segments it finished. */
static void retire_oldest(struct trp *t, struct iwe_qp_priv *q,
			  uint64_t *sample_sent, int *clean, uint32_t *tokens)
{
	struct trp_txp *p = trp_slot(t, t->snd_una);

	rack_update(t, p);
	if (p->retx)
		*clean = 0;

	if (p->token)
		(*tokens)++;
	if (p->want_retx)
		t->nretx--;
	if (t->gate && t->snd_una == t->gate_psn) {
		/* Our reply arrived: the responder may speak. */
		t->gate = 0;
		q->tx_gate = 0;
	}
	/* Karn: only a packet sent once gives a sample; and one the peer
	 * had already selectively acked arrived long before this ack. */
	if (!p->retx && !p->sacked && p->sent_ns)
		*sample_sent = p->sent_ns;
	p->token = p->sacked = p->retx = p->fast = p->want_retx = 0;
	p->fatal_term = 0;
	p->sent_ns = 0;
	p->zc = NULL;
	p->zc_len = 0;
	if (p->buf) {
		trp_bufs_put(&t->tx_spare, p->buf);
		p->buf = NULL;
	}
	t->snd_una++;
}

void trp_on_ack(struct trp *t, struct iwe_qp_priv *q, uint32_t ack,
		uint32_t credits, uint32_t heard)
{
	uint64_t sent = 0, now;
	uint32_t tokens = 0;
	int clean = 1;

	if (iw_psn_ge(ack, t->snd_nxt))
		return;		/* acknowledges what we never sent */
	if (iw_psn_ge(ack, t->peer_ack)) {
		t->peer_ack = ack;
		t->peer_limit = ack + credits;
	}
	if (iw_psn_lt(ack, t->snd_una))
		return;		/* nothing new */
	if (iw_psn_ge(ack, t->snd_sent))
		t->snd_sent = ack + 1;	/* cannot happen: we sent it */
	while (iw_psn_le(t->snd_una, ack))
		retire_oldest(t, q, &sent, &clean, &tokens);
	done_add(t, tokens, heard);
	partial_ack(t);
	now = iwe_now_ns();
	/* Karn: no sample from a range that needed a retransmission (its
	 * newest packet waited for the hole to close). */
	if (clean && sent && now > sent)
		rtt_sample(t, (now - sent) / 1000u);
	if (t->tlp_pending && !iw_psn_lt(t->snd_una, t->tlp_high))
		t->tlp_pending = 0;	/* the probe's episode is over */
	timer_arm(t, now);
}

/* Mark PSNs [first, last] held by the peer.  *newest: the latest send
 * time of a newly sacked packet sent once (an RTT sample, Karn's rule). */
static void sack_range(struct trp *t, uint32_t first, uint32_t last,
		       uint64_t *newest)
{
	uint32_t n = last - first + 1;

	if (iw_psn_gt(first, last) || n > t->tx_cap)
		return;
	for (uint32_t psn = first; n--; psn++) {
		struct trp_txp *p = trp_slot(t, psn);

		if (!in_flight(t, psn) || p->sacked)
			continue;
		p->sacked = 1;
		rack_update(t, p);
		if (!p->retx && p->sent_ns > *newest)
			*newest = p->sent_ns;
	}
}

/* Lost packets go again now:
 *  - a hole TRP_FAST_RETX_GAP or more below the highest sacked packet
 *    (once per timeout);
 *  - a packet sent (or sent again) a reordering window before one the
 *    peer has (RACK, RFC 8985): so a lost retransmission is found without
 *    waiting for the timeout. */
static void fast_retransmit(struct trp *t)
{
	uint64_t reo = t->srtt_us * 1000u / 4;
	uint32_t top = t->snd_una, psn;

	if (reo < 1000000u)
		reo = 1000000u;
	for (psn = t->snd_una; psn != t->snd_sent; psn++)
		if (trp_slot(t, psn)->sacked)
			top = psn;
	for (psn = t->snd_una; iw_psn_lt(psn, top); psn++) {
		struct trp_txp *p = trp_slot(t, psn);
		int gap = !p->fast && top - psn >= TRP_FAST_RETX_GAP;
		int rack = p->sent_ns && p->sent_ns + reo < t->rack_ns;

		if (p->sacked || p->want_retx || (!gap && !rack))
			continue;
		p->fast = 1;
		queue_retx(t, psn);
		t->st.fast_retx++;
	}
}

void trp_on_sack(struct trp *t, const uint8_t *body, uint32_t len)
{
	uint32_t n = len / IW_TRP_SACK_BLOCK;
	uint64_t newest = 0, now;

	if (n > IW_TRP_SACK_MAX)
		n = IW_TRP_SACK_MAX;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t be[2];

		memcpy(be, body + i * IW_TRP_SACK_BLOCK, sizeof(be));
		sack_range(t, iw_be32(be[0]), iw_be32(be[1]), &newest);
	}
	/* A packet just selectively acked times the path as well as a
	 * cumulative ack does (RFC 6675's SACK RTT; RFC 8985 uses it): in a
	 * window with holes -- when no cumulative range is clean -- these are
	 * the only samples, and they end the timer's backoff. */
	if (newest && (now = iwe_now_ns()) > newest) {
		rtt_sample(t, (now - newest) / 1000u);
		t->st.rtt_sacked++;
	}
	if (n)
		fast_retransmit(t);
}

/* ------------------------------------------------------- the timer */

/* Lost for good: tell the peer once (LLP, connection lost), then quiet. */
static void send_lost_terminate(struct trp *t, struct iwe_qp_priv *q)
{
	uint8_t b[IW_TRP_HDR_LEN + sizeof(struct iw_terminate_hdr)];
	struct iw_terminate_hdr th = {
		.hdr = {
			.ctrl_be = iw_be16(iw_ctrl_make(0, 1, IW_OP_TERMINATE)),
			.qn_be = iw_be32(IW_QN_TERMINATE),
			.msn_be = iw_be32(1),
		},
		.term_ctrl_be = iw_be32(iw_term_ctrl(IW_TERM_LAYER_LLP,
			IW_TERM_LLP_ETYPE_MPA, IW_TERM_LLP_TCP_LOST, 0) |
			TRP_QUIET_MS),
	};

	iw_trp_put(b, t->snd_nxt, t->rcv_nxt - 1, 0, trp_credits(t));
	memcpy(b + IW_TRP_HDR_LEN, &th, sizeof(th));
	if (send(q->fd, b, sizeof(b), MSG_DONTWAIT) < 0) {
		/* Best effort only. */
	}
	t->quiet = 1;
	t->deadline_ns = 0;
}

/* The probe timeout ran out with no ack: the newest packet goes again
 * (RFC 8985 7.3), or, when the peer has it, the oldest it lacks.  Its
 * ack, or the selective ack of a duplicate, shows what else is missing
 * (fast retransmit and RACK take it from there); the RTO still runs
 * behind it, not doubled. */
static void tail_loss_probe(struct trp *t, uint64_t now)
{
	uint32_t psn = t->snd_sent - 1;

	if (trp_slot(t, psn)->sacked)
		psn = t->snd_una;
	queue_retx(t, psn);
	t->tlp_pending = 1;
	t->tlp_high = t->snd_sent;
	t->st.tlp++;
	t->st.retx++;
	timer_arm(t, now);	/* the RTO: a probe is pending */
}

int trp_check_rto(struct trp *t, struct iwe_qp_priv *q, uint64_t now)
{
	unsigned n = 0;

	if (!t->deadline_ns || now < t->deadline_ns)
		return 0;
	if (t->ending || t->quiet || t->snd_una == t->snd_sent) {
		t->deadline_ns = 0;
		return 0;
	}
	if (t->pto_armed) {
		tail_loss_probe(t, now);
		return 0;
	}
	t->tlp_pending = 0;
	/* The oldest packet goes again (RFC 6298 5.4); the ones behind it
	 * follow one per partial ack (trp_on_ack), so a timeout that only
	 * waited for late acks -- a busy CPU -- costs one packet. */
	if (trp_slot(t, t->snd_una)->retx >= TRP_MAX_RETX) {
		send_lost_terminate(t, q);
		return ETIMEDOUT;
	}
	queue_retx(t, t->snd_una);
	n = 1;
	for (uint32_t psn = t->snd_una; psn != t->snd_sent; psn++)
		trp_slot(t, psn)->fast = 0;
	t->recover = t->snd_sent;
	t->recover_ns = now;
	t->st.rto++;
	t->st.retx += n;
	t->rto_us = t->rto_us * 2 > TRP_RTO_MAX_US ? TRP_RTO_MAX_US
						   : t->rto_us * 2;
	timer_arm(t, now);	/* the RTO, doubled: recovery runs */
	return 0;
}

/* With nothing of ours unacknowledged, nothing would tell us the peer is
 * gone: an idle side sends a pure ack every TRP_IDLE_PROBE_MS, heard or
 * not (a probe skipped because the peer's came would leave the peer
 * hearing nothing), so a live peer is heard at least that often.  The
 * ICMP port unreachable that a vanished process's kernel answers ends
 * the connection (ECONNREFUSED on the next receive); a peer whose host
 * is gone answers nothing, and silence for dead_ns ends it here. */
int trp_check_idle(struct trp *t, struct iwe_qp_priv *q, int heard,
		   uint64_t now)
{
	uint64_t every = (uint64_t)TRP_IDLE_PROBE_MS * 1000000u;

	if (heard)
		t->heard_ns = now;
	if (t->quiet || t->ending || t->snd_una != t->snd_sent) {
		t->idle_ns = 0;		/* the retransmission timer watches */
		return 0;
	}
	if (t->idle_ns && now >= t->idle_ns) {
		if (t->dead_ns && now - t->heard_ns >= t->dead_ns) {
			iw_log(IW_LOG_INFO, "TRP qp %u: the peer was silent "
			       "for %llu ms: the connection is lost",
			       q->pub.qp_num, (unsigned long long)
			       ((now - t->heard_ns) / 1000000u));
			send_lost_terminate(t, q);
			return ETIMEDOUT;
		}
		trp_send_ack(t, q);
		/* A probe period with nothing of ours in flight: the spare
		 * packet buffers go back (a stream takes them again as it
		 * starts; a ping-pong keeps none to speak of). */
		t->st.bufs_trimmed += trp_bufs_trim(&t->tx_spare) +
				      trp_bufs_trim(&t->rx_pool);
	}
	if (!t->idle_ns || now >= t->idle_ns)
		t->idle_ns = now + every;
	return 0;
}

static void arm_task_fn(struct iwe_prog_task *k)
{
	struct trp *t = IWE_CONTAINER_OF(k, struct trp, arm_task);
	uint64_t w = atomic_load(&t->want_ns), now = iwe_now_ns();

	if (!w)
		return;
	iwe_prog_timer_arm_ns(t->prog, &t->timer, w > now ? w - now : 0);
	atomic_store(&t->armed_ns, w);
}

/* Progress thread: the deadline may have come; run the QP's progress
 * (or leave a kick to whoever holds its lock). */
static void timer_cb(struct iwe_prog_timer *tm)
{
	struct trp *t = IWE_CONTAINER_OF(tm, struct trp, timer);
	struct iwe_qp_priv *q;

	atomic_store(&t->armed_ns, 0);
	pthread_mutex_lock(&t->mx);
	q = t->q;
	if (q) {
		atomic_store(&q->kick, 1);
		if (iwe_qp_trylock(q))
			iwe_qp_unlock(q);	/* runs the kick */
	}
	pthread_mutex_unlock(&t->mx);
}

void trp_timer_sync(struct trp *t, const struct iwe_qp_priv *q)
{
	uint64_t d = t->deadline_ns, a = atomic_load(&t->armed_ns);

	/* A failed QP runs none of its timers (its receive side stopped):
	 * a deadline left past would fire again at once, for ever. */
	if (q->state == IWE_QPS_ERROR) {
		atomic_store(&t->want_ns, 0);
		return;
	}
	if (t->idle_ns && (!d || t->idle_ns < d))
		d = t->idle_ns;
	if (t->ack_hold_ns && (!d || t->ack_hold_ns < d))
		d = t->ack_hold_ns;

	atomic_store(&t->want_ns, d);
	/* An earlier deadline is armed on this thread when the loop is
	 * free: a consumer's send or held ack then wakes no thread (a
	 * request every 2 ms over udp woke the progress thread 0.6 times a
	 * round trip on each side for its timer).  A later one lets the
	 * armed timer be, until it is about to fire for nothing: then it
	 * moves too.  A ping-pong holds an ack at every request, 1 ms
	 * ahead, and its answer takes it; left to fire, the timer woke the
	 * progress thread once a millisecond on each side, and a round
	 * trip it landed on waited for that thread (udp's p99 twice tcp's).
	 * Moved when within a quarter of the ack delay: about two system
	 * calls a millisecond of a ping-pong, no wake-up. */
	if (d && (!a || d < a || (d > a && a <= iwe_now_ns() +
					     t->ack_delay_ns / 4)))
		iwe_prog_run_or_post(t->prog, &t->arm_task);
}

static void free_task_fn(struct iwe_prog_task *k)
{
	struct trp *t = IWE_CONTAINER_OF(k, struct trp, free_task);

	iwe_prog_unpost(t->prog, &t->arm_task);
	iwe_prog_timer_cancel(t->prog, &t->timer);
	pthread_mutex_destroy(&t->mx);
	iw_slab_free(t, sizeof(*t));
}

/* ------------------------------------------------------- the table */

uint32_t iwe_trp_pkt_max(const struct iwe_device *dev)
{
	uint32_t mtu = dev->attr.mtu;

	if (mtu < TRP_MIN_MTU)
		mtu = TRP_MIN_MTU;
	if (mtu > TRP_MAX_MTU)
		mtu = TRP_MAX_MTU;
	mtu -= IW_TRP_IP_UDP_LEN;
	return mtu > 65507u ? 65507u : mtu;	/* UDP's largest payload */
}

static uint32_t pow2_floor(uint32_t v)
{
	uint32_t p = 1;

	while (p * 2 <= v)
		p *= 2;
	return p;
}

uint32_t iwe_trp_window(const struct iwe_device *dev)
{
	uint32_t win = TRP_WINDOW_BYTES / iwe_trp_pkt_max(dev);

	return pow2_floor(win < TRP_WINDOW_MIN ? TRP_WINDOW_MIN :
			  win > TRP_WINDOW_MAX ? TRP_WINDOW_MAX : win);
}

/* Big socket buffers (forced where allowed); what the receive buffer
 * holds bounds the credits we grant. */
static uint32_t socket_buffers(int fd, uint32_t pkt)
{
	int want = (int)TRP_SOCKBUF, have = 0;
	socklen_t l = sizeof(have);

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
	if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &have, &l) < 0 || have <= 0)
		return TRP_WINDOW_MIN;
	/* The kernel reports twice what it accounts packets against; each
	 * datagram costs its size and some overhead. */
	have /= 2;
	return (uint32_t)have / (pkt + 1024) > 2 ? (uint32_t)have / (pkt + 1024)
						 : 2;
}

static void tx_free(struct trp *t)
{
	for (uint32_t i = 0; t->tx && i < t->tx_cap; i++)
		free(t->tx[i].buf);
	trp_bufs_free(&t->tx_spare);
	iw_slab_free(t->tx, t->tx_cap * sizeof(*t->tx));
	t->tx = NULL;
}

/* A buffer for the packet in slot p: its own, the last one freed, or a
 * new one.  0 or ENOMEM. */
static int tx_buf(struct trp *t, struct trp_txp *p)
{
	int fresh = !t->tx_spare.n;

	if (p->buf)
		return 0;
	p->buf = trp_bufs_get(&t->tx_spare, t->pkt_max);
	t->st.tx_bufs += fresh && p->buf;
	return p->buf ? 0 : ENOMEM;
}

/* Queue a sequenced packet of our own (I or F) with body b. */
static int queue_ctl(struct trp *t, uint16_t flags, const void *b, size_t len)
{
	struct trp_txp *p = trp_slot(t, t->snd_nxt);

	if (t->snd_nxt - t->snd_una >= t->tx_cap ||
	    IW_TRP_HDR_LEN + len > t->pkt_max)
		return ENOBUFS;
	if (tx_buf(t, p))
		return ENOMEM;
	iw_trp_put(p->buf, t->snd_nxt, 0, flags, 0);
	if (len)
		memcpy(p->buf + IW_TRP_HDR_LEN, b, len);
	p->len = (uint32_t)(IW_TRP_HDR_LEN + len);
	p->zc = NULL;
	p->zc_len = 0;
	p->token = 0;
	t->snd_nxt++;
	return 0;
}

static void start_defaults(struct iwe_trp_start *s, uint32_t window)
{
	memset(s, 0, sizeof(*s));
	s->tx_psn = 1;
	s->rx_psn = 1;
	s->peer_credits = window;
}

static int trp_setup(struct trp *t, struct iwe_qp_priv *q,
		     const struct iwe_trp_start *s)
{
	struct iwe_device *dev = q->pub.pd->dev;

	t->tx = iw_slab_zalloc(t->tx_cap * sizeof(*t->tx));
	if (!t->tx || trp_bufs_init(&t->tx_spare, t->tx_cap) ||
	    trp_rx_attach(t, q->fd, s->rx_psn))
		return ENOMEM;
	t->credit_cap = socket_buffers(q->fd, t->pkt_max);
	t->snd_una = t->snd_sent = t->snd_nxt = s->tx_psn;
	t->peer_ack = s->tx_psn - 1;
	t->peer_limit = t->peer_ack + s->peer_credits;
	t->rto_us = TRP_RTO_INIT_US;
	t->ack_delay_ns = (uint64_t)iw_env_long("IWDAPL_TRP_ACK_DELAY_US",
						TRP_ACK_DELAY_US, 0,
						TRP_ACK_DELAY_MAX_US) * 1000u;
	/* An idle connection's peer silent this long is gone; it was
	 * last heard in the connection exchange, just now. */
	t->dead_ns = (uint64_t)iw_env_peer_timeout_ms() * 1000000u;
	t->heard_ns = iwe_now_ns();
	t->test = dev->trp_test;
	/* UDP GSO (Linux 4.18) cuts equal packets out of one send; the test
	 * aid works packet by packet, so it turns GSO off. */
	t->gso = !t->test.drop && !t->test.reorder && !t->test.dup;
	t->rng = ((uint64_t)t->test.seed << 32 | q->pub.qp_num) *
		 0x9E3779B97F4A7C15ull | 1;
	if (s->first) {
		int err = queue_ctl(t, IW_TRP_I, s->first, s->first_len);

		if (err)
			return err;
		t->gate = 1;
		t->gate_psn = s->tx_psn;
	}
	t->ack_due = !!s->ack_now;
	return 0;
}

static int trp_attach_with(struct iwe_qp_priv *q, const void *start)
{
	struct iwe_prog *prog = iwe_prog_get(q->pub.pd->dev);
	uint32_t pkt = iwe_trp_pkt_max(q->pub.pd->dev);
	uint32_t win = iwe_trp_window(q->pub.pd->dev);
	struct iwe_trp_start def;
	struct trp *t;
	int err;

	if (!prog)
		return ENOMEM;
	if (!start) {
		start_defaults(&def, win);
		start = &def;
	}
	t = iw_slab_zalloc(sizeof(*t));
	if (!t)
		return ENOMEM;
	pthread_mutex_init(&t->mx, NULL);
	t->q = q;
	t->prog = prog;
	t->timer.cb = timer_cb;
	t->arm_task.fn = arm_task_fn;
	t->free_task.fn = free_task_fn;
	t->pkt_max = pkt;
	t->tx_cap = win;
	t->rx_cap = win;
	err = trp_setup(t, q, start);
	if (err) {
		tx_free(t);
		trp_rx_detach(t, q->fd);
		pthread_mutex_destroy(&t->mx);
		iw_slab_free(t, sizeof(*t));
		return err;
	}
	q->llp_tx = q->llp_rx = t;
	trp_flush(t, q);
	trp_timer_sync(t, q);
	return 0;
}

static int trp_attach(struct iwe_qp_priv *q)
{
	return trp_attach_with(q, NULL);
}

/* IWDAPL_TRP_STATS=1: a QP's counters in the log when it lets go (at
 * error level: asked for, so shown unless the log is off). */
static void stats_dump(const struct trp *t, const struct iwe_qp_priv *q)
{
	if (!iw_env_bool("IWDAPL_TRP_STATS", 0))
		return;
	iw_log(IW_LOG_ERROR, "TRP qp %u: sent %llu retx %llu fast %llu "
		"rto %llu probes %llu acks %llu dup %llu ooo %llu srtt %llu us "
		"rto %llu us",
		q->pub.qp_num, (unsigned long long)t->st.sent,
		(unsigned long long)t->st.retx,
		(unsigned long long)t->st.fast_retx,
		(unsigned long long)t->st.rto,
		(unsigned long long)t->st.tlp,
		(unsigned long long)t->st.acks_sent,
		(unsigned long long)t->st.dup_rcvd,
		(unsigned long long)t->st.ooo_rcvd,
		(unsigned long long)t->srtt_us, (unsigned long long)t->rto_us);
}

static void trp_detach(struct iwe_qp_priv *q)
{
	struct trp *t = trp_of(q);

	if (!t)
		return;
	stats_dump(t, q);
	pthread_mutex_lock(&t->mx);
	t->q = NULL;		/* the timer leaves the QP alone from now */
	pthread_mutex_unlock(&t->mx);
	tx_free(t);
	trp_rx_detach(t, q->fd);
	q->llp_tx = q->llp_rx = NULL;
	iwe_prog_post(t->prog, &t->free_task);
}

static uint32_t trp_max_ulpdu(const struct iwe_qp_priv *q)
{
	return trp_of(q)->pkt_max - IW_TRP_HDR_LEN;
}

static uint32_t trp_max_inflight(const struct iwe_qp_priv *q)
{
	return trp_of(q)->tx_cap;
}

/* Room in the ring, within the peer's credits (when nothing is in
 * flight, one packet beyond them probes a closed window; a Terminate
 * goes regardless), and a batch not yet full. */
static int trp_tx_room(const struct iwe_qp_priv *q, uint32_t pay_len,
		       int npay)
{
	const struct trp *t = trp_of(q);

	(void)pay_len;
	(void)npay;
	if (t->quiet || t->fault || t->snd_nxt - t->snd_una >= t->tx_cap ||
	    t->snd_nxt - t->snd_sent >= TRP_BATCH)
		return 0;
	/* A failing QP sends its Terminate (whatever the credits) and
	 * nothing else. */
	if (t->ending || q->tx.kind == IWE_TX_TERMINATE)
		return q->tx.kind == IWE_TX_TERMINATE;
	return iw_psn_le(t->snd_nxt, t->peer_limit) ||
	       t->snd_una == t->snd_nxt;
}

static void trp_tx_add(struct iwe_qp_priv *q, const struct iwe_llp_seg *s)
{
	struct trp *t = trp_of(q);
	struct trp_txp *p = trp_slot(t, t->snd_nxt);
	uint8_t *b;

	if (tx_buf(t, p)) {
		/* Out of memory for the packet: it is not queued and the QP
		 * fails (iw_qp.c, run_tx); the process goes on. */
		t->fault = ENOMEM;
		return;
	}
	b = p->buf + IW_TRP_HDR_LEN;
	iw_trp_put(p->buf, t->snd_nxt, 0, 0, 0);
	memcpy(b, s->hdr, s->hdr_len);
	b += s->hdr_len;
	p->len = IW_TRP_HDR_LEN + s->hdr_len + s->pay_len;
	p->token = 1;
	p->zc = NULL;
	p->zc_len = 0;
	p->fatal_term = 0;
	if (q->tx.kind == IWE_TX_SQ && s->npay == 1 &&
	    s->pay_len >= TRP_ZC_MIN) {
		/* A Send's or Write's payload: its WR completes only once
		 * the peer acknowledged every packet, so until then the
		 * bytes stay where they are (and a retransmission reads
		 * them there).  Not a Read Response: its source may be
		 * freed at any time. */
		p->zc = s->pay[0].iov_base;
		p->zc_len = s->pay_len;
	} else {
		for (int i = 0; i < s->npay; i++) {
			/* Registered memory the consumer unmapped (a Read
			 * Response's source, most likely): the packet is
			 * not queued and the QP fails (iw_qp.c, run_tx),
			 * the process goes on. */
			if (iwe_copy_guarded(b, s->pay[i].iov_base,
					     s->pay[i].iov_len,
					     IWE_COPY_PLAIN, NULL)) {
				t->fault = EFAULT;
				return;
			}
			b += s->pay[i].iov_len;
		}
		p->fatal_term = (uint8_t)trp_term_outgoing(
			q, p->buf + IW_TRP_HDR_LEN, s->hdr_len + s->pay_len);
	}
	t->snd_nxt++;
}

static int trp_tx_write(struct iwe_qp_priv *q, uint32_t *done)
{
	struct trp *t = trp_of(q);
	int err = trp_flush(t, q);

	*done = t->done;
	t->done = 0;
	trp_timer_sync(t, q);
	if (t->fault && (!err || err == EAGAIN)) {
		err = t->fault;
		t->fault = 0;	/* told once: the Terminate may follow */
	}
	return err;
}

static int trp_tx_blocked(const struct iwe_qp_priv *q)
{
	const struct trp *t = trp_of(q);

	return t && t->blocked && (t->snd_sent != t->snd_nxt || t->nretx);
}

/* The QP is failing: packets not yet sent never go (their PSNs are
 * given back), sent ones are kept but not retransmitted -- only a
 * Terminate queued from now on goes out, once. */
static uint32_t trp_tx_detach(struct iwe_qp_priv *q)
{
	struct trp *t = trp_of(q);
	uint32_t keep = 0, psn;

	if (!t)
		return 0;
	for (psn = t->snd_una; psn != t->snd_sent; psn++)
		keep += trp_slot(t, psn)->token;
	for (psn = t->snd_sent; psn != t->snd_nxt; psn++)
		trp_slot(t, psn)->token = 0;
	for (psn = t->snd_una; psn != t->snd_sent; psn++)
		trp_slot(t, psn)->want_retx = 0;
	t->snd_nxt = t->snd_sent;
	t->nretx = 0;
	t->ending = 1;
	t->deadline_ns = 0;
	return keep;
}

const struct iwe_llp_ops iwe_llp_trp = {
	.name = "TRP/UDP",
	.attach = trp_attach,
	.attach_with = trp_attach_with,
	.detach = trp_detach,
	.max_ulpdu = trp_max_ulpdu,
	.max_inflight = trp_max_inflight,
	.tx_room = trp_tx_room,
	.tx_add = trp_tx_add,
	.tx_write = trp_tx_write,
	.tx_blocked = trp_tx_blocked,
	.tx_detach = trp_tx_detach,
	.rx_progress = trp_rx_progress,
	.rx_idle = trp_rx_idle,
};

/* ------------------------------------------------ for the CM and tests */

/* An abrupt close's F is never retransmitted (the QP is gone), so it
 * goes out this many times back to back: copies of one PSN are
 * duplicates to the peer.  Sent once, a lost F (1 % loss, 100
 * connections closed abruptly by dapltest) left the peer to learn of the
 * close from the ICMP answer to its next packet: BROKEN, not
 * DISCONNECTED. */
#define TRP_ABRUPT_FIN_COPIES 3

static void send_abrupt_fin(struct trp *t, struct iwe_qp_priv *q)
{
	uint8_t b[IW_TRP_HDR_LEN];

	iw_trp_put(b, t->snd_nxt, t->rcv_nxt - 1, IW_TRP_F, trp_credits(t));
	for (int i = 0; i < TRP_ABRUPT_FIN_COPIES; i++)
		if (send(q->fd, b, sizeof(b), MSG_DONTWAIT) < 0)
			break;	/* best effort: the peer times out instead */
}

void iwe_trp_send_fin(struct iwe_qp *qp)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	struct trp *t;

	iwe_qp_lock_for_post(q);
	t = q->llp == &iwe_llp_trp ? trp_of(q) : NULL;
	if (t && q->fd >= 0 && !t->quiet) {
		if (q->state == IWE_QPS_ERROR || t->ending ||
		    queue_ctl(t, IW_TRP_F, NULL, 0)) {
			/* An abrupt close sends its F, never retransmitted
			 * (send_abrupt_fin).  A held ack goes on its own
			 * first: two chances, not one, that the peer learns
			 * its last Sends came (else it resends them to a
			 * closed port and ends BROKEN). */
			trp_rx_idle(q);
			send_abrupt_fin(t, q);
		} else
			trp_flush(t, q);
		trp_timer_sync(t, q);
	}
	iwe_qp_unlock(q);
}

int iwe_trp_tx_acked(struct iwe_qp *qp, uint32_t psn)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);
	const struct trp *t;
	int acked;

	iwe_qp_lock(q);
	t = q->llp == &iwe_llp_trp ? trp_of(q) : NULL;
	acked = t && iw_psn_gt(t->snd_una, psn);
	iwe_qp_unlock(q);
	return acked;
}

void iwe_trp_stats(struct iwe_qp *qp, struct iwe_trp_stats *out)
{
	struct iwe_qp_priv *q = iwe_qp_priv(qp);

	memset(out, 0, sizeof(*out));
	iwe_qp_lock_for_post(q);
	if (q->llp == &iwe_llp_trp && trp_of(q)) {
		*out = trp_of(q)->st;
		out->spares = trp_of(q)->tx_spare.n + trp_of(q)->rx_pool.n;
	}
	iwe_qp_unlock(q);
}

static int parse_pct(const char *v, uint8_t *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (!*v || *end || n < 0 || n > 100)
		return EINVAL;
	*out = (uint8_t)n;
	return 0;
}

static int parse_item(char *item, struct iwe_trp_test *o)
{
	char *v = strchr(item, ':'), *end;
	unsigned long s;

	if (!v)
		return EINVAL;
	*v++ = '\0';
	if (!strcmp(item, "drop"))
		return parse_pct(v, &o->drop);
	if (!strcmp(item, "reorder"))
		return parse_pct(v, &o->reorder);
	if (!strcmp(item, "dup"))
		return parse_pct(v, &o->dup);
	if (strcmp(item, "seed"))
		return EINVAL;
	s = strtoul(v, &end, 10);
	if (!*v || *end || s > UINT32_MAX)
		return EINVAL;
	o->seed = (uint32_t)s;
	return 0;
}

int iwe_trp_test_parse(const char *spec, struct iwe_trp_test *out)
{
	struct iwe_trp_test o = { .seed = 1 };
	char buf[128], *save = NULL, *item;
	int err = 0;

	if (!spec || strlen(spec) >= sizeof(buf))
		return EINVAL;
	strcpy(buf, spec);
	for (item = strtok_r(buf, ",", &save); item && !err;
	     item = strtok_r(NULL, ",", &save))
		err = parse_item(item, &o);
	if (!err)
		*out = o;
	return err;
}
