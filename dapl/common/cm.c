/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* An EP's connection: the glue between the engine's connection manager
 * (iwe_cm_*, events on the device's progress thread) and the EP's DAT
 * states and connection events.  Requests arriving on listeners and the
 * Connection Requests they become are cr.c's (and sp.c's, ssp.c's).
 *
 * Threading.  Engine handlers run on the progress thread and take ia->lock;
 * every iwe_cm_* call waits for that thread.  So a consumer thread never
 * calls the engine with ia->lock held: each operation is
 *   1. a transition under ia->lock (check, move the state, take what the
 *      engine call needs),
 *   2. the engine call, unlocked,
 *   3. a second small step under ia->lock to record or undo.
 * A handler names its EP or SP through ctx; those objects stay allocated
 * until the engine promised no more handler calls (iwe_cm_conn_destroy,
 * iwe_cm_listen_destroy return), and a dying EP is flagged so a handler
 * running in that window changes nothing and posts nothing.
 *
 * Ownership of conns: the CR holds the conn of a pending request; accept
 * hands it to the EP, reject destroys it.  An EP holds its conn from
 * dat_ep_connect / dat_cr_accept until dat_ep_reset, dat_ep_free or an
 * abrupt dat_ia_close destroys it (after its final event, or abandoning
 * it).  A request an SP must refuse inside the handler is rejected there
 * and left to the engine, which frees it once the reply is out.
 *
 * Events (DAT 2.0):
 *   active: ESTABLISHED (with the accepter's private data), PEER_REJECTED
 *   (with the rejecter's), NON_PEER_REJECTED, UNREACHABLE, TIMED_OUT;
 *   passive, after dat_cr_accept: ESTABLISHED, or ACCEPT_COMPLETION_ERROR
 *   when the connection breaks before it is established;
 *   both, once connected: exactly one DISCONNECTED or BROKEN per
 *   connection, whoever disconnects first, in any order.  Every failure
 *   and end moves the EP to DISCONNECTED and flushes its QP.
 *   An abrupt dat_ep_disconnect posts DISCONNECTED before it returns and
 *   leaves the EP DISCONNECTED (so dat_ep_reset may follow at once); a
 *   graceful one leaves it DISCONNECT_PENDING until the close completes.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dapl.h"
#include "dapl_ep.h"
#include "dapl_evd.h"

/* ------------------------------------------------------------ params */

/* dapl_config.rtr: 0 none, 1 write, 2 read, 3 send (dapl_instance.c). */
static unsigned int rtr_bits(int cfg_rtr)
{
	static const unsigned int map[] = { 0, IWE_RTR_WRITE, IWE_RTR_READ,
					    IWE_RTR_SEND };

	return cfg_rtr >= 0 && cfg_rtr < 4 ? map[cfg_rtr] : 0;
}

static void params_from_cfg(const struct dapl_ia *ia, struct iwe_cm_params *p)
{
	const struct dapl_config *c = &ia->prov->cfg;

	memset(p, 0, sizeof(*p));
	p->mpa_rev = c->mpa_rev;
	p->crc = c->crc;
	p->rtr = rtr_bits(c->rtr);
	p->mpa_timeout_ms = c->mpa_timeout_ms;
	/* IWDAPL_* variables override the instance data (doc/testing). */
	iwe_cm_params_from_env(p);
}

void dapl_cm_params(const struct dapl_ep *ep, struct iwe_cm_params *p)
{
	params_from_cfg(ep->obj.ia, p);
	p->ird = (uint32_t)ep->attr.max_rdma_read_in;
	p->ord = (uint32_t)ep->attr.max_rdma_read_out;
}

/* A listener answers before it knows which EP accepts: offer what the
 * device can serve (an engine QP sizes its Read rings at attach, for
 * what the connection settled). */
void dapl_cm_listen_params(const struct dapl_ia *ia, struct iwe_cm_params *p)
{
	params_from_cfg(ia, p);
	p->ird = ia->dev_attr.max_ird;
	p->ord = ia->dev_attr.max_ord;
}

/* DAT timeouts are microseconds; the engine takes milliseconds, <= 0
 * meaning infinite.  Round up so a short timeout never becomes infinite. */
static int timeout_ms(DAT_TIMEOUT us)
{
	uint64_t ms;

	if (us == DAT_TIMEOUT_INFINITE)
		return 0;
	ms = ((uint64_t)us + 999) / 1000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ------------------------------------------------------------ events */

/* Keep the private data in the EP: the event points to it, and it stays
 * until the EP is reused or freed. */
static void ep_save_pd_locked(struct dapl_ep *ep, const void *pd, size_t len)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (len > sizeof(ep->ev_pd))
		len = sizeof(ep->ev_pd);
	if (len)
		memcpy(ep->ev_pd, pd, len);
	ep->ev_pd_size = (DAT_COUNT)len;
}

static void ep_post_conn_event_locked(struct dapl_ep *ep,
				      DAT_EVENT_NUMBER number, int with_pd)
{
	DAT_CONNECTION_EVENT_DATA *d;
	DAT_EVENT ev;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (!ep->connect_evd)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.event_number = number;
	d = &ev.event_data.connect_event_data;
	d->ep_handle = ep->obj.handle;
	if (with_pd && ep->ev_pd_size) {
		d->private_data_size = ep->ev_pd_size;
		d->private_data = ep->ev_pd;
	}
	/* A full EVD reports its overflow on the async EVD itself. */
	(void)dapl_evd_post(ep->connect_evd, &ev);
}

static void sin_to_dat(DAT_SOCK_ADDR6 *to, const struct sockaddr_in *from)
{
	memset(to, 0, sizeof(*to));
	memcpy(to, from, sizeof(*from));
}

static void ep_flush_locked(struct dapl_ep *ep)
{
	struct iwe_qp *qp = dapl_ep_qp(ep->pool);

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	/* Any state may go to ERROR; posted work completes FLUSHED. */
	if (qp)
		iwe_modify_qp(qp, IWE_QPS_ERROR);
}

/* The connection is over (or never came): one event, EP DISCONNECTED. */
static void ep_end_locked(struct dapl_ep *ep, DAT_EVENT_NUMBER number,
			  const void *pd, size_t pd_len)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	ep->cm_final = 1;
	ep_flush_locked(ep);
	dapl_ep_transition_locked(ep, DAT_EP_STATE_DISCONNECTED);
	if (ep->disc_posted)
		return;
	ep->disc_posted = 1;
	ep_save_pd_locked(ep, pd, pd_len);
	ep_post_conn_event_locked(ep, number, pd_len > 0);
}

static void ep_established_locked(struct dapl_ep *ep,
				  const struct iwe_cm_event *ev)
{
	DAT_EP_STATE s = dapl_ep_base_state(ep->state);

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	/* A disconnect may have overtaken the establishment. */
	if (s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING &&
	    s != DAT_EP_STATE_COMPLETION_PENDING)
		return;
	sin_to_dat(&ep->remote_addr, &ev->remote);
	/* Ports: the qualifiers are already known (remote for the active
	 * side, local for the passive); the other side is a TCP port. */
	if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
		ep->local_port = ntohs(ev->local.sin_port);
	else
		ep->remote_port = ntohs(ev->remote.sin_port);
	ep_save_pd_locked(ep, ev->pdata, ev->pdata_len);
	if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
		ep->stats.conn_opened++;
	else
		ep->stats.conn_accepted++;
	dapl_ep_transition_locked(ep, DAT_EP_STATE_CONNECTED);
	ep_post_conn_event_locked(ep, DAT_CONNECTION_EVENT_ESTABLISHED, 1);
}

/* A passive connection that breaks before ESTABLISHED failed to
 * complete the accept. */
static DAT_EVENT_NUMBER broken_event(const struct dapl_ep *ep)
{
	return dapl_ep_base_state(ep->state) == DAT_EP_STATE_COMPLETION_PENDING
		       ? DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR
		       : DAT_CONNECTION_EVENT_BROKEN;
}

/* A connection over a consumer's socket that is not established gives
 * the socket back, open (DAT iWARP extension 3.1.4).  Handlers may call
 * this one on their own conn. */
static void ep_return_socket_locked(struct dapl_ep *ep,
				    const struct iwe_cm_event *ev)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (!ep->adopted_socket)
		return;
	ep->adopted_socket = 0;
	(void)iwe_cm_release_socket(ev->conn);
}

/* Connection outcomes other than ESTABLISHED, counted once: an attempt
 * whose end was already reported (a disconnect overtook it) is not. */
static void ep_count_end_locked(struct dapl_ep *ep,
				const struct iwe_cm_event *ev)
{
	if (ep->disc_posted)
		return;
	if (ev->type == IWE_CM_REJECTED)
		ep->stats.conn_peer_rejected++;
	else if (ev->type == IWE_CM_NON_PEER_REJECTED ||
		 ev->type == IWE_CM_UNREACHABLE ||
		 ev->type == IWE_CM_TIMED_OUT ||
		 (ev->type == IWE_CM_BROKEN &&
		  broken_event(ep) != DAT_CONNECTION_EVENT_BROKEN))
		ep->stats.conn_failed++;
}

static void ep_on_event_locked(struct dapl_ep *ep,
			       const struct iwe_cm_event *ev)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	ep_count_end_locked(ep, ev);
	switch (ev->type) {
	case IWE_CM_REJECTED:
	case IWE_CM_NON_PEER_REJECTED:
	case IWE_CM_UNREACHABLE:
	case IWE_CM_TIMED_OUT:
		ep_return_socket_locked(ep, ev);
		break;
	case IWE_CM_ESTABLISHED:
		ep->adopted_socket = 0;	/* the EP owns it for good */
		break;
	default:
		break;
	}
	switch (ev->type) {
	case IWE_CM_ESTABLISHED:
		ep_established_locked(ep, ev);
		break;
	case IWE_CM_REJECTED:
		ep_end_locked(ep, DAT_CONNECTION_EVENT_PEER_REJECTED,
			      ev->pdata, ev->pdata_len);
		break;
	case IWE_CM_NON_PEER_REJECTED:
		ep_end_locked(ep, DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
			      NULL, 0);
		break;
	case IWE_CM_UNREACHABLE:
		ep_end_locked(ep, DAT_CONNECTION_EVENT_UNREACHABLE, NULL, 0);
		break;
	case IWE_CM_TIMED_OUT:
		ep_end_locked(ep, DAT_CONNECTION_EVENT_TIMED_OUT, NULL, 0);
		break;
	case IWE_CM_DISCONNECTED:
		ep_end_locked(ep, DAT_CONNECTION_EVENT_DISCONNECTED, NULL, 0);
		break;
	case IWE_CM_BROKEN:
		ep_end_locked(ep, broken_event(ep), NULL, 0);
		break;
	default:
		break;		/* SSP events never reach an EP's conn */
	}
}

/* The handler of every conn an EP owns (ctx: the EP). */
static void ep_handler(const struct iwe_cm_event *ev, void *ctx)
{
	struct dapl_ep *ep = ctx;
	struct dapl_ia *ia = ep->obj.ia;

	dapl_ia_lock(ia);
	/* The handler may run before the connecting thread stored the conn;
	 * a conn the EP no longer owns (being destroyed by a reset or free)
	 * is ignored. */
	if (!ep->conn && ep->cm_adopt) {
		ep->conn = ev->conn;
		ep->cm_adopt = 0;
	}
	if (!ep->dying && ep->conn == ev->conn)
		ep_on_event_locked(ep, ev);
	dapl_ia_unlock(ia);
}

/* ------------------------------------------------------- active side */

static DAT_RETURN cm_errno(int err)
{
	switch (err) {
	case EINVAL:
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
	case ENOMEM:
	case EMFILE:
	case ENFILE:
	case ENOBUFS:
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEP;
	default:
		return DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNREACHABLE;
	}
}

/* UNCONNECTED -> ACTIVE_CONNECTION_PENDING. */
static DAT_RETURN connect_begin_locked(struct dapl_ep *ep,
				       const struct sockaddr_in *dst,
				       DAT_CONN_QUAL qual, struct iwe_qp **qp)
{
	DAT_RETURN r = dapl_ep_check_connectable(ep);

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (r != DAT_SUCCESS)
		return r;
	(void)dapl_ep_qp_create_locked(ep);
	*qp = dapl_ep_qp(ep->pool);
	if (!*qp || iwe_qp_get_state(*qp) != IWE_QPS_INIT)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
	sin_to_dat(&ep->remote_addr, dst);
	ep->remote_port = qual;
	ep->local_port = 0;
	ep->ev_pd_size = 0;
	ep->cm_final = 0;
	ep->disc_posted = 0;
	ep->cm_adopt = 1;
	dapl_ep_transition_locked(ep, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
	return DAT_SUCCESS;
}

/* After the engine call of a connect: record the conn, or undo. */
static DAT_RETURN connect_end(struct dapl_ep *ep, int err,
			      struct iwe_conn *conn)
{
	struct dapl_ia *ia = ep->obj.ia;

	dapl_ia_lock(ia);
	if (err) {
		/* Nothing was started: the EP is as before the call, unless
		 * a disconnect ended the attempt meanwhile (DISCONNECTED,
		 * its event posted: dat_ep_reset follows). */
		if (dapl_ep_base_state(ep->state) ==
		    DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
			dapl_ep_transition_locked(ep, DAT_EP_STATE_UNCONNECTED);
		memset(&ep->remote_addr, 0, sizeof(ep->remote_addr));
		ep->remote_port = 0;
		ep->adopted_socket = 0;
	} else if (!ep->conn && !ep->dying) {
		ep->conn = conn;
	}
	ep->stats.conn_requested += !err;
	ep->cm_adopt = 0;
	dapl_ia_unlock(ia);
	return err ? cm_errno(err) : DAT_SUCCESS;
}

/* What dat_iw_socket_connect changes before the engine adopts the
 * socket, whose peer the socket's check found (f: no system call). */
static DAT_RETURN adopt_begin_locked(struct dapl_ep *ep,
				     const struct iwe_sock_facts *f,
				     struct iwe_qp **qp)
{
	struct sockaddr_in peer;
	DAT_RETURN r;

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (f->connected)
		peer = f->remote;
	else
		memset(&peer, 0, sizeof(peer));
	r = connect_begin_locked(ep, &peer, ntohs(peer.sin_port), qp);
	if (r != DAT_SUCCESS)
		return r;
	/* The specification recommends 0 for depths the consumer left
	 * open, so that no connection fails for the provider's choice. */
	if (ep->rdma_read_default) {
		ep->attr.max_rdma_read_in = 0;
		ep->attr.max_rdma_read_out = 0;
	}
	ep->adopted_socket = 1;
	return DAT_SUCCESS;
}

/* One active connection: by address, or over a consumer's socket. */
struct connect_req {
	const struct sockaddr_in *dst;	/* by address */
	DAT_CONN_QUAL qual;
	int fd;				/* >= 0: adopt this socket */
	const struct iwe_sock_facts *facts;	/* what its check found */
	DAT_TIMEOUT timeout;
	DAT_COUNT pd_size;
	const void *pd;
};

static DAT_RETURN connect_run(struct dapl_ep *ep, const struct connect_req *c)
{
	struct dapl_ia *ia = ep->obj.ia;
	struct iwe_cm_params params;
	struct iwe_conn *conn = NULL;
	struct iwe_qp *qp = NULL;
	DAT_RETURN r;
	int err;

	dapl_ia_lock(ia);
	r = c->fd >= 0 ? adopt_begin_locked(ep, c->facts, &qp)
		       : connect_begin_locked(ep, c->dst, c->qual, &qp);
	if (r == DAT_SUCCESS)
		dapl_cm_params(ep, &params);
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS)
		return r;
	if (c->fd >= 0)
		err = iwe_cm_adopt_active(qp, c->fd, c->facts, c->pd,
					  (size_t)c->pd_size,
					  timeout_ms(c->timeout), &params,
					  ep_handler, ep, &conn);
	else
		err = iwe_cm_connect(qp, c->dst, c->qual, c->pd,
				     (size_t)c->pd_size, timeout_ms(c->timeout),
				     &params, ep_handler, ep, &conn);
	return connect_end(ep, err, conn);
}

DAT_RETURN dapl_cm_adopt_connect(struct dapl_ep *ep, int fd,
				 const struct iwe_sock_facts *facts,
				 DAT_TIMEOUT timeout, DAT_COUNT pd_size,
				 const void *pd)
{
	struct connect_req c = { .fd = fd, .facts = facts, .timeout = timeout,
				 .pd_size = pd_size, .pd = pd };

	return connect_run(ep, &c);
}

DAT_RETURN dapl_cm_connect(struct dapl_ep *ep, const struct sockaddr_in *dst,
			   DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
			   DAT_COUNT pd_size, const void *pd)
{
	struct connect_req c = { .dst = dst, .qual = qual, .fd = -1,
				 .timeout = timeout, .pd_size = pd_size,
				 .pd = pd };

	return connect_run(ep, &c);
}

/* -------------------------------------------------------- disconnect */

/* What dat_ep_disconnect has to do now. */
enum disc_plan { DISC_NOTHING, DISC_CALL, DISC_ERROR };

static enum disc_plan disc_begin_locked(struct dapl_ep *ep,
					DAT_CLOSE_FLAGS how,
					struct iwe_conn **conn, DAT_RETURN *r)
{
	DAT_EP_STATE s = dapl_ep_base_state(ep->state);

	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	*r = DAT_SUCCESS;
	switch (s) {
	case DAT_EP_STATE_DISCONNECTED:
		return DISC_NOTHING;
	case DAT_EP_STATE_DISCONNECT_PENDING:
		/* A second graceful call adds nothing; abrupt hurries. */
		if (how == DAT_CLOSE_GRACEFUL_FLAG)
			return DISC_NOTHING;
		break;
	case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
	case DAT_EP_STATE_COMPLETION_PENDING:
	case DAT_EP_STATE_CONNECTED:
	case DAT_EP_STATE_CONNECTED_SINGLE_PATH:
	case DAT_EP_STATE_CONNECTED_MULTI_PATH:
		break;
	default:
		*r = dapl_ep_state_error(ep);
		return DISC_ERROR;
	}
	*conn = ep->conn;
	if (!*conn || ep->cm_final) {
		/* The conn is not known yet (connect still returning) or is
		 * over: end the DAT side here. */
		ep_end_locked(ep, DAT_CONNECTION_EVENT_DISCONNECTED, NULL, 0);
		return DISC_NOTHING;
	}
	if (how == DAT_CLOSE_GRACEFUL_FLAG && s != DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)
		dapl_ep_transition_locked(ep, DAT_EP_STATE_DISCONNECT_PENDING);
	return DISC_CALL;
}

DAT_RETURN dapl_cm_disconnect(struct dapl_ep *ep, DAT_CLOSE_FLAGS how)
{
	struct dapl_ia *ia = ep->obj.ia;
	struct iwe_conn *conn = NULL;
	enum disc_plan plan;
	DAT_RETURN r;
	int graceful = how == DAT_CLOSE_GRACEFUL_FLAG;

	dapl_ia_lock(ia);
	plan = disc_begin_locked(ep, how, &conn, &r);
	dapl_ia_unlock(ia);
	if (plan != DISC_CALL)
		return r;
	/* The engine turns a graceful close of a connection not yet
	 * established into an abrupt one, as DAT asks. */
	(void)iwe_cm_disconnect(conn, graceful);
	dapl_ia_lock(ia);
	/* Abrupt: over now.  The engine's own DISCONNECTED event, when it
	 * comes, finds the event posted and changes nothing. */
	if (!graceful && ep->conn == conn && !ep->dying)
		ep_end_locked(ep, DAT_CONNECTION_EVENT_DISCONNECTED, NULL, 0);
	dapl_ia_unlock(ia);
	return DAT_SUCCESS;
}

/* ------------------------------------------------------------ accept */

/* The EP takes the request's conn and the CR's addresses, and goes to
 * COMPLETION_PENDING (from PASSIVE_CONNECTION_PENDING with its own CR, or
 * UNCONNECTED when it accepts for a provider-created EP). */
static DAT_RETURN accept_begin_locked(struct dapl_ep *ep, struct iwe_conn *conn,
				      const struct dapl_cr *cr,
				      struct iwe_qp **qp)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	if (ep->conn || !dapl_ep_transition_legal(
				ep->state, DAT_EP_STATE_COMPLETION_PENDING))
		return dapl_ep_state_error(ep);
	(void)dapl_ep_qp_create_locked(ep);
	*qp = dapl_ep_qp(ep->pool);
	if (!*qp || iwe_qp_get_state(*qp) != IWE_QPS_INIT)
		return dapl_ep_state_error(ep);
	ep->conn = conn;
	ep->cm_final = 0;
	ep->disc_posted = 0;
	ep->ev_pd_size = 0;
	memcpy(&ep->remote_addr, &cr->remote_addr, sizeof(ep->remote_addr));
	ep->remote_port = cr->remote_port;
	ep->local_port = cr->conn_qual;
	dapl_ep_transition_locked(ep, DAT_EP_STATE_COMPLETION_PENDING);
	return DAT_SUCCESS;
}

/* The engine refused: the conn goes back to the caller, the EP to 'prev'
 * (unless a disconnect moved it on meanwhile). */
static void accept_undo_locked(struct dapl_ep *ep, DAT_EP_STATE prev)
{
	DAPL_ASSERT_IA_LOCKED(ep->obj.ia);
	ep->conn = NULL;
	if (dapl_ep_base_state(ep->state) == DAT_EP_STATE_COMPLETION_PENDING)
		dapl_ep_transition_locked(ep, prev);
}

DAT_RETURN dapl_cm_accept(struct dapl_ep *ep, struct iwe_conn *conn,
			  const struct dapl_cr *cr, DAT_COUNT pd_size,
			  const void *pd)
{
	struct dapl_ia *ia = ep->obj.ia;
	struct iwe_qp *qp = NULL;
	DAT_EP_STATE prev;
	DAT_RETURN r;
	int err;

	dapl_ia_lock(ia);
	prev = ep->state;
	r = accept_begin_locked(ep, conn, cr, &qp);
	dapl_ia_unlock(ia);
	if (r != DAT_SUCCESS)
		return r;
	err = iwe_cm_accept(conn, qp, pd, (size_t)pd_size, ep_handler, ep);
	if (err) {
		dapl_ia_lock(ia);
		accept_undo_locked(ep, prev);
		dapl_ia_unlock(ia);
		return cm_errno(err);
	}
	return DAT_SUCCESS;
}
