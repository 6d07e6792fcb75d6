/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Endpoints through Debian's libdat2, as a consumer sees them: every bad
 * input of create/query/modify/free/reset/connect/post with its exact
 * return code, the default attributes, the state machine's object side
 * (unconfigured, reserved, reset), the in-use rules of the PZ and EVDs,
 * stale handles, and an abrupt IA close with live EPs (valgrind: no
 * leaks).  Real connections and data transfer are in t_connect; here a
 * valid connect only meets no listener (UNREACHABLE). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tcommon.h"
#include <dat2/dat_registry.h>	/* DAT_EP_COMMON_CONNECT & co. */


#define BOGUS ((DAT_HANDLE)(uintptr_t)77777)
#define BUF_LEN 4096

struct env {
	DAT_IA_HANDLE ia;
	DAT_IA_ATTR ia_attr;
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE recv, req, conn, cr;
};

static DAT_EVD_HANDLE make_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS flags)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_RETURN r = dat_evd_create(ia, 16, DAT_HANDLE_NULL, flags, &evd);

	if (r != DAT_SUCCESS)
		BAIL("dat_evd_create(0x%x) failed: 0x%x", flags, r);
	return evd;
}

static void env_open(struct env *e)
{
	DAT_PROVIDER_ATTR pa;

	memset(e, 0, sizeof(*e));
	e->ia = test_open_ia(NULL);
	if (dat_ia_query(e->ia, NULL, DAT_IA_FIELD_ALL, &e->ia_attr, 0, &pa))
		BAIL("dat_ia_query failed");
	if (dat_pz_create(e->ia, &e->pz) != DAT_SUCCESS)
		BAIL("dat_pz_create failed");
	e->recv = make_evd(e->ia, DAT_EVD_DTO_FLAG);
	e->req = make_evd(e->ia, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	e->conn = make_evd(e->ia, DAT_EVD_CONNECTION_FLAG);
	e->cr = make_evd(e->ia, DAT_EVD_CR_FLAG);
}

static DAT_EP_HANDLE make_ep(const struct env *e, const DAT_EP_ATTR *attr)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_RETURN r = dat_ep_create(e->ia, e->pz, e->recv, e->req, e->conn,
				     attr, &ep);

	if (r != DAT_SUCCESS)
		BAIL("dat_ep_create failed: 0x%x", r);
	return ep;
}

static DAT_EP_STATE ep_state(DAT_EP_HANDLE ep)
{
	DAT_EP_STATE s = (DAT_EP_STATE)-1;

	dat_ep_get_status(ep, &s, NULL, NULL);
	return s;
}

static DAT_EP_ATTR good_attr(void)
{
	DAT_EP_ATTR a;

	memset(&a, 0, sizeof(a));
	a.service_type = DAT_SERVICE_TYPE_RC;
	a.max_message_size = 65536;
	a.max_rdma_size = 65536;
	a.qos = DAT_QOS_BEST_EFFORT;
	a.max_recv_dtos = 16;
	a.max_request_dtos = 16;
	a.max_recv_iov = 2;
	a.max_request_iov = 2;
	a.max_rdma_read_in = 4;
	a.max_rdma_read_out = 4;
	a.srq_soft_hw = DAT_HW_DEFAULT;
	return a;
}

/* ------------------------------------------------------------ create */

static void test_create_query(const struct env *e)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_EP_PARAM p;
	DAT_HANDLE_TYPE t;
	const struct sockaddr_in *sin;

	CHECK_CODE(dat_ep_create(e->ia, e->pz, e->recv, e->req, e->conn, NULL,
				 &ep), DAT_SUCCESS, "dat_ep_create(NULL attr)");
	CHECK(dat_get_handle_type(ep, &t) == DAT_SUCCESS &&
	      t == DAT_HANDLE_TYPE_EP, "get_handle_type(ep) == EP");
	memset(&p, 0, sizeof(p));
	CHECK_CODE(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS,
		   "dat_ep_query(ALL)");
	CHECK(p.ia_handle == e->ia, "query: ia_handle is the consumer's IA handle");
	CHECK(p.ep_state == DAT_EP_STATE_UNCONNECTED,
	      "created with PZ and 3 EVDs: UNCONNECTED (%d)", p.ep_state);
	CHECK(p.pz_handle == e->pz && p.recv_evd_handle == e->recv &&
	      p.request_evd_handle == e->req && p.connect_evd_handle == e->conn &&
	      p.srq_handle == DAT_HANDLE_NULL,
	      "query: PZ, EVD and SRQ handles as given");
	sin = (const struct sockaddr_in *)p.local_ia_address_ptr;
	CHECK(sin && sin->sin_family == AF_INET &&
	      sin->sin_addr.s_addr ==
		((const struct sockaddr_in *)e->ia_attr.ia_address_ptr)->sin_addr.s_addr,
	      "query: local address is the IA address");
	CHECK(p.remote_ia_address_ptr &&
	      p.remote_ia_address_ptr->sa_family == AF_UNSPEC &&
	      p.remote_port_qual == 0 && p.local_port_qual == 0,
	      "query: no remote address or ports before a connection");
	CHECK(p.comm.domain == AF_INET, "query: comm domain AF_INET");
	CHECK(p.ep_attr.service_type == DAT_SERVICE_TYPE_RC &&
	      p.ep_attr.qos == DAT_QOS_BEST_EFFORT &&
	      p.ep_attr.max_message_size == e->ia_attr.max_message_size &&
	      p.ep_attr.max_rdma_size == e->ia_attr.max_rdma_size,
	      "defaults: RC, best effort, IA's max message and RDMA size");
	CHECK(p.ep_attr.max_recv_dtos > 0 && p.ep_attr.max_request_dtos > 0 &&
	      p.ep_attr.max_recv_dtos <= e->ia_attr.max_dto_per_ep &&
	      p.ep_attr.max_recv_iov > 0 &&
	      p.ep_attr.max_request_iov <= e->ia_attr.max_iov_segments_per_dto &&
	      p.ep_attr.max_rdma_read_in <= e->ia_attr.max_rdma_read_per_ep_in &&
	      p.ep_attr.max_rdma_read_out <= e->ia_attr.max_rdma_read_per_ep_out &&
	      p.ep_attr.max_rdma_read_iov ==
		e->ia_attr.max_iov_segments_per_rdma_read &&
	      p.ep_attr.srq_soft_hw == DAT_HW_DEFAULT,
	      "defaults: queue and IOV sizes within the IA limits");
	CHECK_CODE(dat_ep_query(ep, DAT_EP_FIELD_ALL + 1, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "query: mask beyond DAT_EP_FIELD_ALL -> ARG2");
	CHECK_CODE(dat_ep_query(ep, DAT_EP_FIELD_ALL, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "query: NULL param -> ARG3");
	CHECK_CODE(dat_ep_query(e->pz, DAT_EP_FIELD_ALL, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "query: a PZ handle -> INVALID_HANDLE_EP");
	CHECK_CODE(dat_ep_free(ep), DAT_SUCCESS, "dat_ep_free");
	CHECK_CODE(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "query after free -> INVALID_HANDLE_EP");
	CHECK_CODE(dat_ep_free(ep), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "second dat_ep_free -> INVALID_HANDLE_EP");
}

static void test_create_handles(const struct env *e)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_PZ_HANDLE dead_pz;

	CHECK_RET(dat_ep_create(BOGUS, e->pz, e->recv, e->req, e->conn, NULL,
				&ep), DAT_INVALID_HANDLE, "create: bogus IA");
	CHECK_CODE(dat_ep_create(e->ia, e->recv, e->recv, e->req, e->conn, NULL,
				 &ep), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ,
		   "create: an EVD as PZ -> INVALID_HANDLE_PZ");
	CHECK_CODE(dat_ep_create(e->ia, e->pz, e->conn, e->req, e->conn, NULL,
				 &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_RECV,
		   "create: recv EVD without DTO flag -> EVD_RECV");
	CHECK_CODE(dat_ep_create(e->ia, e->pz, e->recv, e->cr, e->conn, NULL,
				 &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST,
		   "create: request EVD without DTO flag -> EVD_REQUEST");
	CHECK_CODE(dat_ep_create(e->ia, e->pz, e->recv, e->req, e->recv, NULL,
				 &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CONN,
		   "create: connect EVD without CONNECTION flag -> EVD_CONN");
	CHECK_CODE(dat_ep_create(e->ia, e->pz, e->recv, e->req, e->conn, NULL,
				 NULL), DAT_INVALID_PARAMETER | DAT_INVALID_ARG7,
		   "create: NULL ep_handle -> ARG7");
	/* dapltest FFT endpoint case 1: a PZ freed before the EP. */
	if (dat_pz_create(e->ia, &dead_pz) != DAT_SUCCESS)
		BAIL("dat_pz_create");
	dat_pz_free(dead_pz);
	CHECK_CODE(dat_ep_create(e->ia, dead_pz, e->recv, e->req, e->conn, NULL,
				 &ep), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ,
		   "create: freed PZ -> INVALID_HANDLE_PZ");
}

/* Break attribute number i of 'a'; returns what it did, NULL past the
 * last one. */
static const char *break_attr(int i, DAT_EP_ATTR *a, const DAT_IA_ATTR *l)
{
	switch (i) {
	case 0:
		a->service_type = 7;
		return "service type not RC";
	case 1:
		a->max_message_size = (DAT_SEG_LENGTH)l->max_message_size + 1;
		return "max_message_size above the IA's";
	case 2:
		a->qos = DAT_QOS_HIGH_THROUGHPUT;
		return "qos other than best effort";
	case 3:
		a->max_recv_dtos = l->max_dto_per_ep + 1;
		return "max_recv_dtos above max_dto_per_ep";
	case 4:
		a->max_request_dtos = -1;
		return "negative max_request_dtos";
	case 5:
		a->max_request_iov = l->max_iov_segments_per_dto + 1;
		return "max_request_iov above the IA's";
	case 6:
		a->max_rdma_read_in = l->max_rdma_read_per_ep_in + 1;
		return "max_rdma_read_in above the IA's";
	case 7:
		a->max_rdma_read_out = l->max_rdma_read_per_ep_out + 1;
		return "max_rdma_read_out above the IA's";
	case 8:
		a->recv_completion_flags = (DAT_COMPLETION_FLAGS)0x40;
		return "unknown recv completion flag";
	case 9:
		a->recv_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG |
					   DAT_COMPLETION_EVD_THRESHOLD_FLAG;
		return "unsignalled receives with the threshold flag";
	case 10:
		a->ep_transport_specific_count = 1;
		return "transport-specific count without array";
	case 11:
		a->max_rdma_write_iov = l->max_iov_segments_per_rdma_write + 1;
		return "max_rdma_write_iov above the IA's";
	default:
		return NULL;
	}
}

/* One bad attribute at a time; each must be DAT_INVALID_ARG6. */
static void test_create_attrs(const struct env *e)
{
	const DAT_IA_ATTR *ia = &e->ia_attr;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	const char *what;
	DAT_EP_ATTR a;
	DAT_EP_PARAM p;

	for (int i = 0; a = good_attr(), (what = break_attr(i, &a, ia)); i++)
		CHECK_CODE(dat_ep_create(e->ia, e->pz, e->recv, e->req, e->conn,
					 &a, &ep),
			   DAT_INVALID_PARAMETER | DAT_INVALID_ARG6,
			   "create attr: %s -> ARG6", what);
	/* MPI libraries pass 0 for the RDMA IOV counts: the defaults. */
	a = good_attr();
	CHECK_CODE(dat_ep_create(e->ia, e->pz, e->recv, e->req, e->conn, &a, &ep),
		   DAT_SUCCESS, "create attr: zero RDMA IOV counts accepted");
	dat_ep_query(ep, DAT_EP_FIELD_ALL, &p);
	CHECK(p.ep_attr.max_recv_dtos == 16 && p.ep_attr.max_request_iov == 2 &&
	      p.ep_attr.max_rdma_read_iov == ia->max_iov_segments_per_rdma_read &&
	      p.ep_attr.max_rdma_write_iov == ia->max_iov_segments_per_rdma_write,
	      "query: given attributes kept, zero RDMA IOVs reported as the default");
	dat_ep_free(ep);
}

static void test_foreign_ia(const struct env *e)
{
	DAT_IA_HANDLE ia2 = test_open_ia(NULL);
	DAT_PZ_HANDLE pz2 = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

	dat_pz_create(ia2, &pz2);
	CHECK_CODE(dat_ep_create(e->ia, pz2, e->recv, e->req, e->conn, NULL,
				 &ep), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ,
		   "create: PZ of another IA -> INVALID_HANDLE_PZ");
	dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG);
}

/* ----------------------------------------------- unconfigured, modify */

static void test_unconfigured_modify(const struct env *e)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL, other;
	DAT_IA_ADDRESS_PTR addr = e->ia_attr.ia_address_ptr;
	DAT_EP_PARAM p;

	CHECK_CODE(dat_ep_create(e->ia, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
				 DAT_HANDLE_NULL, DAT_HANDLE_NULL, NULL, &ep),
		   DAT_SUCCESS, "create without PZ and EVDs");
	CHECK(ep_state(ep) == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED,
	      "... is UNCONFIGURED_UNCONNECTED");
	CHECK_CODE(dat_ep_connect(ep, addr, 45000, DAT_TIMEOUT_INFINITE, 0, NULL,
				  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_PZ,
		   "connect without PZ -> INVALID_STATE_EP_PZ");
	memset(&p, 0, sizeof(p));
	CHECK_CODE(dat_ep_modify(ep, DAT_EP_FIELD_EP_STATE, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "modify: state is not modifiable -> ARG2");
	CHECK_CODE(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "modify: NULL param -> ARG3");
	p.pz_handle = e->pz;
	p.recv_evd_handle = e->conn;
	CHECK_CODE(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE |
				 DAT_EP_FIELD_RECV_EVD_HANDLE, &p),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_RECV,
		   "modify: recv EVD without DTO flag -> EVD_RECV");
	p.ep_attr.max_recv_dtos = -1;
	CHECK_CODE(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "modify: bad attribute -> ARG3");
	p.pz_handle = e->pz;
	p.recv_evd_handle = e->recv;
	CHECK_CODE(dat_ep_modify(ep, DAT_EP_FIELD_PZ_HANDLE |
				 DAT_EP_FIELD_RECV_EVD_HANDLE, &p),
		   DAT_SUCCESS, "modify: PZ and recv EVD");
	CHECK_CODE(dat_ep_connect(ep, addr, 45000, DAT_TIMEOUT_INFINITE, 0, NULL,
				  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_EVD_REQUEST,
		   "connect without request EVD -> INVALID_STATE_EP_EVD_REQUEST");
	p.request_evd_handle = e->req;
	p.connect_evd_handle = e->conn;
	p.ep_attr.max_recv_dtos = 8;
	CHECK_CODE(dat_ep_modify(ep, DAT_EP_FIELD_REQUEST_EVD_HANDLE |
				 DAT_EP_FIELD_CONNECT_EVD_HANDLE |
				 DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p),
		   DAT_SUCCESS, "modify: the other EVDs and max_recv_dtos");
	dat_ep_query(ep, DAT_EP_FIELD_ALL, &p);
	CHECK(p.ep_state == DAT_EP_STATE_UNCONNECTED &&
	      p.ep_attr.max_recv_dtos == 8 && p.connect_evd_handle == e->conn,
	      "configured: UNCONNECTED, new attribute and EVD reported");
	/* The handles moved: the old state's counts must be exact. */
	other = make_ep(e, NULL);
	dat_ep_free(other);
	dat_ep_free(ep);
}

/* --------------------------------------------- in use, status, reset */

static void test_in_use_status(const struct env *e)
{
	DAT_EP_HANDLE ep = make_ep(e, NULL);
	DAT_EP_STATE s = (DAT_EP_STATE)-1;
	DAT_BOOLEAN in = DAT_FALSE, out = DAT_FALSE;
	DAT_COUNT nb = -1, span = -1;

	CHECK_RET(dat_evd_free(e->recv), DAT_INVALID_STATE,
		  "dat_evd_free of an EP's recv EVD -> INVALID_STATE");
	CHECK_CODE(dat_pz_free(e->pz), DAT_INVALID_STATE | DAT_INVALID_STATE_PZ_IN_USE,
		   "dat_pz_free of an EP's PZ -> PZ_IN_USE");
	CHECK(dat_ep_get_status(ep, &s, &in, &out) == DAT_SUCCESS &&
	      s == DAT_EP_STATE_UNCONNECTED && in == DAT_TRUE && out == DAT_TRUE,
	      "get_status: UNCONNECTED, both directions idle");
	CHECK_CODE(dat_ep_get_status(ep, NULL, NULL, NULL), DAT_SUCCESS,
		   "get_status: every output optional");
	CHECK(dat_ep_recv_query(ep, &nb, &span) == DAT_SUCCESS && nb == 0 &&
	      span == 0, "recv_query: nothing posted");
	CHECK_CODE(dat_ep_set_watermark(ep, -5, 10),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "set_watermark: negative soft watermark -> ARG2");
	CHECK_CODE(dat_ep_set_watermark(ep, DAT_WATERMARK_INFINITE, 10),
		   DAT_SUCCESS, "set_watermark: infinite soft, 10 hard");
	CHECK_CODE(dat_ep_reset(ep), DAT_SUCCESS, "reset of an UNCONNECTED EP");
	CHECK(ep_state(ep) == DAT_EP_STATE_UNCONNECTED, "... stays UNCONNECTED");
	CHECK_CODE(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED,
		   "disconnect of a never connected EP -> INVALID_STATE");
	CHECK_CODE(dat_ep_disconnect(ep, 7), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "disconnect: bad close flags -> ARG2");
	dat_ep_free(ep);
}

static void test_reserved(const struct env *e)
{
	DAT_EP_HANDLE ep = make_ep(e, NULL);
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	DAT_IA_ADDRESS_PTR addr = e->ia_attr.ia_address_ptr;

	CHECK_CODE(dat_rsp_create(e->ia, 63010, ep, e->cr, &rsp), DAT_SUCCESS,
		   "dat_rsp_create on the EP");
	CHECK(ep_state(ep) == DAT_EP_STATE_RESERVED, "EP is RESERVED");
	CHECK_CODE(dat_ep_free(ep), DAT_INVALID_STATE | DAT_INVALID_STATE_EP_RESERVED,
		   "dat_ep_free of a reserved EP -> INVALID_STATE_EP_RESERVED");
	CHECK_CODE(dat_ep_reset(ep), DAT_INVALID_STATE | DAT_INVALID_STATE_EP_RESERVED,
		   "dat_ep_reset of a reserved EP -> INVALID_STATE_EP_RESERVED");
	CHECK_CODE(dat_ep_connect(ep, addr, 45000, DAT_TIMEOUT_INFINITE, 0, NULL,
				  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_RESERVED,
		   "connect of a reserved EP -> INVALID_STATE_EP_RESERVED");
	CHECK_CODE(dat_rsp_free(rsp), DAT_SUCCESS, "dat_rsp_free");
	CHECK(ep_state(ep) == DAT_EP_STATE_UNCONNECTED, "EP back to UNCONNECTED");
	CHECK_CODE(dat_ep_free(ep), DAT_SUCCESS, "then dat_ep_free succeeds");
}

/* ----------------------------------------------------------- connect */

static void test_connect(const struct env *e)
{
	DAT_EP_HANDLE ep = make_ep(e, NULL), dup = make_ep(e, NULL);
	DAT_IA_ADDRESS_PTR addr = e->ia_attr.ia_address_ptr;
	struct sockaddr_in6 six;
	char pd[8] = "hello";

	memset(&six, 0, sizeof(six));
	six.sin6_family = AF_INET6;
#define CONNECT(a, q, t, n, d, qos, f)                                    \
	dat_ep_connect(ep, (a), (q), (t), (n), (d), (qos), (f))
	CHECK_CODE(dat_ep_connect(e->pz, addr, 45000, 1000000, 0, NULL,
				  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "connect: a PZ handle -> INVALID_HANDLE_EP");
	CHECK_CODE(CONNECT(NULL, 45000, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "connect: NULL address -> ARG2");
	CHECK_CODE(CONNECT((DAT_IA_ADDRESS_PTR)&six, 45000, 1000000, 0, NULL,
			   DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNSUPPORTED,
		   "connect: IPv6 address -> INVALID_ADDRESS_UNSUPPORTED");
	CHECK_CODE(CONNECT(addr, 0, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "connect: qualifier 0 -> ARG3");
	CHECK_CODE(CONNECT(addr, 45000, 0, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4,
		   "connect: zero timeout -> ARG4");
	CHECK_CODE(CONNECT(addr, 45000, 1000000, 257, pd, DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "connect: 257 bytes of private data -> ARG5");
	CHECK_CODE(CONNECT(addr, 45000, 1000000, -1, pd, DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "connect: negative private data size -> ARG5");
	CHECK_CODE(CONNECT(addr, 45000, 1000000, 8, NULL, DAT_QOS_BEST_EFFORT, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG6,
		   "connect: NULL private data with a size -> ARG6");
	CHECK_CODE(CONNECT(addr, 45000, 1000000, 0, NULL, DAT_QOS_LOW_LATENCY, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG7,
		   "connect: QoS other than best effort -> ARG7");
	CHECK_CODE(CONNECT(addr, 45000, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT, 0x10),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG8,
		   "connect: unknown connect flag -> ARG8");
	CHECK_CODE(CONNECT(addr, 45000, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT,
			   DAT_CONNECT_MULTIPATH_REQUIRED_FLAG),
		   DAT_MODEL_NOT_SUPPORTED, "connect: multipath required -> MODEL_NOT_SUPPORTED");
	CHECK(ep_state(ep) == DAT_EP_STATE_UNCONNECTED,
	      "... and the EP is unchanged by refused calls");
	/* Nobody listens on 45000: the attempt starts, then fails. */
	CHECK_CODE(CONNECT(addr, 45000, 1000000, 5, pd, DAT_QOS_BEST_EFFORT,
			   DAT_CONNECT_MULTIPATH_REQUESTED_FLAG),
		   DAT_SUCCESS, "connect: every argument valid -> SUCCESS");
	{
		DAT_EVENT ev;
		DAT_COUNT more;

		memset(&ev, 0, sizeof(ev));
		dat_evd_wait(e->conn, 5000000, 1, &ev, &more);
		CHECK(ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE &&
		      ev.event_data.connect_event_data.ep_handle == ep,
		      "... then UNREACHABLE (no listener)");
	}
	CHECK(ep_state(ep) == DAT_EP_STATE_DISCONNECTED, "... EP DISCONNECTED");
	CHECK_CODE(dat_ep_reset(ep), DAT_SUCCESS, "... reset");
#undef CONNECT
	CHECK_CODE(dat_ep_dup_connect(ep, dup, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED,
		   "dup_connect: unconnected dup EP -> INVALID_STATE");
	CHECK_RET(dat_ep_dup_connect(ep, e->pz, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT),
		  DAT_INVALID_HANDLE, "dup_connect: a PZ as dup EP -> INVALID_HANDLE");
	CHECK_CODE(DAT_EP_COMMON_CONNECT(ep, addr, 1000000, 0, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "common_connect: address without a port -> ARG2");
	dat_ep_free(dup);
	dat_ep_free(ep);
}

/* -------------------------------------------------------------- posts */

struct mem {
	char *buf, *buf2;
	DAT_LMR_HANDLE lmr, lmr_ro, lmr_other;
	DAT_LMR_CONTEXT ctx, ctx_ro, ctx_other;
	DAT_PZ_HANDLE pz2;
};

static DAT_RETURN reg(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *addr,
		      DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *lmr,
		      DAT_LMR_CONTEXT *ctx)
{
	DAT_REGION_DESCRIPTION r = { .for_va = addr };
	DAT_RMR_CONTEXT rctx;
	DAT_VLEN rlen;
	DAT_VADDR raddr;

	return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF_LEN, pz, priv,
			      DAT_VA_TYPE_VA, lmr, ctx, &rctx, &rlen, &raddr);
}

static int mem_open(const struct env *e, struct mem *m)
{
	memset(m, 0, sizeof(*m));
	m->buf = calloc(1, BUF_LEN);
	m->buf2 = calloc(1, BUF_LEN);
	dat_pz_create(e->ia, &m->pz2);
	return reg(e->ia, e->pz, m->buf, DAT_MEM_PRIV_ALL_FLAG, &m->lmr, &m->ctx) ||
	       reg(e->ia, e->pz, m->buf2, DAT_MEM_PRIV_LOCAL_READ_FLAG,
		   &m->lmr_ro, &m->ctx_ro) ||
	       reg(e->ia, m->pz2, m->buf2, DAT_MEM_PRIV_ALL_FLAG, &m->lmr_other,
		   &m->ctx_other);
}

static void mem_close(struct mem *m)
{
	dat_lmr_free(m->lmr);
	dat_lmr_free(m->lmr_ro);
	dat_lmr_free(m->lmr_other);
	dat_pz_free(m->pz2);
	free(m->buf);
	free(m->buf2);
}

static DAT_LMR_TRIPLET seg(const void *p, DAT_SEG_LENGTH len, DAT_LMR_CONTEXT c)
{
	DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)p, len, c };
	return t;
}

static void test_post_recv(const struct env *e, const struct mem *m)
{
	DAT_EP_HANDLE ep = make_ep(e, NULL);
	DAT_DTO_COOKIE ck = { .as_64 = 1 };
	DAT_LMR_TRIPLET t;

	t = seg(m->buf, 64, 0xdead0000u);
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_WRITE,
		   "post_recv: unknown lmr_context -> PRIVILEGES_VIOLATION");
	t = seg(m->buf + BUF_LEN - 8, 64, m->ctx);
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "post_recv: segment beyond its LMR -> ARG3");
	t = seg(m->buf2, 64, m->ctx_other);
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_PROTECTION_VIOLATION | DAT_PROTECTION_WRITE,
		   "post_recv: LMR of another PZ -> PROTECTION_VIOLATION");
	t = seg(m->buf2, 64, m->ctx_ro);
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_WRITE,
		   "post_recv: LMR without local write -> PRIVILEGES_VIOLATION");
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_SUPPRESS_FLAG),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "post_recv: suppress flag -> ARG5");
	CHECK_CODE(dat_ep_post_recv(ep, 1, NULL, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "post_recv: NULL iov -> ARG3");
	t = seg(m->buf, 64, m->ctx);
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_SUCCESS, "post_recv before connecting: valid -> SUCCESS");
	t = seg(NULL, 0, 0xdead0000u);
	CHECK_CODE(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG),
		   DAT_SUCCESS,
		   "post_recv: zero-length segment ignores its context");
	{
		DAT_COUNT nb = -1;

		dat_ep_recv_query(ep, &nb, NULL);
		CHECK(nb == 2, "recv_query: both receives outstanding (%d)", nb);
	}
	dat_ep_free(ep);
}

static void test_post_request(const struct env *e, const struct mem *m)
{
	DAT_EP_HANDLE ep = make_ep(e, NULL);
	DAT_DTO_COOKIE ck = { .as_64 = 2 };
	DAT_LMR_TRIPLET t[20];
	DAT_RMR_TRIPLET rt = { 0x1000, 64, 0x100 };
	DAT_EP_PARAM p;

	dat_ep_query(ep, DAT_EP_FIELD_ALL, &p);
	for (int i = 0; i < 20; i++)
		t[i] = seg(m->buf, 8, m->ctx);
	CHECK_CODE(dat_ep_post_send(ep, -1, t, ck, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "post_send: negative segment count -> ARG2");
	CHECK_CODE(dat_ep_post_send(ep, p.ep_attr.max_request_iov + 1, t, ck, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "post_send: more segments than max_request_iov -> ARG2");
	CHECK_CODE(dat_ep_post_send(ep, 1, NULL, ck, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "post_send: NULL iov -> ARG3");
	CHECK_CODE(dat_ep_post_send(ep, 1, t, ck, DAT_COMPLETION_EVD_THRESHOLD_FLAG),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "post_send: EP-only completion flag -> ARG5");
	CHECK_CODE(dat_ep_post_send(ep, 1, t, ck, 0),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED,
		   "post_send on an unconnected EP -> INVALID_STATE_EP_UNCONNECTED");
	CHECK_CODE(dat_ep_post_send(e->pz, 1, t, ck, 0),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP,
		   "post_send: a PZ handle -> INVALID_HANDLE_EP");
	CHECK_CODE(dat_ep_post_rdma_write(ep, 1, t, ck, NULL, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5,
		   "post_rdma_write: NULL remote triplet -> ARG5");
	CHECK_CODE(dat_ep_post_rdma_read(ep, 1, t, ck, &rt,
					 DAT_COMPLETION_SOLICITED_WAIT_FLAG),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG6,
		   "post_rdma_read: solicited flag -> ARG6");
	CHECK_CODE(dat_ep_post_rdma_read(ep, 1, t, ck, &rt, 0),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED,
		   "post_rdma_read on an unconnected EP -> INVALID_STATE");
	CHECK_CODE(DAT_EP_POST_SEND_WITH_INVALIDATE(ep, 1, t, ck, 0, 5, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG6,
		   "post_send_with_invalidate: invalidate flag not a boolean -> ARG6");
	CHECK_CODE(DAT_EP_POST_RDMA_READ_TO_RMR(ep, NULL, ck, &rt, 0),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "post_rdma_read_to_rmr: NULL local triplet -> ARG2");
	dat_ep_free(ep);
}

/* ------------------------------------------------------------------ */

int main(void)
{
	struct env e;
	struct mem m;
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;

	env_open(&e);
	test_create_query(&e);
	test_create_handles(&e);
	test_create_attrs(&e);
	test_foreign_ia(&e);
	test_unconfigured_modify(&e);
	test_in_use_status(&e);
	test_reserved(&e);
	test_connect(&e);
	if (mem_open(&e, &m))
		BAIL("LMR registration failed");
	test_post_recv(&e, &m);
	test_post_request(&e, &m);
	mem_close(&m);
	CHECK_CODE(dat_evd_free(e.conn), DAT_SUCCESS,
		   "every EP freed: its connect EVD can be freed");
	CHECK_CODE(dat_pz_free(e.pz), DAT_SUCCESS,
		   "every EP freed: its PZ can be freed");
	/* Abrupt close with live EPs, one of them reserved by an RSP:
	 * everything must be released (valgrind checks the leaks). */
	if (dat_pz_create(e.ia, &e.pz) != DAT_SUCCESS)
		BAIL("dat_pz_create");
	e.conn = make_evd(e.ia, DAT_EVD_CONNECTION_FLAG);
	make_ep(&e, NULL);
	CHECK_CODE(dat_rsp_create(e.ia, 63011, make_ep(&e, NULL), e.cr, &rsp),
		   DAT_SUCCESS, "an RSP and its reserved EP left for the abrupt close");
	test_close_ia(e.ia);
	return tap_done();
}
