/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine side of an EVD that takes DTO or RMR-bind completions: its
 * CQ, into which the engine writes completions, and the completion channel
 * that makes them pollable.  Waiters (evd.c) and CNOs (cno.c) both drain
 * the channel; dequeue and wait poll the CQ (evd.c). */
#include "config.h"

#include <fcntl.h>

#include "dapl.h"
#include "dapl_evd.h"

DAT_RETURN dapl_evd_cq_create(struct dapl_evd *evd, struct dapl_ia *ia)
{
	int fl;

	evd->channel = iwe_create_comp_channel(ia->dev);
	if (!evd->channel)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEVD;
	/* Waits poll() the fd and then drain it: reads must not block. */
	fl = fcntl(evd->channel->fd, F_GETFL);
	if (fl < 0 || fcntl(evd->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEVD;
	evd->cq = iwe_create_cq(ia->dev, evd->qlen, evd, evd->channel);
	if (!evd->cq)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEVD;
	return DAT_SUCCESS;
}

void dapl_evd_cq_release(struct dapl_evd *evd)
{
	if (evd->cq && iwe_destroy_cq(evd->cq) == 0)
		evd->cq = NULL;
	if (evd->channel && !evd->cq)
		iwe_destroy_comp_channel(evd->channel);
	evd->channel = NULL;
}

int dapl_evd_cq_destroy_locked(struct dapl_evd *evd)
{
	int err;

	DAPL_ASSERT_LOCKED(&evd->lock);
	/* The CNO lock keeps a concurrent dat_cno_wait, which arms and
	 * drains attached CQs under it, away from the CQ while it goes. */
	if (evd->cno)
		dapl_lock(&evd->cno->lock);
	err = iwe_destroy_cq(evd->cq);
	if (!err)
		evd->cq = NULL;
	if (evd->cno)
		dapl_unlock(&evd->cno->lock);
	return err;
}

/* The channel fd is non-blocking: EAGAIN ends the loop, and an empty
 * channel ends it before the read. */
int dapl_evd_channel_drain(struct dapl_evd *evd)
{
	struct iwe_cq *cq;
	void *ctx;
	int n = 0;

	while (iwe_comp_channel_ready(evd->channel) &&
	       iwe_get_cq_event(evd->channel, &cq, &ctx) == 0) {
		iwe_ack_cq_events(cq, 1);
		n++;
	}
	return n;
}

int dapl_evd_cq_fired(struct dapl_evd *evd)
{
	int n = dapl_evd_channel_drain(evd);

	if (n)
		dapl_evd_wake(evd);
	return n;
}

int dapl_evd_cq_overflow_news_locked(struct dapl_evd *evd)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (!evd->cq || evd->cq_overflow_reported ||
	    !iwe_cq_overflowed(evd->cq))
		return 0;
	evd->cq_overflow_reported = 1;
	return 1;
}
