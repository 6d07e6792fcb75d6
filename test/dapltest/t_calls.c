/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* t_calls: the DAT calls that no other program checks (doc/conformance.md
 * lists which program covers each call).
 *
 *   - dat_ia_ha_related (libdat2 neither exports it nor has a usable
 *     macro for it, so it is called through the provider table);
 *   - dat_evd_enable / dat_evd_disable: exact return codes, the state
 *     dat_evd_query reports, the effect on the CNO, stale handles;
 *   - dat_ep_common_connect and dat_ep_dup_connect all the way to a
 *     working connection, not only their argument checks;
 *   - dat_ep_post_send_with_invalidate, plain and invalidating: the
 *     receiver's completion, and the window really being invalidated;
 *   - dat_cr_handoff on a real CR (DAT_NOT_IMPLEMENTED, CR left intact).
 *
 * Server and client are two IAs of iw-lo in one process.  Qualifiers are
 * QBASE + n (64200..64299).  Every wait is bounded; a watchdog bails out
 * rather than hang. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tside.h"
#include <dat2/dat_registry.h>	/* DAT_EP_COMMON_CONNECT & co. */

/* The registry's map from the consumer's IA index to the provider's IA
 * handle: exported by libdat2, not declared by its headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

#define WAIT_US   5000000	/* one event: 5 s at most */
#define QUIET_US  200000	/* "nothing more comes" window */
#define QBASE     64200

/* ------------------------------------------------------------ helpers */

static struct side S, C;	/* server, client */
static DAT_SOCK_ADDR6 ia_addr;	/* the IA's address (port 0) */

/* The next event is a DTO completion with these values (length and
 * operation checked on success only, as DAT defines them then). */
static int dto_is(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, uint64_t cookie,
		  DAT_DTO_COMPLETION_STATUS st, DAT_DTOS op,
		  DAT_SEG_LENGTH len, DAT_DTO_COMPLETION_EVENT_DATA *out)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev.event_data.dto_completion_event_data;

	if (ev.event_number != DAT_DTO_COMPLETION_EVENT) {
		printf("#   event 0x%x, want a DTO completion\n",
		       ev.event_number);
		return 0;
	}
	if (out)
		*out = *d;
	if (d->ep_handle != ep || d->user_cookie.as_64 != cookie ||
	    d->status != st ||
	    (st == DAT_DTO_SUCCESS &&
	     (d->operation != op || d->transfered_length != len))) {
		printf("#   ep %p cookie %llu status %d op %d len %llu\n",
		       (void *)d->ep_handle,
		       (unsigned long long)d->user_cookie.as_64, (int)d->status,
		       (int)d->operation,
		       (unsigned long long)d->transfered_length);
		return 0;
	}
	return 1;
}

/* The next connection event is 'num' for 'ep' (private data compared
 * when 'pd' is given). */
static int conn_ev(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER num, DAT_EP_HANDLE ep,
		   const void *pd, DAT_COUNT pd_len)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);
	const DAT_CONNECTION_EVENT_DATA *d =
		&ev.event_data.connect_event_data;

	if (ev.event_number != num || d->ep_handle != ep) {
		printf("#   event 0x%x ep %p, want 0x%x ep %p\n",
		       ev.event_number, (void *)d->ep_handle, num, (void *)ep);
		return 0;
	}
	if (pd && (d->private_data_size < pd_len || !d->private_data ||
		   memcmp(d->private_data, pd, (size_t)pd_len) != 0))
		return 0;
	return 1;
}

/* The next request on the server's CR EVD: it must come from 'psp' for
 * 'qual'; NULL otherwise. */
static DAT_CR_HANDLE wait_cr(DAT_PSP_HANDLE psp, DAT_CONN_QUAL qual)
{
	DAT_EVENT ev = side_wait(S.cr, WAIT_US);
	const DAT_CR_ARRIVAL_EVENT_DATA *d =
		&ev.event_data.cr_arrival_event_data;

	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    d->sp_handle.psp_handle != psp || d->conn_qual != qual) {
		printf("#   event 0x%x qual %llu, want a request for %llu\n",
		       ev.event_number, (unsigned long long)d->conn_qual,
		       (unsigned long long)qual);
		return DAT_HANDLE_NULL;
	}
	return d->cr_handle;
}

/* Whether the CR carries exactly this private data. */
static int cr_pd_is(DAT_CR_HANDLE cr, const void *pd, DAT_COUNT len)
{
	DAT_CR_PARAM p;

	if (dat_cr_query(cr, DAT_CR_FIELD_ALL, &p) != DAT_SUCCESS)
		return 0;
	return p.private_data_size >= len && p.private_data &&
	       memcmp(p.private_data, pd, (size_t)len) == 0;
}

/* Accept cr on sep and see ESTABLISHED on both sides. */
static int accept_both(DAT_CR_HANDLE cr, DAT_EP_HANDLE sep, DAT_EP_HANDLE cep)
{
	if (!cr || dat_cr_accept(cr, sep, 0, NULL) != DAT_SUCCESS)
		return 0;
	return conn_ev(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, cep, NULL, 0) &&
	       conn_ev(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, sep, NULL, 0);
}

/* A send of n bytes from cep, received by sep: both completions and the
 * bytes.  Buffers: client offset coff, server offset soff. */
static int send_ok(DAT_EP_HANDLE cep, DAT_EP_HANDLE sep, size_t coff,
		   size_t soff, size_t n, unsigned seed)
{
	DAT_LMR_TRIPLET r = side_lseg(&S, soff, n), t = side_lseg(&C, coff, n);

	memset(S.buf + soff, 0, n);
	side_fill(C.buf + coff, n, seed);
	if (dat_ep_post_recv(sep, 1, &r, side_ck(seed + 1000), 0) != DAT_SUCCESS ||
	    dat_ep_post_send(cep, 1, &t, side_ck(seed), 0) != DAT_SUCCESS)
		return 0;
	return dto_is(C.req, cep, seed, DAT_DTO_SUCCESS, DAT_DTO_SEND,
		      (DAT_SEG_LENGTH)n, NULL) &&
	       dto_is(S.rcv, sep, seed + 1000, DAT_DTO_SUCCESS,
		      DAT_DTO_RECEIVE, (DAT_SEG_LENGTH)n, NULL) &&
	       side_same(S.buf + soff, n, seed);
}

/* Connection events until the EVD stays quiet (a broken connection may
 * report on either side). */
static void drain(DAT_EVD_HANDLE evd)
{
	while (side_wait(evd, QUIET_US).event_number != 0)
		;
}

/* ------------------------------------------------ dat_ia_ha_related */

/* Debian's DAT_IA_HA_RELATED macro does not compile (a space before its
 * parameter list, and a member name the table does not have): call the
 * table slot itself, with the provider's IA handle as DAT requires. */
static DAT_RETURN ha_related(DAT_HANDLE h, const char *name, DAT_BOOLEAN *a)
{
	return (*DAT_HANDLE_TO_PROVIDER(h)->ia_ha_related_func)(
		h, (const DAT_NAME_PTR)name, a);
}

static void test_ha_related(void)
{
	DAT_IA_HANDLE ia = test_open_ia(NULL), pia = DAT_HANDLE_NULL;
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	DAT_BOOLEAN a;

	if (dats_get_ia_handle(ia, &pia) != DAT_SUCCESS || !pia)
		BAIL("dats_get_ia_handle failed");
	a = DAT_FALSE;
	CHECK_CODE_TYPE(ha_related(pia, test_ia_name(), &a), DAT_SUCCESS,
		   "ha_related(own IA name) -> SUCCESS");
	CHECK(a == DAT_TRUE, "... an IA is related to its own provider");
	a = DAT_TRUE;
	CHECK_CODE_TYPE(ha_related(pia, "iw-no-such-ia", &a), DAT_SUCCESS,
		   "ha_related(another name) -> SUCCESS");
	CHECK(a == DAT_FALSE, "... and it is not related (no HA)");
	a = DAT_TRUE;
	CHECK_CODE_TYPE(ha_related(pia, "iw-l", &a), DAT_SUCCESS,
		   "ha_related(a prefix of the name) -> SUCCESS");
	CHECK(a == DAT_FALSE, "... and a prefix is not the same provider");
	CHECK_CODE_TYPE(ha_related(pia, NULL, &a),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "ha_related with a NULL name -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(ha_related(pia, test_ia_name(), NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "ha_related with a NULL answer -> INVALID_PARAMETER/ARG3");
	if (dat_pz_create(ia, &pz) != DAT_SUCCESS)
		BAIL("dat_pz_create");
	CHECK_CODE_TYPE(ha_related(pz, test_ia_name(), &a),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA,
		   "ha_related on a PZ handle -> INVALID_HANDLE_IA");
	test_close_ia(ia);
	/* The handle's slot stays readable: the stale IA is recognised. */
	CHECK_CODE_TYPE(ha_related(pia, test_ia_name(), &a),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA,
		   "ha_related on a closed IA -> INVALID_HANDLE_IA");
}

/* -------------------------------------- dat_evd_enable / _disable */

static DAT_RETURN post_se(DAT_EVD_HANDLE evd, uintptr_t tag)
{
	DAT_EVENT ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_SOFTWARE_EVENT;
	ev.event_data.software_event_data.pointer = (DAT_PVOID)tag;
	return dat_evd_post_se(evd, &ev);
}

static int evd_state_is(DAT_EVD_HANDLE evd, int want)
{
	DAT_EVD_PARAM p;

	memset(&p, 0, sizeof(p));
	return dat_evd_query(evd, DAT_EVD_FIELD_EVD_STATE, &p) == DAT_SUCCESS &&
	       (int)p.evd_state == want;
}

static void test_evd_enable_disable(void)
{
	const int on = DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE;
	const int off = DAT_EVD_STATE_DISABLED | DAT_EVD_STATE_WAITABLE;
	DAT_IA_HANDLE ia = test_open_ia(NULL);
	DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL, got = DAT_HANDLE_NULL;
	DAT_EVENT ev;

	if (dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno) !=
	    DAT_SUCCESS ||
	    dat_evd_create(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd) !=
	    DAT_SUCCESS)
		BAIL("CNO or EVD creation failed");
	CHECK(evd_state_is(evd, on), "a new EVD is ENABLED | WAITABLE");
	CHECK_CODE_TYPE(dat_evd_disable(evd), DAT_SUCCESS, "dat_evd_disable -> SUCCESS");
	CHECK(evd_state_is(evd, off), "... the query reports DISABLED | WAITABLE");
	CHECK_CODE_TYPE(dat_evd_disable(evd), DAT_SUCCESS,
		   "dat_evd_disable of a disabled EVD -> SUCCESS");
	CHECK(evd_state_is(evd, off), "... still DISABLED");
	CHECK_CODE_TYPE(post_se(evd, 1), DAT_SUCCESS, "a disabled EVD still takes an event");
	CHECK_CODE_TYPE(dat_cno_wait(cno, 20 * 1000, &got), DAT_QUEUE_EMPTY,
		   "... which does not trigger the CNO");
	CHECK_CODE_TYPE(dat_evd_dequeue(evd, &ev), DAT_SUCCESS,
		   "... and can be dequeued");
	CHECK((uintptr_t)ev.event_data.software_event_data.pointer == 1,
	      "... the event posted while disabled");

	CHECK_CODE_TYPE(dat_evd_enable(evd), DAT_SUCCESS, "dat_evd_enable -> SUCCESS");
	CHECK(evd_state_is(evd, on), "... the query reports ENABLED | WAITABLE");
	CHECK_CODE_TYPE(dat_evd_enable(evd), DAT_SUCCESS,
		   "dat_evd_enable of an enabled EVD -> SUCCESS");
	CHECK(evd_state_is(evd, on), "... still ENABLED");
	got = DAT_HANDLE_NULL;
	CHECK_CODE_TYPE(post_se(evd, 2), DAT_SUCCESS, "post to the enabled EVD");
	CHECK_CODE_TYPE(dat_cno_wait(cno, WAIT_US, &got), DAT_SUCCESS,
		   "... triggers the CNO again");
	CHECK(got == evd, "... and dat_cno_wait names the EVD");
	CHECK_CODE_TYPE(dat_evd_dequeue(evd, &ev), DAT_SUCCESS, "dequeue it");

	/* A CQ-backed EVD (DTO) goes through the same calls. */
	{
		DAT_EVD_HANDLE dto = DAT_HANDLE_NULL;

		if (dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG,
				   &dto) != DAT_SUCCESS)
			BAIL("dat_evd_create(DTO)");
		CHECK_CODE_TYPE(dat_evd_disable(dto), DAT_SUCCESS,
			   "dat_evd_disable of a DTO EVD -> SUCCESS");
		CHECK(evd_state_is(dto, off), "... DISABLED");
		CHECK_CODE_TYPE(dat_evd_enable(dto), DAT_SUCCESS,
			   "dat_evd_enable of a DTO EVD -> SUCCESS");
		CHECK(evd_state_is(dto, on), "... ENABLED");
		dat_evd_free(dto);
	}

	CHECK_CODE_TYPE(dat_evd_free(evd), DAT_SUCCESS, "free the EVD");
	CHECK_CODE_TYPE(dat_evd_enable(evd), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST,
		   "dat_evd_enable of a freed EVD -> INVALID_HANDLE");
	CHECK_CODE_TYPE(dat_evd_disable(evd), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST,
		   "dat_evd_disable of a freed EVD -> INVALID_HANDLE");
	CHECK_CODE_TYPE(dat_evd_enable(cno), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST,
		   "dat_evd_enable of a CNO -> INVALID_HANDLE");
	CHECK_CODE_TYPE(dat_evd_disable(cno), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST,
		   "dat_evd_disable of a CNO -> INVALID_HANDLE");
	CHECK_CODE_TYPE(dat_cno_free(cno), DAT_SUCCESS, "free the CNO");
	test_close_ia(ia);
}

/* ------------------------------------------- dat_ep_common_connect */

/* The IA's address with the port set: how a common connect names the
 * remote service point. */
static struct sockaddr_in addr_port(unsigned port)
{
	struct sockaddr_in a;

	memcpy(&a, &ia_addr, sizeof(a));
	a.sin_port = htons((uint16_t)port);
	return a;
}

static void test_common_connect(DAT_PSP_HANDLE psp, DAT_EP_HANDLE cep,
				DAT_EP_HANDLE sep)
{
	static const char pd[] = "common connect pd";
	struct sockaddr_in a = addr_port(QBASE);
	struct sockaddr_in6 six;
	DAT_EP_PARAM p;
	DAT_CR_HANDLE cr;

	memset(&six, 0, sizeof(six));
	six.sin6_family = AF_INET6;
	six.sin6_port = htons(QBASE);
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(S.pz, (DAT_IA_ADDRESS_PTR)&a, WAIT_US, 0, NULL),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "common_connect on a PZ handle -> INVALID_HANDLE_EP");
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, NULL, WAIT_US, 0, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "common_connect with a NULL address -> ARG2");
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, (DAT_IA_ADDRESS_PTR)&six, WAIT_US, 0, NULL),
		   DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNSUPPORTED,
		   "common_connect to an IPv6 address -> INVALID_ADDRESS_UNSUPPORTED");
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, (DAT_IA_ADDRESS_PTR)&a, 0, 0, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "common_connect with timeout 0 -> ARG3");
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, (DAT_IA_ADDRESS_PTR)&a, WAIT_US, 257,
					 (DAT_PVOID)pd),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4,
		   "common_connect with 257 bytes of private data -> ARG4");
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, (DAT_IA_ADDRESS_PTR)&a, WAIT_US, 4, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "common_connect with NULL private data and a size -> ARG5");
	CHECK(side_ep_state(cep) == DAT_EP_STATE_UNCONNECTED,
	      "the refused calls leave the EP UNCONNECTED");

	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, (DAT_IA_ADDRESS_PTR)&a, WAIT_US,
					 (DAT_COUNT)sizeof(pd), (DAT_PVOID)pd),
		   DAT_SUCCESS, "common_connect to 127.0.0.1:%u -> SUCCESS", QBASE);
	CHECK(side_ep_state(cep) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ||
	      side_ep_state(cep) == DAT_EP_STATE_CONNECTED,
	      "... the EP is connecting");
	cr = wait_cr(psp, QBASE);
	CHECK(cr != DAT_HANDLE_NULL,
	      "... the PSP of qualifier %u (the port) gets the request", QBASE);
	CHECK(cr && cr_pd_is(cr, pd, (DAT_COUNT)sizeof(pd)),
	      "... with the private data");
	CHECK(accept_both(cr, sep, cep), "accept: ESTABLISHED on both sides");
	CHECK(side_ep_state(cep) == DAT_EP_STATE_CONNECTED, "the EP is CONNECTED");
	memset(&p, 0, sizeof(p));
	CHECK(dat_ep_query(cep, DAT_EP_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.remote_port_qual == QBASE && p.remote_ia_address_ptr &&
	      ((struct sockaddr_in *)p.remote_ia_address_ptr)->sin_addr.s_addr ==
	      a.sin_addr.s_addr,
	      "ep_query: remote address and qualifier are the PSP's");
	CHECK(send_ok(cep, sep, 0, 0, 3000, 11), "a send over the connection arrives");
	CHECK_CODE_TYPE(DAT_EP_COMMON_CONNECT(cep, (DAT_IA_ADDRESS_PTR)&a, WAIT_US, 0, NULL),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_CONNECTED,
		   "common_connect on a connected EP -> INVALID_STATE/EP_CONNECTED");
}

/* ---------------------------------------------- dat_ep_dup_connect */

static void test_dup_connect(DAT_PSP_HANDLE psp, DAT_EP_HANDLE connected,
			     DAT_EP_HANDLE cep, DAT_EP_HANDLE sep)
{
	static const char pd[] = "dup pd";
	DAT_EP_PARAM p;
	DAT_CR_HANDLE cr;

	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, cep, WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE2,
		   "dup_connect with itself as dup -> INVALID_HANDLE2");
	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, S.pz, WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE2,
		   "dup_connect with a PZ as dup -> INVALID_HANDLE2");
	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, connected, 0, 0, NULL, DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "dup_connect with timeout 0 -> ARG3");
	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, connected, WAIT_US, 257, (DAT_PVOID)pd,
				      DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4,
		   "dup_connect with 257 bytes of private data -> ARG4");
	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, connected, WAIT_US, 4, NULL,
				      DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "dup_connect with NULL private data and a size -> ARG5");
	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, connected, WAIT_US, 0, NULL,
				      DAT_QOS_LOW_LATENCY),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG6,
		   "dup_connect with a QoS other than best effort -> ARG6");
	CHECK_CODE_TYPE(dat_ep_dup_connect(connected, cep, WAIT_US, 0, NULL,
				      DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_CONNECTED,
		   "dup_connect of an EP that is connected -> INVALID_STATE/EP_CONNECTED");
	CHECK(side_ep_state(cep) == DAT_EP_STATE_UNCONNECTED,
	      "the refused calls leave the EP UNCONNECTED");

	CHECK_CODE_TYPE(dat_ep_dup_connect(cep, connected, WAIT_US, (DAT_COUNT)sizeof(pd),
				      (DAT_PVOID)pd, DAT_QOS_BEST_EFFORT),
		   DAT_SUCCESS, "dup_connect of a connected EP's peer -> SUCCESS");
	cr = wait_cr(psp, QBASE);
	CHECK(cr != DAT_HANDLE_NULL,
	      "... the request reaches the PSP the dup EP is connected to");
	CHECK(cr && cr_pd_is(cr, pd, (DAT_COUNT)sizeof(pd)),
	      "... with the private data");
	CHECK(accept_both(cr, sep, cep), "accept: ESTABLISHED on both sides");
	memset(&p, 0, sizeof(p));
	CHECK(dat_ep_query(cep, DAT_EP_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.ep_state == DAT_EP_STATE_CONNECTED && p.remote_port_qual == QBASE,
	      "ep_query: CONNECTED to qualifier %u", QBASE);
	CHECK(send_ok(cep, sep, 8192, 8192, 5000, 12),
	      "a send over the duplicate connection arrives at its own EP");
}

/* ------------------------------ dat_ep_post_send_with_invalidate */

static void test_send_with_invalidate(DAT_EP_HANDLE cep, DAT_EP_HANDLE sep)
{
	const DAT_MEM_PRIV_FLAGS rw = DAT_MEM_PRIV_REMOTE_READ_FLAG |
				      DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
	const size_t win = 65536, rbuf = 98304, sbuf = 32768, n = 700;
	DAT_LMR_TRIPLET t = side_lseg(&S, win, 4096), r, s;
	DAT_RMR_COOKIE rc = { .as_64 = 55 };
	DAT_RMR_CONTEXT ctx = 0;
	DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
	DAT_RMR_TRIPLET rt;
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_EVENT ev;

	/* The server exposes a window of its buffer on sep. */
	CHECK(dat_rmr_create(S.pz, &rmr) == DAT_SUCCESS &&
	      dat_rmr_bind(rmr, S.lmr, &t, rw, DAT_VA_TYPE_VA, sep, rc,
			   DAT_COMPLETION_DEFAULT_FLAG, &ctx) == DAT_SUCCESS &&
	      ctx != 0, "server binds an RMR on its EP");
	ev = side_wait(S.req, WAIT_US);
	CHECK(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT &&
	      ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS,
	      "... the bind completes");
	rt.rmr_context = ctx;
	rt.virtual_address = (DAT_VADDR)(uintptr_t)(S.buf + win);
	rt.segment_length = 256;
	s = side_lseg(&C, 0, 256);
	side_fill(C.buf, 256, 21);
	/* A Write completes once handed to the stream; the receive of a
	 * later Send proves it was placed (RDMAP keeps them in order). */
	CHECK(dat_ep_post_rdma_write(cep, 1, &s, side_ck(20), &rt, 0) == DAT_SUCCESS &&
	      dto_is(C.req, cep, 20, DAT_DTO_SUCCESS, DAT_DTO_RDMA_WRITE, 256, NULL),
	      "before: the client writes through the window");

	s = side_lseg(&C, sbuf, n);
	CHECK_CODE_TYPE(DAT_EP_POST_SEND_WITH_INVALIDATE(cep, 1, &s, side_ck(30),
						    DAT_COMPLETION_EVD_THRESHOLD_FLAG,
						    DAT_FALSE, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "send_with_invalidate with an EP-only completion flag -> ARG5");
	CHECK_CODE_TYPE(DAT_EP_POST_SEND_WITH_INVALIDATE(S.pz, 1, &s, side_ck(30), 0,
						    DAT_FALSE, 0),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "send_with_invalidate on a PZ handle -> INVALID_HANDLE_EP");

	/* invalidate FALSE: an ordinary send. */
	r = side_lseg(&S, rbuf, 4096);
	memset(S.buf + rbuf, 0, 4096);
	side_fill(C.buf + sbuf, n, 22);
	CHECK_CODE_TYPE(dat_ep_post_recv(sep, 1, &r, side_ck(31), 0), DAT_SUCCESS,
		   "server posts a receive");
	CHECK_CODE_TYPE(DAT_EP_POST_SEND_WITH_INVALIDATE(cep, 1, &s, side_ck(32), 0,
						    DAT_FALSE, ctx),
		   DAT_SUCCESS, "send_with_invalidate(invalidate FALSE) -> SUCCESS");
	CHECK(dto_is(C.req, cep, 32, DAT_DTO_SUCCESS, DAT_DTO_SEND, n, NULL),
	      "... the sender's completion: SEND, %u bytes", (unsigned)n);
	CHECK(dto_is(S.rcv, sep, 31, DAT_DTO_SUCCESS, DAT_DTO_RECEIVE, n, NULL) &&
	      side_same(S.buf + rbuf, n, 22),
	      "... the receiver's: a plain RECEIVE with the bytes");
	CHECK(side_same(S.buf + win, 256, 21),
	      "... and the earlier write through the window was placed");
	s = side_lseg(&C, 0, 64);
	side_fill(C.buf, 64, 24);
	CHECK(dat_ep_post_rdma_write(cep, 1, &s, side_ck(33), &rt, 0) == DAT_SUCCESS &&
	      dto_is(C.req, cep, 33, DAT_DTO_SUCCESS, DAT_DTO_RDMA_WRITE, 64, NULL),
	      "the window is still bound after the plain send: another write");

	/* invalidate TRUE: RDMAP Send with Invalidate of the window. */
	s = side_lseg(&C, sbuf, n);
	memset(S.buf + rbuf, 0, 4096);
	side_fill(C.buf + sbuf, n, 23);
	CHECK_CODE_TYPE(dat_ep_post_recv(sep, 1, &r, side_ck(34), 0), DAT_SUCCESS,
		   "server posts a receive");
	CHECK_CODE_TYPE(DAT_EP_POST_SEND_WITH_INVALIDATE(cep, 1, &s, side_ck(35), 0,
						    DAT_TRUE, ctx),
		   DAT_SUCCESS, "send_with_invalidate(invalidate TRUE, the window) -> SUCCESS");
	CHECK(dto_is(C.req, cep, 35, DAT_DTO_SUCCESS, DAT_DTO_SEND, n, NULL),
	      "... the sender's completion: SEND, %u bytes", (unsigned)n);
	memset(&d, 0, sizeof(d));
	CHECK(dto_is(S.rcv, sep, 34, DAT_DTO_SUCCESS,
		     DAT_DTO_RECEIVE_WITH_INVALIDATE, n, &d) &&
	      side_same(S.buf + rbuf, n, 23),
	      "... the receiver's: RECEIVE_WITH_INVALIDATE with the bytes");
	CHECK(d.rmr_context == ctx,
	      "... naming the invalidated rmr_context (0x%x, want 0x%x)",
	      (unsigned)d.rmr_context, (unsigned)ctx);
	CHECK(side_same(S.buf + win, 64, 24),
	      "... the write posted before it was placed first");
	{
		DAT_RMR_PARAM rp;

		memset(&rp, 0xff, sizeof(rp));
		CHECK(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp) == DAT_SUCCESS &&
		      rp.rmr_context == 0 && rp.lmr_triplet.segment_length == 0 &&
		      rp.mem_priv == DAT_MEM_PRIV_NONE_FLAG,
		      "... and dat_rmr_query reports the RMR unbound (context 0x%x)",
		      (unsigned)rp.rmr_context);
	}

	/* The window is gone: a write through it is refused by the server,
	 * whose Terminate breaks the connection. */
	s = side_lseg(&C, 0, 64);
	CHECK_CODE_TYPE(dat_ep_post_rdma_write(cep, 1, &s, side_ck(36), &rt, 0), DAT_SUCCESS,
		   "the client writes through the invalidated context");
	memset(&d, 0, sizeof(d));
	ev = side_wait(C.req, WAIT_US);
	CHECK(ev.event_number == DAT_DTO_COMPLETION_EVENT &&
	      ev.event_data.dto_completion_event_data.user_cookie.as_64 == 36,
	      "... its completion arrives (status %d)",
	      (int)ev.event_data.dto_completion_event_data.status);
	if (test_ia_is_udp(C.ia)) {
		/* TRP: a bad STag's Terminate is non-fatal (doc/trp.md). */
		CHECK(ev.event_data.dto_completion_event_data.status ==
		      DAT_DTO_ERR_REMOTE_ACCESS,
		      "... with a remote access error (udp)");
		ev = side_wait(C.conn, 200000);
		CHECK(ev.event_number == 0,
		      "... and the connection goes on (udp: event 0x%x)",
		      ev.event_number);
	} else {
		ev = side_wait(C.conn, WAIT_US);
		CHECK(ev.event_number == DAT_CONNECTION_EVENT_BROKEN &&
		      ev.event_data.connect_event_data.ep_handle == cep,
		      "... and the server's Terminate breaks the connection "
		      "(0x%x)", ev.event_number);
	}
	drain(S.conn);
	drain(S.rcv);
	drain(C.req);
	CHECK_CODE_TYPE(dat_rmr_free(rmr), DAT_SUCCESS, "the invalidated RMR can be freed");
}

/* -------------------------------------------------- dat_cr_handoff */

static void test_cr_handoff(DAT_EP_HANDLE cep, DAT_EP_HANDLE sep)
{
	const DAT_CONN_QUAL q = QBASE + 1, other = QBASE + 2;
	static const char pd[] = "handoff";
	static const char why[] = "no";
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL, psp2 = DAT_HANDLE_NULL;
	DAT_CR_PARAM p;
	DAT_CR_HANDLE cr;

	if (dat_psp_create(S.ia, q, S.cr, DAT_PSP_CONSUMER_FLAG, &psp) != DAT_SUCCESS ||
	    dat_psp_create(S.ia, other, S.cr, DAT_PSP_CONSUMER_FLAG, &psp2) != DAT_SUCCESS)
		BAIL("dat_psp_create %llu/%llu", (unsigned long long)q,
		     (unsigned long long)other);
	CHECK_CODE_TYPE(dat_ep_connect(cep, (DAT_IA_ADDRESS_PTR)&ia_addr, q, WAIT_US,
				  (DAT_COUNT)sizeof(pd), (DAT_PVOID)pd,
				  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		   DAT_SUCCESS, "connect to qualifier %llu", (unsigned long long)q);
	cr = wait_cr(psp, q);
	CHECK(cr != DAT_HANDLE_NULL, "the request arrives");
	CHECK_CODE_TYPE(dat_cr_handoff(cr, 0), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "cr_handoff to qualifier 0 -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(dat_cr_handoff(cr, other), DAT_NOT_IMPLEMENTED,
		   "cr_handoff to another PSP -> DAT_NOT_IMPLEMENTED");
	CHECK(side_wait(S.cr, QUIET_US).event_number == 0,
	      "... no request is raised on the other PSP");
	CHECK(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.private_data_size >= (DAT_COUNT)sizeof(pd) &&
	      memcmp(p.private_data, pd, sizeof(pd)) == 0,
	      "... the CR is still there, with its private data");
	CHECK(side_ep_state(cep) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
	      "... the client still waits for an answer");
	CHECK_CODE_TYPE(dat_cr_reject(cr, (DAT_COUNT)sizeof(why), (DAT_PVOID)why),
		   DAT_SUCCESS, "the CR can still be rejected");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_PEER_REJECTED, cep, why,
		      (DAT_COUNT)sizeof(why)),
	      "... the client gets PEER_REJECTED with the reason");
	CHECK_CODE_TYPE(dat_cr_handoff(cr, other), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR,
		   "cr_handoff of the answered CR -> INVALID_HANDLE_CR");
	CHECK_CODE_TYPE(dat_ep_reset(cep), DAT_SUCCESS, "reset the client EP");
	(void)sep;
	dat_psp_free(psp2);
	dat_psp_free(psp);
}

/* ---------------------------------------------------------------- main */

int main(void)
{
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	DAT_EP_HANDLE cep1, cep2, cep3, sep1, sep2;
	DAT_IA_ATTR a;

	test_watchdog(120);

	test_ha_related();
	test_evd_enable_disable();

	side_open_req(&S, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	side_open_req(&C, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	if (dat_ia_query(S.ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &a, 0, NULL) !=
	    DAT_SUCCESS)
		BAIL("dat_ia_query");
	memcpy(&ia_addr, a.ia_address_ptr, sizeof(struct sockaddr_in));
	if (dat_psp_create(S.ia, QBASE, S.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS)
		BAIL("dat_psp_create %u", QBASE);
	cep1 = side_ep(&C);
	cep2 = side_ep(&C);
	cep3 = side_ep(&C);
	sep1 = side_ep(&S);
	sep2 = side_ep(&S);

	test_common_connect(psp, cep1, sep1);
	test_dup_connect(psp, cep1, cep2, sep2);
	CHECK(send_ok(cep1, sep1, 24576, 24576, 1500, 14),
	      "the first connection still carries data next to its duplicate");
	test_send_with_invalidate(cep2, sep2);
	CHECK(send_ok(cep1, sep1, 24576, 24576, 1500, 15),
	      "the other connection is unaffected by the broken one");
	test_cr_handoff(cep3, sep1);

	CHECK_CODE_TYPE(dat_ep_disconnect(cep1, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS,
		   "disconnect the common connection");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_DISCONNECTED, cep1, NULL, 0),
	      "... DISCONNECTED");
	dat_psp_free(psp);
	CHECK_CODE_TYPE(dat_ia_close(C.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		   "abrupt dat_ia_close of the client IA");
	CHECK_CODE_TYPE(dat_ia_close(S.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		   "abrupt dat_ia_close of the server IA");
	free(C.buf);
	free(S.buf);
	return tap_done();
}
