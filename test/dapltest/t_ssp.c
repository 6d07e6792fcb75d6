/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket Service Points (DAT iWARP extension): every call, return code and
 * event, with the EP state, the SSP state and the socket's fate checked
 * after each.  Server and client are two IAs of one process; the sockets
 * are plain TCP over loopback made by the test. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "tside.h"
#include <dat2/dat_iw_extensions.h>

#define PD_LEN 64

static struct side S, C;	/* server (SSP), client (socket_connect) */

/* ------------------------------------------------------------ sockets */

static int listener_on(const char *addr, uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, addr, &a.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		BAIL("listener on %s: %s", addr, strerror(errno));
	*port = ntohs(a.sin_port);
	return fd;
}

/* A connected pair of TCP sockets over addr: *c the client end, *s the
 * server end. */
static void tcp_pair_on(const char *addr, int *c, int *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	uint16_t port;
	int l = listener_on(addr, &port);

	inet_pton(AF_INET, addr, &a.sin_addr);
	a.sin_port = htons(port);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (*c < 0 || connect(*c, (struct sockaddr *)&a, sizeof(a)) < 0)
		BAIL("connect: %s", strerror(errno));
	*s = accept(l, NULL, NULL);
	if (*s < 0)
		BAIL("accept: %s", strerror(errno));
	close(l);
}

static void tcp_pair(int *c, int *s)
{
	tcp_pair_on("127.0.0.1", c, s);
}

static int fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static int fd_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* Read exactly len bytes within a second. */
static int read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 1000) <= 0)
			return 0;
		n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		if (n <= 0)
			return 0;
		got += (size_t)n;
	}
	return 1;
}

/* The stream still carries bytes both ways. */
static int stream_works(int a, int b)
{
	char m[5];

	return send(a, "ping", 4, 0) == 4 && read_all(b, m, 4) &&
	       memcmp(m, "ping", 4) == 0 && send(b, "pong", 4, 0) == 4 &&
	       read_all(a, m, 4) && memcmp(m, "pong", 4) == 0;
}

/* A peer close is seen as EOF within a second. */
static int sees_eof(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, 1000) == 1 && recv(fd, &c, 1, 0) <= 0;
}

/* A local IPv4 address that is not on the loopback interface, or NULL. */
static const char *other_address(void)
{
	static char buf[INET_ADDRSTRLEN];
	struct ifaddrs *ifa, *i;
	const char *found = NULL;

	if (getifaddrs(&ifa) < 0)
		return NULL;
	for (i = ifa; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *sin =
			(const struct sockaddr_in *)i->ifa_addr;

		if (!sin || sin->sin_family != AF_INET ||
		    (ntohl(sin->sin_addr.s_addr) >> 24) == 127)
			continue;
		inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
		found = buf;
	}
	freeifaddrs(ifa);
	return found;
}

/* ------------------------------------------------------------- SSPs */

static DAT_IW_SSP_STATE ssp_state(DAT_IW_SSP_HANDLE ssp)
{
	DAT_IW_SSP_PARAM p;

	memset(&p, 0xff, sizeof(p));
	if (dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_SSP_STATE, &p) != DAT_SUCCESS)
		return (DAT_IW_SSP_STATE)-1;
	return p.ssp_state;
}

static int is_socket_down(const DAT_EVENT *ev, DAT_IW_SSP_HANDLE ssp, int fd)
{
	const DAT_IW_SSP_EVENT_DATA *d = DAT_IW_SSP_EVENT_DATA_PTR(ev);

	return DAT_IW_EVENT_IS_SOCKET_DOWN(ev) && d->ssp_handle == ssp &&
	       d->socket_id == fd;
}

static DAT_CR_HANDLE wait_cr(DAT_EVD_HANDLE evd, DAT_IW_SSP_HANDLE ssp)
{
	DAT_EVENT ev = side_wait(evd, TSIDE_WAIT_US);

	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    ev.event_data.cr_arrival_event_data.sp_handle.psp_handle != ssp)
		return DAT_HANDLE_NULL;
	return ev.event_data.cr_arrival_event_data.cr_handle;
}

static DAT_EVENT_NUMBER conn_event(struct side *s, DAT_COUNT *pd_size,
				   void *pd)
{
	DAT_EVENT ev = side_wait(s->conn, TSIDE_WAIT_US);
	const DAT_CONNECTION_EVENT_DATA *d = &ev.event_data.connect_event_data;

	if (pd_size) {
		*pd_size = d->private_data_size;
		if (pd && d->private_data_size > 0)
			memcpy(pd, d->private_data, (size_t)d->private_data_size);
	}
	return ev.event_number;
}

/* ----------------------------------------------------------- cases */

static void test_create_errors(void)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = side_ep(&S);
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	int p[2], u, c, s, closed;

	if (pipe(p) < 0)
		BAIL("pipe");
	u = socket(AF_INET, SOCK_DGRAM, 0);
	closed = dup(p[0]);
	close(closed);
	tcp_pair(&c, &s);
	CHECK_RET(dat_iw_ssp_create(S.ia, p[0], ep, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_PARAMETER, "ssp_create: a pipe -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_ssp_create(S.ia, u, ep, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_STATE, "ssp_create: a UDP socket on a tcp IA -> DAT_INVALID_STATE");
	CHECK_RET(dat_iw_ssp_create(S.ia, closed, ep, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_PARAMETER, "ssp_create: a closed fd -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_ssp_create(S.ia, -1, ep, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_PARAMETER, "ssp_create: fd -1 -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, S.pz, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_HANDLE, "ssp_create: a PZ as EP -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.conn, NULL, 0, &ssp),
		  DAT_INVALID_HANDLE, "ssp_create: an EVD without CR flag -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.pz, NULL, 0, &ssp),
		  DAT_INVALID_HANDLE, "ssp_create: a PZ as EVD -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_iw_ssp_create(S.pz, s, ep, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_HANDLE, "ssp_create: a PZ as IA -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.cr, NULL, -1, &ssp),
		  DAT_INVALID_PARAMETER, "ssp_create: negative message length -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.cr, NULL, 4, &ssp),
		  DAT_INVALID_PARAMETER, "ssp_create: NULL message with a length -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.cr, NULL, 0, NULL),
		  DAT_INVALID_PARAMETER, "ssp_create: NULL handle pointer -> DAT_INVALID_PARAMETER");
	CHECK(side_ep_state(ep) == DAT_EP_STATE_UNCONNECTED,
	      "after the refusals the EP is still UNCONNECTED");
	CHECK(stream_works(c, s), "after the refusals the socket is untouched");

	CHECK_RET(dat_rsp_create(S.ia, 64601, ep, S.cr, &rsp), DAT_SUCCESS,
		  "an RSP reserves the EP");
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.cr, NULL, 0, &ssp),
		  DAT_INVALID_STATE, "ssp_create: an EP that is not idle -> DAT_INVALID_STATE");
	dat_rsp_free(rsp);

	const char *other = other_address();
	if (other) {
		int oc, os;

		tcp_pair_on(other, &oc, &os);
		CHECK_RET(dat_iw_ssp_create(S.ia, os, ep, S.cr, NULL, 0, &ssp),
			  DAT_INVALID_STATE,
			  "ssp_create: a socket on %s (not this IA's interface) -> DAT_INVALID_STATE",
			  other);
		CHECK(stream_works(oc, os), "that socket is untouched");
		close(oc);
		close(os);
	} else {
		printf("ok %d # SKIP no non-loopback IPv4 address\n", ++tap_count);
		printf("ok %d # SKIP no non-loopback IPv4 address\n", ++tap_count);
	}
	dat_ep_free(ep);
	close(p[0]);
	close(p[1]);
	close(u);
	close(c);
	close(s);
}

static void test_query_and_free(void)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL, first;
	DAT_EP_HANDLE ep = side_ep(&S);
	DAT_IW_SSP_PARAM p;
	DAT_HANDLE_TYPE t;
	int c, s, reused = 0;

	tcp_pair(&c, &s);
	CHECK_RET(dat_iw_ssp_create(S.ia, s, ep, S.cr, NULL, 0, &ssp),
		  DAT_SUCCESS, "ssp_create on a connected socket");
	CHECK(side_ep_state(ep) == DAT_EP_STATE_RESERVED, "the EP is RESERVED");
	CHECK_RET(dat_get_handle_type(ssp, &t), DAT_SUCCESS, "dat_get_handle_type on the SSP");
	CHECK(t == (DAT_HANDLE_TYPE)DAT_IW_HANDLE_TYPE_SSP, "its type is DAT_IW_HANDLE_TYPE_SSP");
	memset(&p, 0, sizeof(p));
	CHECK_RET(dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_ALL, &p), DAT_SUCCESS,
		  "ssp_query(all)");
	CHECK(p.ia_handle == S.ia && p.socket_id == s && p.evd_handle == S.cr &&
	      p.ep_handle == ep && p.ssp_state == DAT_IW_SSP_STATE_OPERATIONAL,
	      "query: the consumer's IA handle, socket, EVD, EP, OPERATIONAL");
	CHECK_RET(dat_iw_ssp_query(ssp, 0x20, &p), DAT_INVALID_PARAMETER,
		  "ssp_query: mask bit outside FIELD_ALL -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_ALL, NULL),
		  DAT_INVALID_PARAMETER, "ssp_query: NULL param -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_ep_free(ep), DAT_INVALID_STATE,
		  "dat_ep_free of the SSP's EP -> DAT_INVALID_STATE");
	/* no request: free hands the socket back */
	first = ssp;
	CHECK_RET(dat_iw_ssp_free(ssp), DAT_SUCCESS, "ssp_free");
	CHECK(side_ep_state(ep) == DAT_EP_STATE_UNCONNECTED,
	      "after ssp_free the EP reverts to UNCONNECTED");
	CHECK(fd_open(s) && fd_blocking(s), "the socket is back, open and blocking");
	CHECK(stream_works(c, s), "the socket still carries the stream");
	CHECK_RET(dat_iw_ssp_free(ssp), DAT_INVALID_HANDLE, "second ssp_free -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_ALL, &p), DAT_INVALID_HANDLE,
		  "query after free -> DAT_INVALID_HANDLE");
	for (int i = 0; i < 50; i++) {
		DAT_IW_SSP_HANDLE h;

		if (dat_iw_ssp_create(S.ia, s, DAT_HANDLE_NULL, S.cr, NULL, 0,
				      &h) != DAT_SUCCESS)
			break;
		reused += h == first;
		dat_iw_ssp_free(h);
	}
	CHECK(reused == 0, "a freed SSP handle is not reused by the next 50 SSPs");
	CHECK_RET(dat_iw_ssp_free(first), DAT_INVALID_HANDLE,
		  "the old handle stays invalid after other objects were made");
	CHECK(stream_works(c, s), "50 SSP create/free cycles leave the stream intact");
	dat_ep_free(ep);
	close(c);
	close(s);
}

static void test_socket_down(void)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_IW_SSP_PARAM p;
	DAT_EVENT ev;
	int c, s, u = socket(AF_INET, SOCK_STREAM, 0);

	CHECK_RET(dat_iw_ssp_create(S.ia, u, DAT_HANDLE_NULL, S.cr, NULL, 0, &ssp),
		  DAT_SUCCESS, "ssp_create on an unconnected TCP socket succeeds");
	ev = side_wait(S.cr, TSIDE_WAIT_US);
	CHECK(is_socket_down(&ev, ssp, u), "... and gives DAT_CONNECTION_EVENT_SOCKET_DOWN");
	CHECK(ssp_state(ssp) == DAT_IW_SSP_STATE_NON_OPERATIONAL, "... the SSP is NON_OPERATIONAL");
	dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_SOCKET_ID, &p);
	CHECK(p.socket_id == -1, "a non-operational SSP has no socket");
	CHECK_RET(dat_iw_ssp_free(ssp), DAT_SUCCESS, "ssp_free");
	CHECK(fd_open(u), "the unconnected socket stays the consumer's (open)");
	close(u);

	tcp_pair(&c, &s);
	CHECK_RET(dat_iw_ssp_create(S.ia, s, DAT_HANDLE_NULL, S.cr, NULL, 0, &ssp),
		  DAT_SUCCESS, "ssp_create on a connected socket");
	close(c);
	ev = side_wait(S.cr, TSIDE_WAIT_US);
	CHECK(is_socket_down(&ev, ssp, s), "the peer closes first -> SOCKET_DOWN");
	CHECK(ssp_state(ssp) == DAT_IW_SSP_STATE_NON_OPERATIONAL, "the SSP is NON_OPERATIONAL");
	CHECK_RET(dat_iw_ssp_free(ssp), DAT_SUCCESS, "ssp_free");
	CHECK(fd_open(s), "the dead socket is left for the consumer to close");
	close(s);
}

static void test_not_mpa(void)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	const char junk[] = "GET / HTTP/1.0\r\n\r\n";
	char back[sizeof(junk)];
	DAT_EVENT ev;
	int c, s;

	tcp_pair(&c, &s);
	CHECK_RET(dat_iw_ssp_create(S.ia, s, DAT_HANDLE_NULL, S.cr, NULL, 0, &ssp),
		  DAT_SUCCESS, "ssp_create");
	CHECK(send(c, junk, sizeof(junk), 0) == (ssize_t)sizeof(junk), "the peer sends non-MPA bytes");
	ev = side_wait(S.cr, TSIDE_WAIT_US);
	CHECK(ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED &&
	      DAT_IW_SSP_EVENT_DATA_PTR(&ev)->ssp_handle == ssp,
	      "non-MPA bytes -> DAT_CONNECTION_EVENT_NON_PEER_REJECTED on the SSP's EVD");
	CHECK(ssp_state(ssp) == DAT_IW_SSP_STATE_NON_OPERATIONAL, "the SSP is NON_OPERATIONAL");
	CHECK_RET(dat_iw_ssp_free(ssp), DAT_SUCCESS, "ssp_free");
	CHECK(read_all(s, back, sizeof(back)) && memcmp(back, junk, sizeof(junk)) == 0,
	      "no byte was consumed: the consumer reads them all");
	CHECK(stream_works(c, s), "and the stream goes on");
	close(c);
	close(s);
}

/* A whole upgrade: final streaming message, request, accept, data. */
struct upgrade {
	int c, s;
	DAT_IW_SSP_HANDLE ssp;
	int use_provider_ep;
};

static void test_upgrade(int provider_ep)
{
	unsigned char pd[PD_LEN], got[256], reply[PD_LEN];
	const char final_msg[] = "RDMA-GO";
	char fm[sizeof(final_msg)];
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_CR_HANDLE cr;
	DAT_CR_PARAM crp;
	DAT_EP_PARAM epp;
	DAT_COUNT got_size = 0;
	int c, s, one = 1, nd = 0;
	socklen_t ol = sizeof(nd);

	for (int i = 0; i < PD_LEN; i++) {
		pd[i] = (unsigned char)(i * 7 + 1);
		reply[i] = (unsigned char)(255 - i);
	}
	tcp_pair(&c, &s);
	setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	S.ep = provider_ep ? DAT_HANDLE_NULL : side_ep(&S);
	C.ep = side_ep(&C);
	CHECK_RET(dat_iw_ssp_create(S.ia, s, S.ep, S.cr, final_msg,
				    (DAT_COUNT)sizeof(final_msg), &ssp),
		  DAT_SUCCESS, "%s: ssp_create with a final streaming message",
		  provider_ep ? "provider EP" : "consumer EP");
	CHECK(read_all(c, fm, sizeof(fm)) && memcmp(fm, final_msg, sizeof(fm)) == 0,
	      "the peer reads the final streaming message first");
	CHECK_RET(dat_iw_socket_connect(C.ep, c, 5000000, PD_LEN, pd), DAT_SUCCESS,
		  "socket_connect with 64 bytes of private data");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
	      "the client EP is ACTIVE_CONNECTION_PENDING");
	cr = wait_cr(S.cr, ssp);
	CHECK(cr != DAT_HANDLE_NULL, "DAT_CONNECTION_REQUEST_EVENT on the SSP's EVD");
	if (!cr)
		BAIL("no connection request");
	CHECK(ssp_state(ssp) == DAT_IW_SSP_STATE_NON_OPERATIONAL,
	      "the SSP is NON_OPERATIONAL once it produced its request");
	memset(&crp, 0, sizeof(crp));
	dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp);
	CHECK(crp.private_data_size == PD_LEN && memcmp(crp.private_data, pd, PD_LEN) == 0,
	      "the CR carries the peer's private data");
	CHECK(((struct sockaddr_in *)crp.remote_ia_address_ptr)->sin_addr.s_addr ==
	      htonl(INADDR_LOOPBACK), "the CR carries the peer's address");
	if (provider_ep) {
		DAT_EP_PARAM mp;

		CHECK(crp.local_ep_handle != DAT_HANDLE_NULL, "the CR names a provider-created EP");
		S.ep = crp.local_ep_handle;
		memset(&mp, 0, sizeof(mp));
		mp.pz_handle = S.pz;
		mp.recv_evd_handle = S.rcv;
		mp.request_evd_handle = S.req;
		mp.connect_evd_handle = S.conn;
		CHECK_RET(dat_ep_modify(S.ep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
					DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE, &mp),
			  DAT_SUCCESS, "the consumer configures the provider's EP");
	} else {
		CHECK(crp.local_ep_handle == S.ep, "the CR names the SSP's EP");
	}
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
	      "the server EP is PASSIVE_CONNECTION_PENDING");
	CHECK_RET(side_recv(&S, 0, 4096, 1), DAT_SUCCESS, "server posts a receive");
	CHECK_RET(side_recv(&C, 0, 4096, 2), DAT_SUCCESS, "client posts a receive");
	CHECK_RET(dat_cr_accept(cr, provider_ep ? S.ep : DAT_HANDLE_NULL, PD_LEN, reply),
		  DAT_SUCCESS, "dat_cr_accept with private data");
	CHECK(conn_event(&S, NULL, NULL) == DAT_CONNECTION_EVENT_ESTABLISHED,
	      "server: DAT_CONNECTION_EVENT_ESTABLISHED");
	CHECK(conn_event(&C, &got_size, got) == DAT_CONNECTION_EVENT_ESTABLISHED &&
	      got_size == PD_LEN && memcmp(got, reply, PD_LEN) == 0,
	      "client: ESTABLISHED with the accepter's private data");
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_CONNECTED &&
	      side_ep_state(C.ep) == DAT_EP_STATE_CONNECTED, "both EPs CONNECTED");
	memset(&epp, 0, sizeof(epp));
	dat_ep_query(C.ep, DAT_EP_FIELD_ALL, &epp);
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	getpeername(c, (struct sockaddr *)&peer, &pl);
	CHECK(((struct sockaddr_in *)epp.remote_ia_address_ptr)->sin_addr.s_addr ==
	      peer.sin_addr.s_addr && epp.remote_port_qual == ntohs(peer.sin_port),
	      "the client EP inherits the socket's remote address and port");
	CHECK(epp.ep_attr.max_rdma_read_in == 0 && epp.ep_attr.max_rdma_read_out == 0,
	      "RDMA read depths the consumer left open are 0");
	CHECK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &nd, &ol) == 0 && nd,
	      "TCP_NODELAY is set on the adopted socket");
	nd = 0;
	CHECK(getsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &nd, &ol) == 0 && nd,
	      "SO_KEEPALIVE is kept");
	for (int i = 0; i < 4096; i++)
		C.buf[65536 + i] = (unsigned char)(i ^ 0x5a);
	CHECK_RET(side_send(&C, 65536, 4096, 3), DAT_SUCCESS, "client sends 4 KiB");
	CHECK(side_dto_ok(C.req, 3, 4096) && side_dto_ok(S.rcv, 1, 4096) &&
	      memcmp(S.buf, C.buf + 65536, 4096) == 0,
	      "the server receives it intact over the upgraded socket");
	CHECK_RET(dat_ep_disconnect(C.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS,
		  "client disconnects");
	CHECK(conn_event(&C, NULL, NULL) == DAT_CONNECTION_EVENT_DISCONNECTED &&
	      conn_event(&S, NULL, NULL) == DAT_CONNECTION_EVENT_DISCONNECTED,
	      "one DISCONNECTED on each side");
	/* drain flushed receives */
	while (side_wait(S.rcv, 100000).event_number)
		;
	while (side_wait(C.rcv, 100000).event_number)
		;
	CHECK_RET(dat_ep_free(C.ep), DAT_SUCCESS, "client EP freed");
	CHECK(!fd_open(c), "freeing the EP closed the adopted socket");
	CHECK_RET(dat_ep_free(S.ep), DAT_SUCCESS, "server EP freed");
	CHECK(!fd_open(s), "the server's socket went with its EP");
	CHECK_RET(dat_iw_ssp_free(ssp), DAT_SUCCESS,
		  "ssp_free after its request was accepted");
	S.ep = C.ep = DAT_HANDLE_NULL;
}

static void test_reject(void)
{
	unsigned char why[16] = "not today";
	unsigned char got[256];
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_COUNT got_size = 0;
	DAT_CR_HANDLE cr;
	int c, s;

	tcp_pair(&c, &s);
	S.ep = side_ep(&S);
	C.ep = side_ep(&C);
	dat_iw_ssp_create(S.ia, s, S.ep, S.cr, NULL, 0, &ssp);
	CHECK_RET(dat_iw_socket_connect(C.ep, c, 5000000, 0, NULL), DAT_SUCCESS,
		  "reject: socket_connect");
	cr = wait_cr(S.cr, ssp);
	CHECK(cr != DAT_HANDLE_NULL, "reject: the request arrives");
	CHECK_RET(dat_cr_reject(cr, sizeof(why), why), DAT_SUCCESS,
		  "dat_cr_reject with private data");
	CHECK(conn_event(&C, &got_size, got) == DAT_CONNECTION_EVENT_PEER_REJECTED &&
	      got_size == (DAT_COUNT)sizeof(why) && memcmp(got, why, sizeof(why)) == 0,
	      "client: PEER_REJECTED with the rejecter's private data");
	CHECK(side_ep_state(C.ep) == DAT_EP_STATE_DISCONNECTED, "client EP DISCONNECTED");
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_UNCONNECTED, "server EP back to UNCONNECTED");
	CHECK(fd_open(c) && fd_blocking(c), "the client socket is back with the consumer, open");
	CHECK(sees_eof(c), "the provider closed the server's socket (the client sees EOF)");
	CHECK_RET(dat_ep_free(C.ep), DAT_SUCCESS, "client EP freed after the reject");
	CHECK(fd_open(c), "freeing the EP does not close a socket it handed back");
	dat_ep_free(S.ep);
	dat_iw_ssp_free(ssp);
	close(c);
	S.ep = C.ep = DAT_HANDLE_NULL;
}

static void test_connect_errors(void)
{
	DAT_EP_HANDLE ep = side_ep(&C), nopz = DAT_HANDLE_NULL;
	unsigned char big[300] = { 0 };
	DAT_RSP_HANDLE rsp = DAT_HANDLE_NULL;
	int c, s, p[2];

	tcp_pair(&c, &s);
	if (pipe(p) < 0)
		BAIL("pipe");
	CHECK_RET(dat_iw_socket_connect(ep, c, 0, 0, NULL), DAT_INVALID_PARAMETER,
		  "socket_connect: timeout 0 -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_socket_connect(ep, c, (DAT_TIMEOUT)-5, 0, NULL),
		  DAT_INVALID_PARAMETER, "socket_connect: negative timeout -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_socket_connect(ep, c, 1000000, -1, NULL), DAT_INVALID_PARAMETER,
		  "socket_connect: negative private data size -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_socket_connect(ep, c, 1000000, sizeof(big), big),
		  DAT_INVALID_PARAMETER,
		  "socket_connect: private data over the maximum -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_socket_connect(ep, c, 1000000, 8, NULL), DAT_INVALID_PARAMETER,
		  "socket_connect: NULL private data with a size -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_socket_connect(ep, p[0], 1000000, 0, NULL), DAT_INVALID_PARAMETER,
		  "socket_connect: a pipe -> DAT_INVALID_PARAMETER");
	CHECK_RET(dat_iw_socket_connect(C.pz, c, 1000000, 0, NULL), DAT_INVALID_HANDLE,
		  "socket_connect: a PZ as EP -> DAT_INVALID_HANDLE");
	if (dat_ep_create(C.ia, DAT_HANDLE_NULL, C.rcv, C.req, C.conn, NULL, &nopz) !=
	    DAT_SUCCESS)
		BAIL("ep without PZ");
	CHECK_RET(dat_iw_socket_connect(nopz, c, 1000000, 0, NULL), DAT_INVALID_STATE,
		  "socket_connect: EP without a PZ -> DAT_INVALID_STATE");
	CHECK_RET(dat_rsp_create(C.ia, 64602, ep, C.cr, &rsp), DAT_SUCCESS, "reserve the EP");
	CHECK_RET(dat_iw_socket_connect(ep, c, 1000000, 0, NULL), DAT_INVALID_STATE,
		  "socket_connect: EP not UNCONNECTED -> DAT_INVALID_STATE");
	dat_rsp_free(rsp);
	const char *other = other_address();
	if (other) {
		int oc, os;

		tcp_pair_on(other, &oc, &os);
		CHECK_RET(dat_iw_socket_connect(ep, oc, 1000000, 0, NULL),
			  DAT_INVALID_STATE,
			  "socket_connect: a socket not routed through the IA -> DAT_INVALID_STATE");
		close(oc);
		close(os);
	} else {
		printf("ok %d # SKIP no non-loopback IPv4 address\n", ++tap_count);
	}
	CHECK(side_ep_state(ep) == DAT_EP_STATE_UNCONNECTED, "after every refusal the EP is UNCONNECTED");
	CHECK(fd_open(c) && fd_blocking(c) && stream_works(c, s),
	      "after every refusal the socket is the consumer's and works");
	/* no answer within the timeout */
	C.ep = ep;
	CHECK_RET(dat_iw_socket_connect(ep, c, 300000, 0, NULL), DAT_SUCCESS,
		  "socket_connect to a peer that never answers (300 ms)");
	CHECK(conn_event(&C, NULL, NULL) == DAT_CONNECTION_EVENT_TIMED_OUT,
	      "-> DAT_CONNECTION_EVENT_TIMED_OUT");
	CHECK(side_ep_state(ep) == DAT_EP_STATE_DISCONNECTED, "the EP is DISCONNECTED");
	CHECK(fd_open(c) && fd_blocking(c), "the socket is back with the consumer, open");
	{
		char req[20];

		CHECK(read_all(s, req, sizeof(req)) && memcmp(req, "MPA ID Req Frame", 16) == 0,
		      "the peer received a well-formed MPA request on the stream");
	}
	dat_ep_free(ep);
	dat_ep_free(nopz);
	close(c);
	close(s);
	close(p[0]);
	close(p[1]);
	C.ep = DAT_HANDLE_NULL;
}

static void test_unreachable(void)
{
	DAT_EP_HANDLE ep = side_ep(&C);
	int c, s;

	tcp_pair(&c, &s);
	C.ep = ep;
	CHECK_RET(dat_iw_socket_connect(ep, c, 5000000, 0, NULL), DAT_SUCCESS,
		  "socket_connect to a peer that then resets");
	{
		struct linger lg = { 1, 0 };

		setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(s);	/* RST */
	}
	CHECK(conn_event(&C, NULL, NULL) == DAT_CONNECTION_EVENT_UNREACHABLE,
	      "a reset before the reply -> DAT_CONNECTION_EVENT_UNREACHABLE");
	CHECK(side_ep_state(ep) == DAT_EP_STATE_DISCONNECTED, "the EP is DISCONNECTED");
	CHECK(fd_open(c), "the socket is handed back to the consumer");
	dat_ep_free(ep);
	close(c);
	C.ep = DAT_HANDLE_NULL;
}

static void test_garbage_reply(void)
{
	DAT_EP_HANDLE ep = side_ep(&C);
	char req[20];
	int c, s;

	tcp_pair(&c, &s);
	C.ep = ep;
	CHECK_RET(dat_iw_socket_connect(ep, c, 5000000, 0, NULL), DAT_SUCCESS,
		  "socket_connect to a peer that answers garbage");
	if (!read_all(s, req, sizeof(req)) ||
	    send(s, "HTTP/1.0 400 Bad Request\r\n\r\n", 28, 0) != 28)
		BAIL("raw peer");
	CHECK(conn_event(&C, NULL, NULL) == DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
	      "an answer that is not an MPA reply -> NON_PEER_REJECTED");
	CHECK(fd_open(c), "the socket is handed back to the consumer");
	dat_ep_free(ep);
	close(c);
	close(s);
	C.ep = DAT_HANDLE_NULL;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_watchdog(120);
	side_open(&S);
	side_open(&C);
	test_create_errors();
	test_query_and_free();
	test_socket_down();
	test_not_mpa();
	test_upgrade(0);
	test_upgrade(1);
	test_reject();
	test_connect_errors();
	test_unreachable();
	test_garbage_reply();
	side_close(&S);
	side_close(&C);
	return tap_done();
}
