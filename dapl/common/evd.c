/* Stub: not implemented yet. */
#include "config.h"
#include <stdlib.h>
#include "dapl.h"
#include "dapl_evd.h"

DAT_RETURN dapl_evd_create(DAT_IA_HANDLE a0, DAT_COUNT a1, DAT_CNO_HANDLE a2, DAT_EVD_FLAGS a3, DAT_EVD_HANDLE * a4)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_query(DAT_EVD_HANDLE a0, DAT_EVD_PARAM_MASK a1, DAT_EVD_PARAM * a2)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_modify_cno(DAT_EVD_HANDLE a0, DAT_CNO_HANDLE a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_enable(DAT_EVD_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_disable(DAT_EVD_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_wait(DAT_EVD_HANDLE a0, DAT_TIMEOUT a1, DAT_COUNT a2, DAT_EVENT * a3, DAT_COUNT * a4)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_resize(DAT_EVD_HANDLE a0, DAT_COUNT a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_post_se(DAT_EVD_HANDLE a0, const DAT_EVENT * a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_dequeue(DAT_EVD_HANDLE a0, DAT_EVENT * a1)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_free(DAT_EVD_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_set_unwaitable(DAT_EVD_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_clear_unwaitable(DAT_EVD_HANDLE a0)
{
	return DAT_NOT_IMPLEMENTED;
}

DAT_RETURN dapl_evd_create_internal(struct dapl_ia *ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags, struct dapl_evd **out)
{
	return DAT_NOT_IMPLEMENTED;
}
