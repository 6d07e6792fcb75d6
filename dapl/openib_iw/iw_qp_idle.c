/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A connection's idle give-back.  What a QP allocates for traffic -- its
 * send and receive queues at their first post, the list of segments it
 * has in the transport, the transport's receive buffer (MPA: a page, or
 * the ring of up to 128 KiB that bulk input grew) -- goes back once the
 * connection has been quiet for QP_IDLE_MS with none of it in use, and
 * is allocated again by the next post or read.  A queue holding work (the
 * receives most consumers keep posted ahead) stays.
 *
 * Once all of it went back, the QP's owner hears IWE_EVENT_QP_IDLE and
 * may give back its own per-request state (the DAT layer's work slots).
 *
 * One timer per QP that holds any of it, on the progress thread: armed
 * when something is allocated, re-armed while the connection is busy or
 * some of it is still in use, stopped once everything went back.  No
 * scan of the connections, and a busy connection pays one timer a
 * period, never an allocation per message.
 */
#include <stdlib.h>

#include "iw_llp.h"
#include "iw_progress.h"
#include "iw_qp.h"

#define QP_IDLE_MS 1000

/* What moves while the connection works: posts, completions, data
 * taken off the wire -- not a transport's pure acks: TRP's idle probe
 * (one a second each way) counted as reads kept every udp connection
 * from ever going quiet, holding its queues and work slots (48 KiB of
 * an idle EP, against 6 over tcp). */
static uint64_t activity(const struct iwe_qp_priv *q)
{
	return (uint64_t)q->sq_tail + q->sq_head + q->rq_tail + q->rq_head +
	       q->rx_data;
}

/* QP lock held: give back what is not in use; 1 while some of it that
 * should go later still is (a send or a Read under way, bytes of a
 * segment in the receive buffer). */
static int trim(struct iwe_qp_priv *q)
{
	int held = 0;

	if (q->sq) {
		if (q->sq_head == q->sq_tail && !iwe_tx_busy(q))
			iwe_wq_sq_free(q);
		else
			held = 1;
	}
	if (q->rq && q->rq_head == q->rq_tail)
		iwe_wq_rq_free(q);
	if (!q->tx.tok_count)
		iwe_tx_fini(q);
	if (q->llp && q->llp->trim)
		held |= q->llp->trim(q);
	return held;
}

static void idle_timer_cb(struct iwe_prog_timer *t)
{
	struct iwe_qp_priv *q = IWE_CONTAINER_OF(t, struct iwe_qp_priv,
						 idle_timer);
	uint64_t now;

	if (!iwe_qp_trylock(q)) {	/* a consumer's call: busy */
		iwe_prog_timer_arm(q->prog, &q->idle_timer, QP_IDLE_MS);
		return;
	}
	now = activity(q);
	if (now != q->idle_seen || trim(q)) {
		q->idle_seen = now;
		iwe_prog_timer_arm(q->prog, &q->idle_timer, QP_IDLE_MS);
	} else {
		q->idle_watched = 0;
		/* Out of the CQs' epolls until its next completion: a poll
		 * looks directly at the few connections that are busy. */
		iwe_cq_hook_leave(q->pub.send_cq, &q->send_hook);
		if (q->pub.recv_cq != q->pub.send_cq)
			iwe_cq_hook_leave(q->pub.recv_cq, &q->recv_hook);
		/* Nothing posted is outstanding: the owner's per-request
		 * state may go too. */
		if (!q->sq && !q->rq)
			q->ev_pending |= IWE_QP_EV_IDLE;
	}
	iwe_qp_release(q, 0);
}

/* On the loop (timers are its own). */
static void idle_task(struct iwe_prog_task *t)
{
	struct iwe_qp_priv *q = IWE_CONTAINER_OF(t, struct iwe_qp_priv,
						 idle_task);

	if (!q->idle_timer.slot)
		iwe_prog_timer_arm(q->prog, &q->idle_timer, QP_IDLE_MS);
}

void iwe_qp_idle_init(struct iwe_qp_priv *q)
{
	q->idle_task.fn = idle_task;
	q->idle_timer.cb = idle_timer_cb;
}

void iwe_qp_idle_hold(struct iwe_qp_priv *q)
{
	IWE_QP_ASSERT_LOCKED(q);
	/* Watched sockets only: unwatch (under this lock) stops both. */
	if (!q->prog || q->watch.fd < 0 || q->idle_watched)
		return;
	q->idle_watched = 1;
	q->idle_seen = activity(q);
	iwe_prog_post(q->prog, &q->idle_task);
}

void iwe_qp_idle_stop(struct iwe_qp_priv *q)
{
	iwe_prog_unpost(q->prog, &q->idle_task);
	iwe_prog_timer_cancel(q->prog, &q->idle_timer);
	q->idle_watched = 0;
}
