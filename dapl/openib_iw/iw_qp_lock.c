/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The QP lock and its kick (see iw_qp.h): below the transports, so a
 * transport's timer can take the lock and have the QP's progress run
 * without calling up into iw_qp.c (which hands its progress down as
 * q->on_kick).
 */
#include <stdatomic.h>

#include "iw_qp.h"

void iwe_qp_lock(struct iwe_qp_priv *q)
{
	iwe_lock(&q->lock);
}

int iwe_qp_trylock(struct iwe_qp_priv *q)
{
	if (pthread_mutex_trylock(&q->lock.m))
		return 0;
	q->lock.owner = pthread_self();
	return 1;
}

/* Deliver the asynchronous events noticed under the lock. */
static void deliver_events(struct iwe_qp_priv *q, unsigned ev)
{
	struct iwe_async_event e = { .type = IWE_EVENT_QP_LAST_WQE_REACHED,
				     .element.qp = &q->pub,
				     .context = q->pub.qp_context };

	/* The limit first: it is older than an error that stops the QP. */
	if (ev & IWE_QP_EV_SRQ_LIMIT)
		iwe_srq_report_limit(q->srq);
	if ((ev & IWE_QP_EV_LAST_WQE) && q->handler)
		q->handler(&e);
	if ((ev & IWE_QP_EV_IDLE) && q->handler) {
		e.type = IWE_EVENT_QP_IDLE;
		q->handler(&e);
	}
}

void iwe_qp_release(struct iwe_qp_priv *q, int keep_events)
{
	for (;;) {
		unsigned ev = keep_events ? 0 : q->ev_pending;

		if (!keep_events)
			q->ev_pending = 0;
		else if (q->ev_pending && q->notify)
			q->notify(q->notify_arg);
		iwe_unlock(&q->lock);
		if (ev)
			deliver_events(q, ev);
		if (!atomic_load(&q->kick) || !iwe_qp_trylock(q))
			return;	/* a new holder sees the kick */
		q->on_kick(q);
	}
}

void iwe_qp_unlock(struct iwe_qp_priv *q)
{
	iwe_qp_release(q, 0);
}

void iwe_qp_lock_for_post(struct iwe_qp_priv *q)
{
	iwe_qp_lock(q);
}

void iwe_qp_kick(struct iwe_qp_priv *q)
{
	atomic_store(&q->kick, 1);
	if (iwe_qp_trylock(q))
		iwe_qp_release(q, 0);	/* runs the kick */
}
