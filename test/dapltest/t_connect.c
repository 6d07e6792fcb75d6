/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connections and data transfer through the DAT API, over the registry
 * (libdat2) as a real consumer: two IAs of iw-lo in one process, the
 * server side driven by the main thread or, for the sequential-connection
 * test, by a thread of its own.  Every wait is bounded, and a watchdog
 * bails out rather than hang.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#define WAIT_US   5000000		/* one event: 5 s at most */
#define QUIET_US  300000		/* "no further event" window */
#define BUF_SIZE  (4u << 20)		/* send half, receive half */
#define HALF      (BUF_SIZE / 2)
#define MIB       (1u << 20)
#define PD_LEN    64
#define QBASE     63210		/* test qualifiers: QBASE + n */
#define TSIDE_BUF_SIZE BUF_SIZE
#include "tside.h"

static struct side S, C;	/* server, client */
static DAT_SOCK_ADDR6 srv_addr;

/* ------------------------------------------------------------ helpers */

static int quiet(DAT_EVD_HANDLE evd)
{
	return side_wait(evd, QUIET_US).event_number == 0;
}

static int post_recv(struct side *s, DAT_EP_HANDLE ep, size_t len,
		     uint64_t cookie)
{
	DAT_LMR_TRIPLET t = side_lseg(s, HALF, len);

	return dat_ep_post_recv(ep, 1, &t, side_ck(cookie),
				DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS;
}

/* One DTO completion with the expected cookie, status and length. */
static int dto_ok(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, uint64_t cookie,
		  DAT_DTO_COMPLETION_STATUS st, size_t len)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);
	DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev.event_data.dto_completion_event_data;

	if (ev.event_number != DAT_DTO_COMPLETION_EVENT) {
		printf("#   no DTO completion (event 0x%x)\n", ev.event_number);
		return 0;
	}
	if (d->ep_handle != ep || d->user_cookie.as_64 != cookie ||
	    d->status != st || (st == DAT_DTO_SUCCESS &&
				d->transfered_length != len)) {
		printf("#   DTO: cookie %llu status %d len %llu\n",
		       (unsigned long long)d->user_cookie.as_64, d->status,
		       (unsigned long long)d->transfered_length);
		return 0;
	}
	return 1;
}

/* A connection event of the given number for ep; pd checked if given. */
static int conn_ev(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER num, DAT_EP_HANDLE ep,
		   const unsigned char *pd, DAT_COUNT pd_len)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);
	DAT_CONNECTION_EVENT_DATA *d = &ev.event_data.connect_event_data;

	if (ev.event_number != num || d->ep_handle != ep) {
		printf("#   got event 0x%x, want 0x%x\n", ev.event_number, num);
		return 0;
	}
	if (pd && (d->private_data_size != pd_len ||
		   memcmp(d->private_data, pd, (size_t)pd_len))) {
		printf("#   private data size %d, want %d\n",
		       d->private_data_size, pd_len);
		return 0;
	}
	return 1;
}

/* The CR of the next request on an SP's EVD, or NULL. */
static DAT_CR_HANDLE wait_cr(struct side *s, DAT_CONN_QUAL qual)
{
	DAT_EVENT ev = side_wait(s->cr, WAIT_US);
	DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;

	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    d->conn_qual != qual)
		return DAT_HANDLE_NULL;
	return d->cr_handle;
}

static DAT_RETURN connect_to(DAT_EP_HANDLE ep, DAT_CONN_QUAL q,
			     const unsigned char *pd, DAT_COUNT n)
{
	return dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&srv_addr, q, WAIT_US, n,
			      (DAT_PVOID)pd, DAT_QOS_BEST_EFFORT,
			      DAT_CONNECT_DEFAULT_FLAG);
}

/* Client C.ep connects to PSP qual, server accepts on S.ep; both see
 * ESTABLISHED.  No private data. */
static int establish(DAT_CONN_QUAL q)
{
	DAT_CR_HANDLE cr;

	if (connect_to(C.ep, q, NULL, 0) != DAT_SUCCESS)
		return 0;
	cr = wait_cr(&S, q);
	if (!cr || dat_cr_accept(cr, S.ep, 0, NULL) != DAT_SUCCESS)
		return 0;
	return conn_ev(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, C.ep, NULL, 0) &&
	       conn_ev(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, S.ep, NULL, 0);
}

/* Drain DTO completions (flushes) until quiet. */
static int drain(DAT_EVD_HANDLE evd, DAT_DTO_COMPLETION_STATUS *last)
{
	int n = 0;
	DAT_EVENT ev;

	while ((ev = side_wait(evd, QUIET_US)).event_number ==
	       DAT_DTO_COMPLETION_EVENT) {
		*last = ev.event_data.dto_completion_event_data.status;
		n++;
	}
	return n;
}

static void drain_all(void)
{
	DAT_DTO_COMPLETION_STATUS st;

	drain(C.req, &st);
	drain(C.rcv, &st);
	drain(S.req, &st);
	drain(S.rcv, &st);
}

static int reset_both(void)
{
	return dat_ep_reset(C.ep) == DAT_SUCCESS &&
	       dat_ep_reset(S.ep) == DAT_SUCCESS;
}

/* ------------------------------------------------------------- tests */

static void test_connect_pd(DAT_PSP_HANDLE psp, DAT_CONN_QUAL q)
{
	unsigned char a[PD_LEN], b[PD_LEN];
	DAT_CR_PARAM crp;
	DAT_EVENT ev;
	DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;
	DAT_EP_PARAM epp;
	DAT_COUNT nbufs = -1;
	const struct sockaddr_in *sin;

	side_fill(a, sizeof(a), 1);
	side_fill(b, sizeof(b), 2);
	C.ep = side_ep(&C);
	S.ep = side_ep(&S);
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_UNCONNECTED, "new EP is UNCONNECTED");
	CHECK(post_recv(&C, C.ep, MIB, 900), "post_recv before connect succeeds");
	dat_ep_recv_query(C.ep, &nbufs, NULL);
	CHECK(nbufs == 1, "recv_query counts the pre-posted buffer (%d)", nbufs);
	CHECK_RET(connect_to(C.ep, q, a, PD_LEN), DAT_SUCCESS,
		  "connect with 64 bytes of private data");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ||
	      side_ep_state(C.ep) == DAT_EP_STATE_CONNECTED,
	      "client EP ACTIVE_CONNECTION_PENDING after connect");
	ev = side_wait(S.cr, WAIT_US);
	CHECK(ev.event_number == DAT_CONNECTION_REQUEST_EVENT,
	      "server: CONNECTION_REQUEST event");
	CHECK(d->sp_handle.psp_handle == psp && d->conn_qual == q &&
	      d->local_ia_address_ptr &&
	      d->local_ia_address_ptr->sa_family == AF_INET,
	      "CR event names the PSP, qualifier and local address");
	CHECK_RET(dat_cr_query(d->cr_handle, DAT_CR_FIELD_ALL, &crp), DAT_SUCCESS,
		  "dat_cr_query");
	sin = (const struct sockaddr_in *)crp.remote_ia_address_ptr;
	CHECK(crp.private_data_size == PD_LEN &&
	      !memcmp(crp.private_data, a, PD_LEN),
	      "CR carries the client's 64 bytes of private data");
	CHECK(sin && sin->sin_family == AF_INET &&
	      sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
	      crp.remote_port_qual != 0 && crp.local_ep_handle == DAT_HANDLE_NULL,
	      "CR: remote address 127.0.0.1, a port, no EP for a consumer PSP");
	CHECK(post_recv(&S, S.ep, MIB, 800), "server post_recv before accept");
	CHECK_RET(dat_cr_accept(d->cr_handle, S.ep, PD_LEN, b), DAT_SUCCESS,
		  "accept with 64 bytes of private data");
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_COMPLETION_PENDING ||
	      side_ep_state(S.ep) == DAT_EP_STATE_CONNECTED,
	      "server EP COMPLETION_PENDING after accept");
	CHECK_RET(dat_cr_query(d->cr_handle, DAT_CR_FIELD_ALL, &crp),
		  DAT_INVALID_HANDLE, "the CR handle is gone after accept");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, C.ep, b, PD_LEN),
	      "client ESTABLISHED carries the server's 64 bytes");
	CHECK(conn_ev(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, S.ep, NULL, 0),
	      "server ESTABLISHED");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_CONNECTED &&
	      side_ep_state(S.ep) == DAT_EP_STATE_CONNECTED, "both EPs CONNECTED");
	dat_ep_query(C.ep, DAT_EP_FIELD_ALL, &epp);
	sin = (const struct sockaddr_in *)epp.remote_ia_address_ptr;
	CHECK(sin->sin_family == AF_INET &&
	      sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
	      epp.remote_port_qual == q && epp.local_port_qual != 0,
	      "client query: remote 127.0.0.1 at the qualifier, a local port");
	dat_ep_query(S.ep, DAT_EP_FIELD_ALL, &epp);
	CHECK(epp.local_port_qual == q && epp.remote_port_qual != 0,
	      "server query: local qualifier, remote port");
}

static void one_transfer(struct side *from, struct side *to, size_t n,
			 unsigned seed)
{
	DAT_LMR_TRIPLET t = side_lseg(from, 0, n);
	int ok;

	side_fill(from->buf, n, seed);
	memset(to->buf + HALF, 0, n);
	ok = post_recv(to, to->ep, MIB, 100 + seed);
	ok = ok && dat_ep_post_send(from->ep, 1, &t, side_ck(200 + seed),
				    DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS;
	ok = ok && dto_ok(to->rcv, to->ep, 100 + seed, DAT_DTO_SUCCESS, n);
	ok = ok && dto_ok(from->req, from->ep, 200 + seed, DAT_DTO_SUCCESS, n);
	CHECK(ok && side_same(to->buf + HALF, n, seed),
	      "send/recv %zu bytes: completions and data", n);
}

static void test_sendrecv(void)
{
	static const size_t sizes[] = { 1, 7, 64, 1000, 4096, 65536, 65537,
					300000, MIB };
	DAT_LMR_TRIPLET t = side_lseg(&S, 0, 100);

	/* The client's pre-posted receive takes the first server message. */
	side_fill(S.buf, 100, 9);
	CHECK(dat_ep_post_send(S.ep, 1, &t, side_ck(9), DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS && dto_ok(C.rcv, C.ep, 900, DAT_DTO_SUCCESS, 100) &&
	      dto_ok(S.req, S.ep, 9, DAT_DTO_SUCCESS, 100) &&
	      side_same(C.buf + HALF, 100, 9),
	      "the receive posted before connecting gets the first message");
	/* The server's receive posted before accept. */
	side_fill(C.buf, 33, 8);
	t = side_lseg(&C, 0, 33);
	CHECK(dat_ep_post_send(C.ep, 1, &t, side_ck(8), DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS && dto_ok(S.rcv, S.ep, 800, DAT_DTO_SUCCESS, 33) &&
	      dto_ok(C.req, C.ep, 8, DAT_DTO_SUCCESS, 33),
	      "the receive posted before accept gets the first message");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		one_transfer(&C, &S, sizes[i], (unsigned)i + 10);
	one_transfer(&S, &C, 5000, 30);
}

static void test_rdma(void)
{
	DAT_LMR_TRIPLET t = side_lseg(&C, 0, 256 * 1024), m = side_lseg(&C, HALF - 16, 16);
	DAT_RMR_TRIPLET r = side_rseg(&S, HALF, 256 * 1024);
	int ok;

	/* RDMA Write then Send: the write is visible when the send lands. */
	side_fill(C.buf, 256 * 1024, 40);
	memset(S.buf + HALF, 0, 256 * 1024);
	{
		/* Away from the written range: the send must not cover it. */
		DAT_LMR_TRIPLET rv = side_lseg(&S, HALF + MIB, 64);

		ok = dat_ep_post_recv(S.ep, 1, &rv, side_ck(41), 0) == DAT_SUCCESS;
	}
	ok = ok && dat_ep_post_rdma_write(C.ep, 1, &t, side_ck(42), &r,
					  DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS;
	ok = ok && dat_ep_post_send(C.ep, 1, &m, side_ck(43),
				    DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS;
	ok = ok && dto_ok(C.req, C.ep, 42, DAT_DTO_SUCCESS, 256 * 1024) &&
	     dto_ok(C.req, C.ep, 43, DAT_DTO_SUCCESS, 16) &&
	     dto_ok(S.rcv, S.ep, 41, DAT_DTO_SUCCESS, 16);
	CHECK(ok && side_same(S.buf + HALF, 256 * 1024, 40),
	      "RDMA write 256 KiB then send: data visible at the send");

	/* RDMA Read 64 KiB. */
	side_fill(S.buf + MIB, 65536, 44);
	memset(C.buf + HALF, 0, 65536);
	t = side_lseg(&C, HALF, 65536);
	r = side_rseg(&S, MIB, 65536);
	ok = dat_ep_post_rdma_read(C.ep, 1, &t, side_ck(45), &r,
				   DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
	     dto_ok(C.req, C.ep, 45, DAT_DTO_SUCCESS, 65536);
	CHECK(ok && side_same(C.buf + HALF, 65536, 44), "RDMA read 64 KiB");

	/* Eight outstanding reads of 8 KiB, completing in order. */
	side_fill(S.buf + MIB, 65536, 46);
	memset(C.buf + HALF, 0, 65536);
	ok = 1;
	for (int i = 0; i < 8 && ok; i++) {
		t = side_lseg(&C, HALF + (size_t)i * 8192, 8192);
		r = side_rseg(&S, MIB + (size_t)i * 8192, 8192);
		ok = dat_ep_post_rdma_read(C.ep, 1, &t, side_ck(50 + (uint64_t)i),
					   &r, DAT_COMPLETION_DEFAULT_FLAG) ==
		     DAT_SUCCESS;
	}
	for (int i = 0; i < 8 && ok; i++)
		ok = dto_ok(C.req, C.ep, 50 + (uint64_t)i, DAT_DTO_SUCCESS, 8192);
	CHECK(ok && side_same(C.buf + HALF, 65536, 46),
	      "8 outstanding RDMA reads complete in order with the data");

	/* A suppressed send produces no event; the next one does. */
	t = side_lseg(&C, 0, 10);
	ok = post_recv(&S, S.ep, 64, 60) && post_recv(&S, S.ep, 64, 61) &&
	     dat_ep_post_send(C.ep, 1, &t, side_ck(62), DAT_COMPLETION_SUPPRESS_FLAG) ==
	     DAT_SUCCESS &&
	     dat_ep_post_send(C.ep, 1, &t, side_ck(63), DAT_COMPLETION_DEFAULT_FLAG) ==
	     DAT_SUCCESS &&
	     dto_ok(C.req, C.ep, 63, DAT_DTO_SUCCESS, 10) &&
	     dto_ok(S.rcv, S.ep, 60, DAT_DTO_SUCCESS, 10) &&
	     dto_ok(S.rcv, S.ep, 61, DAT_DTO_SUCCESS, 10);
	CHECK(ok, "SUPPRESS: no event for a successful send, the next reports");
}

/* Disconnect by 'who' (1 client, 2 server, 3 both): exactly one
 * DISCONNECTED each, outstanding receives flushed. */
static void test_disconnect(int who, const char *name)
{
	DAT_DTO_COMPLETION_STATUS st = DAT_DTO_SUCCESS;
	int n;

	CHECK(post_recv(&C, C.ep, 64, 70) && post_recv(&S, S.ep, 64, 71),
	      "%s: receives outstanding", name);
	if (who & 1)
		CHECK_RET(dat_ep_disconnect(C.ep, DAT_CLOSE_GRACEFUL_FLAG),
			  DAT_SUCCESS, "%s: client graceful disconnect", name);
	if (who & 2)
		CHECK_RET(dat_ep_disconnect(S.ep, DAT_CLOSE_GRACEFUL_FLAG),
			  DAT_SUCCESS, "%s: server graceful disconnect", name);
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_DISCONNECTED, C.ep, NULL, 0),
	      "%s: client DISCONNECTED", name);
	CHECK(conn_ev(S.conn, DAT_CONNECTION_EVENT_DISCONNECTED, S.ep, NULL, 0),
	      "%s: server DISCONNECTED", name);
	CHECK(quiet(C.conn) && quiet(S.conn), "%s: no second event", name);
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_DISCONNECTED &&
	      side_ep_state(S.ep) == DAT_EP_STATE_DISCONNECTED,
	      "%s: both EPs DISCONNECTED", name);
	n = drain(C.rcv, &st);
	CHECK(n == 1 && st == DAT_DTO_ERR_FLUSHED,
	      "%s: client receive flushed (%d, status %d)", name, n, st);
	n = drain(S.rcv, &st);
	CHECK(n >= 1 && st == DAT_DTO_ERR_FLUSHED,
	      "%s: server receives flushed (%d)", name, n);
	CHECK_RET(dat_ep_post_recv(C.ep, 0, NULL, side_ck(1), 0), DAT_SUCCESS,
		  "%s: post_recv on a disconnected EP is accepted", name);
	n = drain(C.rcv, &st);
	CHECK(n == 1 && st == DAT_DTO_ERR_FLUSHED,
	      "%s: ...and flushed at once", name);
}

static void test_reconnects(DAT_CONN_QUAL q)
{
	CHECK(reset_both(), "ep_reset after DISCONNECTED");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_UNCONNECTED, "reset EP is UNCONNECTED");
	CHECK(establish(q), "reconnect after reset");
	test_disconnect(2, "server-initiated");
	CHECK(reset_both() && establish(q), "reconnect again");
	test_disconnect(3, "both at once");
	CHECK(reset_both() && establish(q), "reconnect for abrupt");
	CHECK_RET(dat_ep_disconnect(C.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "abrupt disconnect");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_DISCONNECTED,
	      "abrupt: DISCONNECTED on return");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_DISCONNECTED, C.ep, NULL, 0) &&
	      quiet(C.conn), "abrupt: exactly one DISCONNECTED locally");
	{
		DAT_EVENT ev = side_wait(S.conn, WAIT_US);

		CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
		      "abrupt: the peer sees DISCONNECTED (0x%x)",
		      ev.event_number);
	}
	CHECK(quiet(S.conn), "abrupt: one event at the peer");
	drain_all();
	CHECK(reset_both(), "reset after abrupt");
}

static void test_reject(DAT_CONN_QUAL q)
{
	unsigned char c[32];
	DAT_CR_HANDLE cr;

	side_fill(c, sizeof(c), 3);
	CHECK_RET(connect_to(C.ep, q, NULL, 0), DAT_SUCCESS, "connect to reject");
	cr = wait_cr(&S, q);
	CHECK(cr != DAT_HANDLE_NULL, "request to reject arrived");
	CHECK_RET(dat_cr_reject(cr, sizeof(c), c), DAT_SUCCESS,
		  "reject with 32 bytes of private data");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_PEER_REJECTED, C.ep, c,
		      sizeof(c)), "client PEER_REJECTED with the data");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_DISCONNECTED,
	      "rejected EP is DISCONNECTED");
	CHECK(dat_ep_reset(C.ep) == DAT_SUCCESS, "reset after reject");

	CHECK_RET(connect_to(C.ep, QBASE + 99, NULL, 0), DAT_SUCCESS,
		  "connect to a qualifier nobody listens on");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_UNREACHABLE, C.ep, NULL, 0),
	      "...UNREACHABLE");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_DISCONNECTED && quiet(C.conn),
	      "...EP DISCONNECTED, one event");
	CHECK(dat_ep_reset(C.ep) == DAT_SUCCESS, "reset after UNREACHABLE");
}

static void test_big_qual(void)
{
	DAT_PSP_HANDLE p, p2;
	DAT_CONN_QUAL any = 0;

	CHECK_RET(dat_psp_create(S.ia, 70000, S.cr, DAT_PSP_CONSUMER_FLAG, &p),
		  DAT_SUCCESS, "PSP on qualifier 70000");
	CHECK_RET(dat_psp_create(S.ia, 70000, S.cr, DAT_PSP_CONSUMER_FLAG, &p2),
		  DAT_CONN_QUAL_IN_USE, "a second PSP on 70000 -> CONN_QUAL_IN_USE");
	CHECK(establish(70000), "connect and accept on qualifier 70000");
	test_disconnect(1, "q70000");
	CHECK(reset_both(), "reset after q70000");
	dat_psp_free(p);
	CHECK_RET(dat_psp_create_any(S.ia, &any, S.cr, DAT_PSP_CONSUMER_FLAG, &p),
		  DAT_SUCCESS, "psp_create_any");
	CHECK(any > 0 && establish(any), "connect to the any-qualifier %llu",
	      (unsigned long long)any);
	test_disconnect(1, "any");
	CHECK(reset_both(), "reset after any");
	dat_psp_free(p);
}

static void test_rsp(void)
{
	DAT_RSP_HANDLE rsp;
	DAT_CR_PARAM crp;
	DAT_CR_HANDLE cr;
	DAT_CONN_QUAL q = QBASE + 3;

	CHECK_RET(dat_rsp_create(S.ia, q, S.ep, S.cr, &rsp), DAT_SUCCESS,
		  "RSP with the server EP");
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_RESERVED, "EP RESERVED");
	CHECK_RET(connect_to(C.ep, q, NULL, 0), DAT_SUCCESS, "connect to RSP");
	cr = wait_cr(&S, q);
	CHECK(cr && dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp) == DAT_SUCCESS &&
	      crp.local_ep_handle == S.ep, "RSP CR names the reserved EP");
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
	      "reserved EP PASSIVE_CONNECTION_PENDING");
	CHECK_RET(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL), DAT_SUCCESS,
		  "accept with the CR's own EP");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, C.ep, NULL, 0) &&
	      conn_ev(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, S.ep, NULL, 0),
	      "RSP connection ESTABLISHED");
	CHECK_RET(dat_rsp_free(rsp), DAT_SUCCESS, "rsp_free after use");
	one_transfer(&C, &S, 1234, 80);
	test_disconnect(1, "rsp");
	CHECK(reset_both(), "reset after rsp");
}

static void test_provider_ep(void)
{
	DAT_PSP_HANDLE psp;
	DAT_CR_PARAM crp;
	DAT_EP_PARAM p;
	DAT_CR_HANDLE cr;
	DAT_EP_HANDLE pep;
	DAT_CONN_QUAL q = QBASE + 4;

	CHECK_RET(dat_psp_create(S.ia, q, S.cr, DAT_PSP_PROVIDER_FLAG, &psp),
		  DAT_SUCCESS, "provider PSP");
	CHECK_RET(connect_to(C.ep, q, NULL, 0), DAT_SUCCESS, "connect to it");
	cr = wait_cr(&S, q);
	CHECK(cr && dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp) == DAT_SUCCESS &&
	      crp.local_ep_handle != DAT_HANDLE_NULL, "CR has a provider EP");
	pep = crp.local_ep_handle;
	CHECK(side_ep_state(pep) == DAT_EP_STATE_UNCONFIGURED_PASSIVE ||
	      side_ep_state(pep) == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING,
	      "provider EP waits for configuration");
	memset(&p, 0, sizeof(p));
	p.pz_handle = S.pz;
	p.recv_evd_handle = S.rcv;
	p.request_evd_handle = S.req;
	p.connect_evd_handle = S.conn;
	CHECK_RET(dat_ep_modify(pep, DAT_EP_FIELD_PZ_HANDLE |
				DAT_EP_FIELD_RECV_EVD_HANDLE |
				DAT_EP_FIELD_REQUEST_EVD_HANDLE |
				DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p),
		  DAT_SUCCESS, "configure the provider EP");
	CHECK(post_recv(&S, pep, MIB, 90), "post_recv on the provider EP");
	CHECK_RET(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, NULL), DAT_SUCCESS,
		  "accept on the provider EP");
	CHECK(conn_ev(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, C.ep, NULL, 0) &&
	      conn_ev(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, pep, NULL, 0),
	      "provider-EP connection ESTABLISHED");
	side_fill(C.buf, 77, 91);
	{
		DAT_LMR_TRIPLET t = side_lseg(&C, 0, 77);

		CHECK(dat_ep_post_send(C.ep, 1, &t, side_ck(92), 0) == DAT_SUCCESS &&
		      dto_ok(S.rcv, pep, 90, DAT_DTO_SUCCESS, 77) &&
		      dto_ok(C.req, C.ep, 92, DAT_DTO_SUCCESS, 77),
		      "data over the provider EP");
	}
	/* dat_ep_free on a connected EP: no event for it afterwards. */
	CHECK_RET(dat_ep_free(pep), DAT_SUCCESS, "free a connected EP");
	CHECK(quiet(S.conn), "no event after freeing it");
	{
		DAT_EVENT ev = side_wait(C.conn, WAIT_US);

		CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
		      "the peer of a freed EP sees the end (0x%x)",
		      ev.event_number);
	}
	drain_all();
	CHECK(dat_ep_reset(C.ep) == DAT_SUCCESS, "client reset");
	dat_psp_free(psp);
}

/* ------------------------------------------- sequential, with a thread */

#define SEQ_N 20

static void *seq_server(void *arg)
{
	DAT_CONN_QUAL q = *(DAT_CONN_QUAL *)arg;
	intptr_t ok = 0;

	for (int i = 0; i < SEQ_N; i++) {
		DAT_CR_HANDLE cr = wait_cr(&S, q);
		DAT_EP_HANDLE ep = side_ep(&S);

		if (!cr || dat_cr_accept(cr, ep, 0, NULL) != DAT_SUCCESS)
			break;
		if (!conn_ev(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, ep, NULL,
			     0) ||
		    !conn_ev(S.conn, DAT_CONNECTION_EVENT_DISCONNECTED, ep,
			     NULL, 0))
			break;
		if (dat_ep_free(ep) != DAT_SUCCESS)
			break;
		ok++;
	}
	return (void *)ok;
}

static void test_sequential(DAT_CONN_QUAL q)
{
	pthread_t th;
	void *srv_ok = NULL;
	int ok = 0;

	pthread_create(&th, NULL, seq_server, &q);
	for (int i = 0; i < SEQ_N; i++) {
		DAT_EP_HANDLE ep = side_ep(&C);

		if (connect_to(ep, q, NULL, 0) != DAT_SUCCESS ||
		    !conn_ev(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, ep, NULL,
			     0) ||
		    dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS ||
		    !conn_ev(C.conn, DAT_CONNECTION_EVENT_DISCONNECTED, ep,
			     NULL, 0)) {
			dat_ep_free(ep);
			break;
		}
		dat_ep_free(ep);
		ok++;
	}
	pthread_join(th, &srv_ok);
	CHECK(ok == SEQ_N && (intptr_t)srv_ok == SEQ_N,
	      "%d sequential connections on one PSP (client %d, server %ld)",
	      SEQ_N, ok, (long)(intptr_t)srv_ok);
}

/* An IA closed abruptly with a connection up: returns, and the peer
 * sees the end. */
static void test_abrupt_close(void)
{
	struct side a, b;
	DAT_PSP_HANDLE psp;
	DAT_CONN_QUAL q = QBASE + 6;
	DAT_CR_HANDLE cr;
	DAT_EVENT ev;

	side_open(&a);
	side_open(&b);
	a.ep = side_ep(&a);
	b.ep = side_ep(&b);
	dat_psp_create(b.ia, q, b.cr, DAT_PSP_CONSUMER_FLAG, &psp);
	post_recv(&a, a.ep, 64, 1);
	dat_ep_connect(a.ep, (DAT_IA_ADDRESS_PTR)&srv_addr, q, WAIT_US, 0, NULL,
		       DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
	cr = wait_cr(&b, q);
	CHECK(cr && dat_cr_accept(cr, b.ep, 0, NULL) == DAT_SUCCESS &&
	      conn_ev(a.conn, DAT_CONNECTION_EVENT_ESTABLISHED, a.ep, NULL, 0),
	      "abrupt close: connection up");
	CHECK_RET(dat_ia_close(a.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "dat_ia_close(abrupt) with a connection up");
	ev = side_wait(b.conn, WAIT_US);
	if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
		ev = side_wait(b.conn, WAIT_US);
	CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
	      "the peer of a closed IA sees the end (0x%x)", ev.event_number);
	/* A pending request, then close the listening IA abruptly too. */
	CHECK_RET(dat_ia_close(b.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "dat_ia_close(abrupt) of the peer");
	free(a.buf);
	free(b.buf);
}

int main(void)
{
	DAT_IA_ATTR attr;
	DAT_PSP_HANDLE psp;
	DAT_CONN_QUAL q = QBASE + 1;

	test_watchdog(240);
	side_open(&S);
	side_open(&C);
	if (dat_ia_query(S.ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0,
			 NULL) != DAT_SUCCESS)
		BAIL("dat_ia_query");
	memcpy(&srv_addr, attr.ia_address_ptr, sizeof(struct sockaddr_in));
	CHECK_RET(dat_psp_create(S.ia, q, S.cr, DAT_PSP_CONSUMER_FLAG, &psp),
		  DAT_SUCCESS, "PSP on qualifier %d", (int)q);
	test_connect_pd(psp, q);
	test_sendrecv();
	test_rdma();
	test_disconnect(1, "client-initiated");
	test_reconnects(q);
	test_reject(q);
	test_big_qual();
	test_rsp();
	test_provider_ep();
	test_sequential(q);
	CHECK_RET(dat_ep_free(C.ep), DAT_SUCCESS, "free client EP");
	CHECK_RET(dat_ep_free(S.ep), DAT_SUCCESS, "free server EP");
	CHECK_RET(dat_psp_free(psp), DAT_SUCCESS, "free PSP");
	test_abrupt_close();
	test_close_ia(C.ia);
	test_close_ia(S.ia);
	free(C.buf);
	free(S.buf);
	return tap_done();
}
