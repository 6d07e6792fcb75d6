/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared Receive Queues through Debian's libdat2: create/query/free with
 * every bad input, resize and low watermark, posting checks, EPs created
 * with an SRQ (in-use rules, PZ must match, no per-EP receives), stale
 * handles, and an abrupt close with live SRQ and EP (valgrind). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcommon.h"


#define BUF_LEN 4096

struct env {
	DAT_IA_HANDLE ia;
	DAT_IA_ATTR ia_attr;
	DAT_PZ_HANDLE pz, pz2;
	DAT_EVD_HANDLE dto, conn;
	DAT_SRQ_HANDLE srq;
	char *buf;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT ctx;
};

static DAT_EVD_HANDLE make_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS flags)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	if (dat_evd_create(ia, 16, DAT_HANDLE_NULL, flags, &evd) != DAT_SUCCESS)
		BAIL("dat_evd_create(0x%x) failed", flags);
	return evd;
}

static void env_open(struct env *e)
{
	DAT_PROVIDER_ATTR pa;
	DAT_REGION_DESCRIPTION r;
	DAT_RMR_CONTEXT rctx;
	DAT_VLEN rlen;
	DAT_VADDR raddr;

	memset(e, 0, sizeof(*e));
	e->ia = test_open_ia(NULL);
	if (dat_ia_query(e->ia, NULL, DAT_IA_FIELD_ALL, &e->ia_attr, 0, &pa))
		BAIL("dat_ia_query failed");
	if (dat_pz_create(e->ia, &e->pz) || dat_pz_create(e->ia, &e->pz2))
		BAIL("dat_pz_create failed");
	e->dto = make_evd(e->ia, DAT_EVD_DTO_FLAG);
	e->conn = make_evd(e->ia, DAT_EVD_CONNECTION_FLAG);
	e->buf = calloc(1, BUF_LEN);
	r.for_va = e->buf;
	if (dat_lmr_create(e->ia, DAT_MEM_TYPE_VIRTUAL, r, BUF_LEN, e->pz,
			   DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &e->lmr,
			   &e->ctx, &rctx, &rlen, &raddr))
		BAIL("dat_lmr_create failed");
}

static DAT_SRQ_ATTR srq_attr(DAT_COUNT dtos, DAT_COUNT iov, DAT_COUNT lw)
{
	DAT_SRQ_ATTR a = { dtos, iov, lw };
	return a;
}

static void test_create_query(struct env *e)
{
	DAT_SRQ_HANDLE s = DAT_HANDLE_NULL;
	DAT_SRQ_ATTR a = srq_attr(16, 2, 0);
	DAT_SRQ_PARAM p;
	DAT_HANDLE_TYPE t;

	CHECK_CODE(dat_srq_create(e->ia, e->pz, &a, &e->srq), DAT_SUCCESS,
		   "dat_srq_create(16 DTOs, 2 IOVs)");
	CHECK(dat_get_handle_type(e->srq, &t) == DAT_SUCCESS &&
	      t == DAT_HANDLE_TYPE_SRQ, "get_handle_type(srq) == SRQ");
	memset(&p, 0, sizeof(p));
	CHECK(dat_srq_query(e->srq, DAT_SRQ_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.ia_handle == e->ia && p.srq_state == DAT_SRQ_STATE_OPERATIONAL &&
	      p.pz_handle == e->pz && p.max_recv_dtos == 16 &&
	      p.max_recv_iov == 2 && p.low_watermark == 0 &&
	      p.available_dto_count == 0 && p.outstanding_dto_count == 0,
	      "srq_query: consumer IA, OPERATIONAL, PZ, sizes, nothing posted");
	CHECK_CODE(dat_srq_query(e->srq, 0x100, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "srq_query: unknown mask bit -> ARG2");
	CHECK_CODE(dat_srq_query(e->srq, DAT_SRQ_FIELD_ALL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_query: NULL param -> ARG3");
	CHECK_CODE(dat_srq_create(e->ia, e->pz, NULL, &s),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_create: NULL attr -> ARG3");
	a = srq_attr(0, 2, 0);
	CHECK_CODE(dat_srq_create(e->ia, e->pz, &a, &s),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_create: zero max_recv_dtos -> ARG3");
	a = srq_attr(e->ia_attr.max_recv_per_srq + 1, 2, 0);
	CHECK_CODE(dat_srq_create(e->ia, e->pz, &a, &s),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_create: max_recv_dtos above max_recv_per_srq -> ARG3");
	a = srq_attr(16, e->ia_attr.max_iov_segments_per_dto + 1, 0);
	CHECK_CODE(dat_srq_create(e->ia, e->pz, &a, &s),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_create: max_recv_iov above the IA's -> ARG3");
	a = srq_attr(16, 2, 17);
	CHECK_CODE(dat_srq_create(e->ia, e->pz, &a, &s),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_create: low watermark above max_recv_dtos -> ARG3");
	a = srq_attr(16, 2, 0);
	CHECK_CODE(dat_srq_create(e->ia, e->dto, &a, &s),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ,
		   "srq_create: an EVD as PZ -> INVALID_HANDLE_PZ");
	CHECK_CODE(dat_srq_create(e->ia, e->pz, &a, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4,
		   "srq_create: NULL srq_handle -> ARG4");
}

static void test_resize_lw_post(const struct env *e)
{
	DAT_SRQ_PARAM p;
	DAT_DTO_COOKIE ck = { .as_64 = 3 };
	DAT_LMR_TRIPLET t[3];

	CHECK_CODE(dat_srq_set_lw(e->srq, 8), DAT_SUCCESS, "srq_set_lw(8)");
	CHECK_CODE(dat_srq_set_lw(e->srq, 17), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "srq_set_lw above max_recv_dtos -> ARG2");
	CHECK_CODE(dat_srq_resize(e->srq, 32), DAT_SUCCESS, "srq_resize(32)");
	CHECK(dat_srq_query(e->srq, DAT_SRQ_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.max_recv_dtos == 32 && p.low_watermark == 8,
	      "srq_query: new size and watermark");
	CHECK_CODE(dat_srq_resize(e->srq, 0), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "srq_resize(0) -> ARG2");
	CHECK_CODE(dat_srq_resize(e->srq, e->ia_attr.max_recv_per_srq + 1),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "srq_resize above max_recv_per_srq -> ARG2");
	for (int i = 0; i < 3; i++) {
		t[i].virtual_address = (DAT_VADDR)(uintptr_t)e->buf;
		t[i].segment_length = 64;
		t[i].lmr_context = e->ctx;
	}
	CHECK_CODE(dat_srq_post_recv(e->srq, 3, t, ck),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "srq_post_recv: more segments than max_recv_iov -> ARG2");
	CHECK_CODE(dat_srq_post_recv(e->srq, 1, NULL, ck),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "srq_post_recv: NULL iov -> ARG3");
	t[0].lmr_context = 0xdead0000u;
	CHECK_CODE(dat_srq_post_recv(e->srq, 1, t, ck),
		   DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_WRITE,
		   "srq_post_recv: unknown lmr_context -> PRIVILEGES_VIOLATION");
	t[0].lmr_context = e->ctx;
	CHECK_CODE(dat_srq_post_recv(e->srq, 2, t, ck), DAT_SUCCESS,
		   "srq_post_recv: valid");
	CHECK(dat_srq_query(e->srq, DAT_SRQ_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.available_dto_count == 1 && p.outstanding_dto_count == 1,
	      "srq_query: 1 available, 1 outstanding");
	CHECK_CODE(dat_srq_resize(e->srq, 1), DAT_SUCCESS,
		   "srq_resize down to the 1 outstanding");
	CHECK_CODE(dat_srq_post_recv(e->srq, 1, t, ck),
		   DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_SRQ,
		   "srq_post_recv beyond max_recv_dtos -> INSUFFICIENT_RESOURCES");
	CHECK_CODE(dat_srq_resize(e->srq, 32), DAT_SUCCESS, "srq_resize(32)");
	CHECK(dat_srq_post_recv(e->srq, 1, t, ck) == DAT_SUCCESS &&
	      dat_srq_query(e->srq, DAT_SRQ_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.available_dto_count == 2 && p.outstanding_dto_count == 2 &&
	      p.max_recv_dtos == 32,
	      "after growing: 2 available, 2 outstanding");
	CHECK_CODE(dat_srq_resize(e->srq, 1),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE,
		   "srq_resize below the outstanding count -> SRQ_IN_USE");
	CHECK_CODE(dat_srq_post_recv(e->pz, 1, t, ck),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ,
		   "srq_post_recv on a PZ -> INVALID_HANDLE_SRQ");
}

static void test_ep_with_srq(const struct env *e)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL, ep2 = DAT_HANDLE_NULL;
	DAT_EP_PARAM p;
	DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)e->buf, 64, e->ctx };
	DAT_DTO_COOKIE ck = { .as_64 = 4 };

	CHECK_CODE(dat_ep_create_with_srq(e->ia, e->pz, e->dto, e->dto, e->conn,
					  e->srq, NULL, &ep),
		   DAT_SUCCESS, "dat_ep_create_with_srq");
	CHECK(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.srq_handle == e->srq && p.ep_state == DAT_EP_STATE_UNCONNECTED,
	      "ep_query: the SRQ handle, UNCONNECTED");
	CHECK_CODE(dat_ep_create_with_srq(e->ia, e->pz2, e->dto, e->dto, e->conn,
					  e->srq, NULL, &ep2),
		   DAT_MODEL_NOT_SUPPORTED,
		   "EP in another PZ than its SRQ -> MODEL_NOT_SUPPORTED");
	CHECK_CODE(dat_ep_create_with_srq(e->ia, e->pz, e->dto, e->dto, e->conn,
					  e->pz, NULL, &ep2),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ,
		   "create_with_srq: a PZ as SRQ -> INVALID_HANDLE_SRQ");
	CHECK_CODE(dat_ep_create_with_srq(e->ia, e->pz, e->dto, e->dto, e->conn,
					  e->srq, NULL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG8,
		   "create_with_srq: NULL ep_handle -> ARG8");
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, 0),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY,
		   "post_recv on an EP fed by an SRQ -> INVALID_STATE");
	{
		DAT_IA_ATTR a;

		DAT_EVENT ev;
		DAT_COUNT more;

		/* Nobody listens on 64001: the connect starts, then fails
		 * with an event (t_srq_conn.c connects for real). */
		dat_ia_query(e->ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &a, 0, NULL);
		CHECK_CODE(dat_ep_connect(ep, a.ia_address_ptr, 64001, 1000000, 0,
					  NULL, DAT_QOS_BEST_EFFORT,
					  DAT_CONNECT_DEFAULT_FLAG),
			   DAT_SUCCESS, "connect of an EP fed by an SRQ starts");
		memset(&ev, 0, sizeof(ev));
		CHECK(dat_evd_wait(e->conn, 5000000, 1, &ev, &more) ==
		      DAT_SUCCESS && ev.event_number ==
		      DAT_CONNECTION_EVENT_UNREACHABLE,
		      "... and reports UNREACHABLE (0x%x)", ev.event_number);
		dat_ep_reset(ep);
	}
	CHECK_CODE(dat_srq_free(e->srq), DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE,
		   "srq_free while an EP uses it -> SRQ_IN_USE");
	CHECK_CODE(dat_ep_free(ep), DAT_SUCCESS, "dat_ep_free");
	CHECK_CODE(dat_pz_free(e->pz), DAT_INVALID_STATE | DAT_INVALID_STATE_PZ_IN_USE,
		   "pz_free while the SRQ lives -> PZ_IN_USE");
}

int main(void)
{
	struct env e;
	DAT_SRQ_PARAM p;
	DAT_SRQ_ATTR a = srq_attr(8, 1, 0);
	DAT_SRQ_HANDLE live = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

	env_open(&e);
	test_create_query(&e);
	test_resize_lw_post(&e);
	test_ep_with_srq(&e);
	CHECK_CODE(dat_srq_free(e.srq), DAT_SUCCESS, "dat_srq_free");
	CHECK_CODE(dat_srq_query(e.srq, DAT_SRQ_FIELD_ALL, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ,
		   "srq_query after free -> INVALID_HANDLE_SRQ");
	CHECK_CODE(dat_srq_free(e.srq), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_SRQ,
		   "second srq_free -> INVALID_HANDLE_SRQ");
	/* Abrupt close with a live SRQ and an EP using it (valgrind). */
	CHECK(dat_srq_create(e.ia, e.pz, &a, &live) == DAT_SUCCESS &&
	      dat_ep_create_with_srq(e.ia, e.pz, e.dto, e.dto, e.conn, live,
				     NULL, &ep) == DAT_SUCCESS,
	      "a live SRQ and EP left for the abrupt close");
	test_close_ia(e.ia);
	free(e.buf);
	return tap_done();
}
