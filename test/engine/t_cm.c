/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager over loopback ("lo"): listen / connect / accept
 * with private data, every RTR type, MPA revision 1, CRC negotiation,
 * rejects, unreachable (after the refusals' grace, and a listener that
 * comes within it), timeouts, garbage and marker requests, services
 * above 65535, EADDRINUSE, listen_any, graceful and abrupt disconnects,
 * the peer timeout's socket options, polls of one CQ fed by two QPs
 * (both queues of each), 16 KiB posts that leave in a burst, a peer
 * dying mid-FPDU, and concurrent setup from several threads.  TAP
 * output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "cm_harness.h"
#include "cpair.h"
#include "iw_progress.h"
#include "prog_harness.h"
#include "iw_qp.h"

/* --------------------------------------------------------------- tests */

static void test_variant(const char *tag, struct iwe_cm_params ap,
			 struct iwe_cm_params bp, uint64_t service,
			 size_t plen, int from_passive)
{
	struct cpair p;

	cpair_open(&p);
	p.ap = ap;
	p.bp = bp;
	CHECK(cpair_connect(&p, service, plen, plen, tag),
	      "%s: ESTABLISHED on both sides, reply private data delivered",
	      tag);
	if (p.cb && evlog_count(&p.lb) > 0) {
		cpair_traffic(&p, tag);
		cpair_disconnect(&p, from_passive, tag);
	}
	cpair_close(&p);
}

static void test_variants(void)
{
	static const struct { const char *tag; unsigned rtr; } rtr[] = {
		{ "rtr none", 0 }, { "rtr write", IW_RTR_WRITE },
		{ "rtr read", IW_RTR_READ }, { "rtr send", IW_RTR_SEND },
	};
	size_t i;

	test_variant("pdata 64", cm_params(2, 0, IW_RTR_WRITE),
		     cm_params(2, 0, 0), 31111, 64, 0);
	test_variant("pdata 256", cm_params(2, 1, IW_RTR_WRITE),
		     cm_params(2, 1, 0), 31112, 256, 1);
	for (i = 0; i < sizeof(rtr) / sizeof(rtr[0]); i++)
		test_variant(rtr[i].tag, cm_params(2, 0, rtr[i].rtr),
			     cm_params(2, 0, rtr[i].rtr), 31113 + i, 10,
			     (int)(i & 1));
	test_variant("mpa rev 1", cm_params(1, 0, IW_RTR_WRITE),
		     cm_params(2, 0, IW_RTR_WRITE), 31120, 64, 0);
	test_variant("rev 1 both", cm_params(1, 1, 0), cm_params(1, 0, 0),
		     31121, 0, 1);
	test_variant("crc from responder", cm_params(2, 0, IW_RTR_READ),
		     cm_params(2, 1, 0), 31122, 16, 0);
	test_variant("service > 65535", cm_params(2, 1, IW_RTR_SEND),
		     cm_params(2, 1, 0), 5000000123ULL, 64, 0);
}

/* The negotiated CRC, seen on the wire: a raw initiator asks for none
 * and the listener wants CRC: the reply says C. */
static void test_crc_negotiation(void)
{
	struct iwe_cm_params bp = cm_params(2, 1, 0);
	struct evlog lp;
	struct iwe_listener *l = NULL;
	struct iw_mpa_params rq = { .rev = 2, .ird = 1, .ord = 1 };
	struct iw_mpa_frame f;
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct side b;
	int fd;

	evlog_init(&lp);
	side_fresh(&b);
	iwe_cm_listen(g_dev, 31130, &bp, 0, on_event, &lp, &l);
	fd = raw_connect(31130);
	CHECK(fd >= 0 && raw_send_frame(fd, 0, &rq) == 0 &&
	      wait_type(&lp, 0, IWE_CM_CONNECT_REQUEST) &&
	      iwe_cm_accept(lp.r[0].conn, b.qp, NULL, 0, on_event, &lp) == 0,
	      "crc: raw request without C accepted");
	CHECK(raw_read_frame(fd, buf, &f) == 0 && f.is_reply && f.crc &&
	      !f.reject && wait_type(&lp, 1, IWE_CM_ESTABLISHED),
	      "crc: reply sets C because the responder asks (either side)");
	iwe_cm_conn_destroy(lp.r[0].conn);
	close(fd);
	iwe_cm_listen_destroy(l);
	side_close(&b);
	evlog_fini(&lp);
}

static int reject_in_handler(struct evlog *l, const struct iwe_cm_event *ev)
{
	(void)l;
	return iwe_cm_reject(ev->conn, "no thanks, go away", 18);
}

static void test_reject(void)
{
	struct cpair p;
	struct sockaddr_in dst = lo_addr(0);
	struct rec *r;

	cpair_open(&p);
	cpair_std_params(&p);
	p.lp.on_request = reject_in_handler;
	iwe_cm_listen(g_dev, 31140, &p.bp, 0, on_event, &p.lp, &p.l);
	CHECK(iwe_cm_connect(p.a.qp, &dst, 31140, "hi", 2, 2000, &p.ap,
			     on_event, &p.la, &p.ca) == 0, "reject: connect");
	r = wait_ev(&p.la, 0, WAIT_MS);
	CHECK(r && r->type == IWE_CM_REJECTED && r->pdata_len == 18 &&
	      !memcmp(r->pdata, "no thanks, go away", 18),
	      "reject: REJECTED with the peer's private data");
	p.cb = p.lp.r[0].conn;
	sleep_ms(20);
	CHECK(evlog_count(&p.la) == 1, "reject: nothing after REJECTED");
	cpair_close(&p);
}

/* What a consumer polling a connection EVD makes the progress thread
 * urgent for (iwe_device_awaited): the initiator's conn from its connect
 * to ESTABLISHED, not a request waiting for the consumer's accept, not an
 * established conn; a graceful disconnect until it is over.  main checks
 * again that nothing is left counted after every other test. */
static void test_awaited_count(void)
{
	struct sockaddr_in dst = lo_addr(0);
	struct cpair p;
	struct rec *r;
	int ok;

	cpair_open(&p);
	cpair_std_params(&p);
	CHECK(cm_awaited_now() == 0, "awaited: no conn counted before");
	CHECK(iwe_cm_listen(g_dev, 31150, &p.bp, 0, on_event, &p.lp,
			    &p.l) == 0 &&
	      iwe_cm_connect(p.a.qp, &dst, 31150, "hi", 2, 2000, &p.ap,
			     on_event, &p.la, &p.ca) == 0,
	      "awaited: listen, connect");
	r = wait_ev(&p.lp, 0, WAIT_MS);
	CHECK(r && r->type == IWE_CM_CONNECT_REQUEST && cm_awaited_now() == 1,
	      "awaited: the initiator's conn counts while the request waits "
	      "for the accept (got %d)", cm_awaited_now());
	if (!r)
		goto out;
	p.cb = r->conn;
	ok = iwe_cm_accept(p.cb, p.b.qp, "ok", 2, on_event, &p.lb) == 0 &&
	     wait_type(&p.la, 0, IWE_CM_ESTABLISHED) &&
	     wait_type(&p.lb, 0, IWE_CM_ESTABLISHED);
	CHECK(ok && cm_awaited_now() == 0,
	      "awaited: nothing counts once both are ESTABLISHED (got %d)",
	      cm_awaited_now());
	ok = ok && iwe_cm_disconnect(p.ca, 1) == 0 &&
	     wait_type(&p.la, 1, IWE_CM_DISCONNECTED) &&
	     wait_type(&p.lb, 1, IWE_CM_DISCONNECTED);
	CHECK(ok && cm_awaited_now() == 0,
	      "awaited: nothing counts once both saw DISCONNECTED (got %d)",
	      cm_awaited_now());
out:
	cpair_close(&p);
}

static void test_unreachable(void)
{
	struct side a;
	struct evlog la;
	struct iwe_conn *c = NULL;
	struct iwe_cm_params ap = cm_params(2, 0, 0);
	struct sockaddr_in dst = lo_addr(0);
	uint16_t port;
	int fd = raw_listen(&port);
	long t0, ms = -1;

	close(fd);		/* a port nobody listens on */
	evlog_init(&la);
	side_fresh(&a);
	t0 = now_ms();
	CHECK(iwe_cm_connect(a.qp, &dst, port, NULL, 0, 2000, &ap, on_event,
			     &la, &c) == 0 &&
	      wait_type(&la, 0, IWE_CM_UNREACHABLE) &&
	      la.r[0].status == ECONNREFUSED,
	      "unreachable: connect to a closed port -> UNREACHABLE");
	if (evlog_count(&la))
		ms = now_ms() - t0;
	CHECK(ms >= 150 && ms <= 1500,
	      "unreachable: after the refusals' grace of 200 ms (%ld ms)", ms);
	iwe_cm_conn_destroy(c);
	side_close(&a);
	evlog_fini(&la);
}

/* A listener that comes after the connect's first refusal, within the
 * grace, gets the request: dtest's server sends its address on its side
 * channel, then creates its PSP, and a quick client was refused. */
static void test_refused_then_listening(void)
{
	struct sockaddr_in dst = lo_addr(0);
	struct cpair p;
	uint16_t port;
	int fd = raw_listen(&port);

	close(fd);
	cpair_open(&p);
	p.ap = p.bp = cm_params(2, 0, 0);
	CHECK(iwe_cm_connect(p.a.qp, &dst, port, NULL, 0, 2000, &p.ap,
			     on_event, &p.la, &p.ca) == 0,
	      "late listener: connect to a closed port");
	late_listen_accept(g_dev, port, &p.bp,
			   &(struct late_pair){ p.b.qp, &p.la, &p.lp, &p.lb,
						&p.l, &p.cb }, "late listener");
	cpair_close(&p);
}

/* A raw listener that accepts TCP and answers nothing, or garbage. */
static void test_silent_and_garbage(int garbage)
{
	const char *tag = garbage ? "garbage" : "timeout";
	struct side a;
	struct evlog la;
	struct iwe_conn *c = NULL;
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_WRITE);
	struct sockaddr_in dst = lo_addr(0);
	struct iw_mpa_frame f;
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	uint16_t port;
	int l = raw_listen(&port), fd;
	long t0 = now_ms(), dt;

	evlog_init(&la);
	side_fresh(&a);
	CHECK(iwe_cm_connect(a.qp, &dst, port, "x", 1, 300, &ap, on_event,
			     &la, &c) == 0, "%s: connect", tag);
	fd = raw_accept(l);
	CHECK(fd >= 0 && raw_read_frame(fd, buf, &f) == 0 && !f.is_reply &&
	      f.p2p && f.rtr == IW_RTR_WRITE && f.pdata_len == 1,
	      "%s: the raw peer reads a p2p request offering Write", tag);
	if (garbage && send(fd, "HTTP/1.1 400 Bad Request\r\n\r\n", 28, 0) != 28)
		BAIL("send");
	dt = now_ms() - t0;
	if (garbage) {
		CHECK(wait_type(&la, 0, IWE_CM_NON_PEER_REJECTED),
		      "garbage: NON_PEER_REJECTED (%s)", la.r[0].reason);
	} else {
		CHECK(wait_type(&la, 0, IWE_CM_TIMED_OUT) &&
		      (dt = now_ms() - t0) >= 280 && dt < 1500,
		      "timeout: TIMED_OUT after %ld ms (300 asked)", dt);
		CHECK(fd_readable_eof(fd, 1000),
		      "timeout: the connection is torn down");
	}
	iwe_cm_conn_destroy(c);
	close(fd);
	close(l);
	side_close(&a);
	evlog_fini(&la);
}

/* A raw initiator asking for markers gets a reject with the reason;
 * one that sends nothing is dropped after the MPA timeout. */
static void test_raw_initiators(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct evlog lp;
	struct iwe_listener *l = NULL;
	struct iw_mpa_params rq = { .rev = 2, .ird = 1, .ord = 1 };
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	ssize_t n;
	long t0;
	int fd;

	bp.mpa_timeout_ms = 300;
	evlog_init(&lp);
	iwe_cm_listen(g_dev, 31150, &bp, 0, on_event, &lp, &l);
	fd = raw_connect(31150);
	n = iw_mpa_build(buf, sizeof(buf), 0, &rq);
	buf[16] |= IW_MPA_FLAG_MARKERS;
	CHECK(fd >= 0 && send(fd, buf, (size_t)n, 0) == n &&
	      raw_read_frame(fd, buf, &f) == 0 && f.is_reply && f.reject &&
	      f.pdata_len > 0 && memmem(f.pdata, f.pdata_len, "markers", 7),
	      "markers: reject reply with the reason \"%.*s\"",
	      (int)f.pdata_len, f.pdata);
	CHECK(fd_readable_eof(fd, 1000) && evlog_count(&lp) == 0,
	      "markers: closed, no CONNECT_REQUEST");
	close(fd);
	fd = raw_connect(31150);
	t0 = now_ms();
	CHECK(fd >= 0 && fd_readable_eof(fd, 2000) && now_ms() - t0 >= 280 &&
	      evlog_count(&lp) == 0,
	      "silent initiator: closed after the 300 ms MPA timeout "
	      "(%ld ms), no event", now_ms() - t0);
	close(fd);
	iwe_cm_listen_destroy(l);
	evlog_fini(&lp);
}

/* Services above 65535: a wrong header is refused; two services on one
 * port both work. */
static void test_services(void)
{
	const uint64_t s1 = 7000000ULL, s2 = 7001000ULL; /* both -> 61000 */
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iw_mpa_params rq = { .rev = 2, .ird = 1, .ord = 1 };
	uint8_t pd[IWE_CM_SERVICE_HDR_LEN];
	uint64_t wrong_be = iw_be64(7002000ULL);
	struct iwe_listener *l2 = NULL;
	struct evlog lp2;
	struct cpair p;
	int fd;

	evlog_init(&lp2);
	cpair_open(&p);
	p.ap = cm_params(2, 0, IW_RTR_WRITE);
	p.bp = bp;
	CHECK(iwe_cm_listen(g_dev, s1, &bp, 0, on_event, &p.lp, &p.l) == 0 &&
	      iwe_cm_listen(g_dev, s2, &bp, 0, on_event, &lp2, &l2) == 0,
	      "services: two services mapping to port 61000 listen");
	memcpy(pd, "IWDAPLsv", 8);
	memcpy(pd + 8, &wrong_be, 8);
	rq.pdata = pd;
	rq.pdata_len = sizeof(pd);
	fd = raw_connect(61000);
	CHECK(fd >= 0 && raw_send_frame(fd, 0, &rq) == 0 &&
	      fd_readable_eof(fd, 1000) && evlog_count(&p.lp) == 0 &&
	      evlog_count(&lp2) == 0,
	      "services: a request for an unknown service is refused");
	close(fd);
	CHECK(cpair_connect(&p, s1, 32, 32, "services s1"),
	      "services: connect to the first one");
	cpair_close(&p);
	cpair_open(&p);
	p.ap = cm_params(2, 0, IW_RTR_WRITE);
	p.bp = bp;
	p.l = l2;
	p.lpp = &lp2;
	CHECK(cpair_connect(&p, s2, 32, 32, "services s2") &&
	      lp2.r[0].service == s2,
	      "services: connect to the second one after the first stopped");
	cpair_close(&p);
	evlog_fini(&lp2);
}

static void test_addrinuse(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iwe_listener *l1 = NULL, *l2 = NULL, *l3 = NULL;
	struct evlog lp;
	uint64_t any = 0;
	struct cpair p;
	uint16_t port;
	int fd;

	evlog_init(&lp);
	CHECK(iwe_cm_listen(g_dev, 31160, &bp, 0, on_event, &lp, &l1) == 0 &&
	      iwe_cm_listen(g_dev, 31160, &bp, 0, on_event, &lp, &l2) ==
	      EADDRINUSE, "addrinuse: a duplicate small service");
	CHECK(iwe_cm_listen(g_dev, 9000001, &bp, 0, on_event, &lp, &l3) == 0 &&
	      iwe_cm_listen(g_dev, 9000001, &bp, 0, on_event, &lp, &l2) ==
	      EADDRINUSE, "addrinuse: a duplicate large service");
	CHECK(iwe_cm_listen(g_dev, 61001, &bp, 0, on_event, &lp, &l2) ==
	      EADDRINUSE, "addrinuse: a plain service on a port in hashed use");
	fd = raw_listen(&port);
	CHECK(iwe_cm_listen(g_dev, port, &bp, 0, on_event, &lp, &l2) ==
	      EADDRINUSE, "addrinuse: a port another socket holds");
	close(fd);
	iwe_cm_listen_destroy(l1);
	iwe_cm_listen_destroy(l3);
	CHECK(iwe_cm_listen(g_dev, 31160, &bp, 0, on_event, &lp, &l1) == 0,
	      "addrinuse: the service is free again after destroy");
	iwe_cm_listen_destroy(l1);
	evlog_fini(&lp);

	cpair_open(&p);
	p.ap = cm_params(2, 0, IW_RTR_READ);
	p.bp = bp;
	CHECK(iwe_cm_listen_any(g_dev, &any, &p.bp, on_event, &p.lp,
				&p.l) == 0 && any > 0 && any <= 65535,
	      "listen_any: service %llu", (unsigned long long)any);
	CHECK(cpair_connect(&p, any, 8, 8, "listen_any"),
	      "listen_any: the service is usable");
	cpair_close(&p);
}

static void test_abrupt(void)
{
	struct cpair p;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, 31170, "abrupt"), "abrupt: connected");
	CHECK(iwe_cm_disconnect(p.ca, 0) == 0 &&
	      wait_type(&p.la, 1, IWE_CM_DISCONNECTED) &&
	      wait_type(&p.lb, 1, IWE_CM_DISCONNECTED),
	      "abrupt: DISCONNECTED on both sides (a reset is the peer's abrupt close)");
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_ERROR &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR,
	      "abrupt: both QPs in ERROR");
	cpair_close(&p);
}

/* Both ends of an established connection probe an idle peer every
 * quarter of IWDAPL_PEER_TIMEOUT_MS (default 10 s; at least a second)
 * and give up on a silent one after the timeout, sending or not:
 * without it, a connection whose peer's host vanished waited forever
 * idle and a quarter of an hour sending (test/udp_netns.sh kills such
 * peers).  Not every second: 10,000 idle connections' probes slowed the
 * one busy among them. */
static int peer_timeout_set(struct iwe_qp *qp, int want_ms, int want_idle)
{
	int fd = iwe_qp_priv(qp)->fd, ka = 0, idle = 0, intvl = 0, ut = 0;
	socklen_t l = sizeof(int), l2 = sizeof(int), l3 = sizeof(int),
		  l4 = sizeof(int);

	return !getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &ka, &l) && ka &&
	       !getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &l2) &&
	       idle == want_idle &&
	       !getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, &l4) &&
	       intvl == want_idle &&
	       !getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, &l3) &&
	       ut == want_ms;
}

static void peer_timeout_case(const char *env, uint16_t port, int want_ms,
			      int want_idle)
{
	struct cpair p;

	if (env)
		setenv("IWDAPL_PEER_TIMEOUT_MS", env, 1);
	cpair_open(&p);
	p.ap = p.bp = cm_params(2, 0, 0);
	CHECK(cpair_connect(&p, port, 0, 0, "peer timeout"),
	      "peer timeout %d ms: connected", want_ms);
	CHECK(peer_timeout_set(p.a.qp, want_ms, want_idle) &&
	      peer_timeout_set(p.b.qp, want_ms, want_idle),
	      "both sockets: keepalive every %d s, user timeout %d ms",
	      want_idle, want_ms);
	cpair_close(&p);
	unsetenv("IWDAPL_PEER_TIMEOUT_MS");
}

static void test_peer_timeout(void)
{
	peer_timeout_case(NULL, 31191, 10000, 2);
	peer_timeout_case("2500", 31197, 2500, 1);
	peer_timeout_case("40000", 31198, 40000, 10);
}

/* Our TCP sockets run cubic (IWDAPL_TCP_CONGESTION), not the system's
 * pacing BBR, whose 64 KiB pieces of a large message each woke the
 * receiver's progress thread; a name this process may not use gives
 * reno; "system" leaves the system's. */
static int congestion_is(struct iwe_qp *qp, const char *want)
{
	char cc[32] = "";
	socklen_t l = sizeof(cc) - 1;

	return !getsockopt(iwe_qp_priv(qp)->fd, IPPROTO_TCP, TCP_CONGESTION,
			   cc, &l) && !strcmp(cc, want);
}

static void congestion_case(const char *env, uint16_t port, const char *want)
{
	struct cpair p;

	if (env)
		setenv("IWDAPL_TCP_CONGESTION", env, 1);
	cpair_open(&p);
	CHECK(cpair_std_connect(&p, port, "congestion"),
	      "congestion %s: connected", env ? env : "default");
	CHECK(congestion_is(p.a.qp, want) && congestion_is(p.b.qp, want),
	      "IWDAPL_TCP_CONGESTION=%s: both sockets run %s",
	      env ? env : "", want);
	cpair_close(&p);
	unsetenv("IWDAPL_TCP_CONGESTION");
}

static void test_congestion(void)
{
	char sys[32] = "";
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	/* cubic where this process may choose it, as the provider asks */
	int cubic = fd >= 0 && !setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION,
					   "cubic", 5);

	if (fd >= 0)
		close(fd);
	if (f) {
		if (fscanf(f, "%31s", sys) != 1)
			sys[0] = 0;
		fclose(f);
	}
	congestion_case(NULL, 31211, cubic ? "cubic" : "reno");
	congestion_case("no-such-algorithm", 31212, "reno");
	if (sys[0])
		congestion_case("system", 31213, sys);
}

/* A 64 KiB Write, then right behind it a Write of second bytes: neither
 * is held back as part of a burst.  Posts close together are held only
 * while they are small: a bulk post goes from the posting thread at once
 * (it used to wait for the burst's flush, the link idle meanwhile), and
 * so does a small post right behind a bulk one (its safety net woke the
 * progress thread once per round of a window of Writes and the small
 * Send that ends it).  A Write completes once its last byte is in the
 * socket, so both completions are there when the second post returns. */
static void bulk_then(const char *tag, uint16_t port, uint32_t second)
{
	struct cpair p;
	int other;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, port, tag), "%s: connected", tag);
	fill(p.a.buf, 65536 + second, port);
	CHECK(post_send1(&p.a, 20, IBV_WR_RDMA_WRITE, 0, 65536,
			 (uintptr_t)(p.b.buf + 131072), p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0 &&
	      post_send1(&p.a, 21, IBV_WR_RDMA_WRITE, 65536, second,
			 (uintptr_t)(p.b.buf + 196608), p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0 &&
	      iwe_cq_count(p.a.scq) == 2,
	      "%s: a %u-byte Write posted right behind a 64 KiB one is sent "
	      "by the time its post returns (%d completed)", tag, second,
	      iwe_cq_count(p.a.scq));
	CHECK(wait_cq(p.a.scq, 2) &&
	      count_status(p.a.scq, IBV_WC_SUCCESS, &other) == 2 && !other,
	      "%s: both complete with success", tag);
	CHECK(iwe_cm_disconnect(p.ca, 1) == 0 &&
	      wait_type(&p.lb, 1, IWE_CM_DISCONNECTED) &&
	      !memcmp(p.b.buf + 131072, p.a.buf, 65536 + second),
	      "%s: the data arrived whole", tag);
	cpair_close(&p);
}

static void test_bulk_not_held(void)
{
	bulk_then("bulk", 31171, 65536);
	bulk_then("small after bulk", 31173, 64);
}

/* A consumer inside a poll reads the input itself, bulk too: with the
 * progress thread held, a 32 KiB Write and then a small Send (into the
 * first of cpair_connect's receives) arrive by polls alone. */
static void test_poll_reads_bulk(void)
{
	struct prog_stall st = PROG_STALL_INIT;
	struct iwe_prog *prog = iwe_prog_get(g_dev);
	struct ibv_wc wc;
	struct cpair p;
	long end;
	int got = 0;

	cpair_open(&p);
	CHECK(prog && cpair_std_connect(&p, 31177, "poll bulk"),
	      "poll bulk: connected");
	iwe_prog_post(prog, &st.task);
	prog_stall_set(&st, 1);
	fill(p.a.buf + 65536, 65536, 31177);
	CHECK(post_send1(&p.a, 31, IBV_WR_RDMA_WRITE, 65536, 32768,
			 (uintptr_t)(p.b.buf + 131072), p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0,
	      "poll bulk: a 32 KiB Write posted");
	/* Polls read the Write: the input is bulk from then on. */
	for (end = now_ms() + WAIT_MS; now_ms() <= end &&
	     memcmp(p.b.buf + 131072, p.a.buf + 65536, 32768);)
		iwe_poll_cq(p.b.rcq, 1, &wc);
	CHECK(post_send1(&p.a, 32, IBV_WR_SEND, 98304, 64, 0, 0,
			 IBV_SEND_SIGNALED) == 0,
	      "poll bulk: a 64-byte Send posted once the Write was read");
	for (end = now_ms() + WAIT_MS; !got && now_ms() <= end;)
		if (!(got = iwe_poll_cq(p.b.rcq, 1, &wc) == 1))
			sched_yield();
	CHECK(got && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	      wc.byte_len == 64 && !memcmp(p.b.buf, p.a.buf + 98304, 64) &&
	      !memcmp(p.b.buf + 131072, p.a.buf + 65536, 32768),
	      "poll bulk: with the progress thread held, polls alone received "
	      "the Write and the Send after it, data intact");
	prog_stall_set(&st, 0);
	CHECK(iwe_cm_disconnect(p.ca, 1) == 0 &&
	      wait_type(&p.lb, 1, IWE_CM_DISCONNECTED),
	      "poll bulk: disconnected once the progress thread runs again");
	cpair_close(&p);
}

/* The progress model's promise: input is placed as soon as it arrives,
 * whatever the consumer does.  Here the receiver polls its CQ for a
 * while, then stops calling anything (as a consumer that goes on to spin
 * on memory, compute or sleep does): a 512 KiB Write and a Send that come
 * afterwards are placed and completed with nobody calling in, the
 * data intact.  (The engine once left a poller's input to its polls for
 * up to 8 ms after the last one.) */
#define BIG_WRITE (BIG / 2)

static void test_placed_without_calls(void)
{
	struct ibv_wc wc;
	struct cpair p;
	long end, t0, waited;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, 31179, "no calls"), "no calls: connected");
	for (end = now_ms() + 20; now_ms() < end;)
		iwe_poll_cq(p.b.rcq, 1, &wc);
	fill(p.a.buf, BIG_WRITE, 31179);
	t0 = now_ms();
	CHECK(post_send1(&p.a, 51, IBV_WR_RDMA_WRITE, 0, BIG_WRITE,
			 (uintptr_t)(p.b.buf + BIG_WRITE), p.b.mr->rkey, 0) == 0 &&
	      post_send1(&p.a, 52, IBV_WR_SEND, 0, 64, 0, 0, 0) == 0,
	      "no calls: a 512 KiB Write and a Send posted after the polls stopped");
	/* Nothing of b is called from here on: memory and the count only. */
	while (now_ms() - t0 < WAIT_MS &&
	       (iwe_cq_count(p.b.rcq) < 1 ||
		memcmp(p.b.buf + BIG_WRITE, p.a.buf, BIG_WRITE)))
		sleep_ms(1);
	waited = now_ms() - t0;
	CHECK(!memcmp(p.b.buf + BIG_WRITE, p.a.buf, BIG_WRITE) &&
	      iwe_cq_count(p.b.rcq) == 1 && !memcmp(p.b.buf, p.a.buf, 64),
	      "no calls: the Write placed and the Send completed with nobody "
	      "calling in (%ld ms), data intact", waited);
	cpair_disconnect_close(&p, "no calls");
}

/* A consumer spinning on a CQ (iwe_cq_spin, as a blocking wait's spin
 * does) reads its connection's input itself: meanwhile the progress
 * thread leaves it in the socket, and a drive says when it read some.
 * Once the spin ends the thread has the input back -- what came during
 * the spin and was never driven too -- with nobody calling in. */
static void test_spin_leaves_input(void)
{
	struct ibv_wc wc;
	struct cpair p;
	long end;
	int r = 0, quiet;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, 31181, "spin"), "spin: connected");
	iwe_cq_spin(p.b.rcq, 1);
	fill(p.a.buf, 4096, 31181);
	CHECK(post_send1(&p.a, 61, IBV_WR_SEND, 0, 64, 0, 0, 0) == 0,
	      "spin: a Send posted while the receiver spins");
	for (end = now_ms() + WAIT_MS; now_ms() <= end &&
	     iwe_cq_count(p.b.rcq) < 1;)
		r |= iwe_cq_drive(p.b.rcq);
	quiet = iwe_cq_drive(p.b.rcq);
	CHECK(iwe_poll_cq(p.b.rcq, 1, &wc) == 1 && wc.wr_id == 1 &&
	      wc.byte_len == 64 && !memcmp(p.b.buf, p.a.buf, 64) &&
	      (r & IWE_CQ_DRIVE_READ) &&
	      !(quiet & IWE_CQ_DRIVE_READ),
	      "spin: the spinner's drive read the Send (and said so), a drive "
	      "with nothing to read did not");
	CHECK(post_send1(&p.a, 62, IBV_WR_SEND, 64, 64, 0, 0, 0) == 0,
	      "spin: a second Send posted, nobody driving");
	sleep_ms(100);
	CHECK(iwe_cq_count(p.b.rcq) == 0,
	      "spin: the progress thread left it to the spinner");
	iwe_cq_spin(p.b.rcq, 0);
	for (end = now_ms() + WAIT_MS; now_ms() <= end &&
	     iwe_cq_count(p.b.rcq) < 1;)
		sleep_ms(1);
	CHECK(iwe_cq_count(p.b.rcq) == 1 &&
	      iwe_poll_cq(p.b.rcq, 1, &wc) == 1 && wc.wr_id == 2 &&
	      wc.byte_len == 64 && !memcmp(p.b.buf + 4096, p.a.buf + 64, 64),
	      "spin: once the spin ended the progress thread completed the "
	      "Send that came during it, with nobody calling in");
	cpair_disconnect_close(&p, "spin");
}

/* A blocking wait that sleeps reads its own input: while it spins on a
 * CQ, the CQ names the socket of the connection spun on, which turns
 * readable when the peer's Send comes, and a drive reads it (the
 * progress thread leaves it).  An arm the waiter took back signals
 * nothing of what its drive completes -- no channel write and read for
 * each message -- and an arm left in place signals once.  With the spin
 * over, there is no socket to sleep on. */
static void test_sleep_on_socket(void)
{
	struct iwe_comp_channel *ch = iwe_create_comp_channel(g_dev);
	struct iwe_cq *cq = ch ? iwe_create_cq(g_dev, 64, NULL, ch) : NULL;
	struct iwe_cq *fired = NULL;
	struct pollfd pfd;
	struct ibv_wc wc;
	struct cpair p;
	long end;
	int fd, quiet, ready;

	CHECK(cq, "sleep on socket: a CQ with a channel");
	if (!cq)
		return;
	cpair_open(&p);
	side_close(&p.b);
	side_fresh_on(&p.b, cq);
	CHECK(cpair_std_connect(&p, 31214, "sleep on socket"),
	      "sleep on socket: connected");
	CHECK(iwe_cq_sleep_fds(cq, &fd, 1) == 0,
	      "sleep on socket: no socket while nobody spins");
	iwe_cq_spin(cq, 1);
	if (iwe_cq_sleep_fds(cq, &fd, 1) != 1)
		fd = -1;
	iwe_req_notify_cq(cq, 0);
	iwe_cq_disarm(cq);
	fill(p.a.buf, 4096, 31214);
	CHECK(post_send1(&p.a, 71, IBV_WR_SEND, 0, 64, 0, 0, 0) == 0,
	      "sleep on socket: a Send posted to the sleeper");
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	CHECK(fd >= 0 && poll(&pfd, 1, WAIT_MS) == 1,
	      "sleep on socket: the socket named (%d) turned readable", fd);
	sleep_ms(50);
	quiet = iwe_cq_count(cq);
	for (end = now_ms() + WAIT_MS; now_ms() <= end &&
	     iwe_cq_count(cq) < 1;)
		iwe_cq_drive(cq);
	CHECK(quiet == 0 && iwe_poll_cq(cq, 1, &wc) == 1 && wc.wr_id == 1 &&
	      wc.byte_len == 64 && !memcmp(p.b.buf, p.a.buf, 64) &&
	      !iwe_comp_channel_ready(ch),
	      "sleep on socket: the progress thread left the Send to the "
	      "sleeper's drive, which completed it with the channel silent "
	      "(its arm taken back)");
	iwe_req_notify_cq(cq, 0);
	CHECK(post_send1(&p.a, 72, IBV_WR_SEND, 64, 64, 0, 0, 0) == 0,
	      "sleep on socket: a second Send posted");
	for (end = now_ms() + WAIT_MS; now_ms() <= end &&
	     iwe_cq_count(cq) < 1;)
		iwe_cq_drive(cq);
	ready = iwe_comp_channel_ready(ch);
	CHECK(ready && iwe_get_cq_event(ch, &fired, NULL) == 0 &&
	      fired == cq && !iwe_comp_channel_ready(ch),
	      "sleep on socket: armed, the CQ signalled its completion once");
	if (fired)
		iwe_ack_cq_events(cq, 1);
	CHECK(iwe_poll_cq(cq, 1, &wc) == 1 && wc.wr_id == 2 &&
	      !memcmp(p.b.buf + 4096, p.a.buf + 64, 64),
	      "sleep on socket: the second Send's data intact");
	iwe_cq_spin(cq, 0);
	CHECK(iwe_cq_sleep_fds(cq, &fd, 1) == 0,
	      "sleep on socket: no socket once the spin ended");
	cpair_close(&p);
	iwe_destroy_cq(cq);
	iwe_destroy_comp_channel(ch);
}

/* Each poll of an empty CQ drives each QP feeding it once: one recv per
 * QP (with a hook per queue, a QP on one CQ for both was driven twice,
 * and the second drive's recv stood between an arrival and its
 * completion).  A poll that finds a completion stops there, and the
 * next one starts at the next QP. */
static void test_shared_cq(void)
{
	struct iwe_cq *cq = iwe_create_cq(g_dev, 256, NULL, NULL);
	struct prog_stall st = PROG_STALL_INIT;
	struct iwe_prog *prog = iwe_prog_get(g_dev);
	struct cpair p[2];
	struct ibv_wc wc[2];
	uint64_t r0[2], r1[2];
	int got, first = -1, polls = 200;

	for (int i = 0; i < 2; i++) {
		/* The passive QP completes both queues into cq. */
		cpair_open(&p[i]);
		side_close(&p[i].b);
		side_fresh_on(&p[i].b, cq);
		CHECK(cpair_std_connect(&p[i], 31192 + (uint64_t)i,
					"shared CQ"), "shared CQ: connection %d", i);
	}
	/* cpair_connect posted two receives on each passive QP. */
	for (int i = 0; i < 2; i++)
		r0[i] = rx_calls(p[i].b.qp);
	for (int k = 0; k < polls; k++)
		iwe_poll_cq(cq, 1, wc);
	for (int i = 0; i < 2; i++)
		r1[i] = rx_calls(p[i].b.qp) - r0[i];
	/* The old fault read twice a poll (nothing arrives meanwhile, so
	 * the progress thread reads nothing). */
	CHECK(r1[0] >= 1 && r1[0] <= (uint64_t)polls + 4 && r1[1] >= 1 &&
	      r1[1] <= (uint64_t)polls + 4,
	      "shared CQ: %d empty polls read each socket at most once a poll "
	      "(%llu and %llu recv calls)", polls, (unsigned long long)r1[0],
	      (unsigned long long)r1[1]);
	/* Both peers send while the progress thread is held, so nobody
	 * reads the two messages before the next poll. */
	iwe_prog_post(prog, &st.task);
	prog_stall_set(&st, 1);
	fill(p[0].a.buf, 32, 1);
	fill(p[1].a.buf, 32, 2);
	post_send1(&p[0].a, 60, IBV_WR_SEND, 0, 32, 0, 0, 0);
	post_send1(&p[1].a, 61, IBV_WR_SEND, 0, 32, 0, 0, 0);
	sleep_ms(20);		/* both cross loopback */
	got = iwe_poll_cq(cq, 2, wc);
	if (got == 1) {
		first = wc[0].qp_num == p[0].b.qp->qp_num ? 0 : 1;
		got += iwe_poll_cq(cq, 1, &wc[1]);
	}
	prog_stall_set(&st, 0);
	CHECK(got == 2 && first >= 0 &&
	      wc[1].qp_num == p[!first].b.qp->qp_num,
	      "shared CQ: a poll that found one QP's message returned it "
	      "alone, and the next poll the other QP's (%d)", got);
	for (int i = 0; i < 2; i++)
		cpair_close(&p[i]);
	iwe_destroy_cq(cq);
}

/* Past a few QPs, a CQ's poll asks an epoll of their sockets which have
 * input, and a list which asked for a look: an empty poll costs no recv
 * per QP (it cost one each, 10 000 for 10 000 connections).  A QP's
 * socket is in that epoll once the QP has completed something into the
 * CQ: its first message is the progress thread's, the next ones are
 * found by polls alone (the thread held); a burst of small posts on one
 * goes at the next poll, or at an arm, not only when the thread gets
 * to it. */
#define MANY_QPS 8

static int burst_on(struct cpair *p, struct iwe_cq *cq, int base, int arm)
{
	struct ibv_wc wc[8];
	long end = now_ms() + WAIT_MS;
	int n = 0;

	for (int i = 0; i < 4; i++)
		post_send1(&p->b, (uint64_t)(base + i), IBV_WR_RDMA_WRITE,
			   (size_t)i * 16, 16,
			   (uintptr_t)(p->a.buf + 4096 + i * 16),
			   p->a.mr->rkey, IBV_SEND_SIGNALED);
	if (arm) {
		iwe_req_notify_cq(cq, 0);
		return iwe_cq_count(cq);
	}
	while (n < 4 && now_ms() <= end)
		n += iwe_poll_cq(cq, 8 - n, wc + n);
	return n;
}

/* Poll cq until it gives one completion, within WAIT_MS.  Under
 * valgrind, which runs one thread at a time, the loop yields: a poll of
 * a CQ no QP has joined makes no system call, and a loop of them kept
 * the progress thread, which completes the first Send, from running. */
static int poll_one(struct iwe_cq *cq, struct ibv_wc *wc)
{
	long end = now_ms() + WAIT_MS;

	while (now_ms() <= end) {
		if (iwe_poll_cq(cq, 1, wc) == 1)
			return 1;
		if (under_valgrind())
			sched_yield();
	}
	return 0;
}

/* Descriptors open in this process. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_many_on_cq(void)
{
	struct iwe_cq *cq = iwe_create_cq(g_dev, 256, NULL, NULL);
	struct prog_stall st = PROG_STALL_INIT;
	struct iwe_prog *prog = iwe_prog_get(g_dev);
	struct cpair p[MANY_QPS];
	struct ibv_wc wc;
	uint64_t r0 = 0, r1 = 0;
	int got = 0, polls = 200, ok = 1, n_arm, fds0, fds1;
	long end;

	fds0 = open_fds();
	for (int i = 0; i < MANY_QPS; i++) {
		cpair_open(&p[i]);
		side_close(&p[i].b);
		side_fresh_on(&p[i].b, cq);
		ok &= cpair_std_connect(&p[i], 31200 + (uint64_t)i, "many");
	}
	CHECK(ok, "many on a CQ: %d connections, one CQ on the passive side",
	      MANY_QPS);
	sleep_ms(20);		/* what the connects left is read */
	for (int i = 0; i < MANY_QPS; i++)
		r0 += rx_calls(p[i].b.qp);
	for (int k = 0; k < polls; k++)
		iwe_poll_cq(cq, 1, &wc);
	for (int i = 0; i < MANY_QPS; i++)
		r1 += rx_calls(p[i].b.qp);
	CHECK(r1 - r0 <= MANY_QPS,
	      "many on a CQ: %d empty polls made %llu recv calls (one a QP a "
	      "poll would be %d)", polls, (unsigned long long)(r1 - r0),
	      polls * MANY_QPS);
	post_send1(&p[5].a, 69, IBV_WR_SEND, 0, 16, 0, 0, 0);
	got = poll_one(cq, &wc);
	CHECK(got && wc.status == IBV_WC_SUCCESS &&
	      wc.qp_num == p[5].b.qp->qp_num && wc.byte_len == 16,
	      "many on a CQ: the first Send to the sixth QP completes");
	iwe_prog_post(prog, &st.task);
	prog_stall_set(&st, 1);
	post_send1(&p[5].a, 70, IBV_WR_SEND, 0, 32, 0, 0, 0);
	got = poll_one(cq, &wc);
	CHECK(got && wc.status == IBV_WC_SUCCESS &&
	      wc.qp_num == p[5].b.qp->qp_num && wc.byte_len == 32,
	      "many on a CQ: the next Send to it found by polls alone");
	CHECK(burst_on(&p[6], cq, 80, 0) == 4,
	      "many on a CQ: a burst of 4 small Writes completes by polls "
	      "alone");
	n_arm = burst_on(&p[2], cq, 90, 1);
	prog_stall_set(&st, 0);
	CHECK(n_arm == 4, "many on a CQ: another burst is sent by the arm "
	      "that follows it (%d of 4 completed)", n_arm);
	for (int i = 0; i < MANY_QPS; i++)
		cpair_close(&p[i]);
	/* The sockets close on the progress thread, a little later. */
	for (end = now_ms() + WAIT_MS; (fds1 = open_fds()) > fds0 &&
	     now_ms() <= end;)
		sleep_ms(5);
	CHECK(fds1 == fds0, "many on a CQ: with its QPs gone, the CQ holds "
	      "no descriptor (%d open, %d before)", fds1, fds0);
	iwe_destroy_cq(cq);
}

/* Debian's dtest -W over tcp: each side RDMA-writes, polls its send CQ
 * for the Write's completion, then spins on the memory the peer writes,
 * calling nothing: only the progress thread places the answer. */
#define PP_WRITES 200

struct wpp {
	struct side *s, *d;
	int first;		/* writes first (else answers) */
	int n, base;		/* n Writes of values base + 1.. */
	int ok;
};

/* Spin on memory, as dtest -W does: no call into the engine. */
static int wpp_spin(const char *at, char v)
{
	long end = now_ms() + WAIT_MS;

	while (*(const volatile char *)at != v) {
		if (now_ms() > end)
			return 0;
		if (under_valgrind())
			sched_yield();	/* it runs one thread at a time */
	}
	return 1;
}

/* The byte v, RDMA-written (signaled) to the peer's buf + 16384. */
static int wpp_post(struct wpp *w, uint64_t id, char v)
{
	w->s->buf[8192] = v;
	return post_send1(w->s, id, IBV_WR_RDMA_WRITE, 8192, 1,
			  (uintptr_t)(w->d->buf + 16384), w->d->mr->rkey,
			  IBV_SEND_SIGNALED);
}

static int wpp_write_polled(struct wpp *w, char v)
{
	struct ibv_wc wc;

	if (wpp_post(w, (uint64_t)(unsigned char)v, v))
		return 0;
	return poll_one(w->s->scq, &wc) && wc.status == IBV_WC_SUCCESS &&
	       wc.opcode == IBV_WC_RDMA_WRITE;
}

static void *wpp_run(void *arg)
{
	struct wpp *w = arg;
	int i;

	w->ok = 1;
	for (i = 1; i <= w->n && w->ok; i++) {
		char v = (char)((w->base + i) % 120 + 1);

		if (!w->first)
			w->ok = wpp_spin(w->s->buf + 16384, v);
		w->ok = w->ok && wpp_write_polled(w, v);
		if (w->first)
			w->ok = w->ok && wpp_spin(w->s->buf + 16384, v);
	}
	return NULL;
}

/* n Writes each way, a's and b's threads answering each other at once
 * (the holds start again once they are answered).  1 if all went. */
static int wpp_pingpong(struct wpp *a, struct wpp *b, int n, int base)
{
	pthread_t ta, tb;

	a->first = 1, b->first = 0;
	a->n = b->n = n;
	a->base = b->base = base;
	pthread_create(&tb, NULL, wpp_run, b);
	pthread_create(&ta, NULL, wpp_run, a);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	return a->ok && b->ok;
}

/* Writes answered by Writes, each consumer spinning on its memory in
 * between (dtest -W): every Write lands and completes with success, the
 * completion of each as soon as it is in the socket (nothing waits for
 * an answer); and one more that nobody answers completes at once. */
static void test_write_pingpong(void)
{
	struct wpp wa = { 0 }, wb = { 0 };
	struct cpair p;
	long t0;
	int npp;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, 31181, "write pp"), "write pp: connected");
	wa = (struct wpp){ .s = &p.a, .d = &p.b };
	wb = (struct wpp){ .s = &p.b, .d = &p.a };
	npp = under_valgrind() ? 20 : PP_WRITES;
	CHECK(wpp_pingpong(&wa, &wb, npp, 0),
	      "write pp: %d Writes each way, each answered, every completion "
	      "a success", npp);
	t0 = now_ms();
	CHECK(wpp_write_polled(&wa, 'z') && now_ms() - t0 < WAIT_MS,
	      "write pp: an unanswered Write completes while polled (%ld ms)",
	      now_ms() - t0);
	cpair_close(&p);
}

/* Posts close together are a burst, held back until the consumer polls
 * or arms -- or, as the safety net, until the progress thread, woken by
 * the burst's first post, sends them.  Here the sender posts two small
 * Sends back to back (the second may be held), then neither polls nor
 * arms: both arrive. */
static void test_burst_then_idle(void)
{
	struct ibv_wc wc;
	struct cpair p;
	long end;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, 31178, "idle burst"),
	      "idle burst: connected");
	fill(p.a.buf, 128, 31178);
	for (end = now_ms() + 3; now_ms() < end;)
		iwe_poll_cq(p.a.scq, 1, &wc);
	CHECK(post_send1(&p.a, 41, IBV_WR_SEND, 0, 64, 0, 0, 0) == 0 &&
	      post_send1(&p.a, 42, IBV_WR_SEND, 64, 64, 0, 0, 0) == 0,
	      "idle burst: two 64-byte Sends posted back to back");
	CHECK(wait_cq(p.b.rcq, 2) && !memcmp(p.b.buf, p.a.buf, 64) &&
	      !memcmp(p.b.buf + 4096, p.a.buf + 64, 64),
	      "idle burst: both arrived with the sender idle, data intact "
	      "(%d of 2)", iwe_cq_count(p.b.rcq));
	cpair_disconnect_close(&p, "idle burst");
}

/* Mid-size posts close together leave together (a burst reaches 64 KiB
 * with the fourth): four 16 KiB Writes posted back to back complete,
 * data intact.  (How many system calls they take depends on when the
 * progress thread gets to the burst: bench/run.sh's Write rows show the
 * rate.) */
static void test_midsize_burst(void)
{
	struct cpair p;
	int ok = 1, other;

	cpair_open(&p);
	CHECK(cpair_std_connect(&p, 31194, "mid-size burst"),
	      "mid-size burst: connected");
	fill(p.a.buf, 65536, 31194);
	sleep_ms(1);		/* a pause: the first post goes at once */
	for (int i = 0; i < 4; i++)
		ok &= post_send1(&p.a, 70 + (uint64_t)i, IBV_WR_RDMA_WRITE,
				 (size_t)i * 16384, 16384,
				 (uintptr_t)(p.b.buf + 131072 + i * 16384),
				 p.b.mr->rkey, IBV_SEND_SIGNALED) == 0;
	CHECK(ok && wait_cq(p.a.scq, 4) &&
	      count_status(p.a.scq, IBV_WC_SUCCESS, &other) == 4 && !other &&
	      wait_bytes(p.b.buf + 131072, p.a.buf, 65536),
	      "mid-size burst: four 16 KiB Writes complete, data intact");
	cpair_disconnect_close(&p, "mid-size burst");
}

/* With CRC on, a QP that streams large Writes grows its staging room
 * until a whole batch fits: 512 KiB Writes then leave in a few system
 * calls each, not one per 64 KiB FPDU as with a fixed 64 KiB stage. */
static void test_crc_stage_grows(void)
{
	struct iwe_qp_stats st0, st;
	struct cpair p;
	int ok = 1, other;
	const size_t len = 512u << 10;
	unsigned long long calls;

	cpair_open(&p);
	p.ap = cm_params(2, 1, IW_RTR_WRITE);
	p.bp = cm_params(2, 1, 0);
	CHECK(cpair_connect(&p, 31195, 4, 4, "crc stage"),
	      "crc stage: connected with CRC");
	for (int i = 0; i < 12 && ok; i++) {
		if (i == 8)
			iwe_qp_query_stats(p.a.qp, &st0);
		fill(p.a.buf, len, 31195 + i);
		ok = post_send1(&p.a, 80 + (uint64_t)i, IBV_WR_RDMA_WRITE, 0,
				len, (uintptr_t)(p.b.buf + len), p.b.mr->rkey,
				IBV_SEND_SIGNALED) == 0 &&
		     wait_cq(p.a.scq, 1) &&
		     count_status(p.a.scq, IBV_WC_SUCCESS, &other) == 1 &&
		     !other && wait_bytes(p.b.buf + len, p.a.buf, len);
	}
	CHECK(ok, "crc stage: twelve 512 KiB Writes complete, data intact");
	iwe_qp_query_stats(p.a.qp, &st);
	calls = (unsigned long long)(st.tx_syscalls - st0.tx_syscalls);
	CHECK(under_valgrind() || calls < 4 * 8,
	      "crc stage: the last four Writes took %llu system calls "
	      "(fewer than one per 64 KiB FPDU)", calls);
	cpair_disconnect_close(&p, "crc stage");
}

/* A raw initiator establishes by hand, then dies inside an FPDU. */
static void test_peer_dies(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iw_mpa_params rq = { .rev = 1 };
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	struct iwe_listener *l = NULL;
	struct evlog lp;
	struct side b;
	uint8_t half[10] = { 0, 40, 0x43, 0x01 };	/* length 40, 6 bytes */
	int fd;

	evlog_init(&lp);
	side_fresh(&b);
	iwe_cm_listen(g_dev, 31180, &bp, 0, on_event, &lp, &l);
	fd = raw_connect(31180);
	CHECK(fd >= 0 && raw_send_frame(fd, 0, &rq) == 0 &&
	      wait_type(&lp, 0, IWE_CM_CONNECT_REQUEST) &&
	      iwe_cm_accept(lp.r[0].conn, b.qp, NULL, 0, on_event, &lp) == 0 &&
	      raw_read_frame(fd, buf, &f) == 0 && f.rev == 1 && !f.reject &&
	      wait_type(&lp, 1, IWE_CM_ESTABLISHED),
	      "dies: revision-1 raw initiator accepted, ESTABLISHED");
	CHECK(send(fd, half, sizeof(half), 0) == sizeof(half),
	      "dies: half an FPDU sent");
	close(fd);
	CHECK(wait_type(&lp, 2, IWE_CM_BROKEN) &&
	      iwe_qp_get_state(b.qp) == IWE_QPS_ERROR,
	      "dies: BROKEN when the peer closes inside an FPDU");
	iwe_cm_conn_destroy(lp.r[0].conn);
	iwe_cm_listen_destroy(l);
	side_close(&b);
	evlog_fini(&lp);
}

/* max_requests = 1: the second request is refused. */
static void test_max_requests(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iw_mpa_params rq = { .rev = 2, .ird = 1, .ord = 1 };
	struct iwe_listener *l = NULL;
	struct evlog lp;
	int fd1, fd2;

	evlog_init(&lp);
	iwe_cm_listen(g_dev, 31190, &bp, 1, on_event, &lp, &l);
	fd1 = raw_connect(31190);
	fd2 = raw_connect(31190);
	raw_send_frame(fd1, 0, &rq);
	CHECK(wait_type(&lp, 0, IWE_CM_CONNECT_REQUEST),
	      "max_requests: first request delivered");
	raw_send_frame(fd2, 0, &rq);
	CHECK(fd_readable_eof(fd2, 1000) && evlog_count(&lp) == 1,
	      "max_requests: second one closed, not delivered");
	iwe_cm_reject(lp.r[0].conn, NULL, 0);
	iwe_cm_conn_destroy(lp.r[0].conn);
	iwe_cm_listen_destroy(l);
	close(fd1);
	close(fd2);
	evlog_fini(&lp);
}

/* ------------------------------------------------------- concurrency */

#define NTHREADS 4
#define PER_THREAD 5
#define NCONN (NTHREADS * PER_THREAD)

static struct side g_pass[NCONN];
static struct evlog g_plog[NCONN];
static atomic_int g_next_pass;
static atomic_int g_conc_ok;

static int accept_in_handler(struct evlog *l, const struct iwe_cm_event *ev)
{
	int i = atomic_fetch_add(&g_next_pass, 1);

	(void)l;
	post_recv1(&g_pass[i], 1, 0, 64);
	return iwe_cm_accept(ev->conn, g_pass[i].qp, &i, sizeof(i), on_event,
			     &g_plog[i]);
}

static void *conc_thread(void *arg)
{
	struct iwe_cm_params ap = cm_params(2, 1, IW_RTR_SEND);
	struct sockaddr_in dst = lo_addr(0);
	struct iwe_conn *c[PER_THREAD];
	struct evlog la[PER_THREAD];
	struct side a[PER_THREAD];
	int i, ok = 1;

	(void)arg;
	for (i = 0; i < PER_THREAD; i++) {
		evlog_init(&la[i]);
		side_fresh(&a[i]);
		ok &= iwe_cm_connect(a[i].qp, &dst, 31200, NULL, 0, 2000, &ap,
				     on_event, &la[i], &c[i]) == 0;
	}
	for (i = 0; i < PER_THREAD; i++) {
		ok &= wait_type(&la[i], 0, IWE_CM_ESTABLISHED);
		ok &= post_send1(&a[i], 1, IBV_WR_SEND, 0, 8, 0, 0, 0) == 0;
	}
	for (i = 0; i < PER_THREAD; i++) {
		iwe_cm_disconnect(c[i], 1);
		ok &= wait_type(&la[i], 1, IWE_CM_DISCONNECTED);
		iwe_cm_conn_destroy(c[i]);
		side_close(&a[i]);
		evlog_fini(&la[i]);
	}
	atomic_fetch_and(&g_conc_ok, ok);
	return NULL;
}

static void test_concurrent(void)
{
	struct iwe_cm_params bp = cm_params(2, 1, 0);
	struct iwe_listener *l = NULL;
	struct evlog lp;
	pthread_t th[NTHREADS];
	int i, got = 0, disc = 0;
	struct ibv_wc wc;

	evlog_init(&lp);
	lp.on_request = accept_in_handler;
	atomic_store(&g_conc_ok, 1);
	for (i = 0; i < NCONN; i++) {
		side_fresh(&g_pass[i]);
		evlog_init(&g_plog[i]);
	}
	iwe_cm_listen(g_dev, 31200, &bp, 0, on_event, &lp, &l);
	for (i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, conc_thread, NULL);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&g_conc_ok),
	      "concurrent: %d connections from %d threads established, "
	      "used and disconnected", NCONN, NTHREADS);
	for (i = 0; i < NCONN; i++) {
		got += wait_cq(g_pass[i].rcq, 1) && poll1(g_pass[i].rcq, &wc) &&
		       wc.status == IBV_WC_SUCCESS && wc.byte_len == 8;
		disc += wait_type(&g_plog[i], 1, IWE_CM_DISCONNECTED);
	}
	CHECK(got == NCONN && disc == NCONN && evlog_count(&lp) == NCONN,
	      "concurrent: every passive side got its Send and "
	      "DISCONNECTED (%d, %d)", got, disc);
	for (i = 0; i < NCONN; i++) {
		if (evlog_count(&g_plog[i]))
			iwe_cm_conn_destroy(g_plog[i].r[0].conn);
		side_close(&g_pass[i]);
		evlog_fini(&g_plog[i]);
	}
	iwe_cm_listen_destroy(l);
	evlog_fini(&lp);
}

static void test_env(void)
{
	struct iwe_cm_params p = cm_params(2, 0, 0);

	setenv("IWDAPL_MPA_REV", "1", 1);
	setenv("IWDAPL_CRC", "on", 1);
	setenv("IWDAPL_RTR", "read", 1);
	setenv("IWDAPL_MPA_TIMEOUT_MS", "1234", 1);
	iwe_cm_params_from_env(&p);
	CHECK(p.mpa_rev == 1 && p.crc == 1 && p.rtr == IW_RTR_READ &&
	      p.mpa_timeout_ms == 1234, "env: every knob applied");
	setenv("IWDAPL_MPA_REV", "3", 1);
	setenv("IWDAPL_RTR", "bogus", 1);
	setenv("IWDAPL_CRC", "off", 1);
	iwe_cm_params_from_env(&p);
	CHECK(p.mpa_rev == 1 && p.crc == 0 && p.rtr == IW_RTR_READ,
	      "env: invalid values ignored");
	unsetenv("IWDAPL_MPA_REV");
	unsetenv("IWDAPL_CRC");
	unsetenv("IWDAPL_RTR");
	unsetenv("IWDAPL_MPA_TIMEOUT_MS");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_env();
	test_variants();
	test_crc_negotiation();
	test_reject();
	test_unreachable();
	test_refused_then_listening();
	test_silent_and_garbage(0);
	test_silent_and_garbage(1);
	test_raw_initiators();
	test_services();
	test_addrinuse();
	test_abrupt();
	test_peer_timeout();
	test_congestion();
	test_bulk_not_held();
	test_poll_reads_bulk();
	test_placed_without_calls();
	test_spin_leaves_input();
	test_sleep_on_socket();
	test_shared_cq();
	test_many_on_cq();
	test_write_pingpong();
	test_burst_then_idle();
	test_midsize_burst();
	test_crc_stage_grows();
	cpair_idle_case(31196, "idle give-back");
	test_peer_dies();
	test_max_requests();
	test_concurrent();
	test_awaited_count();
	CHECK(cm_awaited_now() == 0,
	      "no conn left counted as awaited after every test (got %d)",
	      cm_awaited_now());
	iwe_device_close(g_dev);
	return tap_done();
}
