/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared Receive Queues: one engine SRQ each.
 *
 * An SRQ belongs to one PZ (it counts one user there) and is counted by
 * every EP created with it; such an EP's QP takes its receives from the
 * engine SRQ, and they complete on the EP's recv EVD like its own.
 *
 * Posted receives keep their cookies in slots of the SRQ, named by the
 * wr_id (DAPL_WR_SRQ_BIT | id << 32 | slot): completions of one SRQ
 * arrive through many QPs and CQs, in any order across them, so slots
 * come from a free list.  SRQs are found by id in a process-wide table,
 * so a completion dequeued after its SRQ was freed becomes an event
 * without cookie instead of a read of freed memory.
 *
 * Choices where DAT 2.0 leaves room:
 *   - available_dto_count counts buffers waiting in the SRQ (the engine's
 *     count); outstanding_dto_count counts every posted buffer whose
 *     completion has not been dequeued yet (waiting, taken by an EP for a
 *     message in progress, or completed and queued on an EVD), as
 *     max_recv_dtos bounds.  A resize below it is DAT_INVALID_STATE.
 *   - Low watermark: an asynchronous event when an EP takes a buffer and
 *     fewer than low_watermark remain, once per dat_srq_set_lw; set_lw
 *     with fewer already waiting reports at once (DAT 2.0).  The value
 *     given to dat_srq_create arms the SRQ the same way, but an SRQ is
 *     born empty, so it reports only when an EP first takes a buffer.
 *     DAT 2.0 has no event number of its own for it: the event is
 *     DAPL_SRQ_LW_EVENT, with the SRQ handle as dat_handle and reason
 *     DAT_SRQ_LOW_WATERMARK_EVENT (the SRQ reason DAT defines for it).
 *   - When an EP with an SRQ leaves its connection (its QP enters the
 *     error state and takes no more buffers), the IA's async EVD gets
 *     DAT_ASYNC_ERROR_EP_BROKEN naming the EP (verbs' "last WQE
 *     reached", as other DAT providers and Debian's dtestsrq expect);
 *     see ep_qp.c.
 *   - A resize does not touch the low watermark.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"
#include "dapl_mem.h"

/* The generic provider event: no DAT 2.0 number fits better, and the
 * reason field says what happened. */
#define DAPL_SRQ_LW_EVENT DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR

#define SRQ_BUCKETS 64

struct dapl_srq_slot {
	DAT_DTO_COOKIE cookie;
	uint32_t next_free;		/* 1-based free-list link */
	uint8_t used;
};

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct dapl_srq *table[SRQ_BUCKETS];
static atomic_uint next_id = 1;

/* --------------------------------------------------------- SRQ table */

static void table_add(struct dapl_srq *srq)
{
	/* Ids fit in 31 bits of the wr_id; wrapping after 2^31 SRQs is
	 * harmless since a stale id then simply misses. */
	srq->id = atomic_fetch_add(&next_id, 1) & 0x7fffffffu;
	pthread_rwlock_wrlock(&table_lock);
	srq->hnext = table[srq->id % SRQ_BUCKETS];
	table[srq->id % SRQ_BUCKETS] = srq;
	pthread_rwlock_unlock(&table_lock);
}

static void table_remove(struct dapl_srq *srq)
{
	struct dapl_srq **pp;

	pthread_rwlock_wrlock(&table_lock);
	for (pp = &table[srq->id % SRQ_BUCKETS]; *pp; pp = &(*pp)->hnext) {
		if (*pp == srq) {
			*pp = srq->hnext;
			break;
		}
	}
	pthread_rwlock_unlock(&table_lock);
}

/* ------------------------------------------------------------ slots */

/* Grow to n slots; never shrinks, so slot numbers in flight stay valid
 * across resizes. */
static int slots_grow_locked(struct dapl_srq *srq, uint32_t n)
{
	struct dapl_srq_slot *s;
	uint32_t i;

	DAPL_ASSERT_LOCKED(&srq->lock);
	if (n <= srq->nslots)
		return 0;
	s = realloc(srq->slots, n * sizeof(*s));
	if (!s)
		return ENOMEM;
	for (i = srq->nslots; i < n; i++) {
		s[i].used = 0;
		s[i].next_free = i + 1 < n ? i + 2 : srq->free_head;
	}
	srq->free_head = srq->nslots + 1;
	srq->slots = s;
	srq->nslots = n;
	return 0;
}

/* A free slot for a cookie, or NULL. */
static struct dapl_srq_slot *slot_take_locked(struct dapl_srq *srq,
					      uint32_t *idx)
{
	struct dapl_srq_slot *s;

	DAPL_ASSERT_LOCKED(&srq->lock);
	if (!srq->free_head || srq->outstanding >= srq->max_recv_dtos)
		return NULL;
	*idx = srq->free_head - 1;
	s = &srq->slots[*idx];
	srq->free_head = s->next_free;
	s->used = 1;
	srq->outstanding++;
	return s;
}

static void slot_give_back_locked(struct dapl_srq *srq, uint32_t idx)
{
	DAPL_ASSERT_LOCKED(&srq->lock);
	srq->slots[idx].used = 0;
	srq->slots[idx].next_free = srq->free_head;
	srq->free_head = idx + 1;
	srq->outstanding--;
}

int dapl_srq_wc_take(uint64_t wr_id, DAT_DTO_COOKIE *cookie)
{
	uint32_t id = (uint32_t)(wr_id >> 32) & 0x7fffffffu;
	uint32_t idx = (uint32_t)wr_id;
	struct dapl_srq *srq;
	int found = 0;

	pthread_rwlock_rdlock(&table_lock);
	for (srq = table[id % SRQ_BUCKETS]; srq && srq->id != id;
	     srq = srq->hnext)
		;
	if (srq) {
		dapl_lock(&srq->lock);
		if (idx < srq->nslots && srq->slots[idx].used) {
			*cookie = srq->slots[idx].cookie;
			slot_give_back_locked(srq, idx);
			found = 1;
		}
		dapl_unlock(&srq->lock);
	}
	pthread_rwlock_unlock(&table_lock);
	return found;
}

/* ----------------------------------------------------------- events */

/* Queue the low-watermark event on the IA's async EVD. */
static void srq_post_lw(struct dapl_srq *srq)
{
	dapl_evd_post_async(srq->obj.ia, DAPL_SRQ_LW_EVENT, srq->obj.handle,
			    DAT_SRQ_LOW_WATERMARK_EVENT);
}

/* Engine handler: an EP took a buffer and the SRQ fell below its armed
 * limit.  Runs without engine locks; the SRQ outlives its QPs. */
static void srq_engine_event(const struct iwe_async_event *ev)
{
	if (ev->type == IWE_EVENT_SRQ_LIMIT_REACHED)
		srq_post_lw(ev->context);
}

/* ------------------------------------------------------- life cycle */

static void srq_release(struct dapl_srq *srq)
{
	table_remove(srq);
	(void)iwe_destroy_srq(srq->esrq);	/* no QP left: EPs are gone */
	dapl_lock_destroy(&srq->lock);
	free(srq->slots);
	free(srq);
}

/* Abrupt IA close: the EPs went first; the PZ goes later. */
static void srq_destroy_cb(struct dapl_obj *obj)
{
	struct dapl_srq *srq = (struct dapl_srq *)obj;
	struct dapl_ia *ia = obj->ia;

	dapl_ia_lock(ia);
	dapl_obj_unpin_locked(&srq->pz->obj);
	dapl_obj_fini_locked(obj);
	dapl_ia_unlock(ia);
	srq_release(srq);
}

static int srq_attr_ok(const struct dapl_ia *ia, const DAT_SRQ_ATTR *a)
{
	const struct iwe_device_attr *d = &ia->dev_attr;

	return a->max_recv_dtos >= 1 &&
	       (uint32_t)a->max_recv_dtos <= d->max_srq_wr &&
	       a->max_recv_iov >= 1 && (uint32_t)a->max_recv_iov <= d->max_sge &&
	       /* DAT_SRQ_LW_DEFAULT (0): no low watermark event. */
	       a->low_watermark >= 0 && a->low_watermark <= a->max_recv_dtos;
}

/* The engine SRQ and the slots; the PZ is pinned already. */
static DAT_RETURN srq_engine_new(struct dapl_srq *srq, const DAT_SRQ_ATTR *a)
{
	struct iwe_srq_init_attr ea = {
		.attr = { .max_wr = (uint32_t)a->max_recv_dtos,
			  .max_sge = (uint32_t)a->max_recv_iov,
			  .srq_limit = (uint32_t)a->low_watermark },
		.srq_context = srq,
		.event_handler = srq_engine_event,
	};

	int grown;

	dapl_lock_init(&srq->lock);
	dapl_lock(&srq->lock);
	grown = slots_grow_locked(srq, (uint32_t)a->max_recv_dtos) == 0;
	dapl_unlock(&srq->lock);
	if (!grown)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	srq->esrq = iwe_create_srq(srq->pz->pd, &ea);
	if (!srq->esrq)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_SRQ;
	return DAT_SUCCESS;
}

static void srq_engine_free(struct dapl_srq *srq)
{
	if (srq->esrq)
		iwe_destroy_srq(srq->esrq);
	dapl_lock_destroy(&srq->lock);
	free(srq->slots);
}

DAT_RETURN dapl_srq_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle,
			   DAT_SRQ_ATTR *attr, DAT_SRQ_HANDLE *srq_handle)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_srq *srq;
	DAT_RETURN r;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!attr || !srq_attr_ok(ia, attr))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (!srq_handle)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	/* Unlike an EP, an SRQ cannot exist without its PZ. */
	srq->pz = dapl_pz_pin(ia, pz_handle);
	if (!srq->pz) {
		free(srq);
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
	}
	srq->state = DAT_SRQ_STATE_OPERATIONAL;
	srq->max_recv_dtos = attr->max_recv_dtos;
	srq->max_recv_iov = attr->max_recv_iov;
	srq->low_watermark = attr->low_watermark;
	r = srq_engine_new(srq, attr);
	if (r == DAT_SUCCESS)
		r = dapl_obj_init(&srq->obj, ia, DAPL_K_SRQ,
				  DAT_HANDLE_TYPE_SRQ, srq_destroy_cb);
	if (r != DAT_SUCCESS) {
		srq_engine_free(srq);
		dapl_obj_unpin(&srq->pz->obj);
		free(srq);
		return r;
	}
	table_add(srq);
	*srq_handle = srq->obj.handle;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_srq_free(DAT_SRQ_HANDLE srq_handle)
{
	struct dapl_srq *srq = dapl_obj_lock(srq_handle, DAT_HANDLE_TYPE_SRQ);
	struct dapl_ia *ia;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	ia = srq->obj.ia;
	if (srq->obj.users > 0) {	/* EPs take their receives from it */
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE;
	}
	dapl_obj_unpin_locked(&srq->pz->obj);
	dapl_obj_fini_locked(&srq->obj);
	dapl_ia_unlock(ia);
	srq_release(srq);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK mask,
			  DAT_SRQ_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_srq *srq = dapl_obj_query_get(srq_handle, DAT_HANDLE_TYPE_SRQ,
						  DAT_INVALID_HANDLE_SRQ, mask,
						  DAT_SRQ_FIELD_ALL, !param, &r);

	if (!srq)
		return r;
	/* The consumer knows its IA by the registry's index, not by ours. */
	param->ia_handle = dapl_ia_consumer_handle(srq->obj.ia);
	dapl_ia_lock(srq->obj.ia);
	param->srq_state = srq->state;
	param->pz_handle = srq->pz->obj.handle;
	param->max_recv_dtos = srq->max_recv_dtos;
	param->max_recv_iov = srq->max_recv_iov;
	param->low_watermark = srq->low_watermark;
	dapl_lock(&srq->lock);
	param->available_dto_count = (DAT_COUNT)iwe_srq_count(srq->esrq);
	param->outstanding_dto_count = srq->outstanding;
	dapl_unlock(&srq->lock);
	dapl_ia_unlock(srq->obj.ia);
	return DAT_SUCCESS;
}

static DAT_RETURN srq_resize_locked(struct dapl_srq *srq, DAT_COUNT n)
{
	struct iwe_srq_attr a = { .max_wr = (uint32_t)n };
	DAT_RETURN r = DAT_SUCCESS;

	DAPL_ASSERT_IA_LOCKED(srq->obj.ia);
	dapl_lock(&srq->lock);
	/* Buffers already posted cannot be taken back. */
	if (n < srq->outstanding)
		r = DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE;
	else if (slots_grow_locked(srq, (uint32_t)n) ||
		 iwe_modify_srq(srq->esrq, &a, IWE_SRQ_MAX_WR))
		r = DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	else
		srq->max_recv_dtos = n;
	dapl_unlock(&srq->lock);
	return r;
}

DAT_RETURN dapl_srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT max_recv_dtos)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);
	DAT_RETURN r;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	if (max_recv_dtos < 1 ||
	    (uint32_t)max_recv_dtos > srq->obj.ia->dev_attr.max_srq_wr)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	dapl_ia_lock(srq->obj.ia);
	r = srq_resize_locked(srq, max_recv_dtos);
	dapl_ia_unlock(srq->obj.ia);
	return r;
}

/* Arm the engine, or report at once when fewer buffers than the new
 * watermark are already waiting (DAT 2.0). */
static void srq_arm_locked(struct dapl_srq *srq, DAT_COUNT lw)
{
	struct iwe_srq_attr a = { .srq_limit = (uint32_t)lw };
	int now = lw > 0 && (DAT_COUNT)iwe_srq_count(srq->esrq) < lw;

	DAPL_ASSERT_IA_LOCKED(srq->obj.ia);
	if (now)
		a.srq_limit = 0;
	(void)iwe_modify_srq(srq->esrq, &a, IWE_SRQ_LIMIT);
	if (now)
		srq_post_lw(srq);
}

DAT_RETURN dapl_srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT low_watermark)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);
	DAT_RETURN r = DAT_SUCCESS;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	dapl_ia_lock(srq->obj.ia);
	if (low_watermark < 0 || low_watermark > srq->max_recv_dtos) {
		r = DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	} else {
		srq->low_watermark = low_watermark;
		srq_arm_locked(srq, low_watermark);
	}
	dapl_ia_unlock(srq->obj.ia);
	return r;
}

/* Post the checked receive to the engine SRQ. */
static DAT_RETURN srq_post_start(struct dapl_srq *srq, DAT_COUNT n,
				 const DAT_LMR_TRIPLET *iov,
				 DAT_DTO_COOKIE cookie)
{
	struct ibv_sge sge[IWE_MAX_SGE];
	struct ibv_recv_wr wr, *bad = NULL;
	struct dapl_srq_slot *s;
	DAT_RETURN r = DAT_SUCCESS;
	uint32_t idx;
	int err;

	memset(&wr, 0, sizeof(wr));
	dapl_lmr_sge_fill(sge, iov, n);
	wr.sg_list = sge;
	wr.num_sge = (int)n;
	dapl_lock(&srq->lock);
	s = slot_take_locked(srq, &idx);
	if (!s) {
		dapl_unlock(&srq->lock);
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_SRQ;
	}
	s->cookie = cookie;
	wr.wr_id = DAPL_WR_SRQ_BIT | (uint64_t)srq->id << 32 | idx;
	err = iwe_post_srq_recv(srq->esrq, &wr, &bad);
	if (err) {
		slot_give_back_locked(srq, idx);
		r = err == ENOMEM ? DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_SRQ
				  : DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	}
	dapl_unlock(&srq->lock);
	return r;
}

DAT_RETURN dapl_srq_post_recv(DAT_SRQ_HANDLE srq_handle, DAT_COUNT n,
			      DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);
	struct dapl_ia *ia;
	uint64_t total;
	DAT_RETURN r;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	ia = srq->obj.ia;
	if (n > 0 && !iov)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	dapl_ia_lock(ia);
	if (n < 0 || n > srq->max_recv_iov)
		r = DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	else
		r = dapl_lmr_iov_check_locked(ia, srq->pz, n, iov,
					      DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
					      DAT_INVALID_ARG3, &total);
	if (r == DAT_SUCCESS && total > DAPL_MAX_MESSAGE)
		r = DAT_LENGTH_ERROR;
	/* Posted under ia->lock: dat_srq_free cannot free it meanwhile. */
	if (r == DAT_SUCCESS)
		r = srq_post_start(srq, n, iov, cookie);
	dapl_ia_unlock(ia);
	return r;
}
