/* Stub: not implemented yet. */
#include "config.h"
#include "dapl.h"

DAT_RETURN dapl_pz_create(DAT_IA_HANDLE a0, DAT_PZ_HANDLE * a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_pz_query(DAT_PZ_HANDLE a0, DAT_PZ_PARAM_MASK a1, DAT_PZ_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_pz_free(DAT_PZ_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}
