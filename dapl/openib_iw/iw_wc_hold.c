/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Holding a lone RDMA Write's completion over MPA while the consumer
 * polls and the peer answers each Write quickly.
 *
 * Why: a consumer that writes, polls its CQ for the Write's completion,
 * then spins on the memory the peer writes back (Debian's dtest -W, a
 * ring that a fast path polls) never polls an empty CQ once the
 * completion is there, so nobody of its process reads the answer but
 * the progress thread -- a thread wake-up per message, and on 2 CPUs
 * with both consumers spinning that wake-up waited 20-30 us for a CPU.
 * Held for a moment, the completion keeps the consumer polling, and its
 * polls read the answer (a poll of an empty CQ drives the receive side);
 * the completion is released as soon as anything has come in.  Only
 * for a consumer whose looks at the send CQ are polls (iwe_cq_polling):
 * one that sleeps in a wait arms, and arming releases the hold.  TRP needs
 * none of this: there a Write completes when it is acknowledged, and the
 * answer carries the acknowledgement.
 *
 * A completion may come any time after the Write is done (the verbs
 * promise no more), so holding it changes nothing a consumer may rely
 * on; the hold is bounded (WC_HOLD_NS), ends at once when the consumer
 * arms its CQ to sleep, posts again, or the QP is flushed, and is taken
 * only while the Writes have been answered (WC_MISSES_MAX holds that run
 * out in a row stop it until an answer comes in time again).
 *
 * Everything here runs with the QP lock held.
 */
#include "iw_llp.h"
#include "iw_qp.h"

/* As long as TRP holds a lone Write's acknowledgement for an answer
 * (IWDAPL_TRP_ACK_DELAY_US's default): an answer later than this is no
 * answer, and the Write's completion comes without it. */
#define WC_HOLD_NS (50u * 1000u)
/* An answer that comes within this of the Write counts: it may have
 * been read by the progress thread, whose wake-up takes tens of
 * microseconds on a busy machine, before the holds began. */
#define WC_ANSWER_NS (1000u * 1000u)
/* Holds that may run out in a row before they stop: one consumer
 * descheduled for a moment (2 CPUs, two spinning consumers) must not end
 * them, for the answer that would start them again comes only through
 * the progress thread, which such consumers leave waiting for a CPU. */
#define WC_MISSES_MAX 4

void iwe_wc_hold_write_done(struct iwe_qp_priv *q, const struct iwe_swqe *w)
{
	uint64_t now;

	/* Lone: the only WR of the send queue, so its head too. */
	if (!q->llp || !q->llp->done_when_sent ||
	    w->opcode != IBV_WR_RDMA_WRITE || q->sq_tail - q->sq_head != 1)
		return;
	now = iwe_now_ns();
	/* Input read before now is not this Write's answer. */
	q->wc_rx_seen = q->stats.rx_segments;
	q->wc_write_ns = now;
	if ((w->signaled || q->sq_sig_all) && q->wc_answered &&
	    q->pub.send_cq && iwe_cq_polling(q->pub.send_cq)) {
		atomic_store(&q->wc_hold_until, now + WC_HOLD_NS);
		q->stats.wc_held++;
	}
}

void iwe_wc_hold_check(struct iwe_qp_priv *q)
{
	uint64_t now;

	if (q->stats.rx_segments != q->wc_rx_seen) {
		/* Something came in: an answer if it came in time. */
		q->wc_rx_seen = q->stats.rx_segments;
		if (q->wc_write_ns &&
		    iwe_now_ns() - q->wc_write_ns <= WC_ANSWER_NS)
			q->wc_answered = WC_MISSES_MAX;
		q->wc_write_ns = 0;
		iwe_wq_sq_release_held(q);
		return;
	}
	if (!atomic_load(&q->wc_hold_until))
		return;
	now = iwe_now_ns();
	if (now >= atomic_load(&q->wc_hold_until)) {
		q->wc_answered--;	/* at 0, until an answer comes in time */
		q->wc_write_ns = 0;
		iwe_wq_sq_release_held(q);
	}
}
