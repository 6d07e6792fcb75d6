/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connection Requests.
 *
 * A request that arrives on a PSP, an RSP (sp.c) or an SSP (ssp.c) becomes
 * a CR here, with its DAT_CONNECTION_REQUEST_EVENT, through one path:
 * dapl_cr_arrive_locked, given the listener's view of the request.  The
 * CR owns the engine conn until dat_cr_accept hands it to an EP (cm.c) or
 * dat_cr_reject answers and destroys it; either way the CR is then freed
 * and its handle becomes invalid.  Handoff is not implemented (see
 * dapl_cr_handoff).
 *
 * Choices where DAT 2.0 leaves room:
 *   - dat_cr_accept with DAT_HANDLE_NULL uses the CR's own EP (the RSP's,
 *     the SSP's or a provider-created one); without one it is
 *     DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP.
 *   - When the CR came with the consumer's reserved EP, that EP is the only
 *     one that may accept (DAT_INVALID_PARAMETER on ep_handle otherwise); a
 *     provider-created EP may be replaced by one of the consumer's.
 *   - The event names the RSP's handle, although dat.h says it is NULL
 *     because the RSP goes away with its request: the dat_rsp_free page
 *     says the consumer frees it, and it stays until then.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"

/* ------------------------------------------------------------ object */

/* Link the CR's EP: it leaves RESERVED (or, provider-created, UNCONNECTED)
 * for PASSIVE_CONNECTION_PENDING. */
static DAT_RETURN cr_take_ep_locked(struct dapl_cr *cr, struct dapl_ep *ep)
{
	DAT_EP_STATE base = dapl_ep_base_state(ep->state);

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (ep->cr ||
	    !(base == DAT_EP_STATE_RESERVED ||
	      (ep->provider_created && base == DAT_EP_STATE_UNCONNECTED)))
		return dapl_ep_state_error(ep);
	ep->cr = cr;
	cr->ep = ep;
	dapl_ep_transition_locked(ep, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
	return DAT_SUCCESS;
}

/* Unlink the EP; its state is the caller's business (accept connects it,
 * reject returns it, abrupt close frees it). */
static void cr_release_ep_locked(struct dapl_cr *cr)
{
	DAPL_ASSERT_IA_LOCKED(cr->obj.ia);
	if (cr->ep && cr->ep->cr == cr)
		cr->ep->cr = NULL;
	cr->ep = NULL;
}

static void cr_free_locked(struct dapl_cr *cr)
{
	DAPL_ASSERT_IA_LOCKED(cr->obj.ia);
	cr_release_ep_locked(cr);
	dapl_obj_fini_locked(&cr->obj);
	free(cr);
}

static void cr_free(struct dapl_cr *cr)
{
	struct dapl_ia *ia = cr->obj.ia;

	dapl_ia_lock(ia);
	cr_free_locked(cr);
	dapl_ia_unlock(ia);
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
	cr_free(cr);
}

static void cr_copy_remote(struct dapl_cr *cr, const struct sockaddr_in *sin)
{
	if (sin->sin_family == AF_INET)
		memcpy(&cr->remote_addr, sin, sizeof(*sin));
	cr->remote_port = ntohs(sin->sin_port);
}

static void cr_copy_pd(struct dapl_cr *cr, const void *pd, size_t len)
{
	if (len > sizeof(cr->pd))
		len = sizeof(cr->pd);
	if (len && pd)
		memcpy(cr->pd, pd, len);
	cr->pd_size = (DAT_COUNT)len;
}

/* A registered CR for the request; the EP of the view is linked. */
static DAT_RETURN cr_create_locked(struct dapl_ia *ia,
				   const struct dapl_sp_view *v,
				   const struct iwe_cm_event *ev,
				   struct dapl_cr **out)
{
	struct dapl_cr *cr = calloc(1, sizeof(*cr));
	DAT_EP_STATE prev = DAT_EP_STATE_UNCONNECTED;
	DAT_RETURN r = DAT_SUCCESS;

	DAPL_ASSERT_IA_LOCKED(ia);
	if (!cr)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	cr->obj.ia = ia;
	cr->sp_handle = v->handle;
	/* The qualifier the consumer listened on (the engine verified the
	 * full value of a large one). */
	cr->conn_qual = v->qual;
	cr_copy_remote(cr, &ev->remote);
	cr_copy_pd(cr, ev->pdata, ev->pdata_len);
	cr->conn = ev->conn;
	if (v->ep) {
		prev = v->ep->state;
		r = cr_take_ep_locked(cr, v->ep);
	}
	if (r == DAT_SUCCESS)
		r = dapl_obj_init_locked(&cr->obj, ia, DAPL_K_CR,
					 DAT_HANDLE_TYPE_CR, cr_destroy_cb);
	if (r != DAT_SUCCESS) {
		if (cr->ep)
			dapl_ep_transition_locked(cr->ep, prev);
		cr_release_ep_locked(cr);
		free(cr);
		return r;
	}
	*out = cr;
	return DAT_SUCCESS;
}

/* ------------------------------------------------------------ arrival */

static DAT_RETURN cr_event_post(struct dapl_ia *ia,
				const struct dapl_sp_view *v,
				const struct dapl_cr *cr)
{
	DAT_CR_ARRIVAL_EVENT_DATA *d;
	DAT_EVENT ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_CONNECTION_REQUEST_EVENT;
	d = &ev.event_data.cr_arrival_event_data;
	d->sp_handle.psp_handle = v->handle;
	d->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->ia_addr;
	d->conn_qual = v->qual;
	d->cr_handle = cr->obj.handle;
	return dapl_evd_post(v->evd, &ev);
}

DAT_RETURN dapl_cr_arrive_locked(struct dapl_ia *ia,
				 const struct dapl_sp_view *v,
				 const struct iwe_cm_event *ev)
{
	DAT_EP_STATE prev = v->ep ? v->ep->state : DAT_EP_STATE_UNCONNECTED;
	struct dapl_cr *cr;
	DAT_RETURN r;

	DAPL_ASSERT_IA_LOCKED(ia);
	r = cr_create_locked(ia, v, ev, &cr);
	if (r != DAT_SUCCESS)
		return r;
	r = cr_event_post(ia, v, cr);
	if (r == DAT_SUCCESS) {
		ia->stats.conn_received++;
		return DAT_SUCCESS;
	}
	/* Nobody will see the CR: the EP returns, the conn stays the
	 * caller's. */
	cr->conn = NULL;
	if (cr->ep)
		dapl_ep_transition_locked(cr->ep, prev);
	cr_free_locked(cr);
	return r;
}

/* --------------------------------------------------- consumer calls */

DAT_RETURN dapl_cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK mask,
			 DAT_CR_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_cr *cr = dapl_obj_query_get(cr_handle, DAT_HANDLE_TYPE_CR,
						DAT_INVALID_HANDLE_CR, mask,
						DAT_CR_FIELD_ALL, !param, &r);

	if (!cr)
		return r;
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

/* Take the CR's conn for an answer; DAT_INVALID_STATE when another
 * answer is in progress or done. */
static DAT_RETURN cr_claim_locked(struct dapl_cr *cr, struct iwe_conn **conn)
{
	DAPL_ASSERT_IA_LOCKED(cr->obj.ia);
	if (cr->busy || !cr->conn)
		return DAT_INVALID_STATE;
	cr->busy = 1;
	*conn = cr->conn;
	cr->conn = NULL;
	return DAT_SUCCESS;
}

/* After a successful accept or reject: the CR goes, and so does a
 * provider-created EP nobody uses; an RSP's or SSP's EP is no longer
 * reserved, and back to UNCONNECTED unless it accepted. */
static void cr_done(struct dapl_cr *cr, struct dapl_ep *accepted)
{
	struct dapl_ia *ia = cr->obj.ia;
	struct dapl_ep *own;

	dapl_ia_lock(ia);
	own = cr->ep;
	if (own && own != accepted && !own->provider_created)
		dapl_ep_transition_locked(own, DAT_EP_STATE_UNCONNECTED);
	if (own) {
		dapl_ep_forget_reserver_locked(own);
		if (own == accepted || !own->provider_created)
			own = NULL;
	}
	cr_free_locked(cr);
	dapl_ia_unlock(ia);
	if (own)
		dapl_ep_destroy(own);
}

/* Which EP accepts, and whether it may. */
static DAT_RETURN accept_target_locked(struct dapl_cr *cr, struct dapl_ep *ep,
				       struct dapl_ep **target)
{
	DAPL_ASSERT_IA_LOCKED(cr->obj.ia);
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

/* The accepting EP and the CR's conn, under one lock hold. */
static DAT_RETURN accept_prepare(struct dapl_cr *cr, DAT_EP_HANDLE ep_handle,
				 struct dapl_ep **target, struct iwe_conn **conn)
{
	struct dapl_ia *ia = cr->obj.ia;
	struct dapl_ep *ep = NULL;
	DAT_RETURN r = DAT_SUCCESS;

	dapl_ia_lock(ia);
	if (ep_handle != DAT_HANDLE_NULL) {
		ep = dapl_obj_get_locked(ia, ep_handle, DAT_HANDLE_TYPE_EP);
		if (!ep)	/* freed since the caller checked it */
			r = DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	}
	if (r == DAT_SUCCESS)
		r = accept_target_locked(cr, ep, target);
	if (r == DAT_SUCCESS)
		r = cr_claim_locked(cr, conn);
	dapl_ia_unlock(ia);
	return r;
}

DAT_RETURN dapl_cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle,
			  DAT_COUNT pd_size, const DAT_PVOID pd)
{
	struct dapl_cr *cr = dapl_obj_get(cr_handle, DAT_HANDLE_TYPE_CR);
	struct dapl_ep *target = NULL;
	struct iwe_conn *conn = NULL;
	struct dapl_ep *ep;
	DAT_RETURN r;

	if (!cr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR;
	if (ep_handle != DAT_HANDLE_NULL) {
		ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
		if (!ep || ep->obj.ia != cr->obj.ia)
			return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	}
	r = dapl_pd_check(pd_size, pd, DAT_INVALID_ARG3, DAT_INVALID_ARG4);
	if (r == DAT_SUCCESS)
		r = accept_prepare(cr, ep_handle, &target, &conn);
	if (r != DAT_SUCCESS)
		return r;
	/* MPA reply, FPDU mode, then ESTABLISHED on the EP's connect EVD. */
	r = dapl_cm_accept(target, conn, cr, pd_size, pd);
	if (r != DAT_SUCCESS) {
		dapl_ia_lock(cr->obj.ia);
		cr->conn = conn;
		cr->busy = 0;
		dapl_ia_unlock(cr->obj.ia);
		return r;
	}
	cr_done(cr, target);
	return DAT_SUCCESS;
}

/* Send an MPA reply with the reject bit and the consumer's private data,
 * then free the CR (and a provider-created EP; an RSP's EP goes back to
 * UNCONNECTED, under the consumer's control). */
DAT_RETURN dapl_cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT pd_size,
			  const DAT_PVOID pd)
{
	struct dapl_cr *cr = dapl_obj_get(cr_handle, DAT_HANDLE_TYPE_CR);
	struct iwe_conn *conn = NULL;
	DAT_RETURN r;

	if (!cr)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR;
	r = dapl_pd_check(pd_size, pd, DAT_INVALID_ARG2, DAT_INVALID_ARG3);
	if (r != DAT_SUCCESS)
		return r;
	dapl_ia_lock(cr->obj.ia);
	r = cr_claim_locked(cr, &conn);
	cr->obj.ia->stats.conn_rejected += r == DAT_SUCCESS;
	dapl_ia_unlock(cr->obj.ia);
	if (r != DAT_SUCCESS)
		return r;
	/* The reply carries the consumer's data; destroying right after
	 * lets it finish going out, then closes (engine contract). */
	(void)iwe_cm_reject(conn, pd, (size_t)pd_size);
	iwe_cm_conn_destroy(conn);
	cr_done(cr, NULL);
	return DAT_SUCCESS;
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
