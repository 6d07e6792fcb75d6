/* Stub: not implemented yet. */
#include "config.h"
#include "dapl.h"

DAT_RETURN dapl_lmr_create(DAT_IA_HANDLE a0, DAT_MEM_TYPE a1, DAT_REGION_DESCRIPTION a2, DAT_VLEN a3, DAT_PZ_HANDLE a4, DAT_MEM_PRIV_FLAGS a5, DAT_VA_TYPE a6, DAT_LMR_HANDLE * a7, DAT_LMR_CONTEXT * a8, DAT_RMR_CONTEXT * a9, DAT_VLEN * a10, DAT_VADDR * a11)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_lmr_query(DAT_LMR_HANDLE a0, DAT_LMR_PARAM_MASK a1, DAT_LMR_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_lmr_free(DAT_LMR_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_lmr_sync_rdma_read(DAT_IA_HANDLE a0, const DAT_LMR_TRIPLET * a1, DAT_VLEN a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_lmr_sync_rdma_write(DAT_IA_HANDLE a0, const DAT_LMR_TRIPLET * a1, DAT_VLEN a2)
{
	return DAT_NOT_IMPLEMENTED;
}
