/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* dat_iw_socket_connect: the active side of the DAT iWARP extension.  The
 * EP adopts a consumer's connected TCP socket and sends the MPA request on
 * it; cm.c drives the rest like any dat_ep_connect. */
#include "config.h"

#include "dapl_ep.h"
#include "ssp.h"

/* DAT_TIMEOUT is unsigned; the specification asks for positive values:
 * 0, and values that are negative as a signed count, are refused. */
static int timeout_ok(DAT_TIMEOUT t)
{
	return t == DAT_TIMEOUT_INFINITE || (t > 0 && (int32_t)t > 0);
}

DAT_RETURN dapl_ssp_socket_connect(DAT_EP_HANDLE ep_handle, int fd,
				   DAT_TIMEOUT timeout, DAT_COUNT pd_size,
				   const void *pd)
{
	struct dapl_ep *ep = dapl_obj_get(ep_handle, DAT_HANDLE_TYPE_EP);
	struct iwe_sock_facts facts;
	DAT_RETURN r;

	if (!ep)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	if (!timeout_ok(timeout))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	r = dapl_pd_check(pd_size, pd, DAT_INVALID_ARG4, DAT_INVALID_ARG5);
	if (r == DAT_SUCCESS)
		r = dapl_ssp_check_socket(ep->obj.ia, fd, &facts);
	if (r != DAT_SUCCESS)
		return r;
	/* An unconnected socket is not refused (DAT iWARP extension 3.1.4.2): sending
	 * the request fails and the EP reports UNREACHABLE. */
	return dapl_cm_adopt_connect(ep, fd, &facts, timeout, pd_size, pd);
}
