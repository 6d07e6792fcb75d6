/* The event ring of an EVD: what the provider posts (connection, CR,
 * asynchronous and software events) and how a consumer takes events out
 * again.  Completions of DTOs and RMR binds do not pass through here: they
 * wait in the EVD's engine CQ (evd_cq.c) until a dequeue converts them
 * (dto_event.c).  Also the dependents' count of an EVD (dapl_evd_pin). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "dapl_evd.h"

/* ------------------------------------------------------------- ring */

DAT_COUNT dapl_evd_count_locked(struct dapl_evd *evd)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	return evd->count + (evd->cq ? iwe_cq_count(evd->cq) : 0);
}

static void ring_put_locked(struct dapl_evd *evd, const DAT_EVENT *event)
{
	DAT_EVENT *slot = &evd->ring[(evd->head + evd->count) % evd->qlen];

	DAPL_ASSERT_LOCKED(&evd->lock);
	*slot = *event;
	slot->evd_handle = evd->obj.handle;
	evd->count++;
}

void dapl_evd_ring_get_locked(struct dapl_evd *evd, DAT_EVENT *event)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	*event = evd->ring[evd->head];
	evd->head = (evd->head + 1) % evd->qlen;
	evd->count--;
	evd->overflowed = 0;	/* below full: a new overflow is news */
}

void dapl_evd_ring_move_locked(struct dapl_evd *evd, DAT_EVENT *ring,
			       DAT_COUNT qlen)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	for (DAT_COUNT i = 0; i < evd->count; i++)
		ring[i] = evd->ring[(evd->head + i) % evd->qlen];
	free(evd->ring);
	evd->ring = ring;
	evd->head = 0;
	evd->qlen = qlen;
	if (evd->count < qlen)
		evd->overflowed = 0;
}

/* -------------------------------------------------------- posting */

/* A new event is in. */
static void notify_locked(struct dapl_evd *evd, struct dapl_agent_call *call)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (atomic_load(&evd->waiting)) {
		/* A direct waiter preempts the CNO (spec, dat_cno_wait). */
		if (dapl_evd_count_locked(evd) >= evd->threshold)
			dapl_efd_poke(evd->wake_fd);
		return;
	}
	if (evd->cno && atomic_load(&evd->enabled))
		dapl_cno_notify_locked(evd->cno, evd, call);
}

DAT_RETURN dapl_evd_enqueue(struct dapl_evd *evd, const DAT_EVENT *event,
			    int report_overflow)
{
	struct dapl_agent_call call = { 0 };
	struct dapl_ia *ia = evd->obj.ia;
	int news = 0;
	DAT_RETURN ret = DAT_SUCCESS;

	dapl_lock(&evd->lock);
	if (evd->count == evd->qlen) {
		ret = DAT_QUEUE_FULL;
		if (report_overflow) {
			news = !evd->overflowed;
			evd->overflowed = 1;
		}
	} else {
		ring_put_locked(evd, event);
		notify_locked(evd, &call);
	}
	dapl_unlock(&evd->lock);
	dapl_cno_call_agent(&call);
	/* The async EVD cannot report its own overflow: it is full. */
	if (news && evd != ia->async_evd)
		dapl_evd_post_async(ia, DAT_ASYNC_ERROR_EVD_OVERFLOW,
				    evd->obj.handle, 0);
	return ret;
}

void dapl_evd_post_async(struct dapl_ia *ia, DAT_EVENT_NUMBER number,
			 DAT_HANDLE subject, int reason)
{
	struct dapl_evd *evd = ia->async_evd;
	DAT_ASYNCH_ERROR_EVENT_DATA *d;
	DAT_EVENT ev;

	if (!evd)
		return;		/* DAT_EVD_ASYNC_EXISTS: nobody listens */
	memset(&ev, 0, sizeof(ev));
	ev.event_number = number;
	d = &ev.event_data.asynch_error_event_data;
	d->dat_handle = subject ? subject : dapl_ia_consumer_handle(ia);
	d->reason = reason;
	(void)dapl_evd_enqueue(evd, &ev, 1);
}

/* ------------------------------------------------------- dependents */

struct dapl_evd *dapl_evd_pin(struct dapl_ia *ia, DAT_EVD_HANDLE h,
			      DAT_EVD_FLAGS flag)
{
	struct dapl_evd *evd;

	dapl_ia_lock(ia);
	/* Under ia->lock, so dat_evd_free cannot win between look-up and
	 * count. */
	evd = dapl_obj_get_locked(ia, h, DAT_HANDLE_TYPE_EVD);
	if (evd && dapl_evd_has(evd, flag))
		evd->obj.users++;
	else
		evd = NULL;
	dapl_ia_unlock(ia);
	return evd;
}

void dapl_evd_unpin_locked(struct dapl_evd *evd)
{
	dapl_obj_unpin_locked(&evd->obj);
}
