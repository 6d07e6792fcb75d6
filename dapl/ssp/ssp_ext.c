/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* dat_extension_op: the DAT_IW extension's dispatch.
 * The registry forwards dat_extension_op(handle, op, ...) here as a va_list
 * once dat_ia_query reported extension_supported == DAT_EXTENSION_IW.  The
 * argument order and types are those documented at the top of
 * <dat2/dat_iw_extensions.h>. */
#include "config.h"

#include "dapl.h"
#include "dapl_stats.h"
#include "ssp.h"

static DAT_RETURN op_ssp_create(DAT_HANDLE handle, va_list args)
{
	struct dapl_ia *ia = dapl_obj_get(handle, DAT_HANDLE_TYPE_IA);
	int fd = va_arg(args, int);
	DAT_EP_HANDLE ep = va_arg(args, DAT_EP_HANDLE);
	DAT_EVD_HANDLE evd = va_arg(args, DAT_EVD_HANDLE);
	const void *msg = va_arg(args, DAT_PVOID);
	DAT_COUNT len = va_arg(args, int);
	DAT_IW_SSP_HANDLE *out = va_arg(args, DAT_IW_SSP_HANDLE *);

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	return dapl_ssp_create(ia, fd, ep, evd, msg, len, out);
}

static DAT_RETURN op_ssp_query(DAT_HANDLE handle, va_list args)
{
	int mask = va_arg(args, int);
	DAT_IW_SSP_PARAM *param = va_arg(args, DAT_IW_SSP_PARAM *);

	return dapl_ssp_query(handle, mask, param);
}

static DAT_RETURN op_socket_connect(DAT_HANDLE handle, va_list args)
{
	int fd = va_arg(args, int);
	DAT_TIMEOUT timeout = va_arg(args, DAT_UINT32);
	DAT_COUNT pd_size = va_arg(args, int);
	const void *pd = va_arg(args, const void *);

	return dapl_ssp_socket_connect(handle, fd, timeout, pd_size, pd);
}

DAT_RETURN dapl_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
	if (dapl_handle_type(handle) == DAPL_HTYPE_FREE)
		return DAT_INVALID_HANDLE;
	switch (op) {
	case DAT_IW_SSP_CREATE_OP:
		return op_ssp_create(handle, args);
	case DAT_IW_SSP_FREE_OP:
		return dapl_ssp_free(handle);
	case DAT_IW_SSP_QUERY_OP:
		return op_ssp_query(handle, args);
	case DAT_IW_SOCKET_CONNECT_OP:
		return op_socket_connect(handle, args);
	case DAT_IW_STATS_QUERY_OP:
		return dapl_stats_query(handle, va_arg(args, DAT_IW_STATS *));
	default:
		return DAT_NOT_IMPLEMENTED;
	}
}
