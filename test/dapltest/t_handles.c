/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Handle semantics common to every object: types, consumer contexts,
 * wrong-type and stale handles, and late reuse of freed handles. */
#include <stdio.h>

#include "tcommon.h"

int main(void)
{
	DAT_EVD_HANDLE async;
	DAT_IA_HANDLE ia = test_open_ia(&async);
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL, first;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
	DAT_HANDLE_TYPE t = (DAT_HANDLE_TYPE)-1;
	DAT_CONTEXT ctx, got;
	int reused = 0;

	CHECK_RET(dat_get_handle_type(ia, &t), DAT_SUCCESS, "dat_get_handle_type on the IA");
	CHECK(t == DAT_HANDLE_TYPE_IA, "IA handle has type DAT_HANDLE_TYPE_IA");
	CHECK_RET(dat_get_handle_type(async, &t), DAT_SUCCESS, "dat_get_handle_type on the async EVD");
	CHECK(t == DAT_HANDLE_TYPE_EVD, "async EVD has type DAT_HANDLE_TYPE_EVD");
	CHECK_RET(dat_pz_create(ia, &pz), DAT_SUCCESS, "PZ created");
	CHECK_RET(dat_get_handle_type(pz, &t), DAT_SUCCESS, "dat_get_handle_type on the PZ");
	CHECK(t == DAT_HANDLE_TYPE_PZ, "PZ handle has type DAT_HANDLE_TYPE_PZ");
	CHECK_RET(dat_get_handle_type(pz, NULL), DAT_INVALID_PARAMETER,
		  "dat_get_handle_type with a NULL result -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS, "CNO created");
	CHECK_RET(dat_get_handle_type(cno, &t), DAT_SUCCESS, "type of the CNO");
	CHECK(t == DAT_HANDLE_TYPE_CNO, "CNO handle has type DAT_HANDLE_TYPE_CNO");

	ctx.as_64 = 0x1122334455667788ULL;
	CHECK_RET(dat_set_consumer_context(pz, ctx), DAT_SUCCESS, "set a consumer context on the PZ");
	got.as_64 = 0;
	CHECK_RET(dat_get_consumer_context(pz, &got), DAT_SUCCESS, "get it back");
	CHECK(got.as_64 == ctx.as_64, "the context round-trips unchanged");
	CHECK_RET(dat_get_consumer_context(pz, NULL), DAT_INVALID_PARAMETER,
		  "dat_get_consumer_context with NULL -> DAT_INVALID_PARAMETER");
	ctx.as_ptr = &got;
	CHECK_RET(dat_set_consumer_context(ia, ctx), DAT_SUCCESS, "a context on the IA");
	got.as_ptr = NULL;
	dat_get_consumer_context(ia, &got);
	CHECK(got.as_ptr == &got, "the IA's context round-trips");

	/* wrong type */
	CHECK_RET(dat_evd_free(pz), DAT_INVALID_HANDLE, "a PZ passed to dat_evd_free -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_pz_free(cno), DAT_INVALID_HANDLE, "a CNO passed to dat_pz_free -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_pz_create(ia, NULL), DAT_INVALID_PARAMETER, "dat_pz_create with NULL -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_evd_create(ia, 8, pz, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_HANDLE,
		  "a PZ passed as the CNO of dat_evd_create -> DAT_INVALID_HANDLE");

	/* stale */
	first = pz;
	CHECK_RET(dat_pz_free(pz), DAT_SUCCESS, "PZ freed");
	CHECK_RET(dat_pz_free(pz), DAT_INVALID_HANDLE, "double free -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_get_handle_type(pz, &t), DAT_INVALID_HANDLE, "type of a freed handle -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_set_consumer_context(pz, ctx), DAT_INVALID_HANDLE, "context on a freed handle -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_get_consumer_context(pz, &got), DAT_INVALID_HANDLE, "context from a freed handle -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_pz_query(pz, DAT_PZ_FIELD_ALL, NULL), DAT_INVALID_HANDLE, "query of a freed PZ -> DAT_INVALID_HANDLE");
	for (int i = 0; i < 1000; i++) {
		DAT_PZ_HANDLE p;
		if (dat_pz_create(ia, &p) != DAT_SUCCESS)
			break;
		reused += p == first;
		dat_pz_free(p);
	}
	CHECK(reused == 0, "a freed handle is not handed out again in the next 1000 creations");
	CHECK_RET(dat_pz_free(first), DAT_INVALID_HANDLE, "the old handle is still invalid after 1000 more objects");

	CHECK_RET(dat_cno_free(cno), DAT_SUCCESS, "CNO freed");
	test_close_ia(ia);
	CHECK_RET(dat_get_handle_type(async, &t), DAT_INVALID_HANDLE, "the async EVD dies with its IA");
	return tap_done();
}
