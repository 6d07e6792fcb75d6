/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Protection Zones: one engine PD each.
 *
 * The PZ's obj.users counts the LMRs, RMRs, EPs and SRQs created in it
 * (see dapl_mem.h); dat_pz_free refuses while it is not zero.
 */
#include "config.h"

#include <stdlib.h>

#include "dapl.h"
#include "dapl_mem.h"

/* Abrupt IA close: dependents are already gone (dapl_kind order), so the
 * PD is idle.  If the engine still refuses, the PD stays with the device,
 * which frees it when it closes; ours is freed regardless. */
static void pz_destroy(struct dapl_obj *obj)
{
	struct dapl_pz *pz = (struct dapl_pz *)obj;
	struct dapl_ia *ia = obj->ia;

	dapl_ia_lock(ia);
	dapl_obj_fini_locked(obj);
	dapl_ia_unlock(ia);
	(void)iwe_dealloc_pd(pz->pd);
	free(pz);
}

DAT_RETURN dapl_pz_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE *pz_handle)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_pz *pz;
	DAT_RETURN ret;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!pz_handle)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	pz = calloc(1, sizeof(*pz));
	if (!pz)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	pz->pd = iwe_alloc_pd(ia->dev);
	if (!pz->pd) {
		/* The engine fails only for lack of memory or PD slots. */
		free(pz);
		return DAT_INSUFFICIENT_RESOURCES |
		       DAT_RESOURCE_PROTECTION_DOMAIN;
	}
	ret = dapl_obj_init(&pz->obj, ia, DAPL_K_PZ, DAT_HANDLE_TYPE_PZ,
			    pz_destroy);
	if (ret != DAT_SUCCESS) {
		iwe_dealloc_pd(pz->pd);
		free(pz);
		return ret;
	}
	*pz_handle = pz->obj.handle;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_pz_query(DAT_PZ_HANDLE pz_handle, DAT_PZ_PARAM_MASK mask,
			 DAT_PZ_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_pz *pz = dapl_obj_query_get(pz_handle, DAT_HANDLE_TYPE_PZ,
						DAT_INVALID_HANDLE_PZ, mask,
						DAT_PZ_FIELD_ALL, !param, &r);

	if (!pz)
		return r;
	/* The consumer knows its IA by the registry's index, not by ours. */
	param->ia_handle = dapl_ia_consumer_handle(pz->obj.ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_pz_free(DAT_PZ_HANDLE pz_handle)
{
	struct dapl_pz *pz = dapl_obj_lock(pz_handle, DAT_HANDLE_TYPE_PZ);
	struct dapl_ia *ia;

	if (!pz)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
	ia = pz->obj.ia;
	/* EBUSY from the engine means something we do not count (a QP of a
	 * module that forgot to pin) still uses the PD: same answer. */
	if (pz->obj.users > 0 || iwe_dealloc_pd(pz->pd) != 0) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_PZ_IN_USE;
	}
	dapl_obj_fini_locked(&pz->obj);
	dapl_ia_unlock(ia);
	free(pz);
	return DAT_SUCCESS;
}
