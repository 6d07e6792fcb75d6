/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket Service Points: create, free, query, and the events of an adopted
 * socket.  See ssp.h for the ownership of the socket; doc/ssp.md for the
 * consumer's view. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dapl_ep.h"
#include "dapl_evd.h"
#include "ssp.h"

/* ----------------------------------------------------------- checks */

DAT_RETURN dapl_ssp_check_socket(struct dapl_ia *ia, int fd,
				 struct iwe_sock_facts *facts)
{
	switch (iwe_device_check_socket(ia->dev, fd, facts)) {
	case 0:
		/* Not connected: the SSP reports it as SOCKET_DOWN; a
		 * connect over it fails as UNREACHABLE. */
		return DAT_SUCCESS;
	case EPROTOTYPE:
		/* A TCP socket on a udp IA (or UDP on tcp) is a socket,
		 * just not one this IA can carry. */
	case EADDRNOTAVAIL:	/* routed through another interface */
		return DAT_INVALID_STATE;
	default:	/* no socket, not IPv4, neither TCP nor UDP */
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	}
}

/* ----------------------------------------------------------- events */

static void post_ssp_event(struct dapl_ssp *ssp, DAT_EVENT_NUMBER number)
{
	DAT_IW_SSP_EVENT_DATA *d;
	DAT_EVENT ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_number = number;
	d = DAT_IW_SSP_EVENT_DATA_PTR(&ev);
	d->ssp_handle = ssp->obj.handle;
	d->socket_id = ssp->consumer_fd;
	(void)dapl_evd_post(ssp->evd, &ev);
}

/* The local port of the socket stands for the qualifier a PSP would have. */
static DAT_CONN_QUAL local_port(const struct iwe_cm_event *ev)
{
	return ntohs(ev->local.sin_port);
}

/* The consumer's EP if it is still reserved by this SSP. */
static struct dapl_ep *reserved_ep_locked(struct dapl_ssp *ssp)
{
	struct dapl_ep *ep;

	DAPL_ASSERT_IA_LOCKED(ssp->obj.ia);
	ep = dapl_obj_get_locked(ssp->obj.ia, ssp->ep_handle,
				 DAT_HANDLE_TYPE_EP);
	return ep && ep->reserved_by == ssp ? ep : NULL;
}

/* A valid MPA request: the one Connection Request of this SSP, made as a
 * PSP's or RSP's are (cr.c).  All of it happens under ia->lock: once the
 * CR holds the conn, dat_iw_ssp_free no longer waits for this handler.
 * A request that cannot become a CR is rejected; the conn stays the
 * SSP's, destroyed at dat_iw_ssp_free. */
static void on_request(struct dapl_ssp *ssp, const struct iwe_cm_event *ev)
{
	struct dapl_ia *ia = ssp->obj.ia;
	DAT_RETURN r = DAT_INVALID_STATE;
	struct dapl_ep *pep = NULL;
	struct dapl_sp_view v;

	if (ssp->provider_ep && dapl_ep_create_internal(ia, &pep) != DAT_SUCCESS)
		pep = NULL;
	dapl_ia_lock(ia);
	if (!ssp->dead) {
		v = (struct dapl_sp_view){ .handle = ssp->obj.handle,
					   .qual = local_port(ev),
					   .evd = ssp->evd,
					   .ep = ssp->provider_ep
						 ? pep : reserved_ep_locked(ssp) };
		if (v.ep)
			r = dapl_cr_arrive_locked(ia, &v, ev);
		if (r == DAT_SUCCESS) {
			ssp->conn = NULL;	/* the CR owns the socket now */
			ssp->conn_given = 1;
			ssp->fd = -1;
		} else {
			(void)iwe_cm_reject(ev->conn, NULL, 0);
		}
		ssp->state = DAT_IW_SSP_STATE_NON_OPERATIONAL;
	}
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS && pep)
		dapl_ep_destroy(pep);
}

static void ssp_handler(const struct iwe_cm_event *ev, void *ctx)
{
	struct dapl_ssp *ssp = ctx;
	struct dapl_ia *ia = ssp->obj.ia;
	int dead;

	dapl_ia_lock(ia);
	/* The handler may run before dat_iw_ssp_create stored the conn. */
	if (!ssp->conn && !ssp->conn_given)
		ssp->conn = ev->conn;
	dead = ssp->dead || ssp->state != DAT_IW_SSP_STATE_OPERATIONAL;
	if (!dead && ev->type != IWE_CM_CONNECT_REQUEST)
		ssp->state = DAT_IW_SSP_STATE_NON_OPERATIONAL;
	dapl_ia_unlock(ia);
	if (dead)
		return;
	switch (ev->type) {
	case IWE_CM_CONNECT_REQUEST:
		on_request(ssp, ev);
		break;
	case IWE_CM_SOCKET_DOWN:
		/* Closed or reset before a request: the socket stays the
		 * consumer's to close (handed back at dat_iw_ssp_free). */
		post_ssp_event(ssp, (DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN);
		break;
	case IWE_CM_BAD_REQUEST:
		/* The peer sent something else than an MPA request; not a
		 * byte was consumed, so the consumer can take the socket back
		 * (dat_iw_ssp_free) and go on streaming. */
		post_ssp_event(ssp, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
		break;
	default:
		break;
	}
}

/* ----------------------------------------------------------- create */

static void ssp_release_locked(struct dapl_ssp *ssp)
{
	struct dapl_ep *ep;

	DAPL_ASSERT_IA_LOCKED(ssp->obj.ia);
	if (ssp->ep_handle) {
		ep = dapl_obj_get_locked(ssp->obj.ia, ssp->ep_handle,
					 DAT_HANDLE_TYPE_EP);
		if (ep)
			dapl_ep_unreserve_locked(ep, ssp);
		ssp->ep_handle = DAT_HANDLE_NULL;
	}
	if (ssp->evd)
		dapl_evd_unpin(ssp->evd);
	ssp->evd = NULL;
	dapl_obj_fini_locked(&ssp->obj);
}

/* Hand the socket back and free; no lock held. */
static void ssp_destroy(struct dapl_ssp *ssp)
{
	struct dapl_ia *ia = ssp->obj.ia;
	struct iwe_conn *conn;

	dapl_ia_lock(ia);
	ssp->dead = 1;
	conn = ssp->conn;
	ssp->conn = NULL;
	dapl_ia_unlock(ia);
	if (conn) {
		/* Flags restored, unread bytes left in the socket. */
		(void)iwe_cm_release_socket(conn);
		iwe_cm_conn_destroy(conn);
	}
	dapl_ia_lock(ia);
	ssp_release_locked(ssp);
	dapl_ia_unlock(ia);
	free(ssp);
}

static void ssp_destroy_cb(struct dapl_obj *obj)
{
	ssp_destroy((struct dapl_ssp *)obj);
}

/* Pin the EVD and reserve the EP; undone by ssp_release_locked. */
static DAT_RETURN ssp_link(struct dapl_ssp *ssp, DAT_EP_HANDLE ep_handle,
			   DAT_EVD_HANDLE evd_handle)
{
	struct dapl_ia *ia = ssp->obj.ia;
	struct dapl_ep *ep;
	DAT_RETURN r = DAT_SUCCESS;

	ssp->evd = dapl_evd_pin(ia, evd_handle, DAT_EVD_CR_FLAG);
	if (!ssp->evd)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CR;
	if (!ep_handle)
		return DAT_SUCCESS;
	dapl_ia_lock(ia);
	ep = dapl_obj_get_locked(ia, ep_handle, DAT_HANDLE_TYPE_EP);
	r = ep ? dapl_ep_reserve_locked(ep, ssp, NULL)
	       : DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (r == DAT_SUCCESS)
		ssp->ep_handle = ep_handle;
	dapl_ia_unlock(ia);
	return r;
}

static DAT_RETURN ssp_adopt(struct dapl_ssp *ssp,
			    const struct iwe_sock_facts *facts,
			    const void *final_msg, DAT_COUNT final_len)
{
	struct dapl_ia *ia = ssp->obj.ia;
	struct iwe_cm_params params;
	struct iwe_conn *conn = NULL;
	int err;

	if (!facts->connected) {
		/* DAT iWARP extension 3.1.1.2: not connected at create is reported as
		 * SOCKET_DOWN, not refused. */
		ssp->state = DAT_IW_SSP_STATE_NON_OPERATIONAL;
		post_ssp_event(ssp, (DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN);
		return DAT_SUCCESS;
	}
	dapl_cm_listen_params(ia, &params);
	err = iwe_cm_adopt_passive(ia->dev, ssp->fd, facts, final_msg,
				   (size_t)final_len, &params, ssp_handler,
				   ssp, &conn);
	if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
		ssp->state = DAT_IW_SSP_STATE_NON_OPERATIONAL;
		post_ssp_event(ssp, (DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN);
		return DAT_SUCCESS;
	}
	if (err)
		return err == EINVAL ? DAT_INVALID_PARAMETER | DAT_INVALID_ARG2
				     : DAT_INSUFFICIENT_RESOURCES |
					       DAT_RESOURCE_MEMORY;
	dapl_ia_lock(ia);
	/* A handler may already have learnt it, or given it to a CR. */
	if (!ssp->conn && !ssp->conn_given)
		ssp->conn = conn;
	dapl_ia_unlock(ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ssp_create(struct dapl_ia *ia, int fd, DAT_EP_HANDLE ep,
			   DAT_EVD_HANDLE evd, const void *final_msg,
			   DAT_COUNT final_len, DAT_IW_SSP_HANDLE *out)
{
	struct dapl_ssp *ssp;
	struct iwe_sock_facts facts;
	DAT_RETURN r;

	if (final_len < 0 || (final_len > 0 && !final_msg))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG6;
	if (!out)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG7;
	r = dapl_ssp_check_socket(ia, fd, &facts);
	if (r != DAT_SUCCESS)
		return r;
	ssp = calloc(1, sizeof(*ssp));
	if (!ssp)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	ssp->fd = ssp->consumer_fd = fd;
	ssp->provider_ep = ep == DAT_HANDLE_NULL;
	ssp->state = DAT_IW_SSP_STATE_OPERATIONAL;
	r = dapl_obj_init(&ssp->obj, ia, DAPL_K_SSP, DAT_IW_HANDLE_TYPE_SSP,
			  ssp_destroy_cb);
	if (r != DAT_SUCCESS) {
		free(ssp);
		return r;
	}
	r = ssp_link(ssp, ep, evd);
	if (r != DAT_SUCCESS) {
		dapl_ia_lock(ia);
		ssp_release_locked(ssp);
		dapl_ia_unlock(ia);
		free(ssp);
		return r;
	}
	r = ssp_adopt(ssp, &facts, final_msg, final_len);
	if (r != DAT_SUCCESS) {
		ssp_destroy(ssp);
		return r;
	}
	*out = ssp->obj.handle;
	return DAT_SUCCESS;
}

/* ------------------------------------------------------- free, query */

DAT_RETURN dapl_ssp_free(DAT_IW_SSP_HANDLE handle)
{
	struct dapl_ssp *ssp = dapl_obj_lock(handle, DAT_IW_HANDLE_TYPE_SSP);

	if (!ssp)
		return DAT_INVALID_HANDLE;
	if (ssp->dead) {	/* a concurrent free won */
		dapl_ia_unlock(ssp->obj.ia);
		return DAT_INVALID_HANDLE;
	}
	ssp->dead = 1;
	dapl_ia_unlock(ssp->obj.ia);
	ssp_destroy(ssp);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ssp_query(DAT_IW_SSP_HANDLE handle, int mask,
			  DAT_IW_SSP_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_ssp *ssp = dapl_obj_query_get(handle, DAT_IW_HANDLE_TYPE_SSP,
						  0, mask,
						  DAT_IW_SSP_FIELD_ALL, !param,
						  &r);
	struct dapl_ia *ia;

	if (!ssp)
		return r;
	ia = ssp->obj.ia;
	dapl_ia_lock(ia);
	param->ia_handle = dapl_ia_consumer_handle(ia);
	/* The DAT iWARP extension: a non-operational SSP has no socket associated. */
	param->socket_id = ssp->state == DAT_IW_SSP_STATE_OPERATIONAL
				   ? ssp->fd : -1;
	param->evd_handle = ssp->evd->obj.handle;
	param->ep_handle = ssp->ep_handle;
	param->ssp_state = ssp->state;
	dapl_ia_unlock(ia);
	return DAT_SUCCESS;
}
