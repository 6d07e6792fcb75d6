/* Stub: not implemented yet. */
#include "config.h"
#include "dapl.h"

DAT_RETURN dapl_rmr_create(DAT_PZ_HANDLE a0, DAT_RMR_HANDLE * a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_rmr_create_for_ep(DAT_PZ_HANDLE a0, DAT_RMR_HANDLE * a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_rmr_query(DAT_RMR_HANDLE a0, DAT_RMR_PARAM_MASK a1, DAT_RMR_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_rmr_bind(DAT_RMR_HANDLE a0, DAT_LMR_HANDLE a1, const DAT_LMR_TRIPLET * a2, DAT_MEM_PRIV_FLAGS a3, DAT_VA_TYPE a4, DAT_EP_HANDLE a5, DAT_RMR_COOKIE a6, DAT_COMPLETION_FLAGS a7, DAT_RMR_CONTEXT * a8)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_rmr_free(DAT_RMR_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}
