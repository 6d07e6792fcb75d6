/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Protection Zones, LMRs and RMRs through Debian's libdat2, as a consumer
 * sees them: every bad input with its exact return code, create/query/free
 * of each kind, the STag layout of the contexts, the in-use rules, stale
 * handles and an abrupt IA close that must free everything (valgrind). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcommon.h"
#include <dat2/dat_registry.h>	/* DAT_RMR_CREATE_FOR_EP */

#define BUF_LEN 8192


#define SKIP(...)                                                         \
	do {                                                              \
		printf("ok %d - # SKIP ", ++tap_count);                   \
		printf(__VA_ARGS__);                                      \
		printf("\n");                                             \
	} while (0)

#define STAG_INDEX(c) ((uint32_t)(c) >> 8)
#define STAG_KEY(c)   ((uint32_t)(c) & 0xffu)

/* buf_c is registered only with the second IA. */
static char *buf_a, *buf_b, *buf_c;

/* The test IA, with a provider-made async EVD when the provider has EVDs;
 * otherwise without one (the memory objects do not need it). */
static DAT_IA_HANDLE open_ia(void)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	if (dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &evd, &ia) == DAT_SUCCESS)
		return ia;
	evd = DAT_EVD_ASYNC_EXISTS;
	if (dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &evd, &ia) != DAT_SUCCESS)
		BAIL("dat_ia_open(%s) failed (is DAT_OVERRIDE set?)", test_ia_name());
	return ia;
}

static DAT_RETURN reg_va(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *addr,
			 DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv,
			 DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lctx,
			 DAT_RMR_CONTEXT *rctx)
{
	DAT_REGION_DESCRIPTION r = { .for_va = addr };
	DAT_VLEN rlen;
	DAT_VADDR raddr;

	return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, len, pz, priv,
			      DAT_VA_TYPE_VA, lmr, lctx, rctx, &rlen, &raddr);
}

/* ------------------------------------------------------------------ PZ */

static DAT_PZ_HANDLE test_pz(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	DAT_PZ_PARAM pp;
	DAT_HANDLE_TYPE t;

	CHECK_CODE(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create");
	CHECK_CODE(dat_pz_create(ia, NULL), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "dat_pz_create(NULL out) -> ARG2");
	CHECK_RET(dat_pz_create((DAT_IA_HANDLE)(uintptr_t)77777, &pz), DAT_INVALID_HANDLE,
		  "dat_pz_create(bogus IA) -> DAT_INVALID_HANDLE");
	memset(&pp, 0, sizeof(pp));
	CHECK(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pp) == DAT_SUCCESS && pp.ia_handle == ia,
	      "dat_pz_query reports the IA handle the consumer holds");
	CHECK_CODE(dat_pz_query(pz, (DAT_PZ_PARAM_MASK)0x2, &pp),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "dat_pz_query(bad mask) -> ARG2");
	CHECK_CODE(dat_pz_query(pz, DAT_PZ_FIELD_ALL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "dat_pz_query(NULL) -> ARG3");
	CHECK(dat_get_handle_type(pz, &t) == DAT_SUCCESS && t == DAT_HANDLE_TYPE_PZ,
	      "dat_get_handle_type(pz) == PZ");
	return pz;
}

/* ----------------------------------------------------------------- LMR */

static void test_lmr_query(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_LMR_HANDLE lmr,
			   DAT_LMR_CONTEXT lctx)
{
	DAT_LMR_PARAM p;
	DAT_HANDLE_TYPE t;

	memset(&p, 0, sizeof(p));
	CHECK(dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.ia_handle == ia && p.mem_type == DAT_MEM_TYPE_VIRTUAL &&
	      p.region_desc.for_va == buf_a && p.length == BUF_LEN && p.pz_handle == pz &&
	      p.mem_priv == DAT_MEM_PRIV_ALL_FLAG && p.va_type == DAT_VA_TYPE_VA &&
	      p.lmr_context == lctx && p.rmr_context == lctx &&
	      p.registered_size == BUF_LEN &&
	      p.registered_address == (DAT_VADDR)(uintptr_t)buf_a,
	      "dat_lmr_query reports every field as created");
	CHECK_CODE(dat_lmr_query(lmr, (DAT_LMR_PARAM_MASK)0x800, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "dat_lmr_query(bad mask) -> ARG2");
	CHECK_CODE(dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "dat_lmr_query(NULL) -> ARG3");
	CHECK(dat_get_handle_type(lmr, &t) == DAT_SUCCESS && t == DAT_HANDLE_TYPE_LMR,
	      "dat_get_handle_type(lmr) == LMR");
}

/* Two LMRs: outputs, distinct STags (24-bit index << 8 | 8-bit key). */
static void test_lmr_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_LMR_HANDLE *lmr_a,
			    DAT_LMR_HANDLE *lmr_b, DAT_LMR_CONTEXT *ctx_a)
{
	DAT_REGION_DESCRIPTION r = { .for_va = buf_a };
	DAT_LMR_CONTEXT la = 0, lb = 0;
	DAT_RMR_CONTEXT ra = 0, rb = 0;
	DAT_VLEN rlen = 0;
	DAT_VADDR raddr = 0;
	DAT_LMR_PARAM p;

	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF_LEN, pz, DAT_MEM_PRIV_ALL_FLAG,
				  DAT_VA_TYPE_VA, lmr_a, &la, &ra, &rlen, &raddr),
		   DAT_SUCCESS, "dat_lmr_create(VIRTUAL)");
	CHECK(rlen == BUF_LEN && raddr == (DAT_VADDR)(uintptr_t)buf_a,
	      "registered length and address are the region's");
	CHECK(la == ra && STAG_INDEX(la) != 0, "lmr_context == rmr_context, a STag with index != 0");
	/* Only LOCAL_READ: the other outputs may be NULL. */
	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){ .for_va = buf_b },
				  BUF_LEN, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA,
				  lmr_b, NULL, NULL, NULL, NULL),
		   DAT_SUCCESS, "dat_lmr_create with NULL optional outputs");
	if (dat_lmr_query(*lmr_b, DAT_LMR_FIELD_ALL, &p) == DAT_SUCCESS) {
		lb = p.lmr_context;
		rb = p.rmr_context;
	}
	CHECK(lb != la && rb != ra && STAG_INDEX(lb) != STAG_INDEX(la),
	      "two LMRs have distinct contexts and STag indexes (0x%x, 0x%x)", la, lb);
	test_lmr_query(ia, pz, *lmr_a, la);
	*ctx_a = la;
}

static void test_lmr_bad_args(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_PZ_HANDLE other_pz,
			      DAT_LMR_HANDLE lmr)
{
	DAT_REGION_DESCRIPTION r = { .for_va = buf_a };
	DAT_LMR_HANDLE h;
	DAT_RETURN want;

	CHECK_CODE(dat_lmr_create(ia, (DAT_MEM_TYPE)0x77, r, BUF_LEN, pz, 0, DAT_VA_TYPE_VA,
				  &h, NULL, NULL, NULL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "unknown mem_type -> ARG2");
	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, r, BUF_LEN, pz, 0,
				  DAT_VA_TYPE_VA, &h, NULL, NULL, NULL, NULL),
		   DAT_MODEL_NOT_SUPPORTED, "SHARED_VIRTUAL -> DAT_MODEL_NOT_SUPPORTED");
	CHECK_CODE(reg_va(ia, pz, NULL, BUF_LEN, 0, &h, NULL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "NULL address -> ARG3");
	CHECK_CODE(reg_va(ia, pz, buf_a, 0, 0, &h, NULL, NULL),
		   DAT_LENGTH_ERROR, "length 0 -> DAT_LENGTH_ERROR");
	CHECK_CODE(reg_va(ia, pz, NULL, 0, 0, &h, NULL, NULL),
		   DAT_LENGTH_ERROR, "NULL address, length 0 -> DAT_LENGTH_ERROR");
	CHECK_CODE(reg_va(ia, pz, buf_a, 1ULL << 50, 0, &h, NULL, NULL),
		   DAT_LENGTH_ERROR, "length beyond the engine's region limit -> DAT_LENGTH_ERROR");
	want = DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ;
	CHECK_CODE(reg_va(ia, DAT_HANDLE_NULL, buf_a, BUF_LEN, 0, &h, NULL, NULL), want,
		   "NULL PZ -> DAT_INVALID_HANDLE_PZ");
	CHECK_CODE(reg_va(ia, lmr, buf_a, BUF_LEN, 0, &h, NULL, NULL), want,
		   "an LMR handle as PZ -> DAT_INVALID_HANDLE_PZ");
	CHECK_CODE(reg_va(ia, other_pz, buf_a, BUF_LEN, 0, &h, NULL, NULL), want,
		   "PZ of another IA -> DAT_INVALID_HANDLE_PZ");
	CHECK_CODE(reg_va(ia, pz, buf_a, BUF_LEN, (DAT_MEM_PRIV_FLAGS)0x40, &h, NULL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG6, "unknown privilege bits -> ARG6");
	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF_LEN, pz, 0, DAT_VA_TYPE_ZB,
				  &h, NULL, NULL, NULL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG7, "DAT_VA_TYPE_ZB -> ARG7 (no zero-based)");
	CHECK_CODE(reg_va(ia, pz, buf_a, BUF_LEN, 0, NULL, NULL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG8, "NULL lmr_handle -> ARG8");
}

/* DAT_MEM_TYPE_LMR: the same memory again, in another PZ. */
static void test_lmr_type(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz2, DAT_LMR_HANDLE src,
			  DAT_LMR_CONTEXT src_ctx, DAT_LMR_HANDLE other_ia_lmr)
{
	DAT_REGION_DESCRIPTION r = { .for_lmr_handle = src };
	DAT_LMR_HANDLE h = DAT_HANDLE_NULL;
	DAT_LMR_CONTEXT c = 0;
	DAT_VLEN rlen = 0;
	DAT_VADDR raddr = 0;
	DAT_LMR_PARAM p;

	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_LMR, r, 0, pz2, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
				  DAT_VA_TYPE_VA, &h, &c, NULL, &rlen, &raddr),
		   DAT_SUCCESS, "dat_lmr_create(DAT_MEM_TYPE_LMR) in another PZ");
	CHECK(rlen == BUF_LEN && raddr == (DAT_VADDR)(uintptr_t)buf_a && c != src_ctx,
	      "LMR type registers the source's range with its own context");
	memset(&p, 0, sizeof(p));
	CHECK(dat_lmr_query(h, DAT_LMR_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.mem_type == DAT_MEM_TYPE_LMR && p.region_desc.for_lmr_handle == src &&
	      p.pz_handle == pz2 && p.length == BUF_LEN,
	      "query of an LMR-type LMR reports its source and PZ");
	CHECK_CODE(dat_lmr_free(h), DAT_SUCCESS, "free the LMR-type LMR");
	r.for_lmr_handle = other_ia_lmr;
	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_LMR, r, 0, pz2, 0, DAT_VA_TYPE_VA, &h,
				  NULL, NULL, NULL, NULL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR, "LMR type from another IA's LMR");
	r.for_lmr_handle = pz2;
	CHECK_CODE(dat_lmr_create(ia, DAT_MEM_TYPE_LMR, r, 0, pz2, 0, DAT_VA_TYPE_VA, &h,
				  NULL, NULL, NULL, NULL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR, "LMR type from a non-LMR handle");
}

/* A freed STag index comes back (after the engine's quarantine) with a new
 * key in the low 8 bits. */
static void test_stag_key(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz)
{
	enum { MAX_ROUNDS = 4000 };
	static DAT_LMR_CONTEXT seen[MAX_ROUNDS];
	int found = 0, ok = 1;

	for (int i = 0; i < MAX_ROUNDS && !found && ok; i++) {
		DAT_LMR_HANDLE h;

		ok = reg_va(ia, pz, buf_b, 64, 0, &h, &seen[i], NULL) == DAT_SUCCESS &&
		     dat_lmr_free(h) == DAT_SUCCESS;
		for (int j = 0; j < i && ok && !found; j++)
			if (STAG_INDEX(seen[j]) == STAG_INDEX(seen[i]))
				found = STAG_KEY(seen[j]) != STAG_KEY(seen[i]) ? 1 : -1;
	}
	CHECK(ok && found == 1, "a reused STag index carries a new 8-bit key");
}

/* ---------------------------------------------------------------- sync */

static void test_sync(DAT_IA_HANDLE ia, DAT_LMR_CONTEXT ctx, DAT_LMR_CONTEXT other_ia_ctx)
{
	DAT_VADDR base = (DAT_VADDR)(uintptr_t)buf_a;
	DAT_LMR_TRIPLET good[2] = { { base + 16, 256, ctx }, { 0, 0, 0 } };
	DAT_LMR_TRIPLET t;
	DAT_RETURN bad = DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;

	CHECK_CODE(dat_lmr_sync_rdma_read(ia, good, 2), DAT_SUCCESS,
		   "sync_rdma_read of a segment (and an empty one)");
	CHECK_CODE(dat_lmr_sync_rdma_write(ia, good, 1), DAT_SUCCESS, "sync_rdma_write of a segment");
	CHECK_RET(dat_lmr_sync_rdma_read((DAT_IA_HANDLE)(uintptr_t)77777, good, 1),
		  DAT_INVALID_HANDLE, "sync with a bogus IA -> DAT_INVALID_HANDLE");
	CHECK_CODE(dat_lmr_sync_rdma_read(ia, NULL, 1), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "sync NULL segments -> ARG2");
	CHECK_CODE(dat_lmr_sync_rdma_write(ia, good, 0), DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "sync 0 segments -> ARG3");
	t = (DAT_LMR_TRIPLET){ base, 16, ctx ^ 0xffffff00u };
	CHECK_CODE(dat_lmr_sync_rdma_read(ia, &t, 1), bad, "sync of an unknown lmr_context");
	t = (DAT_LMR_TRIPLET){ base + BUF_LEN - 8, 16, ctx };
	CHECK_CODE(dat_lmr_sync_rdma_write(ia, &t, 1), bad, "sync of a segment past the LMR's end");
	t = (DAT_LMR_TRIPLET){ base - 8, 16, ctx };
	CHECK_CODE(dat_lmr_sync_rdma_read(ia, &t, 1), bad, "sync of a segment before the LMR");
	/* STags are per device, so the context may also name one of ours;
	 * the range is registered only with the other IA. */
	t = (DAT_LMR_TRIPLET){ (DAT_VADDR)(uintptr_t)buf_c, 16, other_ia_ctx };
	CHECK_CODE(dat_lmr_sync_rdma_write(ia, &t, 1), bad, "sync of another IA's LMR");
}

/* ----------------------------------------------------------------- RMR */

static DAT_RMR_HANDLE test_rmr_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz)
{
	DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL, rmr_ep = DAT_HANDLE_NULL;
	DAT_RMR_PARAM p;
	DAT_HANDLE_TYPE t;

	CHECK_CODE(dat_rmr_create(pz, &rmr), DAT_SUCCESS, "dat_rmr_create");
	CHECK_CODE(dat_rmr_create(pz, NULL), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "dat_rmr_create(NULL out) -> ARG2");
	CHECK(dat_get_handle_type(rmr, &t) == DAT_SUCCESS && t == DAT_HANDLE_TYPE_RMR,
	      "dat_get_handle_type(rmr) == RMR");
	memset(&p, 0xa5, sizeof(p));
	CHECK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p) == DAT_SUCCESS && p.ia_handle == ia &&
	      p.pz_handle == pz && p.lmr_triplet.virtual_address == 0 &&
	      p.lmr_triplet.segment_length == 0 && p.lmr_triplet.lmr_context == 0 &&
	      p.mem_priv == DAT_MEM_PRIV_NONE_FLAG && p.rmr_context == 0 &&
	      p.rmr_scope == DAT_RMR_SCOPE_PZ && p.va_type == DAT_VA_TYPE_VA,
	      "unbound RMR: zero triplet, context 0, scope PZ");
	CHECK_CODE(dat_rmr_query(rmr, (DAT_RMR_PARAM_MASK)0x80, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "dat_rmr_query(bad mask) -> ARG2");
	CHECK_CODE(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "dat_rmr_query(NULL) -> ARG3");
	/* libdat2 exports no dat_rmr_create_for_ep: go through the table. */
	CHECK(DAT_RMR_CREATE_FOR_EP(pz, &rmr_ep) == DAT_SUCCESS &&
	      dat_rmr_query(rmr_ep, DAT_RMR_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.rmr_scope == DAT_RMR_SCOPE_EP, "rmr_create_for_ep gives scope EP");
	CHECK_CODE(dat_rmr_free(rmr_ep), DAT_SUCCESS, "dat_rmr_free");
	return rmr;
}

/* An EP to bind on, if the provider has EPs yet; NULL otherwise. */
static DAT_EP_HANDLE make_ep(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz)
{
	DAT_EVD_HANDLE dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

	if (dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto) != DAT_SUCCESS ||
	    dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn) != DAT_SUCCESS ||
	    dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep) != DAT_SUCCESS)
		return DAT_HANDLE_NULL;	/* the abrupt close frees what was made */
	return ep;
}

static void test_bind_with_ep(DAT_EP_HANDLE ep, DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr,
			      DAT_LMR_HANDLE ro_lmr, DAT_LMR_HANDLE lmr_pz2,
			      const DAT_LMR_TRIPLET *t, const DAT_LMR_TRIPLET *ro_t,
			      const DAT_LMR_TRIPLET *t_pz2)
{
	DAT_RMR_CONTEXT c;
	const DAT_MEM_PRIV_FLAGS rw = DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG;

	if (!ep) {
		for (int i = 0; i < 5; i++)
			SKIP("bind checks that need an EP: no EPs in this build yet");
		return;
	}
	CHECK_CODE(dat_rmr_bind(rmr, lmr, t, rw, DAT_VA_TYPE_VA, ep, (DAT_RMR_COOKIE){ 0 },
				(DAT_COMPLETION_FLAGS)0x40, &c),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG8, "bind with bad completion flags -> ARG8");
	CHECK_CODE(dat_rmr_bind(rmr, lmr, t, rw, DAT_VA_TYPE_VA, ep, (DAT_RMR_COOKIE){ 0 },
				DAT_COMPLETION_DEFAULT_FLAG, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG9, "bind with NULL context -> ARG9");
	CHECK_CODE(dat_rmr_bind(rmr, lmr_pz2, t_pz2, rw, DAT_VA_TYPE_VA, ep,
				(DAT_RMR_COOKIE){ 0 }, DAT_COMPLETION_DEFAULT_FLAG, &c),
		   DAT_PROTECTION_VIOLATION, "bind to an LMR of another PZ -> PROTECTION_VIOLATION");
	CHECK_CODE(dat_rmr_bind(rmr, ro_lmr, ro_t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA,
				ep, (DAT_RMR_COOKIE){ 0 }, DAT_COMPLETION_DEFAULT_FLAG, &c),
		   DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_RDMA_WRITE,
		   "remote write on a read-only LMR -> PRIVILEGES_VIOLATION");
	/* A bind is a DTO on the EP: it needs a connection. */
	CHECK_RET(dat_rmr_bind(rmr, lmr, t, rw, DAT_VA_TYPE_VA, ep, (DAT_RMR_COOKIE){ 0 },
			       DAT_COMPLETION_DEFAULT_FLAG, &c),
		  DAT_INVALID_STATE, "a valid bind on an unconnected EP -> INVALID_STATE");
}

struct bind_fix {
	DAT_RMR_HANDLE rmr;
	DAT_LMR_HANDLE lmr, ro_lmr, lmr_pz2;
	DAT_LMR_TRIPLET t, ro_t, t_pz2;
	DAT_EP_HANDLE ep;
};

static void test_bind(const struct bind_fix *f)
{
	const DAT_MEM_PRIV_FLAGS rw = DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
	DAT_LMR_TRIPLET out = f->t;
	DAT_RMR_CONTEXT c;
	DAT_RMR_COOKIE ck = { 0 };
	DAT_EP_HANDLE bad_ep = f->ep ? (DAT_EP_HANDLE)f->lmr : DAT_HANDLE_NULL;

	CHECK_CODE(dat_rmr_bind(f->lmr, f->lmr, &f->t, rw, DAT_VA_TYPE_VA, f->ep, ck, 0, &c),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_RMR, "bind on a non-RMR handle");
	CHECK_CODE(dat_rmr_bind(f->rmr, f->lmr, NULL, rw, DAT_VA_TYPE_VA, f->ep, ck, 0, &c),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "bind with NULL triplet -> ARG3");
	CHECK_CODE(dat_rmr_bind(f->rmr, f->rmr, &f->t, rw, DAT_VA_TYPE_VA, f->ep, ck, 0, &c),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR, "bind to a non-LMR handle");
	out.segment_length = BUF_LEN;
	out.virtual_address += 1;
	CHECK_CODE(dat_rmr_bind(f->rmr, f->lmr, &out, rw, DAT_VA_TYPE_VA, f->ep, ck, 0, &c),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "bind of a segment outside the LMR");
	out = f->t;
	out.lmr_context ^= 0xff;
	CHECK_CODE(dat_rmr_bind(f->rmr, f->lmr, &out, rw, DAT_VA_TYPE_VA, f->ep, ck, 0, &c),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3, "bind triplet naming another lmr_context");
	CHECK_CODE(dat_rmr_bind(f->rmr, f->lmr, &f->t, (DAT_MEM_PRIV_FLAGS)0x80, DAT_VA_TYPE_VA,
				f->ep, ck, 0, &c),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4, "bind with unknown privileges -> ARG4");
	CHECK_CODE(dat_rmr_bind(f->rmr, f->lmr, &f->t, rw, DAT_VA_TYPE_ZB, f->ep, ck, 0, &c),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5, "bind with DAT_VA_TYPE_ZB -> ARG5");
	CHECK_CODE(dat_rmr_bind(f->rmr, f->lmr, &f->t, rw, DAT_VA_TYPE_VA, bad_ep, ck, 0, &c),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP, "bind on a bad EP handle");
	out = (DAT_LMR_TRIPLET){ 0 };
	CHECK_CODE(dat_rmr_bind(f->rmr, DAT_HANDLE_NULL, &out, 0, DAT_VA_TYPE_VA, bad_ep, ck, 0, NULL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "unbind (length 0) ignores the LMR but still needs an EP");
	test_bind_with_ep(f->ep, f->rmr, f->lmr, f->ro_lmr, f->lmr_pz2, &f->t, &f->ro_t, &f->t_pz2);
}

/* ------------------------------------------------ in use, stale handles */

static void test_pz_in_use(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE lmr;
	DAT_RMR_HANDLE rmr;
	DAT_RETURN busy = DAT_INVALID_STATE | DAT_INVALID_STATE_PZ_IN_USE;

	dat_pz_create(ia, &pz);
	reg_va(ia, pz, buf_b, 64, 0, &lmr, NULL, NULL);
	CHECK_CODE(dat_pz_free(pz), busy, "dat_pz_free with an LMR -> PZ_IN_USE");
	dat_rmr_create(pz, &rmr);
	CHECK_CODE(dat_lmr_free(lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_CODE(dat_pz_free(pz), busy, "dat_pz_free with an RMR -> PZ_IN_USE");
	dat_rmr_free(rmr);
	CHECK_CODE(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free once its LMR and RMR are gone");
}

static void test_stale(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz, pz2;
	DAT_LMR_HANDLE lmr, lmr2;
	DAT_RMR_HANDLE rmr, rmr2;
	DAT_HANDLE_TYPE t;

	dat_pz_create(ia, &pz);
	reg_va(ia, pz, buf_b, 64, 0, &lmr, NULL, NULL);
	dat_rmr_create(pz, &rmr);
	dat_rmr_free(rmr);
	dat_lmr_free(lmr);
	dat_pz_free(pz);
	/* New objects must not make the old handles valid again. */
	dat_pz_create(ia, &pz2);
	reg_va(ia, pz2, buf_b, 64, 0, &lmr2, NULL, NULL);
	dat_rmr_create(pz2, &rmr2);
	CHECK(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &(DAT_PZ_PARAM){ 0 }) ==
		      (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ) &&
	      dat_pz_free(pz) == (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ),
	      "freed PZ handle -> DAT_INVALID_HANDLE_PZ");
	CHECK(dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, &(DAT_LMR_PARAM){ 0 }) ==
		      (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR) &&
	      dat_lmr_free(lmr) == (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR),
	      "freed LMR handle -> DAT_INVALID_HANDLE_LMR");
	CHECK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &(DAT_RMR_PARAM){ 0 }) ==
		      (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_RMR) &&
	      dat_rmr_free(rmr) == (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_RMR),
	      "freed RMR handle -> DAT_INVALID_HANDLE_RMR");
	CHECK(DAT_GET_TYPE(dat_get_handle_type(lmr, &t)) == DAT_INVALID_HANDLE &&
	      DAT_GET_TYPE(dat_get_handle_type(pz, &t)) == DAT_INVALID_HANDLE,
	      "dat_get_handle_type of freed handles -> DAT_INVALID_HANDLE");
	/* Left alive: the abrupt close at the end frees them. */
}

/* Several consumer threads share a PZ: its count of users must come back
 * to zero exactly, so that it can be freed afterwards. */
struct churn {
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	char *buf;
	int failures;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < 300; i++) {
		DAT_LMR_HANDLE lmr;
		DAT_RMR_HANDLE rmr;

		if (reg_va(c->ia, c->pz, c->buf, 128, DAT_MEM_PRIV_ALL_FLAG, &lmr, NULL,
			   NULL) != DAT_SUCCESS || dat_rmr_create(c->pz, &rmr) != DAT_SUCCESS) {
			c->failures++;
			continue;
		}
		if (dat_pz_free(c->pz) != (DAT_INVALID_STATE | DAT_INVALID_STATE_PZ_IN_USE))
			c->failures++;
		if (dat_rmr_free(rmr) != DAT_SUCCESS || dat_lmr_free(lmr) != DAT_SUCCESS)
			c->failures++;
	}
	return NULL;
}

static void test_threads(DAT_IA_HANDLE ia)
{
	enum { NT = 4 };
	struct churn c[NT];
	pthread_t th[NT];
	DAT_PZ_HANDLE pz;
	int failures = 0;

	dat_pz_create(ia, &pz);
	for (int i = 0; i < NT; i++) {
		c[i] = (struct churn){ ia, pz, buf_b + 128 * i, 0 };
		pthread_create(&th[i], NULL, churn_thread, &c[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		failures += c[i].failures;
	}
	CHECK(failures == 0 && dat_pz_free(pz) == DAT_SUCCESS,
	      "4 threads create and free LMRs/RMRs in one PZ; it is free after (%d failures)",
	      failures);
}

/* ---------------------------------------------------------------- main */

static void setup_bind(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_PZ_HANDLE pz2,
		       DAT_LMR_HANDLE lmr, DAT_LMR_CONTEXT ctx, struct bind_fix *f)
{
	DAT_LMR_CONTEXT ro_ctx = 0, c2 = 0;

	f->lmr = lmr;
	f->t = (DAT_LMR_TRIPLET){ (DAT_VADDR)(uintptr_t)buf_a, BUF_LEN, ctx };
	reg_va(ia, pz, buf_b, BUF_LEN, DAT_MEM_PRIV_LOCAL_READ_FLAG, &f->ro_lmr, &ro_ctx, NULL);
	f->ro_t = (DAT_LMR_TRIPLET){ (DAT_VADDR)(uintptr_t)buf_b, 64, ro_ctx };
	reg_va(ia, pz2, buf_b, BUF_LEN, DAT_MEM_PRIV_ALL_FLAG, &f->lmr_pz2, &c2, NULL);
	f->t_pz2 = (DAT_LMR_TRIPLET){ (DAT_VADDR)(uintptr_t)buf_b, 64, c2 };
	f->ep = make_ep(ia, pz);
}

int main(void)
{
	DAT_IA_HANDLE ia, ia2;
	DAT_PZ_HANDLE pz, pz2, other_pz;
	DAT_LMR_HANDLE lmr_a, lmr_b, other_lmr;
	DAT_LMR_CONTEXT ctx_a, other_ctx;
	struct bind_fix f = { 0 };

	buf_a = calloc(1, BUF_LEN);
	buf_b = calloc(1, BUF_LEN);
	buf_c = calloc(1, BUF_LEN);
	ia = open_ia();
	ia2 = open_ia();
	pz = test_pz(ia);
	dat_pz_create(ia, &pz2);
	dat_pz_create(ia2, &other_pz);
	reg_va(ia2, other_pz, buf_c, BUF_LEN, 0, &other_lmr, &other_ctx, NULL);

	test_lmr_create(ia, pz, &lmr_a, &lmr_b, &ctx_a);
	test_lmr_bad_args(ia, pz, other_pz, lmr_a);
	test_lmr_type(ia, pz2, lmr_a, ctx_a, other_lmr);
	test_stag_key(ia, pz);
	test_sync(ia, ctx_a, other_ctx);
	f.rmr = test_rmr_create(ia, pz);
	setup_bind(ia, pz, pz2, lmr_a, ctx_a, &f);
	test_bind(&f);
	test_pz_in_use(ia);
	test_threads(ia);
	test_stale(ia);

	CHECK_CODE(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE,
		   "graceful dat_ia_close with live PZs, LMRs and RMRs -> IA_IN_USE");
	test_close_ia(ia);
	test_close_ia(ia2);
	free(buf_a);
	free(buf_b);
	free(buf_c);
	return tap_done();
}
