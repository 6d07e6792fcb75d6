/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared receive queues: a ring of receive WRs that the QPs attached to
 * it take from, in posting order, as Sends arrive (see iw_engine.h for
 * the semantics and iw_qp.h for the locking).
 *
 * A WR is copied out of the ring when a QP takes it, so a resize may
 * reallocate the ring at any time without a QP holding a pointer into it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iw_qp.h"

static int srq_attr_valid(const struct iwe_srq_attr *a)
{
	return a->max_wr >= 1 && a->max_wr <= IWE_MAX_SRQ_WR &&
	       a->max_sge >= 1 && a->max_sge <= IWE_MAX_SGE &&
	       a->srq_limit <= a->max_wr;
}

/* A ring of n slots with max_sge SGEs each. */
static int ring_alloc(uint32_t n, uint32_t max_sge, struct iwe_rwqe **ring,
		      struct iwe_sge_res **sge)
{
	uint32_t i;

	*ring = calloc(n, sizeof(**ring));
	*sge = calloc((size_t)n * max_sge, sizeof(**sge));
	if (!*ring || !*sge) {
		free(*ring);
		free(*sge);
		return ENOMEM;
	}
	for (i = 0; i < n; i++)
		(*ring)[i].sg = *sge + (size_t)i * max_sge;
	return 0;
}

static struct iwe_rwqe *srq_slot(struct iwe_srq_priv *s, uint32_t ctr)
{
	return &s->ring[ctr % s->max_wr];
}

static void rwqe_copy(struct iwe_rwqe *dst, const struct iwe_rwqe *src)
{
	dst->wr_id = src->wr_id;
	dst->total = src->total;
	dst->num_sge = src->num_sge;
	memcpy(dst->sg, src->sg, src->num_sge * sizeof(*src->sg));
}

struct iwe_srq *iwe_create_srq(struct iwe_pd *pd,
			       const struct iwe_srq_init_attr *attr)
{
	struct iwe_srq_priv *s;

	if (!pd || !attr || !srq_attr_valid(&attr->attr)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || ring_alloc(attr->attr.max_wr, attr->attr.max_sge, &s->ring,
			     &s->sge)) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->pub.pd = pd;
	s->pub.srq_context = attr->srq_context;
	s->max_wr = attr->attr.max_wr;
	s->max_sge = attr->attr.max_sge;
	s->limit = attr->attr.srq_limit;
	s->handler = attr->event_handler;
	iwe_lock_init(&s->lock);
	iwe_pd_get(pd);
	return &s->pub;
}

int iwe_destroy_srq(struct iwe_srq *srq)
{
	struct iwe_srq_priv *s;

	if (!srq)
		return EINVAL;
	s = iwe_srq_priv(srq);
	iwe_lock(&s->lock);
	if (s->users) {
		iwe_unlock(&s->lock);
		return EBUSY;
	}
	iwe_unlock(&s->lock);
	/* The WRs still posted are discarded without completions. */
	iwe_pd_put(srq->pd);
	pthread_mutex_destroy(&s->lock.m);
	free(s->ring);
	free(s->sge);
	free(s);
	return 0;
}

/* s->lock held.  New ring of n slots holding the posted WRs in order. */
static int srq_resize_locked(struct iwe_srq_priv *s, uint32_t n)
{
	IWE_ASSERT_LOCKED(&s->lock);
	struct iwe_rwqe *ring;
	struct iwe_sge_res *sge;
	uint32_t i, count = s->tail - s->head;

	if (n < count || ring_alloc(n, s->max_sge, &ring, &sge))
		return n < count ? EINVAL : ENOMEM;
	for (i = 0; i < count; i++)
		rwqe_copy(&ring[i], srq_slot(s, s->head + i));
	free(s->ring);
	free(s->sge);
	s->ring = ring;
	s->sge = sge;
	s->max_wr = n;
	s->head = 0;
	s->tail = count;
	return 0;
}

int iwe_modify_srq(struct iwe_srq *srq, const struct iwe_srq_attr *attr,
		   int attr_mask)
{
	struct iwe_srq_priv *s;
	uint32_t max_wr;
	int err = 0;

	if (!srq || !attr ||
	    (attr_mask & ~(IWE_SRQ_MAX_WR | IWE_SRQ_LIMIT)))
		return EINVAL;
	s = iwe_srq_priv(srq);
	iwe_lock(&s->lock);
	max_wr = (attr_mask & IWE_SRQ_MAX_WR) ? attr->max_wr : s->max_wr;
	if (max_wr < 1 || max_wr > IWE_MAX_SRQ_WR ||
	    ((attr_mask & IWE_SRQ_LIMIT) && attr->srq_limit > max_wr))
		err = EINVAL;
	if (!err && max_wr != s->max_wr)
		err = srq_resize_locked(s, max_wr);
	if (!err && (attr_mask & IWE_SRQ_LIMIT))
		s->limit = attr->srq_limit;
	iwe_unlock(&s->lock);
	return err;
}

int iwe_query_srq(struct iwe_srq *srq, struct iwe_srq_attr *attr)
{
	struct iwe_srq_priv *s;

	if (!srq || !attr)
		return EINVAL;
	s = iwe_srq_priv(srq);
	iwe_lock(&s->lock);
	attr->max_wr = s->max_wr;
	attr->max_sge = s->max_sge;
	attr->srq_limit = s->limit;
	iwe_unlock(&s->lock);
	return 0;
}

uint32_t iwe_srq_count(struct iwe_srq *srq)
{
	struct iwe_srq_priv *s = iwe_srq_priv(srq);
	uint32_t n;

	iwe_lock(&s->lock);
	n = s->tail - s->head;
	iwe_unlock(&s->lock);
	return n;
}

/* s->lock held. */
static int post_one(struct iwe_srq_priv *s, const struct ibv_recv_wr *wr)
{
	struct iwe_rwqe *w;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if (s->tail - s->head >= s->max_wr)
		return ENOMEM;
	w = srq_slot(s, s->tail);
	if (iwe_sgl_resolve(s->pub.pd, wr->sg_list, wr->num_sge, IWE_SGE_SINK,
			    w->sg, &w->total) || w->total > UINT32_MAX)
		return EINVAL;
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	s->tail++;
	return 0;
}

int iwe_post_srq_recv(struct iwe_srq *srq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct iwe_srq_priv *s;
	int err = 0;

	if (!srq || !bad_wr)
		return EINVAL;
	s = iwe_srq_priv(srq);
	iwe_lock(&s->lock);
	for (; wr; wr = wr->next) {
		err = post_one(s, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	/* QPs holding a Send for a receive: resume each once.  Under the
	 * lock (a QP that goes takes itself off first), so resume only
	 * asks for the QP's progress, never takes its lock. */
	while (s->head != s->tail && s->waiters) {
		struct iwe_srq_waiter *w = s->waiters;

		s->waiters = w->next;
		w->queued = 0;
		w->resume(w);
	}
	iwe_unlock(&s->lock);
	return err;
}

/* ------------------------------------------------- QP side (iw_rx.c) */

int iwe_srq_take(struct iwe_srq_priv *s, struct iwe_rwqe *out,
		 int *limit_hit)
{
	int err = 0;

	*limit_hit = 0;
	iwe_lock(&s->lock);
	if (s->head == s->tail) {
		err = ENOENT;
	} else {
		rwqe_copy(out, srq_slot(s, s->head));
		s->head++;
		/* Verbs: fires when the count drops below the limit, once. */
		if (s->limit && s->tail - s->head < s->limit) {
			s->limit = 0;
			*limit_hit = 1;
		}
	}
	iwe_unlock(&s->lock);
	return err;
}

int iwe_srq_has_wr(struct iwe_srq_priv *s)
{
	int has;

	iwe_lock(&s->lock);
	has = s->head != s->tail;
	iwe_unlock(&s->lock);
	return has;
}

void iwe_srq_wait(struct iwe_srq_priv *s, struct iwe_srq_waiter *w)
{
	iwe_lock(&s->lock);
	if (!w->queued) {
		w->next = s->waiters;
		s->waiters = w;
		w->queued = 1;
	}
	iwe_unlock(&s->lock);
}

void iwe_srq_unwait(struct iwe_srq_priv *s, struct iwe_srq_waiter *w)
{
	struct iwe_srq_waiter **pp;

	iwe_lock(&s->lock);
	for (pp = &s->waiters; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			w->queued = 0;
			break;
		}
	}
	iwe_unlock(&s->lock);
}

void iwe_srq_attach(struct iwe_srq_priv *s)
{
	iwe_lock(&s->lock);
	s->users++;
	iwe_unlock(&s->lock);
}

void iwe_srq_detach(struct iwe_srq_priv *s)
{
	iwe_lock(&s->lock);
	if (s->users)
		s->users--;
	iwe_unlock(&s->lock);
}

void iwe_srq_report_limit(struct iwe_srq_priv *s)
{
	struct iwe_async_event ev = {
		.type = IWE_EVENT_SRQ_LIMIT_REACHED,
		.element.srq = &s->pub,
		.context = s->pub.srq_context,
	};

	if (s->handler)
		s->handler(&ev);
}
