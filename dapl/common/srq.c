/* Shared Receive Queues.
 *
 * An SRQ belongs to one PZ (it counts one user there) and is counted by
 * every EP created with it.  This issue keeps its attributes and checks
 * every call; buffers are posted to the engine's SRQ in the next issue,
 * so dat_srq_post_recv stops at DAT_NOT_IMPLEMENTED after validation and
 * the available/outstanding counts stay 0.
 *
 * Choices where DAT 2.0 leaves room:
 *   - available_dto_count counts buffers waiting in the SRQ;
 *     outstanding_dto_count counts every posted buffer not yet completed
 *     (waiting, or taken by an EP for a message in progress).  A resize
 *     below the outstanding count is DAT_INVALID_STATE.
 *   - A resize does not touch the low watermark; one above the new size
 *     simply fires at once when the data path checks it.
 */
#include "config.h"

#include <stdlib.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_mem.h"

struct dapl_srq *dapl_srq_pin(struct dapl_ia *ia, DAT_SRQ_HANDLE h)
{
	struct dapl_srq *srq;

	dapl_ia_lock(ia);
	/* Under ia->lock, so dat_srq_free cannot win between look-up and
	 * count. */
	srq = dapl_obj_get(h, DAT_HANDLE_TYPE_SRQ);
	if (srq && srq->obj.ia == ia)
		srq->obj.users++;
	else
		srq = NULL;
	dapl_ia_unlock(ia);
	return srq;
}

void dapl_srq_unpin_locked(struct dapl_srq *srq)
{
	if (srq->obj.users > 0)
		srq->obj.users--;
}

/* Abrupt IA close: the EPs went first; the PZ goes later. */
static void srq_destroy_cb(struct dapl_obj *obj)
{
	struct dapl_srq *srq = (struct dapl_srq *)obj;
	struct dapl_ia *ia = obj->ia;

	dapl_ia_lock(ia);
	dapl_pz_unpin_locked(srq->pz);
	dapl_obj_fini_locked(obj);
	dapl_ia_unlock(ia);
	free(srq);
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
	r = dapl_obj_init(&srq->obj, ia, DAPL_K_SRQ, DAT_HANDLE_TYPE_SRQ,
			  srq_destroy_cb);
	if (r != DAT_SUCCESS) {
		dapl_pz_unpin(srq->pz);
		free(srq);
		return r;
	}
	*srq_handle = srq->obj.handle;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_srq_free(DAT_SRQ_HANDLE srq_handle)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);
	struct dapl_ia *ia;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	ia = srq->obj.ia;
	dapl_ia_lock(ia);
	/* Re-check under the lock: a concurrent free may have won. */
	if (dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ) != srq) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	}
	if (srq->obj.users > 0) {	/* EPs take their receives from it */
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE;
	}
	dapl_pz_unpin_locked(srq->pz);
	dapl_obj_fini_locked(&srq->obj);
	dapl_ia_unlock(ia);
	free(srq);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK mask,
			  DAT_SRQ_PARAM *param)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	if (mask & ~DAT_SRQ_FIELD_ALL)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!param)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	/* The consumer knows its IA by the registry's index, not by ours. */
	param->ia_handle = dapl_ia_consumer_handle(srq->obj.ia);
	dapl_ia_lock(srq->obj.ia);
	param->srq_state = srq->state;
	param->pz_handle = srq->pz->obj.handle;
	param->max_recv_dtos = srq->max_recv_dtos;
	param->max_recv_iov = srq->max_recv_iov;
	param->low_watermark = srq->low_watermark;
	param->available_dto_count = srq->available;
	param->outstanding_dto_count = srq->outstanding;
	dapl_ia_unlock(srq->obj.ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT max_recv_dtos)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);
	DAT_RETURN r = DAT_SUCCESS;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	if (max_recv_dtos < 1 ||
	    (uint32_t)max_recv_dtos > srq->obj.ia->dev_attr.max_srq_wr)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	dapl_ia_lock(srq->obj.ia);
	/* Buffers already posted cannot be taken back. */
	if (max_recv_dtos < srq->outstanding)
		r = DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE;
	else
		srq->max_recv_dtos = max_recv_dtos;	/* next issue: engine too */
	dapl_ia_unlock(srq->obj.ia);
	return r;
}

DAT_RETURN dapl_srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT low_watermark)
{
	struct dapl_srq *srq = dapl_obj_get(srq_handle, DAT_HANDLE_TYPE_SRQ);
	DAT_RETURN r = DAT_SUCCESS;

	if (!srq)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ;
	dapl_ia_lock(srq->obj.ia);
	if (low_watermark < 0 || low_watermark > srq->max_recv_dtos)
		r = DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	else
		srq->low_watermark = low_watermark;
	dapl_ia_unlock(srq->obj.ia);
	return r;
}

/* Post to the engine's SRQ: next issue. */
static DAT_RETURN srq_post_start(struct dapl_srq *srq, DAT_COUNT n,
				 const DAT_LMR_TRIPLET *iov,
				 DAT_DTO_COOKIE cookie)
{
	return DAT_NOT_IMPLEMENTED;
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
	else if (srq->outstanding >= srq->max_recv_dtos)
		r = DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_SRQ;
	else
		r = dapl_ep_iov_check_locked(ia, srq->pz, n, iov,
					     DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
					     DAT_INVALID_ARG3, &total);
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS)
		return r;
	return srq_post_start(srq, n, iov, cookie);
}
