/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The event ring of an EVD: what the provider posts (connection, CR,
 * asynchronous and software events) and how a consumer takes events out
 * again.  Completions of DTOs and RMR binds do not pass through here: they
 * wait in the EVD's engine CQ (evd_cq.c) until a dequeue converts them
 * (dto_event.c).
 *
 * Also the dependents' count of an EVD (dapl_evd_pin), which is where the
 * EVD may be shared across IAs: an EP's connect EVD and the CR EVD of a
 * PSP, RSP or SSP only receive events the provider posts into the ring,
 * so they may belong to any IA of the same provider instance (DAT
 * consumers such as dapltest's limit tests open several IAs on one device
 * and give every EP one connect EVD).  An EVD as recv or request EVD is
 * fed by the QP through its engine CQ, which lives on the EVD's IA's
 * engine device: it must belong to the EP's own IA.
 *
 * Because dependents may live on other IAs, the count (obj.users) and the
 * release of an EVD's handle are guarded by one process-wide lock,
 * share_lock, not by ia->lock.  Lock order: ia->lock, share_lock,
 * evd->lock, cno->lock.  An EVD whose IA is closed abruptly while an
 * object of another IA still counts on it becomes an orphan: its handle
 * and engine resources go with the IA, its ring stays (posts to it still
 * work, nobody reads them) until the last dependent lets it go. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

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

void dapl_evd_wake_locked(struct dapl_evd *evd)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	dapl_evd_wake(evd);
}

/* A new event is in. */
static void notify_locked(struct dapl_evd *evd, struct dapl_agent_call *call)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (atomic_load(&evd->waiting)) {
		/* A direct waiter preempts the CNO (spec, dat_cno_wait). */
		if (evd->asleep && dapl_evd_count_locked(evd) >= evd->threshold)
			dapl_evd_wake_locked(evd);
		return;
	}
	if (evd->cno && atomic_load(&evd->enabled))
		dapl_cno_notify_locked(evd->cno, evd, call);
}

DAT_RETURN dapl_evd_enqueue(struct dapl_evd *evd, const DAT_EVENT *event,
			    int report_overflow)
{
	struct dapl_agent_call call = { 0 };
	struct dapl_ia *ia;
	int news = 0;
	DAT_RETURN ret = DAT_SUCCESS;

	dapl_lock(&evd->lock);
	ia = evd->obj.ia;	/* NULL once orphaned: no async EVD then */
	if (evd->count == evd->qlen) {
		ret = DAT_QUEUE_FULL;
		if (report_overflow && ia) {
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

static struct dapl_lock share_lock = DAPL_LOCK_INITIALIZER;

/* The roles whose EVD may belong to another IA of the provider instance:
 * nothing but dapl_evd_post feeds them. */
#define SHAREABLE_ROLES (DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG)

struct dapl_evd *dapl_evd_pin(struct dapl_ia *ia, DAT_EVD_HANDLE h,
			      DAT_EVD_FLAGS role)
{
	const struct dapl_ia *owner = (role & SHAREABLE_ROLES) ? NULL : ia;
	struct dapl_evd *evd;

	/* Under share_lock, so dat_evd_free cannot win between look-up and
	 * count: it releases the handle under the same lock. */
	dapl_lock(&share_lock);
	evd = dapl_handle_find(h, DAT_HANDLE_TYPE_EVD, &ia->prov->dat, owner);
	if (evd && dapl_evd_has(evd, role))
		evd->obj.users++;
	else
		evd = NULL;
	dapl_unlock(&share_lock);
	return evd;
}

void dapl_evd_unpin(struct dapl_evd *evd)
{
	int last;

	dapl_lock(&share_lock);
	if (evd->obj.users > 0)
		evd->obj.users--;
	last = !evd->obj.ia && evd->obj.users == 0;
	dapl_unlock(&share_lock);
	if (last)
		dapl_evd_ring_free(evd);	/* the orphan's last user */
}

int dapl_evd_in_use(struct dapl_evd *evd)
{
	int used;

	dapl_lock(&share_lock);
	used = evd->obj.users > 0;
	dapl_unlock(&share_lock);
	return used;
}

DAT_RETURN dapl_evd_unlink_locked(struct dapl_evd *evd,
				  DAT_RETURN (*may_go_locked)(struct dapl_evd *))
{
	DAT_RETURN ret = DAT_SUCCESS;

	DAPL_ASSERT_IA_LOCKED(evd->obj.ia);
	dapl_lock(&share_lock);
	if (evd->obj.users > 0)
		ret = DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE;
	dapl_lock(&evd->lock);
	if (ret == DAT_SUCCESS)
		ret = may_go_locked(evd);
	if (ret == DAT_SUCCESS) {
		evd->dead = 1;
		if (evd->cno)
			dapl_cno_detach_locked(evd->cno, evd);
	}
	dapl_unlock(&evd->lock);
	if (ret == DAT_SUCCESS)
		dapl_obj_fini_locked(&evd->obj);
	dapl_unlock(&share_lock);
	return ret;
}

int dapl_evd_orphan_locked(struct dapl_evd *evd)
{
	int orphan;

	DAPL_ASSERT_IA_LOCKED(evd->obj.ia);
	dapl_lock(&share_lock);
	dapl_obj_fini_locked(&evd->obj);
	orphan = evd->obj.users > 0;
	dapl_lock(&evd->lock);
	if (evd->cno)
		dapl_cno_detach_locked(evd->cno, evd);
	if (orphan)
		evd->obj.ia = NULL;	/* its IA is going */
	dapl_unlock(&evd->lock);
	dapl_unlock(&share_lock);
	return orphan;
}

/* ----------------------------------------------------------- memory */

struct dapl_evd *dapl_evd_ring_alloc(struct dapl_ia *ia, DAT_COUNT qlen,
				     DAT_EVD_FLAGS flags)
{
	struct dapl_evd *evd = calloc(1, sizeof(*evd));

	if (!evd)
		return NULL;
	dapl_lock_init(&evd->lock);
	pthread_cond_init(&evd->idle, NULL);
	evd->obj.ia = ia;
	evd->flags = flags;
	atomic_init(&evd->enabled, 1);
	atomic_init(&evd->waiting, 0);
	atomic_init(&evd->fd_woken, 0);
	evd->waitable = 1;
	evd->qlen = qlen;
	evd->threshold = 1;
	evd->ring = calloc((size_t)qlen, sizeof(*evd->ring));
	evd->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!evd->ring || evd->wake_fd < 0) {
		dapl_evd_ring_free(evd);
		return NULL;
	}
	return evd;
}

void dapl_evd_ring_free(struct dapl_evd *evd)
{
	if (evd->wake_fd >= 0)
		close(evd->wake_fd);
	pthread_cond_destroy(&evd->idle);
	dapl_lock_destroy(&evd->lock);
	free(evd->ring);
	free(evd);
}
