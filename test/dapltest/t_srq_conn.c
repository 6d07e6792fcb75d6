/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* SRQs and RMR binds over real connections, through libdat2: two server
 * EPs fed by one SRQ, connected to two client EPs of a second IA on
 * iw-lo.  Receives from the SRQ, its counts and low-watermark event, the
 * EP_BROKEN async event when an SRQ EP leaves its connection (dtestsrq
 * waits for it), dat_rmr_bind / unbind on an EP, remote access through
 * the RMR before and after unbind, and dat_ep_post_rdma_read_to_rmr.
 * Every wait is bounded; a watchdog bails out rather than hang.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_US  5000000
#define BUF_SIZE (1u << 20)
#define QUAL     64010
#define NEP      2
#define TSIDE_BUF_SIZE BUF_SIZE
#include "tside.h"
#include <dat2/dat_registry.h>	/* DAT_EP_POST_RDMA_READ_TO_RMR */

static struct side S, C;
static DAT_EP_HANDLE sep[NEP], cep[NEP];	/* the EPs of S and C */
static DAT_SRQ_HANDLE srq;

static DAT_EVENT side_wait_5s(DAT_EVD_HANDLE evd)
{
	return side_wait(evd, WAIT_US);
}

static int nothing_on(DAT_EVD_HANDLE evd)
{
	DAT_EVENT ev;

	return dat_evd_dequeue(evd, &ev) != DAT_SUCCESS;
}

static int dto_is(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, uint64_t cookie,
		  DAT_DTO_COMPLETION_STATUS st, DAT_SEG_LENGTH len)
{
	DAT_EVENT ev = side_wait_5s(evd);
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev.event_data.dto_completion_event_data;

	if (ev.event_number != DAT_DTO_COMPLETION_EVENT) {
		printf("# event 0x%x\n", ev.event_number);
		return 0;
	}
	if (d->ep_handle != ep || d->user_cookie.as_64 != cookie ||
	    d->status != st || (st == DAT_DTO_SUCCESS &&
				d->transfered_length != len)) {
		printf("# ep %p cookie %llu status %d len %llu\n",
		       (void *)d->ep_handle,
		       (unsigned long long)d->user_cookie.as_64, d->status,
		       (unsigned long long)d->transfered_length);
		return 0;
	}
	return 1;
}

/* Two client EPs connect to a PSP; each CR is accepted with an SRQ EP. */
static void connect_all(void)
{
	DAT_SRQ_ATTR sa = { .max_recv_dtos = 16, .max_recv_iov = 2,
			    .low_watermark = 0 };
	DAT_IA_ATTR ia_attr;
	DAT_PSP_HANDLE psp;
	int i, ok = 1;

	CHECK(dat_srq_create(S.ia, S.pz, &sa, &srq) == DAT_SUCCESS,
	      "server SRQ created");
	dat_ia_query(S.ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia_attr, 0,
		     NULL);
	if (dat_psp_create(S.ia, QUAL, S.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS)
		BAIL("dat_psp_create %d", QUAL);
	for (i = 0; i < NEP; i++) {
		DAT_EVENT ev;

		ok &= dat_ep_create_with_srq(S.ia, S.pz, S.rcv, S.req, S.conn,
					     srq, NULL, &sep[i]) == DAT_SUCCESS;
		ok &= dat_ep_create(C.ia, C.pz, C.rcv, C.req, C.conn, NULL,
				    &cep[i]) == DAT_SUCCESS;
		ok &= dat_ep_connect(cep[i], ia_attr.ia_address_ptr, QUAL,
				     WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
				     DAT_CONNECT_DEFAULT_FLAG) == DAT_SUCCESS;
		ev = side_wait_5s(S.cr);
		ok &= ev.event_number == DAT_CONNECTION_REQUEST_EVENT &&
		      dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
				    sep[i], 0, NULL) == DAT_SUCCESS;
		ok &= side_wait_5s(C.conn).event_number ==
		      DAT_CONNECTION_EVENT_ESTABLISHED;
		ok &= side_wait_5s(S.conn).event_number ==
		      DAT_CONNECTION_EVENT_ESTABLISHED;
	}
	CHECK(ok, "two SRQ EPs accept and connect");
	dat_psp_free(psp);
}

static int send_from(int i, size_t len, uint64_t cookie)
{
	DAT_LMR_TRIPLET t = side_lseg(&C, 0, len);

	return dat_ep_post_send(cep[i], 1, &t, side_ck(cookie),
				DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
	       dto_is(C.req, cep[i], cookie, DAT_DTO_SUCCESS, len);
}

static void srq_counts(DAT_COUNT *avail, DAT_COUNT *outst)
{
	DAT_SRQ_PARAM p;

	memset(&p, 0, sizeof(p));
	dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p);
	*avail = p.available_dto_count;
	*outst = p.outstanding_dto_count;
}

static void test_srq_receives(void)
{
	DAT_COUNT av, out, nbufs = -1, span = -1;
	int i, ok = 1;

	for (i = 0; i < 4; i++) {
		DAT_LMR_TRIPLET t = side_lseg(&S, (size_t)i * 4096, 4096);

		ok &= dat_srq_post_recv(srq, 1, &t, side_ck(100 + (uint64_t)i)) ==
		      DAT_SUCCESS;
	}
	srq_counts(&av, &out);
	CHECK(ok && av == 4 && out == 4, "4 posted: available 4, outstanding 4");
	memset(C.buf, 0x5a, 100);
	/* Two connections are two streams with no order between them: the
	 * second message goes once the first has landed. */
	CHECK(send_from(0, 100, 1) &&
	      dto_is(S.rcv, sep[0], 100, DAT_DTO_SUCCESS, 100) &&
	      send_from(1, 200, 2) &&
	      dto_is(S.rcv, sep[1], 101, DAT_DTO_SUCCESS, 200),
	      "each client sends one message; receives complete on the recv "
	      "EVD: right EP, SRQ cookies in order");
	CHECK(S.buf[0] == 0x5a && S.buf[99] == 0x5a,
	      "the first SRQ buffer holds the first message");
	srq_counts(&av, &out);
	CHECK(av == 2 && out == 2, "after dequeuing: available 2, outstanding 2");
	CHECK(dat_ep_recv_query(sep[0], &nbufs, &span) == DAT_SUCCESS &&
	      nbufs == 0 && span == 0,
	      "ep_recv_query of an SRQ EP between messages: 0");
	CHECK(dat_ep_post_recv(sep[0], 1, &(DAT_LMR_TRIPLET){ 0 }, side_ck(9),
			       DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS,
	      "post_recv on an SRQ EP is refused");
}

static void test_low_watermark(void)
{
	DAT_EVENT ev;
	int ok;

	CHECK(dat_srq_set_lw(srq, 2) == DAT_SUCCESS && nothing_on(S.async),
	      "set_lw(2) with 2 available: no event");
	ok = send_from(0, 10, 3) &&
	     dto_is(S.rcv, sep[0], 102, DAT_DTO_SUCCESS, 10);
	ev = side_wait_5s(S.async);
	CHECK(ok && ev.event_number == DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR &&
	      ev.event_data.asynch_error_event_data.dat_handle == srq &&
	      ev.event_data.asynch_error_event_data.reason ==
	      DAT_SRQ_LOW_WATERMARK_EVENT,
	      "1 left: the low-watermark event names the SRQ (0x%x)",
	      ev.event_number);
	ok = send_from(1, 10, 4) &&
	     dto_is(S.rcv, sep[1], 103, DAT_DTO_SUCCESS, 10);
	CHECK(ok && nothing_on(S.async), "once per setting");
	CHECK(dat_srq_set_lw(srq, 1) == DAT_SUCCESS &&
	      side_wait_5s(S.async).event_number ==
	      DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR,
	      "set_lw(1) with 0 available reports at once");
	for (int i = 0; i < 4; i++) {
		DAT_LMR_TRIPLET t = side_lseg(&S, (size_t)i * 4096, 4096);

		dat_srq_post_recv(srq, 1, &t, side_ck(200 + (uint64_t)i));
	}
}

/* Server binds an RMR on EP 0; the client writes and reads through it. */
static void test_rmr(void)
{
	const DAT_MEM_PRIV_FLAGS rw = DAT_MEM_PRIV_REMOTE_READ_FLAG |
				      DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
	DAT_LMR_TRIPLET t = side_lseg(&S, 65536, 8192), un = { 0 };
	DAT_RMR_COOKIE rc = { .as_64 = 77 };
	DAT_RMR_CONTEXT ctx = 0;
	DAT_RMR_HANDLE rmr;
	DAT_RMR_PARAM p;
	DAT_RMR_TRIPLET r;
	DAT_LMR_TRIPLET lt;
	DAT_EVENT ev;

	CHECK(dat_rmr_create(S.pz, &rmr) == DAT_SUCCESS &&
	      dat_rmr_bind(rmr, S.lmr, &t, rw, DAT_VA_TYPE_VA, sep[0], rc,
			   DAT_COMPLETION_DEFAULT_FLAG, &ctx) == DAT_SUCCESS &&
	      ctx != 0, "dat_rmr_bind on a connected EP returns a context");
	ev = side_wait_5s(S.req);
	CHECK(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT &&
	      ev.event_data.rmr_completion_event_data.rmr_handle == rmr &&
	      ev.event_data.rmr_completion_event_data.user_cookie.as_64 == 77 &&
	      ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS,
	      "RMR_BIND_COMPLETION_EVENT on the request EVD (0x%x)",
	      ev.event_number);
	CHECK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.rmr_context == ctx && p.lmr_triplet.segment_length == 8192,
	      "rmr_query reports the binding");
	CHECK((dat_lmr_free(S.lmr) & 0x3fff0000) == DAT_INVALID_STATE,
	      "the LMR cannot be freed while the RMR is bound to it");
	memset(C.buf, 0xc3, 8192);
	lt = side_lseg(&C, 0, 8192);
	r = (DAT_RMR_TRIPLET){ .rmr_context = ctx,
			       .virtual_address = (DAT_VADDR)(uintptr_t)(S.buf + 65536),
			       .segment_length = 8192 };
	CHECK(dat_ep_post_rdma_write(cep[0], 1, &lt, side_ck(5), &r,
				     DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS && dto_is(C.req, cep[0], 5, DAT_DTO_SUCCESS, 8192),
	      "client RDMA write through the RMR");
	lt = side_lseg(&C, 16384, 4096);
	r.segment_length = 4096;
	CHECK(dat_ep_post_rdma_read(cep[0], 1, &lt, side_ck(6), &r,
				    DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS && dto_is(C.req, cep[0], 6, DAT_DTO_SUCCESS, 4096) &&
	      S.buf[65536] == 0xc3 && C.buf[16384] == 0xc3 &&
	      C.buf[16384 + 4095] == 0xc3,
	      "client RDMA read through the RMR returns the written bytes");
	/* Unbind: segment_length 0. */
	CHECK(dat_rmr_bind(rmr, DAT_HANDLE_NULL, &un, 0, DAT_VA_TYPE_VA,
			   sep[0], rc, DAT_COMPLETION_DEFAULT_FLAG, NULL) ==
	      DAT_SUCCESS && side_wait_5s(S.req).event_number ==
	      DAT_RMR_BIND_COMPLETION_EVENT,
	      "unbind completes");
	CHECK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.rmr_context == 0 && p.lmr_triplet.segment_length == 0,
	      "rmr_query: unbound");
	lt = side_lseg(&C, 0, 64);
	r.segment_length = 64;
	CHECK(dat_ep_post_rdma_write(cep[0], 1, &lt, side_ck(7), &r,
				     DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS,
	      "client writes with the old context");
	{
		DAT_EVENT e = side_wait_5s(C.req);
		DAT_DTO_COMPLETION_STATUS st =
			e.event_data.dto_completion_event_data.status;

		/* Over tcp the Write itself completed when handed to the
		 * stream; the peer's Terminate then breaks the connection.
		 * Over udp it completes at the peer's ack, which rides the
		 * (non-fatal) Terminate: it fails, the connection goes on. */
		CHECK(e.event_number == DAT_DTO_COMPLETION_EVENT &&
		      (st == DAT_DTO_ERR_REMOTE_ACCESS ||
		       (st == DAT_DTO_SUCCESS && !test_ia_is_udp(C.ia))),
		      "its completion (status %d)", st);
	}
	if (test_ia_is_udp(C.ia))
		CHECK(side_wait(C.conn, 200000).event_number == 0,
		      "the connection goes on (udp: a non-fatal Terminate)");
	else
		CHECK(side_wait_5s(C.conn).event_number ==
		      DAT_CONNECTION_EVENT_BROKEN,
		      "the server's Terminate breaks the client's connection");
	CHECK(dat_rmr_free(rmr) == DAT_SUCCESS, "dat_rmr_free");
}

/* The client reads server memory into a window of its own. */
static void test_read_to_rmr(void)
{
	DAT_LMR_TRIPLET t = side_lseg(&C, 131072, 4096);
	DAT_RMR_CONTEXT ctx = 0;
	DAT_RMR_HANDLE rmr;
	DAT_RMR_TRIPLET local, remote;

	memset(S.buf + 200000, 0x7e, 1000);
	CHECK(dat_rmr_create(C.pz, &rmr) == DAT_SUCCESS &&
	      dat_rmr_bind(rmr, C.lmr, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
			   DAT_VA_TYPE_VA, cep[1], (DAT_RMR_COOKIE){ 0 },
			   DAT_COMPLETION_SUPPRESS_FLAG, &ctx) == DAT_SUCCESS,
	      "client binds a remote-writable RMR, completion suppressed");
	local = (DAT_RMR_TRIPLET){ .rmr_context = ctx,
		.virtual_address = (DAT_VADDR)(uintptr_t)(C.buf + 131072 + 8),
		.segment_length = 1000 };
	remote = (DAT_RMR_TRIPLET){ .rmr_context = S.rctx,
		.virtual_address = (DAT_VADDR)(uintptr_t)(S.buf + 200000),
		.segment_length = 1000 };
	CHECK(DAT_EP_POST_RDMA_READ_TO_RMR(cep[1], &local, side_ck(8), &remote,
					   DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS && dto_is(C.req, cep[1], 8, DAT_DTO_SUCCESS, 1000) &&
	      C.buf[131072 + 8] == 0x7e && C.buf[131072 + 1007] == 0x7e &&
	      C.buf[131072 + 1008] == 0,
	      "rdma_read_to_rmr (through the provider table) lands in the window");
	local.virtual_address += 4000;
	CHECK(DAT_EP_POST_RDMA_READ_TO_RMR(cep[1], &local, side_ck(9), &remote,
					   DAT_COMPLETION_DEFAULT_FLAG) ==
	      (DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_WRITE),
	      "a sink beyond the window -> PRIVILEGES_VIOLATION");
	CHECK(dat_rmr_free(rmr) == DAT_SUCCESS, "free the client RMR");
}

/* dtestsrq: after an SRQ EP's connection ends, the async EVD reports
 * DAT_ASYNC_ERROR_EP_BROKEN naming it. */
static void test_ep_broken(void)
{
	DAT_EVENT ev;
	int seen0 = 0, seen1 = 0, i;

	/* Over udp EP 0 outlived the Terminate (test_window). */
	if (test_ia_is_udp(C.ia))
		CHECK(dat_ep_disconnect(cep[0], DAT_CLOSE_GRACEFUL_FLAG) ==
		      DAT_SUCCESS && side_wait_5s(S.conn).event_number != 0,
		      "EP 0 disconnects (udp)");
	CHECK(dat_ep_disconnect(cep[1], DAT_CLOSE_GRACEFUL_FLAG) ==
	      DAT_SUCCESS &&
	      side_wait_5s(S.conn).event_number != 0, "EP 1 disconnects");
	for (i = 0; i < 2; i++) {
		ev = side_wait_5s(S.async);
		if (ev.event_number != DAT_ASYNC_ERROR_EP_BROKEN)
			continue;
		seen0 += ev.event_data.asynch_error_event_data.dat_handle ==
			 sep[0];
		seen1 += ev.event_data.asynch_error_event_data.dat_handle ==
			 sep[1];
	}
	CHECK(seen0 == 1 && seen1 == 1,
	      "EP_BROKEN async event once for each server SRQ EP");
	CHECK(dat_ep_free(sep[0]) == DAT_SUCCESS &&
	      dat_ep_free(sep[1]) == DAT_SUCCESS && nothing_on(S.async),
	      "freeing the EPs adds no async event");
	CHECK(dat_srq_free(srq) == DAT_SUCCESS, "dat_srq_free once the EPs are gone");
}

int main(void)
{
	test_watchdog(120);
	side_open_req(&S, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	side_open_req(&C, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	connect_all();
	test_srq_receives();
	test_low_watermark();
	test_rmr();
	test_read_to_rmr();
	test_ep_broken();
	test_close_ia(C.ia);
	test_close_ia(S.ia);
	free(S.buf);
	free(C.buf);
	return tap_done();
}
