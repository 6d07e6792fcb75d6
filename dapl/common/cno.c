/* Stub: not implemented yet. */
#include "config.h"
#include "dapl.h"

DAT_RETURN dapl_cno_create(DAT_IA_HANDLE a0, DAT_OS_WAIT_PROXY_AGENT a1, DAT_CNO_HANDLE * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cno_modify_agent(DAT_CNO_HANDLE a0, DAT_OS_WAIT_PROXY_AGENT a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cno_query(DAT_CNO_HANDLE a0, DAT_CNO_PARAM_MASK a1, DAT_CNO_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cno_free(DAT_CNO_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cno_wait(DAT_CNO_HANDLE a0, DAT_TIMEOUT a1, DAT_EVD_HANDLE * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cno_fd_create(DAT_IA_HANDLE a0, DAT_FD * a1, DAT_CNO_HANDLE * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_cno_trigger(DAT_CNO_HANDLE a0, DAT_EVD_HANDLE * a1)
{
	return DAT_NOT_IMPLEMENTED;
}
