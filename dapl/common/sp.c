/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Service Points: Public (PSP), Reserved (RSP) and Common (CSP).
 *
 * A PSP or RSP is an engine listener (iwe_cm_listen) on the IA's address:
 * a qualifier up to 65535 is the TCP port; a larger one is mapped by the
 * engine onto a port range, travels in the request and is verified there.
 * Qualifiers are also registered in a process-wide table, so two Service
 * Points of this provider (even of two IAs on one address) never claim
 * the same one; the engine's bind catches other programs' sockets, and
 * either collision is DAT_CONN_QUAL_IN_USE.
 *
 * Each request the listener delivers becomes a CR (cr.c), or is refused
 * when that fails: rejected, and the engine frees it once the reply is
 * out (iwe_cm_reject_forget).  Freeing an SP
 * stops the listener first (requests not yet delivered are refused as if
 * nobody listened, DAT 2.0 dat_psp_free), and releases its EVD only after
 * the engine promised no more handler calls.
 *
 * Choices where DAT 2.0 leaves room:
 *   - Qualifier 0 is DAT_INVALID_PARAMETER; every other 64-bit value is
 *     valid (MPI libraries derive qualifiers from process ids).
 *   - dat_psp_create_any lets the kernel choose a free port (an ephemeral
 *     one), so it never collides with another program.
 *   - An RSP delivers at most one request.  It stays until dat_rsp_free
 *     (the dat_rsp_free page), so the CR event carries its handle.
 *   - An RSP may reserve an unconfigured EP (UNCONFIGURED_RESERVED):
 *     DAT 2.0 defines that state so the consumer can configure the EP with
 *     dat_ep_modify before the request arrives.
 *   - dat_rsp_free returns a still-reserved EP to UNCONNECTED; an EP a CR
 *     has taken keeps its state.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"

/* -------------------------------------------------- qualifier registry */

static struct dapl_lock qual_lock = DAPL_LOCK_INITIALIZER;
static struct dapl_sp *qual_list;	/* every live PSP and RSP */

static int same_port(const struct dapl_sp *a, const struct dapl_sp *b)
{
	return a->qual == b->qual && a->transport == b->transport &&
	       a->addr.s_addr == b->addr.s_addr;
}

/* Claim sp->qual; DAT_CONN_QUAL_IN_USE if another SP holds it. */
static DAT_RETURN qual_register(struct dapl_sp *sp)
{
	DAT_RETURN r = DAT_SUCCESS;

	dapl_lock(&qual_lock);
	for (struct dapl_sp *o = qual_list; o; o = o->qnext)
		if (same_port(o, sp))
			r = DAT_CONN_QUAL_IN_USE;
	if (r == DAT_SUCCESS) {
		sp->qnext = qual_list;
		qual_list = sp;
	}
	dapl_unlock(&qual_lock);
	return r;
}

static void qual_unregister(struct dapl_sp *sp)
{
	dapl_lock(&qual_lock);
	for (struct dapl_sp **pp = &qual_list; *pp; pp = &(*pp)->qnext) {
		if (*pp == sp) {
			*pp = sp->qnext;
			break;
		}
	}
	sp->qnext = NULL;
	dapl_unlock(&qual_lock);
}

/* ---------------------------------------------------------- requests */

/* The listener's handler.  The SP, its EVD and an RSP's reservation stay
 * valid until iwe_cm_listen_destroy has returned, which waits for us; the
 * PSP's flags never change, so the provider's EP is made before locking
 * (making it takes ia->lock). */
static void sp_handler(const struct iwe_cm_event *ev, void *ctx)
{
	struct dapl_sp *sp = ctx;
	struct dapl_ia *ia = sp->obj.ia;
	int provider_ep = sp->sp_kind == DAPL_SP_PSP &&
			  sp->psp_flags == DAT_PSP_PROVIDER_FLAG;
	DAT_RETURN r = DAT_INVALID_STATE;
	struct dapl_ep *pep = NULL;
	struct dapl_sp_view v;

	if (ev->type != IWE_CM_CONNECT_REQUEST)
		return;
	if (provider_ep && dapl_ep_create_internal(ia, &pep) != DAT_SUCCESS)
		pep = NULL;
	dapl_ia_lock(ia);
	if (!sp->dead && (provider_ep ? pep != NULL
				      : sp->sp_kind == DAPL_SP_PSP || sp->ep)) {
		v = (struct dapl_sp_view){ .handle = sp->obj.handle,
					   .qual = sp->qual, .evd = sp->evd,
					   .ep = provider_ep ? pep : sp->ep };
		r = dapl_cr_arrive_locked(ia, &v, ev);
	}
	/* Refused: the reject reply goes out before the close (the
	 * initiator sees PEER_REJECTED, not a reset), and the engine frees
	 * the conn: nothing is held for it. */
	if (r != DAT_SUCCESS)
		(void)iwe_cm_reject_forget(ev->conn, NULL, 0);
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS && pep)
		dapl_ep_destroy(pep);
}

/* ---------------------------------------------------------- listening */

static DAT_RETURN listen_errno(int err)
{
	if (err == EADDRINUSE)
		return DAT_CONN_QUAL_IN_USE;
	if (err == EACCES)		/* a privileged port */
		return DAT_CONN_QUAL_UNAVAILABLE;
	return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
}

/* Start listening on sp->qual (RSP: one request at most). */
static DAT_RETURN sp_listen_start(struct dapl_sp *sp)
{
	struct iwe_cm_params params;
	int err;

	dapl_cm_listen_params(sp->obj.ia, &params);
	err = iwe_cm_listen(sp->obj.ia->dev, sp->qual, &params,
			    sp->sp_kind == DAPL_SP_RSP ? 1 : 0,
			    sp_handler, sp, &sp->listener);
	return err ? listen_errno(err) : DAT_SUCCESS;
}

/* Stop listening: no handler runs after this.  No lock held. */
static void sp_listen_stop(struct dapl_sp *sp)
{
	iwe_cm_listen_destroy(sp->listener);
	sp->listener = NULL;
}

/* Claim the qualifier and listen; on failure nothing is held. */
static DAT_RETURN sp_bind(struct dapl_sp *sp)
{
	DAT_RETURN r = qual_register(sp);

	if (r != DAT_SUCCESS)
		return r;
	r = sp_listen_start(sp);
	if (r != DAT_SUCCESS)
		qual_unregister(sp);
	return r;
}

/* The kernel picks the port; the registry is told afterwards (it cannot
 * collide: the port was free). */
static DAT_RETURN sp_bind_any(struct dapl_sp *sp)
{
	struct iwe_cm_params params;
	uint64_t svc = 0;
	DAT_RETURN r;
	int err;

	dapl_cm_listen_params(sp->obj.ia, &params);
	err = iwe_cm_listen_any(sp->obj.ia->dev, &svc, &params,
				sp_handler, sp, &sp->listener);
	if (err)
		return err == EADDRINUSE ? DAT_CONN_QUAL_UNAVAILABLE
					 : listen_errno(err);
	sp->qual = svc;
	r = qual_register(sp);
	if (r != DAT_SUCCESS)
		sp_listen_stop(sp);
	return r;
}

static void sp_unbind(struct dapl_sp *sp)
{
	sp_listen_stop(sp);
	qual_unregister(sp);
}

/* ------------------------------------------------------ create / free */

/* Release what the SP holds (its EP's reservation, its EVD); the
 * listener is gone. */
static void sp_release_locked(struct dapl_sp *sp)
{
	DAPL_ASSERT_IA_LOCKED(sp->obj.ia);
	if (sp->ep)
		dapl_ep_unreserve_locked(sp->ep, sp);
	sp->ep = NULL;
	dapl_evd_unpin(sp->evd);
}

/* The same and unregister it. */
static void sp_unlink_locked(struct dapl_sp *sp)
{
	DAPL_ASSERT_IA_LOCKED(sp->obj.ia);
	sp_release_locked(sp);
	dapl_obj_fini_locked(&sp->obj);
}

/* Abrupt IA close: CRs went first; the reserved EP and the EVD go later,
 * so the reservation and the count are dropped now. */
static void sp_destroy_cb(struct dapl_obj *obj)
{
	struct dapl_sp *sp = (struct dapl_sp *)obj;
	struct dapl_ia *ia = obj->ia;

	dapl_ia_lock(ia);
	sp->dead = 1;
	dapl_ia_unlock(ia);
	sp_unbind(sp);
	dapl_ia_lock(ia);
	sp_unlink_locked(sp);
	dapl_ia_unlock(ia);
	free(sp);
}

/* A new SP with its CR EVD pinned; NULL with *r set otherwise. */
static struct dapl_sp *sp_alloc(struct dapl_ia *ia, enum dapl_sp_kind kind,
				DAT_EVD_HANDLE evd_handle, DAT_RETURN *r)
{
	struct dapl_sp *sp = calloc(1, sizeof(*sp));

	if (!sp) {
		*r = DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
		return NULL;
	}
	sp->evd = dapl_evd_pin(ia, evd_handle, DAT_EVD_CR_FLAG);
	if (!sp->evd) {
		free(sp);
		*r = DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR;
		return NULL;
	}
	sp->sp_kind = kind;
	sp->obj.ia = ia;	/* sp_bind needs it before registration */
	sp->addr = ia->dev_attr.addr.sin_addr;
	sp->transport = ia->dev_attr.transport;
	return sp;
}

/* Undo sp_alloc (and an RSP's reservation). */
static void sp_discard(struct dapl_ia *ia, struct dapl_sp *sp)
{
	dapl_ia_lock(ia);
	sp_release_locked(sp);
	dapl_ia_unlock(ia);
	free(sp);
}

/* Bind (fixed or any qualifier) and register the object; consumes sp. */
static DAT_RETURN sp_publish(struct dapl_ia *ia, struct dapl_sp *sp, int any,
			     DAT_HANDLE *out)
{
	static const int htype[] = { [DAPL_SP_PSP] = DAT_HANDLE_TYPE_PSP,
				     [DAPL_SP_RSP] = DAT_HANDLE_TYPE_RSP };
	static const enum dapl_kind kind[] = { [DAPL_SP_PSP] = DAPL_K_PSP,
					       [DAPL_SP_RSP] = DAPL_K_RSP };
	DAT_RETURN r;

	/* Registered first: a request may arrive as soon as the listener
	 * exists, and its CR names the SP's handle. */
	r = dapl_obj_init(&sp->obj, ia, kind[sp->sp_kind], htype[sp->sp_kind],
			  sp_destroy_cb);
	if (r != DAT_SUCCESS) {
		sp_discard(ia, sp);
		return r;
	}
	r = any ? sp_bind_any(sp) : sp_bind(sp);
	if (r != DAT_SUCCESS) {
		dapl_ia_lock(ia);
		dapl_obj_fini_locked(&sp->obj);
		dapl_ia_unlock(ia);
		sp_discard(ia, sp);
		return r;
	}
	*out = sp->obj.handle;
	return DAT_SUCCESS;
}

static DAT_RETURN psp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual,
			     int any, DAT_EVD_HANDLE evd_handle,
			     DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *out,
			     DAT_CONN_QUAL *qual_out)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_sp *sp;
	DAT_RETURN r;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (any ? !qual_out : !dapl_qual_ok(qual))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (!out)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG5;
	sp = sp_alloc(ia, DAPL_SP_PSP, evd_handle, &r);
	if (!sp)
		return r;
	sp->qual = qual;
	sp->psp_flags = flags;
	r = sp_publish(ia, sp, any, out);
	if (r == DAT_SUCCESS && any)
		*qual_out = sp->qual;
	return r;
}

DAT_RETURN dapl_psp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual,
			   DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS flags,
			   DAT_PSP_HANDLE *psp_handle)
{
	return psp_create(ia_handle, qual, 0, evd_handle, flags, psp_handle,
			  NULL);
}

DAT_RETURN dapl_psp_create_any(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL *qual,
			       DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS flags,
			       DAT_PSP_HANDLE *psp_handle)
{
	return psp_create(ia_handle, 0, 1, evd_handle, flags, psp_handle,
			  qual);
}

/* Free a PSP or RSP whose handle has been looked up as 'htype'. */
static DAT_RETURN sp_free(DAT_HANDLE handle, int htype, DAT_RETURN bad)
{
	struct dapl_sp *sp = dapl_obj_lock(handle, htype);
	struct dapl_ia *ia;

	if (!sp)
		return DAT_INVALID_HANDLE | bad;
	ia = sp->obj.ia;
	/* CRs already generated are independent of their SP (DAT 2.0).
	 * The handle goes now; the listener stops without ia->lock (it waits
	 * for a handler that may want it), and only then are the EVD and
	 * the RSP's EP released: a handler may still use them until then. */
	sp->dead = 1;
	dapl_obj_fini_locked(&sp->obj);
	dapl_ia_unlock(ia);
	sp_unbind(sp);
	dapl_ia_lock(ia);
	sp_release_locked(sp);
	dapl_ia_unlock(ia);
	free(sp);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_psp_free(DAT_PSP_HANDLE psp_handle)
{
	return sp_free(psp_handle, DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP);
}

/* What dat_psp_query and dat_rsp_query report, taken under ia->lock. */
struct sp_param {
	DAT_IA_HANDLE ia_handle;
	DAT_CONN_QUAL qual;
	DAT_EVD_HANDLE evd_handle;
	DAT_PSP_FLAGS psp_flags;
	DAT_EP_HANDLE ep_handle;
};

/* Both queries: argument checks (the mask against 'all'), then the SP's
 * parameters. */
static DAT_RETURN sp_query(DAT_HANDLE handle, int htype, DAT_RETURN bad,
			   DAT_UINT64 mask, DAT_UINT64 all, const void *param,
			   struct sp_param *out)
{
	DAT_RETURN r;
	struct dapl_sp *sp = dapl_obj_query_get(handle, htype, bad, mask, all,
						!param, &r);
	struct dapl_ia *ia;

	if (!sp)
		return r;
	ia = sp->obj.ia;
	/* The consumer knows its IA by the registry's index, not by ours. */
	out->ia_handle = dapl_ia_consumer_handle(ia);
	dapl_ia_lock(ia);
	out->qual = sp->qual;
	out->evd_handle = sp->evd->obj.handle;
	out->psp_flags = sp->psp_flags;
	out->ep_handle = sp->ep ? sp->ep->obj.handle : DAT_HANDLE_NULL;
	dapl_ia_unlock(ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK mask,
			  DAT_PSP_PARAM *param)
{
	struct sp_param p;
	DAT_RETURN r = sp_query(psp_handle, DAT_HANDLE_TYPE_PSP,
				DAT_INVALID_HANDLE_PSP, mask,
				DAT_PSP_FIELD_ALL, param, &p);

	if (r == DAT_SUCCESS)
		*param = (DAT_PSP_PARAM){ .ia_handle = p.ia_handle,
					  .conn_qual = p.qual,
					  .evd_handle = p.evd_handle,
					  .psp_flags = p.psp_flags };
	return r;
}

/* --------------------------------------------------------------- RSP */

DAT_RETURN dapl_rsp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual,
			   DAT_EP_HANDLE ep_handle, DAT_EVD_HANDLE evd_handle,
			   DAT_RSP_HANDLE *rsp_handle)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_ep *ep;
	struct dapl_sp *sp;
	DAT_RETURN r;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!dapl_qual_ok(qual))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!rsp_handle)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG5;
	sp = sp_alloc(ia, DAPL_SP_RSP, evd_handle, &r);
	if (!sp)
		return r;
	sp->qual = qual;
	dapl_ia_lock(ia);
	/* Looked up under ia->lock so that dat_ep_free cannot interleave. */
	ep = dapl_obj_get_locked(ia, ep_handle, DAT_HANDLE_TYPE_EP);
	r = ep ? dapl_ep_reserve_locked(ep, sp, &sp->ep)
	       : DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS) {
		sp_discard(ia, sp);
		return r;
	}
	return sp_publish(ia, sp, 0, rsp_handle);
}

DAT_RETURN dapl_rsp_free(DAT_RSP_HANDLE rsp_handle)
{
	return sp_free(rsp_handle, DAT_HANDLE_TYPE_RSP, DAT_INVALID_HANDLE_RSP);
}

DAT_RETURN dapl_rsp_query(DAT_RSP_HANDLE rsp_handle, DAT_RSP_PARAM_MASK mask,
			  DAT_RSP_PARAM *param)
{
	struct sp_param p;
	DAT_RETURN r = sp_query(rsp_handle, DAT_HANDLE_TYPE_RSP,
				DAT_INVALID_HANDLE_RSP, mask,
				DAT_RSP_FIELD_ALL, param, &p);

	if (r == DAT_SUCCESS)
		*param = (DAT_RSP_PARAM){ .ia_handle = p.ia_handle,
					  .conn_qual = p.qual,
					  .evd_handle = p.evd_handle,
					  .ep_handle = p.ep_handle };
	return r;
}

/* --------------------------------------------------------------- CSP */

/* Common Service Points (one listening point shared by many processes,
 * addressed by a DAT_COMM socket description) are not part of this
 * provider: the engine maps one qualifier to one port of one IA, and
 * Debian's libdat2 does not even export dat_csp_*.  The handles are still
 * checked, so a misrouted handle gets the answer it deserves. */
DAT_RETURN dapl_csp_create(DAT_IA_HANDLE ia_handle, DAT_COMM *comm,
			   DAT_IA_ADDRESS_PTR addr, DAT_EVD_HANDLE evd_handle,
			   DAT_CSP_HANDLE *csp_handle)
{
	if (!dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA))
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	return DAT_NOT_IMPLEMENTED;
}

/* No CSP ever exists, so every handle is invalid. */
DAT_RETURN dapl_csp_query(DAT_CSP_HANDLE csp_handle, DAT_CSP_PARAM_MASK mask,
			  DAT_CSP_PARAM *param)
{
	if (!dapl_obj_get(csp_handle, DAT_HANDLE_TYPE_CSP))
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CSP;
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_csp_free(DAT_CSP_HANDLE csp_handle)
{
	if (!dapl_obj_get(csp_handle, DAT_HANDLE_TYPE_CSP))
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CSP;
	return DAT_NOT_IMPLEMENTED;
}
