/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Remote Memory Regions: one engine memory window each.
 *
 * Choices where DAT 2.0 leaves room (tested by test/dapltest/t_mem.c):
 * - dat_rmr_create gives scope PZ, dat_rmr_create_for_ep scope EP.  An
 *   unbound RMR reports a zero lmr_triplet, DAT_MEM_PRIV_NONE_FLAG and
 *   rmr_context 0.
 * - dat_rmr_free of a bound RMR is allowed: freeing the window invalidates
 *   its STag (as verbs do), and the LMR is released.
 * - dat_rmr_bind with segment_length 0 is DAT's unbind: the LMR handle,
 *   the rest of the triplet, mem_priv and va_type are then ignored.
 *   Otherwise the triplet's lmr_context must be the LMR's and the segment
 *   must lie inside it (DAT_INVALID_ARG3); local privilege bits in mem_priv
 *   are accepted and ignored (DAT_MEM_PRIV_ALL_FLAG is common), others are
 *   ARG4; remote write needs an LMR that may be written locally (verbs):
 *   DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_RDMA_WRITE.  An LMR of
 *   another PZ is DAT_PROTECTION_VIOLATION.  (dat_error.h's comments on
 *   these two codes are swapped; the DAT specification's meanings are the
 *   ones used here.)
 * - A bind (or unbind) is a work request (IBV_WR_BIND_MW) on the EP's
 *   send queue: the EP must be connected (DAT_INVALID_STATE otherwise) and
 *   of the RMR's PZ (DAT_PROTECTION_VIOLATION).  It completes with
 *   DAT_RMR_BIND_COMPLETION_EVENT on the EP's request EVD, in order with
 *   the EP's other requests.  The engine picks the new STag when the bind
 *   is posted, so dat_rmr_bind returns the rmr_context at once, and
 *   dat_rmr_query reports the new binding from then on; the window
 *   accepts remote access once the bind has executed (at the latest when
 *   its completion is reported).  If the bind fails (flushed), the RMR
 *   ends unbound: the engine revokes the old binding too.
 * - The LMR of a binding stays in use (dat_lmr_free: LMR_IN_USE) until
 *   the RMR is unbound, rebound elsewhere or freed.  dat_rmr_free of an
 *   RMR whose bind is still queued on an EP is DAT_INVALID_STATE: the
 *   send queue still holds its window.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_mem.h"

#define BIND_COMPLETION_FLAGS                                        \
	(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |  \
	 DAT_COMPLETION_BARRIER_FENCE_FLAG)

/* Undo a binding on our side; the engine window is unbound by the caller
 * (or by iwe_dealloc_mw). */
static void rmr_forget_binding_locked(struct dapl_rmr *rmr)
{
	DAPL_ASSERT_IA_LOCKED(rmr->obj.ia);
	if (rmr->lmr && rmr->lmr->obj.users > 0)
		rmr->lmr->obj.users--;
	rmr->lmr = NULL;
	rmr->triplet = (DAT_LMR_TRIPLET){ 0 };
	rmr->mem_priv = DAT_MEM_PRIV_NONE_FLAG;
	rmr->rmr_context = 0;
}

/* Shared by dat_rmr_free and the abrupt-close path; the engine window is
 * gone already. */
static void rmr_release_locked(struct dapl_rmr *rmr)
{
	DAPL_ASSERT_IA_LOCKED(rmr->obj.ia);
	rmr_forget_binding_locked(rmr);
	dapl_obj_fini_locked(&rmr->obj);
	dapl_obj_unpin_locked(&rmr->pz->obj);
}

static void rmr_destroy(struct dapl_obj *obj)
{
	struct dapl_ia *ia = obj->ia;
	struct dapl_rmr *rmr = (struct dapl_rmr *)obj;

	dapl_ia_lock(ia);
	/* The EPs went first, so no bind holds the window: freeing it
	 * invalidates a bound STag. */
	(void)iwe_dealloc_mw(rmr->mw);
	rmr_release_locked(rmr);
	dapl_ia_unlock(ia);
	free(obj);
}

/* ---------------------------------------------------- create, query, free */

static DAT_RETURN rmr_create(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *out,
			     DAT_RMR_SCOPE scope)
{
	struct dapl_pz *pz = dapl_obj_get(pz_handle, DAT_HANDLE_TYPE_PZ);
	struct dapl_rmr *rmr;
	DAT_RETURN ret;

	if (!pz)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
	if (!out)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	rmr = calloc(1, sizeof(*rmr));
	if (!rmr)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	rmr->scope = scope;
	rmr->va_type = DAT_VA_TYPE_VA;
	/* Pin through the IA so that a concurrent dat_pz_free is refused or
	 * wins cleanly. */
	rmr->pz = dapl_pz_pin(pz->obj.ia, pz_handle);
	if (!rmr->pz) {
		free(rmr);
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
	}
	rmr->mw = iwe_alloc_mw(rmr->pz->pd);
	ret = rmr->mw ? DAT_SUCCESS
		      : DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY_REGION;
	if (ret == DAT_SUCCESS)
		ret = dapl_obj_init(&rmr->obj, rmr->pz->obj.ia, DAPL_K_RMR,
				    DAT_HANDLE_TYPE_RMR, rmr_destroy);
	if (ret != DAT_SUCCESS) {
		if (rmr->mw)
			iwe_dealloc_mw(rmr->mw);
		dapl_obj_unpin(&rmr->pz->obj);
		free(rmr);
		return ret;
	}
	*out = rmr->obj.handle;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_rmr_create(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr_handle)
{
	return rmr_create(pz_handle, rmr_handle, DAT_RMR_SCOPE_PZ);
}

DAT_RETURN dapl_rmr_create_for_ep(DAT_PZ_HANDLE pz_handle,
				  DAT_RMR_HANDLE *rmr_handle)
{
	return rmr_create(pz_handle, rmr_handle, DAT_RMR_SCOPE_EP);
}

DAT_RETURN dapl_rmr_query(DAT_RMR_HANDLE rmr_handle, DAT_RMR_PARAM_MASK mask,
			  DAT_RMR_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_rmr *rmr = dapl_obj_query_get(rmr_handle, DAT_HANDLE_TYPE_RMR,
						  DAT_INVALID_HANDLE_RMR, mask,
						  DAT_RMR_FIELD_ALL, !param, &r);
	DAT_IA_HANDLE ia_handle;
	struct dapl_ia *ia;

	if (!rmr)
		return r;
	ia = rmr->obj.ia;
	/* Asked before taking ia->lock: it calls into the registry. */
	ia_handle = dapl_ia_consumer_handle(ia);
	/* Under the lock: a bind completing elsewhere changes several
	 * fields at once. */
	dapl_ia_lock(ia);
	*param = (DAT_RMR_PARAM){
		.ia_handle = ia_handle,
		.pz_handle = rmr->pz->obj.handle,
		.lmr_triplet = rmr->triplet,
		.mem_priv = rmr->mem_priv,
		.rmr_context = rmr->rmr_context,
		.rmr_scope = rmr->scope,
		.va_type = rmr->va_type,
	};
	dapl_ia_unlock(ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_rmr_free(DAT_RMR_HANDLE rmr_handle)
{
	struct dapl_rmr *rmr = dapl_obj_lock(rmr_handle, DAT_HANDLE_TYPE_RMR);
	struct dapl_ia *ia;

	if (!rmr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_RMR;
	ia = rmr->obj.ia;
	if (iwe_dealloc_mw(rmr->mw) == EBUSY) {
		dapl_ia_unlock(ia);	/* a bind is queued on an EP */
		return DAT_INVALID_STATE;
	}
	rmr_release_locked(rmr);
	dapl_ia_unlock(ia);
	free(rmr);
	return DAT_SUCCESS;
}

/* --------------------------------------------------------------- bind */

struct bind_req {
	struct dapl_rmr *rmr;
	DAT_LMR_HANDLE lmr_handle;
	const DAT_LMR_TRIPLET *triplet;
	DAT_MEM_PRIV_FLAGS mem_priv;
	DAT_VA_TYPE va_type;
	DAT_EP_HANDLE ep_handle;
	DAT_COMPLETION_FLAGS flags;
	DAT_RMR_CONTEXT *context;
	struct dapl_lmr *lmr;		/* resolved; NULL for an unbind */
	struct dapl_ep *ep;		/* resolved */
};

/* Arguments 2-5 of a bind proper (not an unbind). */
static DAT_RETURN bind_check_region_locked(struct bind_req *b,
					   struct dapl_ia *ia)
{
	const DAT_LMR_TRIPLET *t = b->triplet;

	DAPL_ASSERT_IA_LOCKED(ia);
	b->lmr = dapl_obj_get_locked(ia, b->lmr_handle, DAT_HANDLE_TYPE_LMR);
	if (!b->lmr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR;
	if (t->lmr_context != b->lmr->lmr_context ||
	    !dapl_lmr_covers(b->lmr, t->virtual_address, t->segment_length))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (b->mem_priv & ~DAT_MEM_PRIV_ALL_FLAG)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (b->va_type != DAT_VA_TYPE_VA)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG5;
	return DAT_SUCCESS;
}

/* What needs the LMR and the RMR together. */
static DAT_RETURN bind_check_rights(const struct bind_req *b)
{
	if (b->lmr->pz != b->rmr->pz)
		return DAT_PROTECTION_VIOLATION;
	if ((b->mem_priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) &&
	    !dapl_lmr_allows(b->lmr, DAT_MEM_PRIV_LOCAL_WRITE_FLAG))
		return DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_RDMA_WRITE;
	return DAT_SUCCESS;
}

/* Every argument, in argument order, then the checks that relate them. */
static DAT_RETURN bind_validate_locked(struct bind_req *b, struct dapl_ia *ia)
{
	int unbind = b->triplet->segment_length == 0;
	DAT_RETURN ret;

	DAPL_ASSERT_IA_LOCKED(ia);
	if (!unbind && (ret = bind_check_region_locked(b, ia)) != DAT_SUCCESS)
		return ret;
	b->ep = dapl_obj_get_locked(ia, b->ep_handle, DAT_HANDLE_TYPE_EP);
	if (!b->ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (b->flags & ~BIND_COMPLETION_FLAGS)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG8;
	if (!unbind && !b->context)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG9;
	return unbind ? DAT_SUCCESS : bind_check_rights(b);
}

/* Remote rights of a bind; local ones are accepted and ignored. */
static unsigned int bind_access(DAT_MEM_PRIV_FLAGS priv)
{
	unsigned int a = 0;

	if (priv & DAT_MEM_PRIV_REMOTE_READ_FLAG)
		a |= IBV_ACCESS_REMOTE_READ;
	if (priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
		a |= IBV_ACCESS_REMOTE_WRITE;
	return a;
}

/* After a successful post: the RMR records the binding (or none, for an
 * unbind) as of bind number seq. */
static void bind_record_locked(struct bind_req *b, uint32_t seq,
			       uint32_t rkey)
{
	struct dapl_rmr *rmr = b->rmr;

	DAPL_ASSERT_IA_LOCKED(rmr->obj.ia);
	rmr_forget_binding_locked(rmr);
	rmr->bind_seq = seq;
	if (!b->lmr)
		return;
	b->lmr->obj.users++;
	rmr->lmr = b->lmr;
	rmr->triplet = *b->triplet;
	rmr->mem_priv = b->mem_priv;
	rmr->va_type = b->va_type;
	rmr->rmr_context = rkey;
	*b->context = rkey;
}

/* Post the bind on the EP's send queue; recorded under the same lock
 * hold, so a failed completion (dapl_rmr_bind_failed, which takes
 * ia->lock) always finds it. */
static DAT_RETURN bind_post_locked(struct bind_req *b, DAT_RMR_COOKIE cookie)
{
	struct dapl_wr_pool *pool;
	struct ibv_send_wr wr;
	struct dapl_wr_ctx ctx;
	DAT_RETURN r;

	DAPL_ASSERT_IA_LOCKED(b->rmr->obj.ia);
	if (!dapl_ep_connected(b->ep))
		return dapl_ep_state_error(b->ep);
	if (b->ep->pz != b->rmr->pz)
		return DAT_PROTECTION_VIOLATION;
	pool = dapl_ep_pool_hold_locked(b->ep);
	if (!pool)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
	memset(&wr, 0, sizeof(wr));
	iwe_wr_set_bind_mw(&wr, b->rmr->mw, b->lmr ? b->lmr->mr : NULL,
			   b->triplet->virtual_address,
			   b->lmr ? b->triplet->segment_length : 0,
			   bind_access(b->mem_priv));
	if (!(b->flags & DAT_COMPLETION_SUPPRESS_FLAG))
		wr.send_flags |= IBV_SEND_SIGNALED;
	if (b->flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
		wr.send_flags |= IBV_SEND_FENCE;
	memset(&ctx, 0, sizeof(ctx));
	ctx.op = DAT_DTO_BIND_MW;
	ctx.cookie.as_64 = cookie.as_64;
	ctx.flags = b->flags;
	ctx.suppressed = !!(b->flags & DAT_COMPLETION_SUPPRESS_FLAG);
	ctx.rmr = b->rmr->obj.handle;
	ctx.rmr_seq = b->rmr->bind_seq + 1;
	r = dapl_ep_pool_post_send(pool, &wr, &ctx, 0);
	if (r == DAT_SUCCESS)
		bind_record_locked(b, ctx.rmr_seq, wr.bind_mw.rkey);
	dapl_ep_pool_release(pool);
	return r;
}

/* A peer's Send with Invalidate named this context: the engine has
 * unbound the window already; the RMR forgets the binding (and releases
 * its LMR) so that dat_rmr_query and dat_lmr_free see it unbound.  A
 * context the RMR no longer carries (rebound since) is left alone. */
void dapl_rmr_remote_invalidated(struct dapl_ia *ia, DAT_RMR_CONTEXT ctx)
{
	dapl_ia_lock(ia);
	for (struct dapl_obj *o = ia->objs[DAPL_K_RMR]; o; o = o->next) {
		struct dapl_rmr *rmr = (struct dapl_rmr *)o;

		if (rmr->lmr && rmr->rmr_context == ctx) {
			rmr_forget_binding_locked(rmr);
			break;
		}
	}
	dapl_ia_unlock(ia);
}

void dapl_rmr_bind_failed(DAT_RMR_HANDLE rmr_handle, uint32_t seq)
{
	struct dapl_rmr *rmr = dapl_obj_lock(rmr_handle, DAT_HANDLE_TYPE_RMR);

	if (!rmr)
		return;		/* freed since */
	if (rmr->bind_seq == seq)
		rmr_forget_binding_locked(rmr);
	dapl_ia_unlock(rmr->obj.ia);
}

DAT_RETURN dapl_rmr_bind(DAT_RMR_HANDLE rmr_handle, DAT_LMR_HANDLE lmr_handle,
			 const DAT_LMR_TRIPLET *triplet,
			 DAT_MEM_PRIV_FLAGS mem_priv, DAT_VA_TYPE va_type,
			 DAT_EP_HANDLE ep_handle, DAT_RMR_COOKIE cookie,
			 DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *context)
{
	struct bind_req b = { .lmr_handle = lmr_handle, .triplet = triplet,
			      .mem_priv = mem_priv, .va_type = va_type,
			      .ep_handle = ep_handle, .flags = flags,
			      .context = context };
	struct dapl_ia *ia;
	DAT_RETURN ret;

	b.rmr = dapl_obj_get(rmr_handle, DAT_HANDLE_TYPE_RMR);
	if (!b.rmr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_RMR;
	if (!triplet)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	ia = b.rmr->obj.ia;
	dapl_ia_lock(ia);
	ret = bind_validate_locked(&b, ia);
	if (ret == DAT_SUCCESS)
		ret = bind_post_locked(&b, cookie);
	dapl_ia_unlock(ia);
	return ret;
}
