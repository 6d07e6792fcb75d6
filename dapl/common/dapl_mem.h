/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Memory objects of the DAT layer: Protection Zones, LMRs and RMRs.
 *
 * Each wraps one engine object (PD, MR, MW).  Dependencies are counted in
 * obj.users under ia->lock:
 *   - a PZ counts every LMR, RMR, EP and SRQ created in it;
 *   - an LMR counts the RMRs currently bound to it.
 * An object whose users count is not zero cannot be freed (DAT_INVALID_STATE
 * with the *_IN_USE subtype); an abrupt dat_ia_close destroys dependents
 * first (enum dapl_kind order), so the counts are back to zero by the time
 * a PZ or LMR is destroyed.
 *
 * Other modules (EP, SRQ) take their PZ reference with dapl_pz_pin() and
 * drop it with dapl_pz_unpin(); they may also read pz->pd for the engine.
 * Local IOVs of every post are checked against the LMRs here
 * (dapl_lmr_iov_check_locked).
 */
#ifndef DAPL_MEM_H
#define DAPL_MEM_H

#include "dapl.h"

struct dapl_pz {
	struct dapl_obj obj;
	struct iwe_pd *pd;
};

struct dapl_lmr {
	struct dapl_obj obj;
	struct dapl_pz *pz;
	struct iwe_mr *mr;
	/* What dat_lmr_query reports; region_desc and mem_priv are kept as
	 * the consumer gave them. */
	DAT_MEM_TYPE mem_type;
	DAT_REGION_DESCRIPTION region_desc;
	DAT_VLEN length;
	DAT_MEM_PRIV_FLAGS mem_priv;
	DAT_VA_TYPE va_type;
	/* The engine's STag: lkey == rkey, 24-bit index << 8 | 8-bit key.
	 * Local posts use it as the ibv_sge lkey. */
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	DAT_VADDR address;		/* registered_address */
	DAT_VLEN size;			/* registered_size */
};

struct dapl_rmr {
	struct dapl_obj obj;
	struct dapl_pz *pz;
	struct iwe_mw *mw;
	DAT_RMR_SCOPE scope;		/* PZ (dat_rmr_create) or EP */
	/* Binding; lmr is NULL while unbound, and then the triplet is zero,
	 * mem_priv is NONE and rmr_context is 0. */
	struct dapl_lmr *lmr;
	DAT_LMR_TRIPLET triplet;
	DAT_MEM_PRIV_FLAGS mem_priv;
	DAT_VA_TYPE va_type;
	DAT_RMR_CONTEXT rmr_context;
	uint32_t bind_seq;		/* binds posted; the binding recorded
					 * is the one of this number */
};

/* Look up a PZ handle that must belong to 'ia' and count one more user of
 * it, atomically with respect to dat_pz_free.  NULL (and no count) when the
 * handle is bad, freed, not a PZ or belongs to another IA: the caller then
 * returns DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ. */
static inline struct dapl_pz *dapl_pz_pin(struct dapl_ia *ia,
					  DAT_PZ_HANDLE handle)
{
	return dapl_obj_pin(ia, handle, DAT_HANDLE_TYPE_PZ);
}

/* The live LMR of 'ia' whose lmr_context is 'ctx', or NULL.  The pointer
 * is valid only while the caller holds ia->lock.  A linear walk of the
 * IA's LMRs (see lmr.c). */
struct dapl_lmr *dapl_lmr_find_locked(struct dapl_ia *ia, DAT_LMR_CONTEXT ctx);

/* Whether the LMR grants every privilege in 'priv', as the engine enforces
 * them: local read is always granted, and remote write brings local write
 * (verbs).  Use this rather than lmr->mem_priv, which is kept as given. */
int dapl_lmr_allows(const struct dapl_lmr *lmr, DAT_MEM_PRIV_FLAGS priv);

/* Whether [va, va + len) lies inside the LMR's registered range
 * (len 0 always does: DAT ignores the other fields then). */
int dapl_lmr_covers(const struct dapl_lmr *lmr, DAT_VADDR va, DAT_VLEN len);

/* Validate a local IOV against the LMRs of a PZ: each non-empty segment
 * must lie inside a live LMR of 'pz' whose privileges include 'priv'
 * (DAT_MEM_PRIV_LOCAL_WRITE_FLAG for sinks, NONE for sources).  Adds the
 * lengths into *total.  Errors (DAT 2.0 post_* return values):
 *   unknown LMR or missing privilege -> DAT_PRIVILEGES_VIOLATION,
 *   LMR of another PZ                -> DAT_PROTECTION_VIOLATION,
 *   segment outside its LMR          -> DAT_INVALID_PARAMETER | iov_arg. */
DAT_RETURN dapl_lmr_iov_check_locked(struct dapl_ia *ia,
				     const struct dapl_pz *pz, DAT_COUNT n,
				     const DAT_LMR_TRIPLET *iov,
				     DAT_MEM_PRIV_FLAGS priv,
				     DAT_RETURN iov_arg, uint64_t *total);

/* LMR triplets as engine SGEs: the STag is the lmr_context. */
void dapl_lmr_sge_fill(struct ibv_sge *sge, const DAT_LMR_TRIPLET *iov,
		       DAT_COUNT n);

/* A peer's Send with Invalidate named this context: the RMR bound with it
 * forgets its binding.  Takes ia->lock (rmr.c). */
void dapl_rmr_remote_invalidated(struct dapl_ia *ia, DAT_RMR_CONTEXT ctx);
/* A bind posted by dat_rmr_bind did not happen (its completion carries an
 * error): the RMR, if it still records that bind (seq), becomes unbound,
 * as the engine left its window.  Takes ia->lock. */
void dapl_rmr_bind_failed(DAT_RMR_HANDLE rmr, uint32_t seq);

#endif
