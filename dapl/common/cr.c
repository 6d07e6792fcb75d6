/* Connection Requests.
 *
 * The connection manager glue (cm.c) creates a CR with dapl_cr_create()
 * when a valid MPA request arrives on a Service Point; the CR owns the
 * engine conn until dat_cr_accept hands it to an EP or dat_cr_reject
 * answers and destroys it; either way the CR is then freed and its handle
 * becomes invalid.  Handoff is not implemented (see dapl_cr_handoff).
 *
 * Choices where DAT 2.0 leaves room:
 *   - dat_cr_accept with DAT_HANDLE_NULL uses the CR's own EP (the RSP's,
 *     the SSP's or a provider-created one); without one it is
 *     DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP.
 *   - When the CR came with the consumer's reserved EP, that EP is the only
 *     one that may accept (DAT_INVALID_PARAMETER on ep_handle otherwise); a
 *     provider-created EP may be replaced by one of the consumer's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dapl.h"
#include "dapl_ep.h"

/* ------------------------------------------------------------ object */

/* Link the CR's EP: it leaves RESERVED (or, provider-created, UNCONNECTED)
 * for PASSIVE_CONNECTION_PENDING.  Caller holds ia->lock. */
static DAT_RETURN cr_take_ep_locked(struct dapl_cr *cr, struct dapl_ep *ep)
{
	DAT_EP_STATE base = dapl_ep_base_state(ep->state);

	if (ep->cr ||
	    !(base == DAT_EP_STATE_RESERVED ||
	      (ep->provider_created && base == DAT_EP_STATE_UNCONNECTED)))
		return dapl_ep_state_error(ep);
	ep->cr = cr;
	cr->ep = ep;
	dapl_ep_set_state(ep, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
	return DAT_SUCCESS;
}

/* Unlink the EP; its state is the caller's business (accept connects it,
 * reject returns it, abrupt close frees it).  Caller holds ia->lock. */
static void cr_release_ep_locked(struct dapl_cr *cr)
{
	if (cr->ep && cr->ep->cr == cr)
		cr->ep->cr = NULL;
	cr->ep = NULL;
}

/* Abrupt IA close: CRs go first (their requests are reset: nobody will
 * answer them); their EPs are destroyed later. */
static void cr_destroy_cb(struct dapl_obj *obj)
{
	struct dapl_cr *cr = (struct dapl_cr *)obj;
	struct iwe_conn *conn;

	dapl_ia_lock(obj->ia);
	conn = cr->conn;
	cr->conn = NULL;
	dapl_ia_unlock(obj->ia);
	if (conn)
		iwe_cm_conn_destroy(conn);
	dapl_cr_free(cr);
}

static void cr_copy_remote(struct dapl_cr *cr, const struct sockaddr *sa)
{
	size_t len = 0;

	if (!sa)
		return;
	if (sa->sa_family == AF_INET)
		len = sizeof(struct sockaddr_in);
	else if (sa->sa_family == AF_INET6)
		len = sizeof(struct sockaddr_in6);
	memcpy(&cr->remote_addr, sa, len);
}

DAT_RETURN dapl_cr_create(struct dapl_ia *ia, const struct dapl_cr_info *info,
			  struct dapl_cr **out)
{
	struct dapl_cr *cr = calloc(1, sizeof(*cr));
	DAT_EP_STATE prev = DAT_EP_STATE_UNCONNECTED;
	DAT_RETURN r = DAT_SUCCESS;

	if (!cr)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	cr->sp_handle = info->sp_handle;
	cr->conn_qual = info->conn_qual;
	cr->remote_port = info->remote_port;
	cr_copy_remote(cr, info->remote);
	cr->pd_size = info->pd_size < 0 ? 0 : info->pd_size;
	if (cr->pd_size > (DAT_COUNT)sizeof(cr->pd))
		cr->pd_size = sizeof(cr->pd);
	if (cr->pd_size && info->pd)
		memcpy(cr->pd, info->pd, (size_t)cr->pd_size);
	cr->conn = info->conn;
	if (info->ep) {
		dapl_ia_lock(ia);
		prev = info->ep->state;
		r = cr_take_ep_locked(cr, info->ep);
		dapl_ia_unlock(ia);
	}
	if (r == DAT_SUCCESS)
		r = dapl_obj_init(&cr->obj, ia, DAPL_K_CR, DAT_HANDLE_TYPE_CR,
				  cr_destroy_cb);
	if (r != DAT_SUCCESS) {
		dapl_ia_lock(ia);
		if (cr->ep)
			cr->ep->state = prev;
		cr_release_ep_locked(cr);
		dapl_ia_unlock(ia);
		free(cr);
		return r;
	}
	*out = cr;
	return DAT_SUCCESS;
}

void dapl_cr_free(struct dapl_cr *cr)
{
	struct dapl_ia *ia = cr->obj.ia;

	dapl_ia_lock(ia);
	cr_release_ep_locked(cr);
	dapl_obj_fini_locked(&cr->obj);
	dapl_ia_unlock(ia);
	free(cr);
}

/* --------------------------------------------------- consumer calls */

DAT_RETURN dapl_cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK mask,
			 DAT_CR_PARAM *param)
{
	struct dapl_cr *cr = dapl_obj_get(cr_handle, DAT_HANDLE_TYPE_CR);

	if (!cr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR;
	if (mask & ~DAT_CR_FIELD_ALL)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!param)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	/* Pointers into the CR: valid until it is accepted or rejected. */
	param->remote_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&cr->remote_addr;
	param->remote_port_qual = cr->remote_port;
	param->private_data_size = cr->pd_size;
	param->private_data = cr->pd;
	dapl_ia_lock(cr->obj.ia);
	param->local_ep_handle = cr->ep ? cr->ep->obj.handle : DAT_HANDLE_NULL;
	dapl_ia_unlock(cr->obj.ia);
	return DAT_SUCCESS;
}

/* Which EP accepts, and whether it may.  Caller holds ia->lock. */
static DAT_RETURN accept_target_locked(struct dapl_cr *cr, struct dapl_ep *ep,
				       struct dapl_ep **target)
{
	if (!ep) {
		if (!cr->ep)
			return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
		*target = cr->ep;
		/* Pending with this CR; a provider-created EP must have been
		 * configured (dat_ep_modify) before it can carry traffic. */
		return dapl_ep_is_configured(cr->ep)
			       ? DAT_SUCCESS : dapl_ep_state_error(cr->ep);
	}
	if (ep == cr->ep)
		return accept_target_locked(cr, NULL, target);
	if (cr->ep && !cr->ep->provider_created)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	*target = ep;
	return dapl_ep_check_connectable(ep);
}

DAT_RETURN dapl_cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle,
			  DAT_COUNT pd_size, const DAT_PVOID pd)
{
	struct dapl_cr *cr = dapl_obj_get(cr_handle, DAT_HANDLE_TYPE_CR);
	struct dapl_ep *ep = NULL, *target = NULL;
	DAT_RETURN r;

	if (!cr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR;
	if (ep_handle != DAT_HANDLE_NULL) {
		ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
		if (!ep || ep->obj.ia != cr->obj.ia)
			return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	}
	if (!dapl_pd_size_ok(pd_size))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (pd_size > 0 && !pd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	dapl_ia_lock(cr->obj.ia);
	r = accept_target_locked(cr, ep, &target);
	dapl_ia_unlock(cr->obj.ia);
	if (r != DAT_SUCCESS)
		return r;
	/* MPA reply, FPDU mode, then ESTABLISHED on the EP's connect EVD. */
	return dapl_cm_accept(cr, target, pd_size, pd);
}

/* Send an MPA reply with the reject bit and the consumer's private data,
 * then free the CR (and a provider-created EP; an RSP's EP goes back to
 * UNCONNECTED, under the consumer's control). */
DAT_RETURN dapl_cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT pd_size,
			  const DAT_PVOID pd)
{
	struct dapl_cr *cr = dapl_obj_get(cr_handle, DAT_HANDLE_TYPE_CR);

	if (!cr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR;
	if (!dapl_pd_size_ok(pd_size))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (pd_size > 0 && !pd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	return dapl_cm_reject(cr, pd_size, pd);
}

/* Handing a request to the PSP of another qualifier means moving its TCP
 * connection, still waiting for the MPA reply, under that PSP and raising
 * a new CR there.  Within one process that is possible (the connection is
 * ours), but the engine has no call that re-targets a delivered request
 * yet, so this stays DAT_NOT_IMPLEMENTED after checking. */
DAT_RETURN dapl_cr_handoff(DAT_CR_HANDLE cr_handle, DAT_CONN_QUAL qual)
{
	if (!dapl_obj_get(cr_handle, DAT_HANDLE_TYPE_CR))
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR;
	if (!dapl_qual_ok(qual))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	return DAT_NOT_IMPLEMENTED;
}
