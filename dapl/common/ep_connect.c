/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Endpoints: the connection calls (dat_ep_connect, dat_ep_common_connect,
 * dat_ep_dup_connect, dat_ep_disconnect): their argument checks, then the
 * connection manager glue (cm.c).
 *
 * Choices where DAT 2.0 leaves room:
 *   - Addresses: the engine speaks IPv4 only, so any other family is
 *     DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNSUPPORTED.
 *   - Connection qualifiers: any non-zero value (0 is DAT_INVALID_PARAMETER).
 *   - Timeouts must be positive (DAT 2.0: "Values must be positive").
 *   - DAT_CONNECT_MULTIPATH_REQUESTED_FLAG is honoured with a single path;
 *     DAT_CONNECT_MULTIPATH_REQUIRED_FLAG cannot be, and the IA reports
 *     supports_multipath FALSE: DAT_MODEL_NOT_SUPPORTED.
 *   - dat_ep_disconnect on a DISCONNECTED EP succeeds (nothing to do); on an
 *     EP that never connected (or whose CR is pending) it is
 *     DAT_INVALID_STATE.
 */
#include "config.h"

#include <string.h>
#include <sys/socket.h>

#include "dapl.h"
#include "dapl_ep.h"

static DAT_RETURN addr_check(DAT_IA_ADDRESS_PTR addr, DAT_RETURN arg)
{
	if (!addr)
		return DAT_INVALID_PARAMETER | arg;
	if (addr->sa_family != AF_INET)
		return DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNSUPPORTED;
	return DAT_SUCCESS;
}

static DAT_RETURN connect_flags_check(DAT_CONNECT_FLAGS flags, DAT_RETURN arg)
{
	if (flags == DAT_CONNECT_DEFAULT_FLAG ||
	    flags == DAT_CONNECT_MULTIPATH_REQUESTED_FLAG)
		return DAT_SUCCESS;
	if (flags == DAT_CONNECT_MULTIPATH_REQUIRED_FLAG)
		return DAT_MODEL_NOT_SUPPORTED;
	return DAT_INVALID_PARAMETER | arg;
}

static DAT_RETURN ep_connectable(struct dapl_ep *ep)
{
	DAT_RETURN r;

	dapl_ia_lock(ep->obj.ia);
	r = dapl_ep_check_connectable(ep);
	dapl_ia_unlock(ep->obj.ia);
	return r;
}

/* --------------------------------------------------------- connecting */

DAT_RETURN dapl_ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR addr,
			   DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
			   DAT_COUNT pd_size, const DAT_PVOID pd, DAT_QOS qos,
			   DAT_CONNECT_FLAGS flags)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if ((r = addr_check(addr, DAT_INVALID_ARG2)))
		return r;
	if (!dapl_qual_ok(qual))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (timeout == 0)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if ((r = dapl_pd_check(pd_size, pd, DAT_INVALID_ARG5, DAT_INVALID_ARG6)))
		return r;
	if (qos != DAT_QOS_BEST_EFFORT)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG7;
	if ((r = connect_flags_check(flags, DAT_INVALID_ARG8)))
		return r;
	if ((r = ep_connectable(ep)))
		return r;
	return dapl_cm_connect(ep, (const struct sockaddr_in *)addr, qual,
			       timeout, pd_size, pd);
}

/* Connecting to a Common Service Point: the remote address carries the
 * port.  CSPs are not part of this provider (see sp.c), but an EP may
 * still reach another provider's CSP once the connection manager exists. */
DAT_RETURN dapl_ep_common_connect(DAT_EP_HANDLE ep_handle,
				  DAT_IA_ADDRESS_PTR addr, DAT_TIMEOUT timeout,
				  DAT_COUNT pd_size, const DAT_PVOID pd)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	const struct sockaddr_in *sin;
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if ((r = addr_check(addr, DAT_INVALID_ARG2)))
		return r;
	sin = (const struct sockaddr_in *)addr;
	if (sin->sin_port == 0)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (timeout == 0)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if ((r = dapl_pd_check(pd_size, pd, DAT_INVALID_ARG4, DAT_INVALID_ARG5)))
		return r;
	if ((r = ep_connectable(ep)))
		return r;
	return dapl_cm_connect(ep, sin, ntohs(sin->sin_port), timeout,
			       pd_size, pd);
}

/* A connection to the same remote EP as 'dup', which must be connected. */
DAT_RETURN dapl_ep_dup_connect(DAT_EP_HANDLE ep_handle, DAT_EP_HANDLE dup_handle,
			       DAT_TIMEOUT timeout, DAT_COUNT pd_size,
			       const DAT_PVOID pd, DAT_QOS qos)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	struct dapl_ep *dup = dapl_obj_get(dup_handle, DAT_HANDLE_TYPE_EP);
	struct sockaddr_in dst;
	DAT_CONN_QUAL qual = 0;
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (!dup || dup->obj.ia != ep->obj.ia || dup == ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE2;
	if (timeout == 0)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if ((r = dapl_pd_check(pd_size, pd, DAT_INVALID_ARG4, DAT_INVALID_ARG5)))
		return r;
	if (qos != DAT_QOS_BEST_EFFORT)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG6;
	dapl_ia_lock(ep->obj.ia);
	r = dapl_ep_check_connectable(ep);
	if (r == DAT_SUCCESS && !dapl_ep_connected(dup))
		r = dapl_ep_state_error(dup);
	if (r == DAT_SUCCESS) {
		/* The remote qualifier an active EP connected to, or the
		 * peer's port of a passive one: the best DAT lets us know. */
		memcpy(&dst, &dup->remote_addr, sizeof(dst));
		qual = dup->remote_port;
	}
	dapl_ia_unlock(ep->obj.ia);
	if (r != DAT_SUCCESS)
		return r;
	return dapl_cm_connect(ep, &dst, qual, timeout, pd_size, pd);
}

DAT_RETURN dapl_ep_disconnect(DAT_EP_HANDLE ep_handle, DAT_CLOSE_FLAGS flags)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	DAT_EP_STATE state;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	dapl_ia_lock(ep->obj.ia);
	state = ep->state;
	dapl_ia_unlock(ep->obj.ia);
	switch (dapl_ep_base_state(state)) {
	case DAT_EP_STATE_DISCONNECTED:
		return DAT_SUCCESS;
	case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
	case DAT_EP_STATE_CONNECTED:
	case DAT_EP_STATE_CONNECTED_SINGLE_PATH:
	case DAT_EP_STATE_CONNECTED_MULTI_PATH:
	case DAT_EP_STATE_DISCONNECT_PENDING:
	case DAT_EP_STATE_COMPLETION_PENDING:
		/* cm.c re-checks under the lock: the state may move. */
		return dapl_cm_disconnect(ep, flags);
	default:
		/* Never connected, or a CR is pending (reject it instead). */
		return DAT_INVALID_STATE | dapl_ep_state_subtype(state);
	}
}

