/* Stub: not implemented yet. */
#include "config.h"
#include "dapl.h"

DAT_RETURN dapl_srq_create(DAT_IA_HANDLE a0, DAT_PZ_HANDLE a1, DAT_SRQ_ATTR * a2, DAT_SRQ_HANDLE * a3)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_srq_free(DAT_SRQ_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_srq_post_recv(DAT_SRQ_HANDLE a0, DAT_COUNT a1, DAT_LMR_TRIPLET * a2, DAT_DTO_COOKIE a3)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_srq_query(DAT_SRQ_HANDLE a0, DAT_SRQ_PARAM_MASK a1, DAT_SRQ_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_srq_resize(DAT_SRQ_HANDLE a0, DAT_COUNT a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_srq_set_lw(DAT_SRQ_HANDLE a0, DAT_COUNT a1)
{
	return DAT_NOT_IMPLEMENTED;
}
