/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Event Dispatchers and Consumer Notification Objects.
 *
 * Files, from the bottom: evd_cq.c (the engine CQ and completion channel
 * of a DTO EVD), cno.c (CNOs), evd_queue.c (the event ring: what the
 * provider posts and what a consumer takes), dto_event.c (an engine
 * completion as a DAT event) and evd.c (the EVD calls of the consumer).
 *
 * An EVD is a ring of DAT_EVENTs filled by the provider (dapl_evd_post) and
 * by dat_evd_post_se.  An EVD that takes DTO or RMR-bind completions also
 * owns an engine CQ with its own completion channel: the engine writes
 * completions there and dequeue/wait turn them into DAT events, after
 * whatever the ring holds.
 *
 * Blocking uses file descriptors only, so that one poll() covers every
 * source: an EVD waiter sleeps on the EVD's wake eventfd (written when an
 * event arrives, when the EVD is set unwaitable or torn down) and, for a
 * CQ-backed EVD, on the completion channel (armed before sleeping).  A CNO
 * has an eventfd of its own (written when an attached EVD posts an event)
 * and an epoll set holding that eventfd plus the channels of attached
 * CQ-backed EVDs; dat_cno_wait sleeps on the epoll fd and
 * dat_cno_fd_create hands it to the consumer, so completions the engine
 * produces make it readable without any provider thread.
 *
 * Lock order: ia->lock, then the EVD share lock (evd_queue.c), then
 * evd->lock, then cno->lock; engine locks are leaves.  The CNO reads an attached EVD's 'enabled' and 'waiting' flags
 * without the EVD lock (they are atomic) because it cannot take the EVD
 * lock while holding its own.
 */
#ifndef DAPL_EVD_H
#define DAPL_EVD_H

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "dapl.h"

struct dapl_cno;

struct dapl_evd {
	struct dapl_obj obj;
	struct dapl_lock lock;
	pthread_cond_t idle;		/* teardown waits for the waiter here */
	DAT_EVD_FLAGS flags;
	atomic_int enabled;		/* may trigger its CNO */
	int waitable;
	DAT_EVENT *ring;		/* qlen slots */
	DAT_COUNT qlen;
	DAT_COUNT head;			/* oldest event */
	DAT_COUNT count;		/* events in the ring */
	DAT_COUNT threshold;		/* of the current waiter */
	atomic_int waiting;		/* a thread is in dat_evd_wait */
	/* Under lock: the waiter sleeps, or is about to, in a system call.
	 * Only then is its wake fd written (its own thread too may post
	 * meanwhile: the sleep runs the device's due work before its wait;
	 * after the wait it clears this, evd_awake): a spinning
	 * waiter sees new events in memory, and each write costs the
	 * poster a system call, and later the waiter's sleep a spurious
	 * return and a drain. */
	int asleep;
	int overflowed;			/* reported once on the async EVD */
	int cq_overflow_reported;
	int dead;			/* being torn down: waiters abort */
	int wake_fd;			/* eventfd, non-blocking */
	/* wake_fd was written since the waiter's last drain (set after
	 * each write, so a drain never comes before the write it saw). */
	atomic_int fd_woken;
	uint64_t empty_since_us;	/* polls found it empty since then
					 * (or the last yield); 0: not */
	struct dapl_cno *cno;
	struct dapl_evd *cno_next;	/* cno->evds list, under cno->lock */
	/* DTO and RMR-bind completions are produced by the engine into this
	 * CQ; dequeue and wait drain it into DAT events.  NULL otherwise.
	 * The channel fd is non-blocking. */
	struct iwe_cq *cq;
	struct iwe_comp_channel *channel;
};

struct dapl_cno {
	struct dapl_obj obj;		/* obj.users: attached EVDs */
	struct dapl_lock lock;
	pthread_cond_t idle;		/* teardown waits for waiters here */
	DAT_OS_WAIT_PROXY_AGENT agent;
	int fd_mode;			/* made by dat_cno_fd_create */
	int ev_fd;			/* eventfd: an attached EVD posted */
	int ep_fd;			/* epoll: ev_fd + attached channels */
	int pending;			/* triggered, not yet reported */
	struct dapl_evd *triggered;	/* hint for the report; may be NULL */
	struct dapl_evd *evds;		/* attached EVDs */
	int waiters;
	int orphaned;			/* last EVD left while threads waited */
	int dead;
};

/* Whether an EVD accepts the given stream (DAT_EVD_*_FLAG). */
static inline int dapl_evd_has(const struct dapl_evd *evd, DAT_EVD_FLAGS f)
{
	return (evd->flags & f) != 0;
}

/* ---- the engine CQ of a DTO or RMR-bind EVD (evd_cq.c) ---- */

/* Give the EVD its completion channel and CQ (qlen entries). */
DAT_RETURN dapl_evd_cq_create(struct dapl_evd *evd, struct dapl_ia *ia);
/* Destroy both at teardown.  A CQ still referenced by a QP (EBUSY) is
 * leaked, not freed under the engine's feet. */
void dapl_evd_cq_release(struct dapl_evd *evd);
/* evd->lock held: destroy the CQ now (dat_evd_free); EBUSY while a QP
 * still completes into it.  Keeps a CNO waiter away from it meanwhile. */
int dapl_evd_cq_destroy_locked(struct dapl_evd *evd);
/* Consume the channel's events (each must be acknowledged, or the CQ could
 * not be destroyed); returns how many there were. */
int dapl_evd_channel_drain(struct dapl_evd *evd);
/* The same without the EVD lock (the CNO does this); pokes the EVD's wake
 * fd when there were any, so that a thread waiting on the EVD itself
 * re-checks. */
int dapl_evd_cq_fired(struct dapl_evd *evd);
/* evd->lock held.  Whether the engine CQ overflowed and nobody said so
 * yet; the caller reports it after unlocking. */
int dapl_evd_cq_overflow_news_locked(struct dapl_evd *evd);

/* ---- between the EVD and its CNO (cno.c) ---- */

/* An OS wait proxy agent call, captured under the CNO lock and made after
 * every lock is dropped. */
struct dapl_agent_call {
	DAT_AGENT_FUNC fn;
	DAT_PVOID data;
	DAT_EVD_HANDLE evd;
};

/* ia->lock and evd->lock held.  Attach returns DAT_SUCCESS or
 * DAT_INSUFFICIENT_RESOURCES; both keep cno->obj.users in step. */
DAT_RETURN dapl_cno_attach_locked(struct dapl_cno *cno, struct dapl_evd *evd);
void dapl_cno_detach_locked(struct dapl_cno *cno, struct dapl_evd *evd);

/* evd->lock held: an event arrived on an enabled, unwaited EVD. */
void dapl_cno_notify_locked(struct dapl_cno *cno, struct dapl_evd *evd,
			    struct dapl_agent_call *call);
void dapl_cno_call_agent(const struct dapl_agent_call *call);

/* ---- the event ring (evd_queue.c) ---- */

/* Provider side: queue an event on an EVD (its evd_handle is set to the
 * EVD).  Wakes a waiter whose threshold is met, or else triggers the CNO
 * of an enabled EVD.  Returns DAT_SUCCESS, or DAT_QUEUE_FULL when the EVD
 * is full: the event is not queued and, with report_overflow, the
 * overflow is reported once as DAT_ASYNC_ERROR_EVD_OVERFLOW on the IA's
 * async EVD (again only after the EVD has drained).  Callers may hold
 * ia->lock but no EVD or CNO lock. */
DAT_RETURN dapl_evd_enqueue(struct dapl_evd *evd, const DAT_EVENT *event,
			    int report_overflow);
static inline DAT_RETURN dapl_evd_post(struct dapl_evd *evd,
				       const DAT_EVENT *event)
{
	return dapl_evd_enqueue(evd, event, 1);
}

/* Queue an asynchronous error or event on the IA's async EVD, if any.
 * subject NULL means the IA itself (unaffiliated errors); reason is the
 * DAT_*_ASYNC_ERROR_REASON (0, the generic first value, when none fits
 * better). */
void dapl_evd_post_async(struct dapl_ia *ia, DAT_EVENT_NUMBER number,
			 DAT_HANDLE subject, int reason);

/* evd->lock held.  Events waiting: the ring's and the CQ's. */
DAT_COUNT dapl_evd_count_locked(struct dapl_evd *evd);
/* evd->lock held.  Take the oldest event of the ring (count > 0). */
void dapl_evd_ring_get_locked(struct dapl_evd *evd, DAT_EVENT *event);
/* evd->lock held.  Move the queue into 'ring' of qlen slots (which holds
 * every queued event), oldest first; the old ring is freed. */
void dapl_evd_ring_move_locked(struct dapl_evd *evd, DAT_EVENT *ring,
			       DAT_COUNT qlen);

/* Look up an EVD for one role ('role': the stream it must carry,
 * DAT_EVD_DTO_FLAG for recv/request, _CONNECTION_FLAG for connect,
 * _CR_FLAG for a Service Point) of an object of 'ia', and count one more
 * user of it, atomically with dat_evd_free.  The connect and CR roles
 * accept an EVD of any IA of the same provider instance, the DTO role only
 * one of 'ia' (see evd_queue.c).  NULL when the handle is bad, not an
 * EVD, out of scope or without the stream. */
struct dapl_evd *dapl_evd_pin(struct dapl_ia *ia, DAT_EVD_HANDLE h,
			      DAT_EVD_FLAGS role);
/* Drop that count (any lock of the user's IA may be held); the last user
 * of an orphan frees it. */
void dapl_evd_unpin(struct dapl_evd *evd);
/* Whether objects count on the EVD. */
int dapl_evd_in_use(struct dapl_evd *evd);
/* dat_evd_free, ia->lock held: refuse while objects count on the EVD or
 * may_go_locked (called with evd->lock held) refuses; otherwise mark it
 * dead, detach it from its CNO and release its handle. */
DAT_RETURN dapl_evd_unlink_locked(struct dapl_evd *evd,
				  DAT_RETURN (*may_go_locked)(struct dapl_evd *));
/* Abrupt IA close, ia->lock held: detach and release the handle whatever
 * the state.  Returns 1 when objects of another IA still count on the
 * EVD: it is an orphan then (obj.ia NULL), and its last dapl_evd_unpin
 * frees its ring. */
int dapl_evd_orphan_locked(struct dapl_evd *evd);

/* The EVD's memory, lock, wake fd and ring of qlen events; NULL when out
 * of memory.  dapl_evd_ring_free frees all of it (release the CQ first). */
struct dapl_evd *dapl_evd_ring_alloc(struct dapl_ia *ia, DAT_COUNT qlen,
				     DAT_EVD_FLAGS flags);
void dapl_evd_ring_free(struct dapl_evd *evd);

/* ---- completions (dto_event.c) ---- */

/* Turn one engine completion of a DTO or RMR bind taken from an EVD's CQ
 * into its DAT event, with what the completion implies for other objects
 * (a failed bind leaves its RMR unbound, a received invalidation unbinds
 * the RMR it names).  Called without EVD or CNO locks held. */
void dapl_dto_event(struct dapl_ia *ia, const struct ibv_wc *wc,
		    DAT_EVD_HANDLE evd, DAT_EVENT *event);

/* Wake the EVD's waiter (dat_evd_wait), evd->lock held: dapl_evd_wake
 * below. */
void dapl_evd_wake_locked(struct dapl_evd *evd);

/* ---- eventfd helpers: wake sleepers / reset after waking ---- */

static inline void dapl_efd_poke(int fd)
{
	uint64_t one = 1;

	/* Only fails once the counter nears 2^64: it is readable anyway. */
	if (write(fd, &one, sizeof(one)) < 0)
		return;
}

static inline void dapl_efd_drain(int fd)
{
	uint64_t v;

	/* Non-blocking: EAGAIN simply means nothing was pending. */
	if (read(fd, &v, sizeof(v)) < 0)
		return;
}

/* Wake the EVD's waiter: its wake fd, flagged after the write (the waiter
 * drains what it saw flagged; a flag seen first would drain before the
 * write and leave the fd readable for ever).  Inline: the EVD's own posts
 * (evd_queue.c) and a CNO's scan (evd_cq.c, the CNO's lock held instead
 * of the EVD's) both wake, and neither file is below the other. */
static inline void dapl_evd_wake(struct dapl_evd *evd)
{
	dapl_efd_poke(evd->wake_fd);
	atomic_store(&evd->fd_woken, 1);
}

#endif
