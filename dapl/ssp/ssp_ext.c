/* dat_extension_op: the DAT_IW extension's dispatch.
 * The registry forwards dat_extension_op(handle, op, ...) here as a va_list
 * once dat_ia_query reported extension_supported == DAT_EXTENSION_IW. */
#include "config.h"

#include "dapl.h"
#include <dat2/dat_iw_extensions.h>

DAT_RETURN dapl_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
	if (dapl_handle_type(handle) == DAPL_HTYPE_FREE)
		return DAT_INVALID_HANDLE;
	switch (op) {
	case DAT_IW_SSP_CREATE_OP:
	case DAT_IW_SSP_FREE_OP:
	case DAT_IW_SSP_QUERY_OP:
	case DAT_IW_SOCKET_CONNECT_OP:
		return DAT_NOT_IMPLEMENTED;	/* Socket Service Points: issue C */
	default:
		return DAT_NOT_IMPLEMENTED;
	}
}
