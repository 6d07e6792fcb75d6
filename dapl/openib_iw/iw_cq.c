/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Completion queues and completion channels.
 *
 * A CQ is a ring of struct ibv_wc behind a mutex: the progress thread (and
 * posting threads) push, application threads poll.  A completion channel
 * is an eventfd in semaphore mode plus a queue of the CQs that fired:
 * every fired event is one queue entry and one eventfd count, written in
 * that order, so a count read from the fd always has an entry behind it
 * (or a "stale" credit, see iwe_destroy_cq).  The fd is what DAT's CNOs and
 * EVD waits sleep on, so nothing here ever spins or sleeps on a timer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "iw_fdlimit.h"
#include "iw_priv.h"

static struct iwe_channel_priv *ch_priv(struct iwe_comp_channel *ch)
{
	return IWE_CONTAINER_OF(ch, struct iwe_channel_priv, pub);
}

/* ---------------------------------------------------------- channels */

struct iwe_comp_channel *iwe_create_comp_channel(struct iwe_device *dev)
{
	struct iwe_channel_priv *c;
	int err;

	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	/* Semaphore mode: one read() consumes one event, so the fd stays
	 * readable while more events wait.  Blocking by default, like
	 * ibv_create_comp_channel; callers may set O_NONBLOCK. */
	c->pub.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->pub.fd < 0) {
		err = iwe_fd_limit_note(errno, "completion channel");
		free(c);
		errno = err;
		return NULL;
	}
	c->dev = dev;
	pthread_mutex_init(&c->lock, NULL);
	return &c->pub;
}

int iwe_destroy_comp_channel(struct iwe_comp_channel *ch)
{
	struct iwe_channel_priv *c;

	if (!ch)
		return EINVAL;
	c = ch_priv(ch);
	pthread_mutex_lock(&c->lock);
	if (c->ncq) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&c->lock);
	close(c->pub.fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

/* Channel lock held. */
static void fired_append(struct iwe_channel_priv *c, struct iwe_cq_priv *q)
{
	q->next_fired = NULL;
	if (c->tail)
		c->tail->next_fired = q;
	else
		c->head = q;
	c->tail = q;
	q->queued = 1;
}

/* Channel lock held. */
static void fired_remove(struct iwe_channel_priv *c, struct iwe_cq_priv *q)
{
	struct iwe_cq_priv **pp = &c->head, *prev = NULL;

	while (*pp && *pp != q) {
		prev = *pp;
		pp = &(*pp)->next_fired;
	}
	if (!*pp)
		return;
	*pp = q->next_fired;
	if (c->tail == q)
		c->tail = prev;
	q->next_fired = NULL;
	q->queued = 0;
}

/* Record one event for q and make the fd readable.  Called with q->lock
 * held (lock order CQ -> channel). */
static void channel_fire(struct iwe_channel_priv *c, struct iwe_cq_priv *q)
{
	uint64_t one = 1;
	ssize_t n;

	pthread_mutex_lock(&c->lock);
	if (!q->queued)
		fired_append(c, q);
	q->pending++;
	/* Cannot block or fail short of a 2^64 counter. */
	do {
		n = write(c->pub.fd, &one, sizeof(one));
	} while (n < 0 && errno == EINTR);
	pthread_mutex_unlock(&c->lock);
}

/* Take the oldest event.  Channel lock held; NULL when only stale
 * credits were left.  A CQ with several pending events goes back to the
 * tail so one busy CQ cannot starve the others. */
static struct iwe_cq_priv *channel_take(struct iwe_channel_priv *c)
{
	struct iwe_cq_priv *q = c->head;

	if (!q) {
		if (c->stale)
			c->stale--;
		return NULL;
	}
	fired_remove(c, q);
	q->pending--;
	q->retrieved++;
	if (q->pending)
		fired_append(c, q);
	return q;
}

/* A blocking fd blocks in read() (equivalent to poll() then read, without
 * the window between them); O_NONBLOCK gives EAGAIN when nothing waits. */
int iwe_get_cq_event(struct iwe_comp_channel *ch, struct iwe_cq **cq,
		     void **cq_context)
{
	struct iwe_channel_priv *c;
	struct iwe_cq_priv *q = NULL;
	uint64_t v;

	if (!ch || !cq)
		return EINVAL;
	c = ch_priv(ch);
	while (!q) {
		if (read(c->pub.fd, &v, sizeof(v)) < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		pthread_mutex_lock(&c->lock);
		q = channel_take(c);
		pthread_mutex_unlock(&c->lock);
	}
	*cq = &q->pub;
	if (cq_context)
		*cq_context = q->pub.cq_context;
	return 0;
}

int iwe_comp_channel_ready(struct iwe_comp_channel *ch)
{
	struct iwe_channel_priv *c;
	int ready;

	if (!ch)
		return 0;
	c = ch_priv(ch);
	pthread_mutex_lock(&c->lock);
	ready = c->head != NULL || c->stale;
	pthread_mutex_unlock(&c->lock);
	return ready;
}

void iwe_ack_cq_events(struct iwe_cq *cq, unsigned int nevents)
{
	struct iwe_channel_priv *c;
	struct iwe_cq_priv *q;

	if (!cq || !cq->channel)
		return;
	q = iwe_cq_priv(cq);
	c = ch_priv(cq->channel);
	pthread_mutex_lock(&c->lock);
	/* Acking more than was retrieved is a caller bug; clamp so that it
	 * cannot hide later unacked events from iwe_destroy_cq. */
	if (nevents > q->retrieved - q->acked)
		nevents = q->retrieved - q->acked;
	q->acked += nevents;
	pthread_mutex_unlock(&c->lock);
}

/* --------------------------------------------------------------- CQs */

static int cq_size_valid(int cqe)
{
	return cqe > 0 && cqe <= IWE_MAX_CQE;
}

static int cq_reserve(struct iwe_device *dev)
{
	int ok;

	iwe_lock(&dev->lock);
	ok = dev->ncq < IWE_MAX_CQ;
	if (ok)
		dev->ncq++;
	iwe_unlock(&dev->lock);
	return ok;
}

static void cq_unreserve(struct iwe_device *dev)
{
	iwe_lock(&dev->lock);
	dev->ncq--;
	iwe_unlock(&dev->lock);
}

static void channel_attach(struct iwe_comp_channel *ch)
{
	struct iwe_channel_priv *c = ch_priv(ch);

	pthread_mutex_lock(&c->lock);
	c->ncq++;
	pthread_mutex_unlock(&c->lock);
}

struct iwe_cq *iwe_create_cq(struct iwe_device *dev, int cqe,
			     void *cq_context,
			     struct iwe_comp_channel *channel)
{
	struct iwe_cq_priv *q;

	if (!dev || !cq_size_valid(cqe) ||
	    (channel && ch_priv(channel)->dev != dev)) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q)
		q->ring = calloc((size_t)cqe, sizeof(*q->ring));
	if (!q || !q->ring || !cq_reserve(dev)) {
		if (q)
			free(q->ring);
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->pub = (struct iwe_cq){ .dev = dev, .cq_context = cq_context,
				  .channel = channel, .cqe = cqe };
	pthread_mutex_init(&q->lock, NULL);
	iwe_cq_hooks_init(q);
	if (channel)
		channel_attach(channel);
	return &q->pub;
}

/* Detach from the channel.  Events already retrieved with
 * iwe_get_cq_event but not acknowledged make this fail with EBUSY (verbs
 * would block instead): the consumer still holds the CQ pointer the event
 * returned.  Events fired but not yet retrieved are discarded; their
 * eventfd counts become stale credits that iwe_get_cq_event skips, so
 * the fd may look readable once more without an event behind it. */
static int channel_detach(struct iwe_cq_priv *q)
{
	struct iwe_channel_priv *c = ch_priv(q->pub.channel);

	pthread_mutex_lock(&c->lock);
	if (q->retrieved != q->acked) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	if (q->queued)
		fired_remove(c, q);
	c->stale += q->pending;
	q->pending = 0;
	c->ncq--;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* EBUSY while QPs use the CQ (iwe_cq_get) or while retrieved events are
 * unacknowledged; see channel_detach. */
int iwe_destroy_cq(struct iwe_cq *cq)
{
	struct iwe_cq_priv *q;
	int err;

	if (!cq)
		return EINVAL;
	q = iwe_cq_priv(cq);
	pthread_mutex_lock(&q->lock);
	err = q->users ? EBUSY : 0;
	pthread_mutex_unlock(&q->lock);
	if (!err && cq->channel)
		err = channel_detach(q);
	if (err)
		return err;
	cq_unreserve(cq->dev);
	pthread_mutex_destroy(&q->lock);
	iwe_cq_hooks_fini(q);
	free(q->ring);
	free(q);
	return 0;
}

void iwe_cq_get(struct iwe_cq *cq)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	pthread_mutex_lock(&q->lock);
	q->users++;
	pthread_mutex_unlock(&q->lock);
}

void iwe_cq_put(struct iwe_cq *cq)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	pthread_mutex_lock(&q->lock);
	if (q->users)
		q->users--;
	pthread_mutex_unlock(&q->lock);
}

int iwe_cq_drive(struct iwe_cq *cq)
{
	return cq ? iwe_cq_hooks_poll(iwe_cq_priv(cq)) : 0;
}

int iwe_cq_waits_elsewhere(struct iwe_cq *cq)
{
	struct iwe_cq_priv *q;

	if (!cq)
		return 0;
	q = iwe_cq_priv(cq);
	return __atomic_load_n(&q->found_busy, __ATOMIC_RELAXED) ||
	       atomic_load(&q->tx_blocked);
}

void iwe_cq_drive_wait(struct iwe_cq *cq)
{
	if (cq)
		iwe_cq_hooks_wait(iwe_cq_priv(cq));
}

void iwe_cq_spin(struct iwe_cq *cq, int on)
{
	if (cq)
		iwe_cq_hooks_spin(iwe_cq_priv(cq), on);
}

int iwe_cq_sleep_fds(struct iwe_cq *cq, int *fds, int max)
{
	return cq && fds && max > 0 ?
	       iwe_cq_hooks_sleep_fds(iwe_cq_priv(cq), fds, max) : 0;
}

/* Copy the queued completions, oldest first, into a new ring. */
static void ring_copy(const struct iwe_cq_priv *q, struct ibv_wc *dst)
{
	uint32_t cap = (uint32_t)q->pub.cqe;
	uint32_t first = cap - q->head;

	if (first > q->count)
		first = q->count;
	memcpy(dst, q->ring + q->head, first * sizeof(*dst));
	memcpy(dst + first, q->ring, (q->count - first) * sizeof(*dst));
}

int iwe_resize_cq(struct iwe_cq *cq, int cqe)
{
	struct iwe_cq_priv *q;
	struct ibv_wc *ring, *old;

	if (!cq || !cq_size_valid(cqe))
		return EINVAL;
	q = iwe_cq_priv(cq);
	ring = calloc((size_t)cqe, sizeof(*ring));
	if (!ring)
		return ENOMEM;
	pthread_mutex_lock(&q->lock);
	if ((uint32_t)cqe < q->count) {
		pthread_mutex_unlock(&q->lock);
		free(ring);
		return EINVAL;
	}
	ring_copy(q, ring);
	old = q->ring;
	q->ring = ring;
	q->head = 0;
	q->pub.cqe = cqe;
	pthread_mutex_unlock(&q->lock);
	free(old);
	return 0;
}

int iwe_poll_cq(struct iwe_cq *cq, int n, struct ibv_wc *wc)
{
	struct iwe_cq_priv *q;
	int i;

	if (!cq || n < 0 || (n > 0 && !wc))
		return -EINVAL;
	q = iwe_cq_priv(cq);
	if (n > 0 && !__atomic_load_n(&q->count, __ATOMIC_RELAXED))
		iwe_cq_hooks_poll(q);
	pthread_mutex_lock(&q->lock);
	for (i = 0; i < n && q->count; i++) {
		wc[i] = q->ring[q->head];
		q->head = (q->head + 1) % (uint32_t)q->pub.cqe;
		/* Atomic store: iwe_poll_cq peeks at count without the lock. */
		__atomic_store_n(&q->count, q->count - 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&q->lock);
	return i;
}

/* Arming is one-shot.  A request for "next" while armed for "solicited"
 * widens the arm; the reverse keeps the wider one. */
int iwe_req_notify_cq(struct iwe_cq *cq, int solicited_only)
{
	struct iwe_cq_priv *q;
	int want = solicited_only ? IWE_CQ_ARM_SOLICITED : IWE_CQ_ARM_NEXT;

	if (!cq)
		return EINVAL;
	q = iwe_cq_priv(cq);
	pthread_mutex_lock(&q->lock);
	if (want > q->armed)
		q->armed = want;
	pthread_mutex_unlock(&q->lock);
	/* Whoever arms is about to sleep: what the QPs held for its next
	 * look goes now. */
	iwe_cq_hooks_arm(q);
	return 0;
}

void iwe_cq_disarm(struct iwe_cq *cq)
{
	struct iwe_cq_priv *q;

	if (!cq)
		return;
	q = iwe_cq_priv(cq);
	pthread_mutex_lock(&q->lock);
	q->armed = IWE_CQ_DISARMED;
	pthread_mutex_unlock(&q->lock);
}

/* q->lock held.  Error completions wake solicited-only waiters too, as
 * the IB and RDMAC verbs specify, so a consumer waiting for a solicited
 * receive learns that its QP failed. */
static int cq_should_fire(const struct iwe_cq_priv *q,
			  const struct ibv_wc *wc, int solicited)
{
	if (q->armed == IWE_CQ_ARM_NEXT)
		return 1;
	return q->armed == IWE_CQ_ARM_SOLICITED &&
	       (solicited || wc->status != IBV_WC_SUCCESS);
}

/* q->lock held. */
static void cq_fire(struct iwe_cq_priv *q)
{
	q->armed = IWE_CQ_DISARMED;
	if (q->pub.channel)
		channel_fire(ch_priv(q->pub.channel), q);
}

/* On overflow an armed CQ still fires (whatever its arm), so a consumer
 * asleep on the channel wakes and finds the overflow flag. */
int iwe_cq_push(struct iwe_cq *cq, const struct ibv_wc *wc, int solicited)
{
	return iwe_cq_push_from(cq, NULL, wc, solicited);
}

int iwe_cq_push_from(struct iwe_cq *cq, struct iwe_cq_hook *h,
		     const struct ibv_wc *wc, int solicited)
{
	struct iwe_cq_priv *q;
	uint32_t cap;

	if (!cq || !wc)
		return EINVAL;
	q = iwe_cq_priv(cq);
	pthread_mutex_lock(&q->lock);
	if (h)
		iwe_cq_hooks_note_done(q, h);
	cap = (uint32_t)q->pub.cqe;
	if (q->count == cap) {
		q->overflow = 1;
		if (q->armed)
			cq_fire(q);
		pthread_mutex_unlock(&q->lock);
		return ENOSPC;
	}
	q->ring[(q->head + q->count) % cap] = *wc;
	__atomic_store_n(&q->count, q->count + 1, __ATOMIC_RELAXED);
	if (cq_should_fire(q, wc, solicited))
		cq_fire(q);
	pthread_mutex_unlock(&q->lock);
	if (h && !__atomic_load_n(&h->joined, __ATOMIC_RELAXED))
		iwe_cq_hook_join(q, h);
	return 0;
}

/* How full the CQ is, read under its lock; no CQ reads as empty. */
static void cq_fill(const struct iwe_cq *cq, uint32_t *count, int *overflow)
{
	struct iwe_cq_priv *q;

	*count = 0;
	*overflow = 0;
	if (!cq)
		return;
	q = iwe_cq_priv(cq);
	pthread_mutex_lock(&q->lock);
	*count = q->count;
	*overflow = q->overflow;
	pthread_mutex_unlock(&q->lock);
}

int iwe_cq_overflowed(const struct iwe_cq *cq)
{
	uint32_t count;
	int overflow;

	cq_fill(cq, &count, &overflow);
	return overflow;
}

int iwe_cq_count(const struct iwe_cq *cq)
{
	uint32_t count;
	int overflow;

	cq_fill(cq, &count, &overflow);
	return (int)count;
}
