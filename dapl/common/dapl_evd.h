/* Event Dispatchers and Consumer Notification Objects. */
#ifndef DAPL_EVD_H
#define DAPL_EVD_H

#include "dapl.h"

struct dapl_cno;

struct dapl_evd {
	struct dapl_obj obj;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC */
	DAT_EVD_FLAGS flags;
	int enabled;
	int waitable;
	DAT_EVENT *ring;		/* qlen slots */
	DAT_COUNT qlen;
	DAT_COUNT head;			/* oldest event */
	DAT_COUNT count;		/* events queued */
	DAT_COUNT threshold;		/* of the current waiter */
	int waiters;
	int overflowed;			/* reported once on the async EVD */
	struct dapl_cno *cno;
	/* DTO and RMR-bind completions are produced by the engine into this
	 * CQ; dequeue and wait drain it into DAT events.  NULL otherwise. */
	struct iwe_cq *cq;
	struct iwe_comp_channel *channel;
};

struct dapl_cno {
	struct dapl_obj obj;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC */
	DAT_OS_WAIT_PROXY_AGENT agent;
	int fd;				/* eventfd: dat_cno_fd_create, -1 otherwise */
	struct dapl_evd *triggered;	/* EVD that fired, for cno_wait */
	int waiters;
};

/* Provider side: queue an event on an EVD.  Wakes a waiter whose
 * threshold is met and triggers the CNO.  Returns DAT_SUCCESS, or
 * DAT_QUEUE_FULL when the EVD is full (the event is not queued, the
 * overflow is reported once as DAT_ASYNC_ERROR_EVD_OVERFLOW on the IA's
 * async EVD). */
DAT_RETURN dapl_evd_post(struct dapl_evd *evd, const DAT_EVENT *event);

/* Queue an asynchronous error or event on the IA's async EVD, if any. */
void dapl_evd_post_async(struct dapl_ia *ia, DAT_EVENT_NUMBER number,
			 DAT_HANDLE subject);

/* Whether an EVD accepts the given stream (DAT_EVD_*_FLAG). */
static inline int dapl_evd_has(const struct dapl_evd *evd, DAT_EVD_FLAGS f)
{
	return (evd->flags & f) != 0;
}

#endif
