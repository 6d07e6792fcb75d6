/* Stub: not implemented yet. */
#include "config.h"
#include "dapl.h"

DAT_RETURN dapl_cr_query(DAT_CR_HANDLE a0, DAT_CR_PARAM_MASK a1, DAT_CR_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cr_accept(DAT_CR_HANDLE a0, DAT_EP_HANDLE a1, DAT_COUNT a2, const DAT_PVOID a3)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cr_reject(DAT_CR_HANDLE a0, DAT_COUNT a1, const DAT_PVOID a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cr_handoff(DAT_CR_HANDLE a0, DAT_CONN_QUAL a1)
{
	return DAT_NOT_IMPLEMENTED;
}
