/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The EP's engine QP and its work slots.  What a completion becomes as a
 * DAT event is dto_event.c's business; this file hands it the slot.
 *
 * Work slots.  Every posted DTO takes one slot of the EP's pool; the slot
 * keeps the cookie, operation and length, and ibv_wc.wr_id names it as
 * (qp_num << 32 | slot index): no allocation per post.  A pool belongs to
 * one engine QP: it is made with the QP and retired with it, so the FIFO
 * order of that QP's completions in its two CQs holds for the whole life
 * of the pool.  Slots form two rings in posting order (requests, then
 * receives) because the engine completes each queue in order.  A slot is
 * free again once its completion has been converted into a DAT event (DAT:
 * a DTO is outstanding until its completion is dequeued, and max_*_dtos
 * bound the outstanding ones).  A request posted with
 * DAT_COMPLETION_SUPPRESS_FLAG produces no completion when it succeeds; its
 * slot is released by the completion of a later request of the same QP,
 * which proves it done (verbs semantics).  A consumer that posts only
 * suppressed requests must therefore post a signalled one now and then, as
 * with any verbs provider.
 *
 * Completions may still sit in an EVD after their EP was freed or reset
 * (DAT 2.0 dat_ep_free: "the Consumer must be ready for all completions
 * that are not dequeued yet either still being on the EVD ... or not being
 * there").  A retired pool therefore stays findable by qp_num until all of
 * its slots are consumed, or until RETIRED_MAX newer pools were retired; a
 * completion whose pool is gone becomes an event with a NULL EP handle and
 * no cookie instead of a read of freed memory.
 *
 * Locks: ia->lock, then pool->lock, then engine locks (posting).  The
 * qp_num table lock comes before a pool's lock (conversion, reaping); it
 * is taken under ia->lock only to insert a new pool, and nothing holding
 * it ever waits for ia->lock.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"
#include "dapl_mem.h"
#include "dapl_stats.h"
#include "iw_slab.h"

#define POOL_BUCKETS 1024
#define RETIRED_MAX 256

enum { SLOT_FREE, SLOT_POSTED, SLOT_DONE };

/* Positions are free-running 32-bit counters: in use = tail - head. */
struct wr_ring {
	uint32_t base;			/* first slot index of the ring */
	uint32_t n;			/* capacity */
	uint32_t head, tail;
};

struct dapl_wr_pool {
	struct dapl_lock lock;
	struct iwe_qp *qp;		/* NULL once retired */
	uint32_t qp_num;
	DAT_EP_HANDLE ep_handle;	/* reported in events, even stale */
	struct dapl_ia *ia;
	struct wr_ring send, recv;
	int retired;
	uint64_t queue_full;		/* posts refused: ring full (lock) */
	atomic_int quiet;		/* being retired: no async events */
	struct dapl_wr_pool *hnext;	/* qp_num table chain */
	struct dapl_wr_pool *rnext;	/* retired list, oldest first */
	/* Send ring, then recv ring; allocated at the first post (an EP
	 * that never posts holds none), given back when the QP goes idle
	 * with none outstanding (pool_slots_give_back). */
	struct dapl_wr_ctx *slots;
};

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct dapl_wr_pool *table[POOL_BUCKETS];
static struct dapl_wr_pool *retired_head, *retired_tail;
static int nretired;

/* ------------------------------------------------------ qp_num table */

static struct dapl_wr_pool **bucket(uint32_t qp_num)
{
	return &table[qp_num % POOL_BUCKETS];
}

/* table_lock held (any mode). */
static struct dapl_wr_pool *table_find(uint32_t qp_num)
{
	struct dapl_wr_pool *p = *bucket(qp_num);

	while (p && p->qp_num != qp_num)
		p = p->hnext;
	return p;
}

/* table_lock held for writing. */
static void table_remove(struct dapl_wr_pool *pool)
{
	for (struct dapl_wr_pool **pp = bucket(pool->qp_num); *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == pool) {
			*pp = pool->hnext;
			return;
		}
	}
}

static uint32_t ring_used(const struct wr_ring *r)
{
	return r->tail - r->head;
}

static size_t slots_size(const struct dapl_wr_pool *p)
{
	return ((size_t)p->send.n + p->recv.n) * sizeof(p->slots[0]);
}

static void slots_free(struct dapl_wr_pool *p)
{
	iw_slab_free(p->slots, slots_size(p));
	p->slots = NULL;
}

/* table_lock held for writing: nobody else can reach the pool. */
static void pool_free(struct dapl_wr_pool *pool)
{
	table_remove(pool);
	dapl_lock_destroy(&pool->lock);
	slots_free(pool);
	iw_slab_free(pool, sizeof(*pool));
}

/* table_lock held for writing.  Free retired pools whose completions have
 * all been consumed, and the oldest ones beyond RETIRED_MAX. */
static void retired_reap(void)
{
	struct dapl_wr_pool **pp = &retired_head, *last = NULL;

	while (*pp) {
		struct dapl_wr_pool *p = *pp;
		uint32_t used;

		dapl_lock(&p->lock);
		used = ring_used(&p->send) + ring_used(&p->recv);
		dapl_unlock(&p->lock);
		if (used == 0 || nretired > RETIRED_MAX) {
			*pp = p->rnext;
			nretired--;
			pool_free(p);
		} else {
			last = p;
			pp = &p->rnext;
		}
	}
	retired_tail = last;
}

/* ---------------------------------------------------------- create */

static uint32_t at_least_one(DAT_COUNT v)
{
	return v > 0 ? (uint32_t)v : 1;
}

static uint32_t max3(DAT_COUNT a, DAT_COUNT b, DAT_COUNT c)
{
	DAT_COUNT m = a > b ? a : b;

	return (uint32_t)(m > c ? m : c);
}

/* Engine caps from the EP attributes.  The engine wants at least one WR
 * per queue; an EP with zero DTOs of a kind still has a (tiny) queue. */
static void qp_caps(const DAT_EP_ATTR *a, struct iwe_qp_cap *cap)
{
	cap->max_send_wr = at_least_one(a->max_request_dtos);
	cap->max_recv_wr = at_least_one(a->max_recv_dtos);
	cap->max_send_sge = max3(a->max_request_iov, a->max_rdma_read_iov,
				 a->max_rdma_write_iov);
	cap->max_recv_sge = (uint32_t)a->max_recv_iov;
}

static struct dapl_wr_pool *pool_new(const struct iwe_qp_cap *cap)
{
	struct dapl_wr_pool *p = iw_slab_zalloc(sizeof(*p));

	if (!p)
		return NULL;
	dapl_lock_init(&p->lock);
	p->send.n = cap->max_send_wr;
	p->recv.base = cap->max_send_wr;
	p->recv.n = cap->max_recv_wr;
	return p;
}

static DAT_RETURN qp_errno(int err)
{
	return err == ENOMEM ? DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEP
			     : DAT_INTERNAL_ERROR;
}

/* The engine's QP went idle with nothing outstanding (IWE_EVENT_QP_IDLE,
 * on the progress thread, no engine lock held): the slots go too, unless
 * a post or a completion holds the pool just now (then it is not idle;
 * the next quiet spell tries again).  pool_slots makes them again at the
 * next post. */
static void pool_slots_give_back(struct dapl_wr_pool *p)
{
	if (!dapl_trylock(&p->lock))
		return;
	if (p->slots && !ring_used(&p->send) && !ring_used(&p->recv))
		slots_free(p);
	dapl_unlock(&p->lock);
}

/* Engine handler of the EP's QP.  An SRQ EP's QP entered the error state
 * and takes no more SRQ buffers: DAT consumers (dtestsrq) expect this as
 * DAT_ASYNC_ERROR_EP_BROKEN naming the EP, after the connection event.
 * The QP went idle: its slots may go back.  Not while the QP is being
 * retired: the EP is reset or gone then. Runs on whatever thread moved
 * the QP, possibly under ia->lock: it only queues an event or frees. */
static void qp_engine_event(const struct iwe_async_event *ev)
{
	struct dapl_wr_pool *pool = ev->context;

	if (atomic_load(&pool->quiet))
		return;
	if (ev->type == IWE_EVENT_QP_IDLE)
		pool_slots_give_back(pool);
	else if (ev->type == IWE_EVENT_QP_LAST_WQE_REACHED)
		dapl_evd_post_async(pool->ia, DAT_ASYNC_ERROR_EP_BROKEN,
				    pool->ep_handle, 0);
}

static struct iwe_qp *qp_new(struct dapl_ep *ep, struct dapl_wr_pool *pool,
			     DAT_RETURN *r)
{
	struct iwe_qp_init_attr at;
	struct iwe_qp *qp;

	memset(&at, 0, sizeof(at));
	at.send_cq = ep->request_evd->cq;
	at.recv_cq = ep->recv_evd->cq;
	qp_caps(&ep->attr, &at.cap);
	at.qp_context = pool;
	at.event_handler = qp_engine_event;
	if (ep->srq)
		at.srq = ep->srq->esrq;
	qp = iwe_create_qp(ep->pz->pd, &at);
	if (!qp) {
		*r = qp_errno(errno);
		return NULL;
	}
	/* INIT: receives may be posted before any connection (DAT). */
	if (iwe_modify_qp(qp, IWE_QPS_INIT)) {
		iwe_destroy_qp(qp);
		*r = DAT_INTERNAL_ERROR;
		return NULL;
	}
	return qp;
}

DAT_RETURN dapl_ep_qp_create_locked(struct dapl_ep *ep)
{
	struct dapl_wr_pool *pool;
	DAT_RETURN r = DAT_SUCCESS;
	struct iwe_qp_cap cap;
	struct iwe_qp *qp;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (ep->pool || !dapl_ep_is_configured(ep))
		return DAT_SUCCESS;
	/* The pool first: it is the QP's context for engine events. */
	qp_caps(&ep->attr, &cap);
	if (ep->srq)
		cap.max_recv_wr = 0;	/* receives are the SRQ's */
	pool = pool_new(&cap);
	if (!pool)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	qp = qp_new(ep, pool, &r);
	if (!qp) {
		dapl_lock_destroy(&pool->lock);
		iw_slab_free(pool, sizeof(*pool));
		return r;
	}
	pool->qp = qp;
	pool->ia = ep->obj.ia;
	pool->qp_num = qp->qp_num;
	pool->ep_handle = ep->obj.handle;
	pthread_rwlock_wrlock(&table_lock);
	pool->hnext = *bucket(pool->qp_num);
	*bucket(pool->qp_num) = pool;
	pthread_rwlock_unlock(&table_lock);
	ep->pool = pool;
	return DAT_SUCCESS;
}

struct dapl_wr_pool *dapl_ep_qp_detach_locked(struct dapl_ep *ep)
{
	struct dapl_wr_pool *pool = ep->pool;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	dapl_stats_qp_retired_locked(ep, dapl_ep_qp(pool));
	ep->stats.queue_full += dapl_ep_pool_queue_full(pool);
	ep->pool = NULL;
	return pool;
}

uint64_t dapl_ep_pool_queue_full(struct dapl_wr_pool *pool)
{
	uint64_t n;

	if (!pool)
		return 0;
	dapl_lock(&pool->lock);
	n = pool->queue_full;
	dapl_unlock(&pool->lock);
	return n;
}

struct iwe_qp *dapl_ep_qp(const struct dapl_wr_pool *pool)
{
	return pool ? pool->qp : NULL;
}

void dapl_ep_qp_retire(struct dapl_wr_pool *pool)
{
	struct iwe_qp *qp;

	if (!pool)
		return;
	/* Waits for a post in progress; later posts see no QP. */
	dapl_lock(&pool->lock);
	qp = pool->qp;
	pool->qp = NULL;
	dapl_unlock(&pool->lock);
	if (qp) {
		atomic_store(&pool->quiet, 1);
		/* Flush, so every posted DTO reports (DAT: outstanding DTOs
		 * are flushed), then free the QP; its CQs stay with the
		 * EVDs, which the EP pins until after this. */
		iwe_modify_qp(qp, IWE_QPS_ERROR);
		iwe_destroy_qp(qp);
	}
	pthread_rwlock_wrlock(&table_lock);
	pool->retired = 1;
	pool->rnext = NULL;
	if (retired_tail)
		retired_tail->rnext = pool;
	else
		retired_head = pool;
	retired_tail = pool;
	nretired++;
	retired_reap();
	pthread_rwlock_unlock(&table_lock);
}

void dapl_ep_outstanding_locked(const struct dapl_ep *ep, DAT_COUNT *recvs,
				DAT_COUNT *requests)
{
	struct dapl_wr_pool *p = ep->pool;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	*recvs = *requests = 0;
	if (!p)
		return;
	dapl_lock(&p->lock);
	*recvs = (DAT_COUNT)ring_used(&p->recv);
	*requests = (DAT_COUNT)ring_used(&p->send);
	if (ep->srq && p->qp)
		*recvs += (DAT_COUNT)iwe_qp_srq_held(p->qp);
	dapl_unlock(&p->lock);
}

/* ---------------------------------------------------------- posting */

struct dapl_wr_pool *dapl_ep_pool_hold_locked(struct dapl_ep *ep)
{
	struct dapl_wr_pool *p;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	/* A QP that could not be made at modify time gets another try. */
	(void)dapl_ep_qp_create_locked(ep);
	p = ep->pool;
	if (p)
		dapl_lock(&p->lock);
	return p;
}

void dapl_ep_pool_release(struct dapl_wr_pool *pool)
{
	dapl_unlock(&pool->lock);
}

/* The slots, at the first post (from the slab, as the engine's queues:
 * an MPI job's first exchange makes them for all its connections). */
static int pool_slots(struct dapl_wr_pool *p)
{
	DAPL_ASSERT_LOCKED(&p->lock);
	if (!p->slots)
		p->slots = iw_slab_zalloc(slots_size(p));
	return p->slots != NULL;
}

/* The next free slot of a ring, or NULL when every slot is outstanding. */
static struct dapl_wr_ctx *ring_next(struct dapl_wr_pool *p,
				     const struct wr_ring *r, uint32_t *idx)
{
	if (ring_used(r) >= r->n)
		return NULL;
	*idx = r->base + r->tail % r->n;
	return &p->slots[*idx];
}

static uint64_t wr_id_of(const struct dapl_wr_pool *p, uint32_t idx)
{
	return (uint64_t)p->qp_num << 32 | idx;
}

static void slot_fill(struct dapl_wr_ctx *s, const struct dapl_wr_ctx *ctx,
		      uint32_t pos)
{
	*s = *ctx;
	s->pos = pos;
	s->state = SLOT_POSTED;
}

/* EINVAL from the engine after our checks: a bad length (too long for a
 * completion) or memory that changed under us. */
static DAT_RETURN post_errno(int err, uint64_t total)
{
	if (err == ENOMEM)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEP;
	if (total > UINT32_MAX)
		return DAT_LENGTH_ERROR;
	return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
}

static DAT_RETURN no_qp(void)
{
	return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
}

/* Post a send (wr: struct ibv_send_wr) or a receive (struct
 * ibv_recv_wr) on the locked pool: take a slot of its ring, name it in
 * the wr_id, hand the request to the engine; on failure the slot goes
 * back. */
static DAT_RETURN pool_post(struct dapl_wr_pool *p, int recv, uint64_t *wr_id,
			    void *wr, const struct dapl_wr_ctx *ctx,
			    uint64_t total)
{
	struct wr_ring *r = recv ? &p->recv : &p->send;
	struct ibv_send_wr *bad_send = NULL;
	struct ibv_recv_wr *bad_recv = NULL;
	struct dapl_wr_ctx *s;
	uint32_t idx;
	int err;

	DAPL_ASSERT_LOCKED(&p->lock);
	if (!p->qp)
		return no_qp();
	if (!pool_slots(p))
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	s = ring_next(p, r, &idx);
	if (!s) {
		p->queue_full++;
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEP;
	}
	*wr_id = wr_id_of(p, idx);
	/* Filled before posting: an inline transmit may complete it and a
	 * consumer thread convert it before the engine call returns. */
	slot_fill(s, ctx, r->tail);
	r->tail++;
	err = recv ? iwe_post_recv(p->qp, wr, &bad_recv)
		   : iwe_post_send(p->qp, wr, &bad_send);
	if (err) {
		r->tail--;
		s->state = SLOT_FREE;
		return post_errno(err, total);
	}
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ep_pool_post_send(struct dapl_wr_pool *p,
				  struct ibv_send_wr *wr,
				  const struct dapl_wr_ctx *ctx,
				  uint64_t total)
{
	return pool_post(p, 0, &wr->wr_id, wr, ctx, total);
}

DAT_RETURN dapl_ep_pool_post_recv(struct dapl_wr_pool *p,
				  struct ibv_recv_wr *wr,
				  const struct dapl_wr_ctx *ctx,
				  uint64_t total)
{
	return pool_post(p, 1, &wr->wr_id, wr, ctx, total);
}

/* ------------------------------------------------------ completions */

/* pool->lock held.  The completion of slot idx arrived: free it, and the
 * suppressed requests before it (they succeeded silently: an error would
 * have completed them earlier, in order).  Slots leave the ring in order
 * only, so a completion converted out of order by a second dequeuing
 * thread waits for the earlier ones. */
static void ring_complete_locked(struct dapl_wr_pool *p, struct wr_ring *r,
				 struct dapl_wr_ctx *s, int requests)
{
	DAPL_ASSERT_LOCKED(&p->lock);
	if (s->state != SLOT_POSTED)
		return;		/* already released: nothing to do */
	s->state = SLOT_DONE;
	if (requests) {
		for (uint32_t pos = r->head; pos != s->pos; pos++) {
			struct dapl_wr_ctx *t =
				&p->slots[r->base + pos % r->n];

			if (t->state == SLOT_POSTED && t->suppressed)
				t->state = SLOT_DONE;
		}
	}
	while (ring_used(r)) {
		struct dapl_wr_ctx *h = &p->slots[r->base + r->head % r->n];

		if (h->state != SLOT_DONE)
			break;
		h->state = SLOT_FREE;
		r->head++;
	}
}

int dapl_ep_wc_take(const struct ibv_wc *wc, struct dapl_wr_ctx *ctx,
		    DAT_EP_HANDLE *ep)
{
	uint32_t qp_num = (uint32_t)(wc->wr_id >> 32);
	uint32_t idx = (uint32_t)wc->wr_id;
	struct dapl_wr_pool *p;
	int found = 0;

	pthread_rwlock_rdlock(&table_lock);
	p = table_find(qp_num);
	if (p && idx < p->send.n + p->recv.n) {
		/* slots under the lock: an idle pool gives them back. */
		dapl_lock(&p->lock);
		if (p->slots) {
			*ctx = p->slots[idx];
			*ep = p->ep_handle;
			ring_complete_locked(p, idx < p->send.n ? &p->send
								: &p->recv,
					     &p->slots[idx], idx < p->send.n);
			found = 1;
		}
		dapl_unlock(&p->lock);
	}
	pthread_rwlock_unlock(&table_lock);
	return found;
}

DAT_EP_HANDLE dapl_ep_of_qp_num(uint32_t qp_num)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	struct dapl_wr_pool *p;

	pthread_rwlock_rdlock(&table_lock);
	p = table_find(qp_num);
	if (p)
		ep = p->ep_handle;
	pthread_rwlock_unlock(&table_lock);
	return ep;
}
