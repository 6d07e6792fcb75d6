/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* IA open/query/close through Debian's libdat2, as a consumer sees them. */
#include "config.h"	/* PACKAGE_VERSION */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "tcommon.h"
#include <dat2/dat_iw_extensions.h>

static int str_is(const char *got, const char *want)
{
	return got && strcmp(got, want) == 0;
}

static void test_query(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, q_async = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = test_open_ia(&async);
	DAT_IA_ATTR a;
	DAT_PROVIDER_ATTR p;
	DAT_RETURN r;

	CHECK(ia != DAT_HANDLE_NULL, "dat_ia_open returns a handle");
	CHECK(async != DAT_HANDLE_NULL, "dat_ia_open creates an async EVD when given NULL");
	r = dat_ia_query(ia, &q_async, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p);
	CHECK(r == DAT_SUCCESS, "dat_ia_query(all) succeeds (0x%x)", r);
	CHECK(q_async == async, "query reports the async EVD dat_ia_open returned");

	const struct sockaddr_in *sin = (const struct sockaddr_in *)a.ia_address_ptr;
	CHECK(sin && sin->sin_family == AF_INET &&
	      sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "IA address is 127.0.0.1");
	CHECK(a.extension_supported == DAT_EXTENSION_IW, "extension_supported == DAT_EXTENSION_IW");
	CHECK(a.extension_version == DAT_IW_EXTENSION_VERSION, "extension_version == %d", DAT_IW_EXTENSION_VERSION);
	CHECK(a.max_eps > 0 && a.max_evds > 0 && a.max_evd_qlen > 0 && a.max_lmrs > 0 &&
	      a.max_pzs > 0 && a.max_rmrs > 0, "object limits are positive");
	CHECK(a.max_iov_segments_per_dto >= 4, "at least 4 segments per DTO (%d)", a.max_iov_segments_per_dto);
	CHECK(a.max_rdma_read_per_ep_in > 0 && a.max_rdma_read_per_ep_out > 0, "RDMA read depths reported");
	CHECK(a.max_message_size >= 65536 && a.max_rdma_size >= 65536, "message and RDMA sizes reported");
	/* Regression: the engine's 2^40 region limit wrapped to 0 in the
	 * 32-bit DAT_SEG_LENGTH, and dapltest refused every buffer. */
	CHECK(a.max_lmr_block_size >= a.max_message_size,
	      "max_lmr_block_size (0x%x) covers the largest message",
	      (unsigned)a.max_lmr_block_size);
	/* The package's version, from configure.ac's AC_INIT. */
	char *end;
	unsigned long vmaj = strtoul(PACKAGE_VERSION, &end, 10);
	unsigned long vmin = *end == '.' ? strtoul(end + 1, NULL, 10) : 0;

	CHECK(p.provider_version_major == vmaj && p.provider_version_minor == vmin,
	      "provider_version %u.%u is the package's (%s)",
	      p.provider_version_major, p.provider_version_minor, PACKAGE_VERSION);
	CHECK(a.firmware_version_major == vmaj && a.firmware_version_minor == vmin,
	      "firmware_version %u.%u is the package's too",
	      a.firmware_version_major, a.firmware_version_minor);
	CHECK(p.dapl_version_major == 2 && p.dapl_version_minor == 0, "provider reports DAPL version 2.0");
	CHECK(p.is_thread_safe == DAT_FALSE, "provider reports thread-safe FALSE (matches dat.conf)");
	CHECK(p.max_private_data_size >= 64 && p.max_private_data_size <= 512,
	      "max_private_data_size in [64, 512] (%d)", p.max_private_data_size);
	CHECK(p.srq_supported == DAT_TRUE, "SRQs supported");
	CHECK(str_is(test_named_attr(&p, "DAT_EXTENSION_INTERFACE"), "TRUE"), "DAT_EXTENSION_INTERFACE=TRUE");
	CHECK(str_is(test_named_attr(&p, "DAT_EXTENSION_VERSION"), DAT_IW_EXTENSION_VERSION_STR), "DAT_EXTENSION_VERSION=%s", DAT_IW_EXTENSION_VERSION_STR);
	CHECK(str_is(test_named_attr(&p, "DAT_IW_ATTR_SSP"), "TRUE"), "DAT_IW_ATTR_SSP=TRUE");
	CHECK(str_is(test_named_attr(&p, "DAT_IB_RDMA_READ"), "TRUE"), "DAT_IB_RDMA_READ=TRUE (dtest reads it)");
	const char *mtu = test_named_attr(&p, "DAT_IB_TRANSPORT_MTU");
	CHECK(mtu && atoi(mtu) >= 1500, "DAT_IB_TRANSPORT_MTU is the link MTU (%s)", mtu ? mtu : "missing");

	/* argument checks */
	CHECK_RET(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, NULL, 0, NULL), DAT_INVALID_PARAMETER,
		  "dat_ia_query with an IA mask and NULL attr -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, NULL), DAT_INVALID_PARAMETER,
		  "dat_ia_query with a provider mask and NULL attr -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), DAT_SUCCESS,
		  "dat_ia_query with empty masks and NULL pointers succeeds");
	CHECK_RET(dat_ia_close(ia, (DAT_CLOSE_FLAGS)7), DAT_INVALID_PARAMETER,
		  "dat_ia_close with unknown flags -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS,
		  "graceful close with only the provider's async EVD succeeds");
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_HANDLE,
		  "closing a closed IA -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &a, 0, NULL), DAT_INVALID_HANDLE,
		  "querying a closed IA -> DAT_INVALID_HANDLE");
}

static void test_open_variants(void)
{
	DAT_IA_HANDLE ia, ia2;
	DAT_EVD_HANDLE evd = DAT_EVD_ASYNC_EXISTS, q = DAT_HANDLE_NULL;
	DAT_RETURN r;

	r = dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &evd, &ia);
	CHECK(r == DAT_SUCCESS, "dat_ia_open with DAT_EVD_ASYNC_EXISTS succeeds");
	if (r == DAT_SUCCESS) {
		dat_ia_query(ia, &q, 0, NULL, 0, NULL);
		CHECK(q == DAT_EVD_OUT_OF_SCOPE, "then the query reports DAT_EVD_OUT_OF_SCOPE");
		evd = DAT_HANDLE_NULL;
		r = dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &evd, &ia2);
		CHECK(r == DAT_SUCCESS && ia2 != ia, "a second IA opens with a distinct handle");
		if (r == DAT_SUCCESS)
			CHECK_RET(dat_ia_close(ia2, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "second IA closes");
		CHECK_RET(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "first IA closes");
	}
	evd = DAT_HANDLE_NULL;
	/* libdat2 itself answers this one before reaching the provider. */
	CHECK_RET(dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &evd, NULL), DAT_INVALID_HANDLE,
		  "dat_ia_open with a NULL IA pointer -> DAT_INVALID_HANDLE (registry)");
	CHECK_RET(dat_ia_open((DAT_NAME_PTR)"no-such-ia", 8, &evd, &ia), DAT_PROVIDER_NOT_FOUND,
		  "dat_ia_open of an unregistered name -> DAT_PROVIDER_NOT_FOUND");
	evd = DAT_HANDLE_NULL;
	r = dat_ia_open((DAT_NAME_PTR)test_ia_name(), 0, &evd, &ia);
	CHECK(r == DAT_SUCCESS, "dat_ia_open with async qlen 0 picks a default queue length");
	if (r == DAT_SUCCESS)
		dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

static void test_close_in_use(void)
{
	DAT_IA_HANDLE ia = test_open_ia(NULL);
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	DAT_HANDLE_TYPE t;

	CHECK_RET(dat_pz_create(ia, &pz), DAT_SUCCESS, "PZ created");
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE,
		  "graceful close with a live PZ -> DAT_INVALID_STATE");
	DAT_PZ_PARAM pzp;
	CHECK_RET(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pzp), DAT_SUCCESS, "PZ still usable after the refused close");
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "abrupt close with a live PZ succeeds");
	CHECK_RET(dat_get_handle_type(pz, &t), DAT_INVALID_HANDLE,
		  "the PZ handle is dead after the abrupt close");
}

static void test_abrupt_everything(void)
{
	DAT_EVD_HANDLE async;
	DAT_IA_HANDLE ia = test_open_ia(&async);
	DAT_EVD_HANDLE dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
	DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
	DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL, ep2 = DAT_HANDLE_NULL;
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
	DAT_REGION_DESCRIPTION reg;
	DAT_LMR_CONTEXT lctx;
	DAT_RMR_CONTEXT rctx;
	DAT_VLEN rlen;
	DAT_VADDR raddr;
	DAT_SRQ_ATTR sattr = { .max_recv_dtos = 16, .max_recv_iov = 2, .low_watermark = DAT_SRQ_LW_DEFAULT };
	static char buf[8192];
	int made = 0;

	reg.for_va = buf;
	made += dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno) == DAT_SUCCESS;
	made += dat_evd_create(ia, 16, cno, DAT_EVD_DTO_FLAG, &dto) == DAT_SUCCESS;
	made += dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn) == DAT_SUCCESS;
	made += dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr) == DAT_SUCCESS;
	made += dat_pz_create(ia, &pz) == DAT_SUCCESS;
	made += dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, reg, sizeof(buf), pz, DAT_MEM_PRIV_ALL_FLAG,
			       DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &rlen, &raddr) == DAT_SUCCESS;
	made += dat_rmr_create(pz, &rmr) == DAT_SUCCESS;
	made += dat_srq_create(ia, pz, &sattr, &srq) == DAT_SUCCESS;
	made += dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep) == DAT_SUCCESS;
	made += dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep2) == DAT_SUCCESS;
	made += dat_psp_create(ia, 63001, cr, DAT_PSP_CONSUMER_FLAG, &psp) == DAT_SUCCESS;
	made += dat_rsp_create(ia, 63002, ep2, cr, &rsp) == DAT_SUCCESS;
	CHECK(made == 12, "one object of every kind created (%d of 12)", made);
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE,
		  "graceful close with every kind alive -> DAT_INVALID_STATE");
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "abrupt close with every kind alive succeeds (valgrind: no leak)");
	DAT_HANDLE all[] = { cno, dto, conn, cr, pz, lmr, rmr, srq, ep, ep2, psp, rsp, async };
	int dead = 0;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		DAT_HANDLE_TYPE t;
		dead += all[i] && dat_get_handle_type(all[i], &t) == DAT_INVALID_HANDLE;
	}
	CHECK(dead == 13, "every handle is invalid after the abrupt close (%d of 13)", dead);
}

static void test_many_opens(void)
{
	int ok = 0;

	for (int i = 0; i < 100; i++) {
		DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
		DAT_IA_HANDLE ia;

		if (dat_ia_open((DAT_NAME_PTR)test_ia_name(), 4, &evd, &ia) == DAT_SUCCESS &&
		    dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG) == DAT_SUCCESS)
			ok++;
	}
	CHECK(ok == 100, "100 open/close cycles succeed (%d)", ok);
}

int main(void)
{
	test_query();
	test_open_variants();
	test_close_in_use();
	test_abrupt_everything();
	test_many_opens();
	return tap_done();
}
