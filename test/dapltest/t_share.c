/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* EVDs shared across IAs of one provider instance (doc/semantics.md).
 *
 * DAT consumers open several IAs on one device and give objects of one
 * IA an EVD of another: dapltest's limit tests with -w 8 create every EP
 * with the connect EVD of the first IA.  The rule checked here: an EP's
 * connect EVD and a Service Point's CR EVD may belong to any IA of the
 * same provider instance; an EP's recv and request EVDs (fed by its QP
 * through an engine CQ of the EVD's IA) and its PZ must be of its own IA.
 * Then what sharing must survive: connection events of two EPs arriving
 * on the other IA's EVDs, the owner IA refusing to free the EVD or to
 * close gracefully while it is used, the owner IA closed abruptly while
 * an EP still posts into the EVD, and the user IA closed first. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "tside.h"

#define QUAL 63071
#define QUAL_NOBODY 63072	/* no listener: connecting fails */

/* The second IA, owner of the shared EVDs. */
struct owner {
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE conn, cr, dto;
};

static void owner_open(struct owner *o)
{
	o->ia = test_open_ia(NULL);
	o->conn = side_evd(o->ia, DAT_EVD_CONNECTION_FLAG, 16);
	o->cr = side_evd(o->ia, DAT_EVD_CR_FLAG, 16);
	o->dto = side_evd(o->ia, DAT_EVD_DTO_FLAG, 16);
}

static DAT_RETURN ep_with(const struct side *a, DAT_EVD_HANDLE rcv,
			  DAT_EVD_HANDLE req, DAT_EVD_HANDLE conn,
			  DAT_EP_HANDLE *ep)
{
	*ep = DAT_HANDLE_NULL;
	return dat_ep_create(a->ia, a->pz, rcv, req, conn, NULL, ep);
}

static void test_scope(struct side *a, const struct owner *o)
{
	DAT_IA_HANDLE ia3 = test_open_ia(NULL);
	DAT_PZ_HANDLE pz3 = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_EP_PARAM p;

	CHECK_CODE(ep_with(a, a->rcv, a->req, o->conn, &a->ep), DAT_SUCCESS,
		   "dat_ep_create: connect EVD of another IA of the provider");
	memset(&p, 0, sizeof(p));
	dat_ep_query(a->ep, DAT_EP_FIELD_ALL, &p);
	CHECK(p.connect_evd_handle == o->conn && p.recv_evd_handle == a->rcv,
	      "dat_ep_query reports the other IA's connect EVD");
	CHECK_CODE(ep_with(a, o->dto, a->req, a->conn, &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_RECV,
		   "recv EVD of another IA -> INVALID_HANDLE_EVD_RECV");
	CHECK_CODE(ep_with(a, a->rcv, o->dto, a->conn, &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST,
		   "request EVD of another IA -> INVALID_HANDLE_EVD_REQUEST");
	dat_pz_create(ia3, &pz3);
	CHECK_CODE(dat_ep_create(a->ia, pz3, a->rcv, a->req, o->conn, NULL, &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ,
		   "PZ of another IA -> INVALID_HANDLE_PZ");
	CHECK_CODE(ep_with(a, a->rcv, a->req, o->cr, &ep),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_CONN,
		   "another IA's EVD without the connection flag -> EVD_CONN");
	p.connect_evd_handle = a->conn;
	CHECK_CODE(dat_ep_modify(a->ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p),
		   DAT_SUCCESS, "dat_ep_modify to the EP's own IA's connect EVD");
	p.connect_evd_handle = o->conn;
	CHECK_CODE(dat_ep_modify(a->ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p),
		   DAT_SUCCESS, "dat_ep_modify back to the other IA's connect EVD");
	dat_ia_close(ia3, DAT_CLOSE_ABRUPT_FLAG);
}

static void test_owner_in_use(const struct side *a, const struct owner *o)
{
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

	CHECK_CODE(dat_evd_free(o->conn),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE,
		   "the owner cannot free a connect EVD another IA's EP uses");
	CHECK_CODE(dat_ia_close(o->ia, DAT_CLOSE_GRACEFUL_FLAG),
		   DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE,
		   "nor close gracefully while its EVDs exist");
	ep_with(a, a->rcv, a->req, a->conn, &ep);
	CHECK_CODE(dat_rsp_create(a->ia, QUAL + 10, ep, o->cr, &rsp),
		   DAT_SUCCESS, "dat_rsp_create: CR EVD of another IA");
	CHECK_CODE(dat_rsp_free(rsp), DAT_SUCCESS, "dat_rsp_free");
	dat_ep_free(ep);
}

/* The next connection event on evd, for either of two EPs. */
static int conn_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER number,
		      DAT_EP_HANDLE *ep)
{
	DAT_EVENT ev = side_wait(evd, TSIDE_WAIT_US);

	*ep = ev.event_data.connect_event_data.ep_handle;
	return ev.event_number == number;
}

/* Both ends on IA a, every connection event on the owner's EVDs. */
static void test_connection(struct side *a, const struct owner *o,
			    DAT_PSP_HANDLE *psp, DAT_EP_HANDLE *passive)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(QUAL),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	DAT_EP_HANDLE e1 = DAT_HANDLE_NULL, e2 = DAT_HANDLE_NULL;
	DAT_EVENT ev;

	CHECK_CODE(dat_psp_create(a->ia, QUAL, o->cr, DAT_PSP_CONSUMER_FLAG,
				  psp), DAT_SUCCESS,
		   "dat_psp_create: CR EVD of another IA");
	ep_with(a, a->rcv, a->req, o->conn, passive);
	CHECK_CODE(dat_ep_connect(a->ep, (DAT_IA_ADDRESS_PTR)&sin, QUAL,
				  TSIDE_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
				  DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS,
		   "dat_ep_connect");
	ev = side_wait(o->cr, TSIDE_WAIT_US);
	CHECK(ev.event_number == DAT_CONNECTION_REQUEST_EVENT &&
	      ev.event_data.cr_arrival_event_data.sp_handle.psp_handle == *psp,
	      "the request arrives on the other IA's CR EVD, naming the PSP");
	CHECK_CODE(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
				 *passive, 0, NULL), DAT_SUCCESS, "dat_cr_accept");
	CHECK(conn_event(o->conn, DAT_CONNECTION_EVENT_ESTABLISHED, &e1) &&
	      conn_event(o->conn, DAT_CONNECTION_EVENT_ESTABLISHED, &e2) &&
	      ((e1 == a->ep && e2 == *passive) || (e1 == *passive && e2 == a->ep)),
	      "ESTABLISHED for both EPs on the other IA's connect EVD");
	CHECK_CODE(dat_ep_disconnect(a->ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		   "dat_ep_disconnect");
	CHECK(conn_event(o->conn, DAT_CONNECTION_EVENT_DISCONNECTED, &e1) &&
	      conn_event(o->conn, DAT_CONNECTION_EVENT_DISCONNECTED, &e2) &&
	      e1 != e2, "DISCONNECTED for both EPs there too");
}

/* The owner goes first: a's EP keeps posting into the orphaned EVD. */
static void test_owner_closes(struct side *a, struct owner *o,
			      DAT_PSP_HANDLE psp, DAT_EP_HANDLE passive)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(QUAL_NOBODY),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	DAT_EP_STATE st = (DAT_EP_STATE)-1;
	DAT_EP_PARAM p;
	int i;

	CHECK_CODE(dat_ia_close(o->ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		   "abrupt close of the owner while another IA uses its EVDs");
	CHECK_CODE(dat_ep_query(a->ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS,
		   "the EP of the other IA is still there");
	CHECK_CODE(dat_psp_free(psp), DAT_SUCCESS, "its PSP frees");
	CHECK_CODE(dat_ep_free(passive), DAT_SUCCESS, "the passive EP frees");
	CHECK_CODE(dat_ep_reset(a->ep), DAT_SUCCESS, "dat_ep_reset");
	CHECK_CODE(dat_ep_connect(a->ep, (DAT_IA_ADDRESS_PTR)&sin, QUAL_NOBODY,
				  TSIDE_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
				  DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS,
		   "dat_ep_connect with the orphaned connect EVD");
	for (i = 0; i < 500 && st != DAT_EP_STATE_DISCONNECTED; i++) {
		usleep(10000);
		dat_ep_get_status(a->ep, &st, NULL, NULL);
	}
	CHECK(st == DAT_EP_STATE_DISCONNECTED,
	      "the failed connection ends (its event goes to the orphan)");
	CHECK_CODE(dat_ep_free(a->ep), DAT_SUCCESS,
		   "dat_ep_free releases the orphaned EVD");
	a->ep = DAT_HANDLE_NULL;
	memset(o, 0, sizeof(*o));
}

/* The user goes first: the owner's EVD is free again. */
static void test_user_closes(void)
{
	struct side b;
	struct owner o;
	DAT_EP_HANDLE ep;

	side_open(&b);
	owner_open(&o);
	CHECK_CODE(ep_with(&b, b.rcv, b.req, o.conn, &ep), DAT_SUCCESS,
		   "another user of another IA's connect EVD");
	side_close(&b);
	CHECK_CODE(dat_evd_free(o.conn), DAT_SUCCESS,
		   "the user IA closed abruptly: the owner frees the EVD");
	dat_evd_free(o.cr);
	dat_evd_free(o.dto);
	CHECK_CODE(dat_ia_close(o.ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS,
		   "and closes gracefully");
}

int main(void)
{
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	DAT_EP_HANDLE passive = DAT_HANDLE_NULL;
	struct side a;
	struct owner o;

	test_watchdog(120);
	side_open(&a);
	owner_open(&o);
	test_scope(&a, &o);
	test_owner_in_use(&a, &o);
	test_connection(&a, &o, &psp, &passive);
	test_owner_closes(&a, &o, psp, passive);
	test_user_closes();
	side_close(&a);
	return tap_done();
}
