/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The Interface Adapter: open and close (abrupt close tears every object
 * of the IA down, dependents first), and dat_ia_ha_related.  Queries are
 * in ia_query.c. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dapl.h"
#include "dapl_evd.h"
#include "iw_log.h"
#include "dapl_stats.h"

#define DEFAULT_ASYNC_QLEN 64

/* --------------------------------------------------------- open/close */

static DAT_RETURN device_error(int err)
{
	switch (err) {
	case EINVAL:
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG1;
	case ENODEV:
	case EADDRNOTAVAIL:
		return DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNREACHABLE;
	default:
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	}
}

static DAT_RETURN attach_async_evd(struct dapl_ia *ia, DAT_COUNT qlen,
				   DAT_EVD_HANDLE *async_evd)
{
	struct dapl_evd *evd;
	DAT_RETURN ret;

	if (*async_evd == DAT_EVD_ASYNC_EXISTS)
		return DAT_SUCCESS;	/* this IA reports no async events */
	if (*async_evd != DAT_HANDLE_NULL)
		/* An EVD belongs to an IA, so none can exist before it. */
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_ASYNC;
	if (qlen <= 0)
		qlen = DEFAULT_ASYNC_QLEN;
	ret = dapl_evd_create_internal(ia, qlen, DAT_EVD_ASYNC_FLAG, &evd);
	if (ret != DAT_SUCCESS)
		return ret;
	ia->async_evd = evd;
	ia->async_evd_ours = 1;
	*async_evd = evd->obj.handle;
	return DAT_SUCCESS;
}

static void ia_free(struct dapl_ia *ia)
{
	if (ia->dev)
		iwe_device_close(ia->dev);
	dapl_lock_destroy(&ia->lock);
	free(ia);
}

DAT_RETURN dapl_ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen,
			DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle)
{
	struct dapl_provider *prov;
	struct dapl_ia *ia;
	struct sockaddr_in *sin;
	DAT_RETURN ret;

	if (!ia_handle)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (!async_evd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	prov = name ? dapl_provider_find(name) : NULL;
	if (!prov)
		return DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED;
	if (prov->cfg.error[0]) {
		iw_log(IW_LOG_ERROR, "ia %s: bad instance data: %s",
		       prov->ia_name, prov->cfg.error);
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG1;
	}
	ia = calloc(1, sizeof(*ia));
	if (!ia)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	dapl_lock_init(&ia->lock);
	ia->prov = prov;
	ia->dev = iwe_device_open(prov->cfg.where, prov->cfg.transport);
	if (!ia->dev) {
		int err = errno;
		char why[160];

		iw_log(IW_LOG_ERROR, "ia %s: %s", prov->ia_name,
		       iwe_device_open_why(prov->cfg.where, err, why,
					   sizeof(why)));
		ia_free(ia);
		return device_error(err);
	}
	/* udp: the path MTU and the test aid of the instance data (both
	 * checked when it was parsed). */
	if (prov->cfg.mtu)
		iwe_device_set_mtu(ia->dev, (uint32_t)prov->cfg.mtu);
	if (prov->cfg.trp_test[0])
		iwe_device_set_trp_test(ia->dev, prov->cfg.trp_test);
	iwe_device_query(ia->dev, &ia->dev_attr);
	sin = (struct sockaddr_in *)&ia->ia_addr;
	*sin = ia->dev_attr.addr;
	sin->sin_port = 0;
	ia->obj.kind = DAPL_K_COUNT;	/* not in any list */
	ia->obj.ia = ia;
	ia->obj.htype = DAT_HANDLE_TYPE_IA;
	ia->obj.handle = dapl_handle_alloc(&prov->dat, DAT_HANDLE_TYPE_IA, ia,
					   ia);
	if (!ia->obj.handle) {
		ia_free(ia);
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	}
	ret = attach_async_evd(ia, async_qlen, async_evd);
	if (ret != DAT_SUCCESS) {
		dapl_handle_release(ia->obj.handle);
		ia_free(ia);
		return ret;
	}
	*ia_handle = ia->obj.handle;
	dapl_stats_ia_opened(ia);
	return DAT_SUCCESS;
}

/* Live objects other than the async EVD the IA created for itself. */
static int ia_in_use_locked(struct dapl_ia *ia)
{
	DAPL_ASSERT_IA_LOCKED(ia);
	for (int k = 0; k < DAPL_K_COUNT; k++)
		for (struct dapl_obj *o = ia->objs[k]; o; o = o->next)
			if (!(ia->async_evd_ours &&
			      o == &ia->async_evd->obj &&
			      !dapl_evd_in_use(ia->async_evd)))
				return 1;
	return 0;
}

static void destroy_all(struct dapl_ia *ia)
{
	for (int k = 0; k < DAPL_K_COUNT; k++) {
		struct dapl_obj *o;

		dapl_ia_lock(ia);
		while ((o = ia->objs[k])) {
			dapl_ia_unlock(ia);
			o->destroy(o);	/* unlinks itself */
			dapl_ia_lock(ia);
		}
		dapl_ia_unlock(ia);
	}
}

DAT_RETURN dapl_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	dapl_ia_lock(ia);
	if (ia->closing) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE;
	}
	if (flags == DAT_CLOSE_GRACEFUL_FLAG && ia_in_use_locked(ia)) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE;
	}
	ia->closing = 1;
	dapl_ia_unlock(ia);
	destroy_all(ia);
	dapl_stats_ia_closing(ia);	/* may dump the final counters */
	dapl_handle_release(ia->obj.handle);
	ia_free(ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ia_ha_related(DAT_IA_HANDLE ia_handle, const DAT_NAME_PTR name,
			      DAT_BOOLEAN *answer)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!name)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!answer)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	/* No high availability: an IA is related only to itself. */
	*answer = strcmp(name, ia->prov->ia_name) == 0 ? DAT_TRUE : DAT_FALSE;
	return DAT_SUCCESS;
}
