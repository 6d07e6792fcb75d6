/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Local Memory Regions: one engine MR each, and the check of every
 * local IOV against them (dapl_lmr_iov_check_locked).
 *
 * Choices where DAT 2.0 leaves room (tested by test/dapltest/t_mem.c):
 * - Memory types: VIRTUAL and LMR (what dat_ia_query reports).  LMR
 *   registers again the whole range of a live LMR of the same IA (in any
 *   PZ, with its own privileges); the 'length' argument is then ignored, as
 *   the region is the source LMR's.  SHARED_VIRTUAL is a valid DAT type we
 *   do not support: DAT_MODEL_NOT_SUPPORTED, as DAT specifies for a memory
 *   type the provider lacks; values DAT does not define: DAT_INVALID_ARG2.
 * - A zero length is refused (ARG4): the engine cannot register an empty
 *   range and DAT gives no meaning to an empty LMR.
 * - lmr_context is the engine's STag (24-bit index << 8 | 8-bit key).
 *   rmr_context is returned always, even without remote privileges: the
 *   engine's lkey and rkey are the same STag, and its table grants peers
 *   only the remote rights the region has, so exposing it gives nothing.
 * - Every LMR is registered with the engine's MW_BIND right, because DAT
 *   has no bind privilege: any LMR may back an RMR.
 * - Sync calls: memory is coherent (lmr_sync_req FALSE), so after checking
 *   the segments there is nothing to do.  A segment naming no LMR of the IA,
 *   or reaching outside it, is DAT_INVALID_PARAMETER | DAT_INVALID_ARG2
 *   (DAT's own example of an invalid parameter for these calls).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "dapl.h"
#include "dapl_mem.h"

#define MEM_PRIV_KNOWN DAT_MEM_PRIV_ALL_FLAG

/* DAT privileges to engine access rights.  Local read is always granted;
 * verbs require local write whenever a peer may write. */
static int lmr_access(DAT_MEM_PRIV_FLAGS priv)
{
	int access = IBV_ACCESS_MW_BIND;

	if (priv & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
		access |= IBV_ACCESS_LOCAL_WRITE;
	if (priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
		access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	if (priv & DAT_MEM_PRIV_REMOTE_READ_FLAG)
		access |= IBV_ACCESS_REMOTE_READ;
	return access;
}

/* The privileges the engine actually grants for what the consumer asked. */
static DAT_MEM_PRIV_FLAGS lmr_effective_priv(DAT_MEM_PRIV_FLAGS priv)
{
	priv |= DAT_MEM_PRIV_LOCAL_READ_FLAG;
	if (priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
		priv |= DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
	return priv;
}

int dapl_lmr_allows(const struct dapl_lmr *lmr, DAT_MEM_PRIV_FLAGS priv)
{
	return (lmr_effective_priv(lmr->mem_priv) & priv) == priv;
}

static DAT_RETURN reg_error(int err)
{
	if (err == EINVAL)
		return DAT_INVALID_PARAMETER;
	return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY_REGION;
}

int dapl_lmr_covers(const struct dapl_lmr *lmr, DAT_VADDR va, DAT_VLEN len)
{
	if (len == 0)
		return 1;
	return va >= lmr->address && len <= lmr->size &&
	       va - lmr->address <= lmr->size - len;
}

struct dapl_lmr *dapl_lmr_find_locked(struct dapl_ia *ia, DAT_LMR_CONTEXT ctx)
{
	DAPL_ASSERT_IA_LOCKED(ia);
	/* A linear walk keeps struct dapl_ia untouched; enough for the sync
	 * calls.  If a data path looks up every segment of IAs holding many
	 * LMRs, an index by STag in struct dapl_ia is the next step. */
	for (struct dapl_obj *o = ia->objs[DAPL_K_LMR]; o; o = o->next) {
		struct dapl_lmr *lmr = (struct dapl_lmr *)o;

		if (lmr->lmr_context == ctx)
			return lmr;
	}
	return NULL;
}

/* Abrupt IA close: RMRs went first, so nothing is bound to the MR. */
static void lmr_destroy(struct dapl_obj *obj)
{
	struct dapl_lmr *lmr = (struct dapl_lmr *)obj;
	struct dapl_ia *ia = obj->ia;

	dapl_ia_lock(ia);
	(void)iwe_dereg_mr(lmr->mr);
	dapl_obj_fini_locked(obj);
	dapl_obj_unpin_locked(&lmr->pz->obj);
	dapl_ia_unlock(ia);
	free(lmr);
}

/* ------------------------------------------------------------- create */

/* The range to register: from the consumer for VIRTUAL, from the source
 * LMR for LMR.  Fills lmr->address and lmr->size. */
static DAT_RETURN lmr_region(struct dapl_ia *ia, struct dapl_lmr *lmr,
			     DAT_VLEN length)
{
	struct dapl_lmr *src;
	int ok;

	if (lmr->mem_type == DAT_MEM_TYPE_VIRTUAL) {
		/* A NULL address is refused by the caller, after the length. */
		lmr->address = (DAT_VADDR)(uintptr_t)lmr->region_desc.for_va;
		lmr->size = lmr->length = length;
		return DAT_SUCCESS;
	}
	/* Under the lock: the source may be freed concurrently.  Once its
	 * range is copied it is not needed (the memory is the consumer's). */
	dapl_ia_lock(ia);
	src = dapl_obj_get_locked(ia, lmr->region_desc.for_lmr_handle,
				  DAT_HANDLE_TYPE_LMR);
	ok = src != NULL;
	if (ok) {
		/* dat_lmr_query reports this length, not the one ignored. */
		lmr->address = src->address;
		lmr->size = lmr->length = src->size;
	}
	dapl_ia_unlock(ia);
	return ok ? DAT_SUCCESS : DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR;
}

/* Arguments 2-4, 6 and 7 (the PZ is checked when it is pinned). */
static DAT_RETURN lmr_check_args(struct dapl_ia *ia, struct dapl_lmr *lmr,
				 DAT_VLEN length)
{
	DAT_RETURN ret;

	if (lmr->mem_type == DAT_MEM_TYPE_SHARED_VIRTUAL)
		return DAT_MODEL_NOT_SUPPORTED;
	if (lmr->mem_type != DAT_MEM_TYPE_VIRTUAL &&
	    lmr->mem_type != DAT_MEM_TYPE_LMR)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	ret = lmr_region(ia, lmr, length);
	if (ret != DAT_SUCCESS)
		return ret;
	/* An empty, oversized or wrapping region is a length error whatever
	 * the address (dapltest's FFT mem case 2 registers NULL, 0). */
	if (lmr->size == 0 || lmr->size > ia->dev_attr.max_mr_size ||
	    lmr->size - 1 > UINTPTR_MAX - lmr->address)
		return DAT_LENGTH_ERROR;
	if (lmr->mem_type == DAT_MEM_TYPE_VIRTUAL && !lmr->region_desc.for_va)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (lmr->mem_priv & ~MEM_PRIV_KNOWN)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG6;
	/* Zero-based addressing is not offered (zb_supported FALSE). */
	if (lmr->va_type != DAT_VA_TYPE_VA)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG7;
	return DAT_SUCCESS;
}

/* Register with the engine and give the LMR its handle.  On failure
 * everything lmr_register did is undone (the PZ pin is the caller's). */
static DAT_RETURN lmr_register(struct dapl_ia *ia, struct dapl_lmr *lmr)
{
	DAT_RETURN ret;

	lmr->mr = iwe_reg_mr(lmr->pz->pd, (void *)(uintptr_t)lmr->address,
			     (size_t)lmr->size, lmr_access(lmr->mem_priv));
	if (!lmr->mr)
		return reg_error(errno);
	lmr->lmr_context = lmr->mr->lkey;
	lmr->rmr_context = lmr->mr->rkey;
	ret = dapl_obj_init(&lmr->obj, ia, DAPL_K_LMR, DAT_HANDLE_TYPE_LMR,
			    lmr_destroy);
	if (ret != DAT_SUCCESS)
		iwe_dereg_mr(lmr->mr);
	return ret;
}

static void lmr_outputs(const struct dapl_lmr *lmr, DAT_LMR_HANDLE *handle,
			DAT_LMR_CONTEXT *lctx, DAT_RMR_CONTEXT *rctx,
			DAT_VLEN *reg_len, DAT_VADDR *reg_addr)
{
	*handle = lmr->obj.handle;
	if (lctx)
		*lctx = lmr->lmr_context;
	if (rctx)
		*rctx = lmr->rmr_context;
	if (reg_len)
		*reg_len = lmr->size;
	if (reg_addr)
		*reg_addr = lmr->address;
}

/* Arguments 5 and 8, then the registration; the PZ stays pinned only on
 * success. */
static DAT_RETURN lmr_attach(struct dapl_ia *ia, struct dapl_lmr *lmr,
			     DAT_PZ_HANDLE pz_handle, DAT_LMR_HANDLE *lmr_handle)
{
	DAT_RETURN ret;

	lmr->pz = dapl_pz_pin(ia, pz_handle);
	if (!lmr->pz)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
	if (!lmr_handle)
		ret = DAT_INVALID_PARAMETER | DAT_INVALID_ARG8;
	else
		ret = lmr_register(ia, lmr);
	if (ret != DAT_SUCCESS)
		dapl_obj_unpin(&lmr->pz->obj);
	return ret;
}

DAT_RETURN dapl_lmr_create(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE mem_type,
			   DAT_REGION_DESCRIPTION region, DAT_VLEN length,
			   DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS priv,
			   DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr_handle,
			   DAT_LMR_CONTEXT *lmr_context,
			   DAT_RMR_CONTEXT *rmr_context,
			   DAT_VLEN *registered_length,
			   DAT_VADDR *registered_address)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_lmr *lmr;
	DAT_RETURN ret;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	lmr = calloc(1, sizeof(*lmr));
	if (!lmr)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	*lmr = (struct dapl_lmr){ .mem_type = mem_type, .region_desc = region,
				  .mem_priv = priv, .va_type = va_type };
	ret = lmr_check_args(ia, lmr, length);
	if (ret == DAT_SUCCESS)
		ret = lmr_attach(ia, lmr, pz_handle, lmr_handle);
	if (ret != DAT_SUCCESS) {
		free(lmr);
		return ret;
	}
	lmr_outputs(lmr, lmr_handle, lmr_context, rmr_context,
		    registered_length, registered_address);
	return DAT_SUCCESS;
}

/* -------------------------------------------------------- query, free */

DAT_RETURN dapl_lmr_query(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK mask,
			  DAT_LMR_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_lmr *lmr = dapl_obj_query_get(lmr_handle, DAT_HANDLE_TYPE_LMR,
						  DAT_INVALID_HANDLE_LMR, mask,
						  DAT_LMR_FIELD_ALL, !param, &r);

	if (!lmr)
		return r;
	/* Every field is cheap, so all are filled whatever the mask. */
	*param = (DAT_LMR_PARAM){
		.ia_handle = dapl_ia_consumer_handle(lmr->obj.ia),
		.mem_type = lmr->mem_type,
		.region_desc = lmr->region_desc,
		.length = lmr->length,
		.pz_handle = lmr->pz->obj.handle,
		.mem_priv = lmr->mem_priv,
		.va_type = lmr->va_type,
		.lmr_context = lmr->lmr_context,
		.rmr_context = lmr->rmr_context,
		.registered_size = lmr->size,
		.registered_address = lmr->address,
	};
	return DAT_SUCCESS;
}

DAT_RETURN dapl_lmr_free(DAT_LMR_HANDLE lmr_handle)
{
	struct dapl_lmr *lmr = dapl_obj_lock(lmr_handle, DAT_HANDLE_TYPE_LMR);
	struct dapl_ia *ia;

	if (!lmr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR;
	ia = lmr->obj.ia;
	/* Bound RMRs keep it; the engine agrees (EBUSY while MWs use it). */
	if (lmr->obj.users > 0 || iwe_dereg_mr(lmr->mr) != 0) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_LMR_IN_USE;
	}
	dapl_obj_fini_locked(&lmr->obj);
	dapl_obj_unpin_locked(&lmr->pz->obj);
	dapl_ia_unlock(ia);
	free(lmr);
	return DAT_SUCCESS;
}

/* ---------------------------------------------------------- local IOVs */

static DAT_RETURN priv_subtype(DAT_MEM_PRIV_FLAGS priv)
{
	return (priv & DAT_MEM_PRIV_LOCAL_WRITE_FLAG) ? DAT_PRIVILEGES_WRITE
						      : DAT_PRIVILEGES_READ;
}

static DAT_RETURN prot_subtype(DAT_MEM_PRIV_FLAGS priv)
{
	return (priv & DAT_MEM_PRIV_LOCAL_WRITE_FLAG) ? DAT_PROTECTION_WRITE
						      : DAT_PROTECTION_READ;
}

void dapl_lmr_sge_fill(struct ibv_sge *sge, const DAT_LMR_TRIPLET *iov,
		       DAT_COUNT n)
{
	for (DAT_COUNT i = 0; i < n; i++) {
		sge[i].addr = iov[i].virtual_address;
		sge[i].length = (uint32_t)iov[i].segment_length;
		sge[i].lkey = iov[i].lmr_context;
	}
}

/* The LMR look-up walks the IA's LMRs; a data path that must scale with
 * many LMRs would validate with the engine's O(1) STag table instead, and
 * keep this for the privilege check. */
DAT_RETURN dapl_lmr_iov_check_locked(struct dapl_ia *ia,
				     const struct dapl_pz *pz, DAT_COUNT n,
				     const DAT_LMR_TRIPLET *iov,
				     DAT_MEM_PRIV_FLAGS priv,
				     DAT_RETURN iov_arg, uint64_t *total)
{
	uint64_t sum = 0;

	DAPL_ASSERT_IA_LOCKED(ia);
	for (DAT_COUNT i = 0; i < n; i++) {
		const DAT_LMR_TRIPLET *t = &iov[i];
		const struct dapl_lmr *lmr;

		/* DAT: with a zero length the other fields may be invalid. */
		if (t->segment_length == 0)
			continue;
		lmr = dapl_lmr_find_locked(ia, t->lmr_context);
		if (!lmr)
			return DAT_PRIVILEGES_VIOLATION | priv_subtype(priv);
		if (lmr->pz != pz)
			return DAT_PROTECTION_VIOLATION | prot_subtype(priv);
		if ((lmr->mem_priv & priv) != priv)
			return DAT_PRIVILEGES_VIOLATION | priv_subtype(priv);
		if (!dapl_lmr_covers(lmr, t->virtual_address, t->segment_length))
			return DAT_INVALID_PARAMETER | iov_arg;
		sum += t->segment_length;
	}
	*total = sum;
	return DAT_SUCCESS;
}

/* --------------------------------------------------------------- sync */

static DAT_RETURN lmr_sync(DAT_IA_HANDLE ia_handle,
			   const DAT_LMR_TRIPLET *segs, DAT_VLEN n)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	DAT_RETURN ret = DAT_SUCCESS;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!segs)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (n == 0)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	dapl_ia_lock(ia);
	for (DAT_VLEN i = 0; i < n && ret == DAT_SUCCESS; i++) {
		struct dapl_lmr *lmr;

		if (segs[i].segment_length == 0)
			continue;	/* DAT: the other fields are irrelevant */
		lmr = dapl_lmr_find_locked(ia, segs[i].lmr_context);
		if (!lmr || !dapl_lmr_covers(lmr, segs[i].virtual_address,
					     segs[i].segment_length))
			ret = DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	}
	dapl_ia_unlock(ia);
	/* Memory is coherent: nothing to flush or invalidate. */
	return ret;
}

DAT_RETURN dapl_lmr_sync_rdma_read(DAT_IA_HANDLE ia_handle,
				   const DAT_LMR_TRIPLET *segs, DAT_VLEN n)
{
	return lmr_sync(ia_handle, segs, n);
}

DAT_RETURN dapl_lmr_sync_rdma_write(DAT_IA_HANDLE ia_handle,
				    const DAT_LMR_TRIPLET *segs, DAT_VLEN n)
{
	return lmr_sync(ia_handle, segs, n);
}
