/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* dat_extension_op reaches the provider once the IA reported
 * DAT_EXTENSION_IW; unknown operations are DAT_NOT_IMPLEMENTED. */
#include <stdio.h>

#include "tcommon.h"
#include <dat2/dat_iw_extensions.h>

int main(void)
{
	DAT_IA_HANDLE ia = test_open_ia(NULL);
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;

	CHECK_RET(dat_extension_op(ia, (DAT_EXTENDED_OP)0x7ff), DAT_NOT_IMPLEMENTED,
		  "an unknown operation on the IA -> DAT_NOT_IMPLEMENTED");
	CHECK_RET(dat_extension_op(ia, (DAT_EXTENDED_OP)0), DAT_NOT_IMPLEMENTED,
		  "operation 0 (an IB op number) -> DAT_NOT_IMPLEMENTED");
	CHECK_RET(dat_pz_create(ia, &pz), DAT_SUCCESS, "PZ created");
	CHECK_RET(dat_extension_op(pz, (DAT_EXTENDED_OP)0x123), DAT_NOT_IMPLEMENTED,
		  "an unknown operation on another object -> DAT_NOT_IMPLEMENTED");
	dat_pz_free(pz);
	CHECK_RET(dat_extension_op(pz, DAT_IW_SSP_FREE_OP), DAT_INVALID_HANDLE,
		  "an extension call on a freed handle -> DAT_INVALID_HANDLE");
	test_close_ia(ia);
	return tap_done();
}
