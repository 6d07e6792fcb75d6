/* Event Dispatchers and Consumer Notification Objects.
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
 * Lock order: ia->lock, then evd->lock, then cno->lock; engine locks are
 * leaves.  The CNO reads an attached EVD's 'enabled' and 'waiting' flags
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
	pthread_mutex_t lock;
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
	int overflowed;			/* reported once on the async EVD */
	int cq_overflow_reported;
	int dead;			/* being torn down: waiters abort */
	int wake_fd;			/* eventfd, non-blocking */
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
	pthread_mutex_t lock;
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

/* Provider side: queue an event on an EVD (its evd_handle is set to the
 * EVD).  Wakes a waiter whose threshold is met, or else triggers the CNO
 * of an enabled EVD.  Returns DAT_SUCCESS, or DAT_QUEUE_FULL when the EVD
 * is full: the event is not queued and the overflow is reported once as
 * DAT_ASYNC_ERROR_EVD_OVERFLOW on the IA's async EVD (again only after the
 * EVD has drained).  Callers may hold ia->lock but no EVD or CNO lock. */
DAT_RETURN dapl_evd_post(struct dapl_evd *evd, const DAT_EVENT *event);

/* Queue an asynchronous error or event on the IA's async EVD, if any.
 * subject NULL means the IA itself (unaffiliated errors).  The reason
 * field is 0, the generic first value of every DAT_*_ASYNC_ERROR_REASON. */
void dapl_evd_post_async(struct dapl_ia *ia, DAT_EVENT_NUMBER number,
			 DAT_HANDLE subject);

/* Whether an EVD accepts the given stream (DAT_EVD_*_FLAG). */
static inline int dapl_evd_has(const struct dapl_evd *evd, DAT_EVD_FLAGS f)
{
	return (evd->flags & f) != 0;
}

/* Provided by the EP module: fill event_number and event_data from one
 * engine completion of a DTO or RMR bind.  Called without EVD or CNO
 * locks held; the caller sets event->evd_handle afterwards. */
void dapl_ep_wc_to_event(const struct ibv_wc *wc, DAT_EVENT *event);

/* ---- between evd.c and cno.c ---- */

/* An OS wait proxy agent call, captured under the CNO lock and made after
 * every lock is dropped. */
struct dapl_agent_call {
	DAT_AGENT_FUNC fn;
	DAT_PVOID data;
	DAT_EVD_HANDLE evd;
};

/* ia->lock and evd->lock held.  Attach returns DAT_SUCCESS or
 * DAT_INSUFFICIENT_RESOURCES; both keep cno->obj.users in step. */
DAT_RETURN dapl_cno_attach(struct dapl_cno *cno, struct dapl_evd *evd);
void dapl_cno_detach(struct dapl_cno *cno, struct dapl_evd *evd);

/* evd->lock held: an event arrived on an enabled, unwaited EVD. */
void dapl_cno_notify(struct dapl_cno *cno, struct dapl_evd *evd,
		     struct dapl_agent_call *call);
void dapl_cno_call_agent(const struct dapl_agent_call *call);

/* Consume the completion-channel events of a CQ-backed EVD without its
 * lock (the CNO does this); pokes the EVD's wake fd when there were any,
 * so that a thread waiting on the EVD itself re-checks.  Returns how many
 * there were. */
int dapl_evd_cq_fired(struct dapl_evd *evd);

/* Sleep in ppoll() on fds until one is readable or the deadline passes
 * (bounded == 0: no deadline).  Returns 0 once the deadline has passed
 * before sleeping, 1 otherwise (woken, interrupted or timed out: the
 * caller re-checks its condition and calls again). */
int dapl_fd_sleep(struct pollfd *fds, int nfds, int bounded,
		  const struct timespec *deadline);

/* eventfd helpers: wake sleepers / reset after waking. */
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

#endif
