/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager over TRP/UDP (a udp device on 127.0.0.1):
 * connect / accept with private data and every RTR type, traffic both
 * ways, graceful and abrupt disconnects, rejects, NON_PEER_REJECTED,
 * UNREACHABLE, TIMED_OUT (with the request retransmitted), BROKEN by a
 * fatal Terminate, ESTABLISHED before any completion, a service above
 * 65535, Socket Service Points on connected UDP sockets (and the wrong
 * socket type refused untouched), 100 connections at once on one
 * listener, a responder's ESTABLISHED not overtaken by the end of a
 * connection the initiator closed after its RTR, an initiator's
 * ESTABLISHED only once its RTR is acknowledged, an idle connection
 * kept by its probes but ended by a silent peer, and a listening port's
 * requests past a burst taken in at the loop's next turn.  TAP output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/resource.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>

#include "cm_harness.h"
#include "cpair.h"
#include "iw_trp.h"

/* --------------------------------------------------------- UDP sockets */

static int udp_bound(struct sockaddr_in *a)
{
	socklen_t l = sizeof(*a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	*a = lo_addr(0);
	if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof(*a)) ||
	    getsockname(fd, (struct sockaddr *)a, &l))
		BAIL("udp: %s", strerror(errno));
	set_timeouts(fd);
	return fd;
}

static void udp_pair(int *x, int *y)
{
	struct sockaddr_in ax, ay;

	*x = udp_bound(&ax);
	*y = udp_bound(&ay);
	if (connect(*x, (struct sockaddr *)&ay, sizeof(ay)) ||
	    connect(*y, (struct sockaddr *)&ax, sizeof(ax)))
		BAIL("udp connect");
}

/* --------------------------------------------------- the pair under test */

/* Listen (service 0: any port), connect with 'req' bytes of private
 * data; the CONNECT_REQUEST, or NULL. */
static struct rec *cpair_request(struct cpair *p, uint64_t service,
				 const struct iwe_cm_params *ap,
				 const struct iwe_cm_params *bp, size_t req)
{
	uint8_t pd[IWE_MAX_PRIVATE_DATA];
	struct sockaddr_in dst = lo_addr(0);
	struct rec *r;

	fill((char *)pd, req, 17);
	p->service = service;
	if ((service ? iwe_cm_listen(g_dev, service, bp, 0, on_event, &p->lp,
				     &p->l)
		     : iwe_cm_listen_any(g_dev, &p->service, bp, on_event,
					 &p->lp, &p->l)) ||
	    iwe_cm_connect(p->a.qp, &dst, p->service, pd, req, 3000, ap,
			   on_event, &p->la, &p->ca))
		return NULL;
	r = wait_ev(&p->lp, 0, WAIT_MS);
	if (r && (r->type != IWE_CM_CONNECT_REQUEST || r->pdata_len != req ||
		  memcmp(r->pdata, pd, req) || r->service != p->service))
		return NULL;
	return r;
}

static int cpair_establish(struct cpair *p, const char *tag, unsigned rtr)
{
	struct iwe_cm_params ap = cm_params(2, 0, rtr), bp = cm_params(2, 0, 0);
	uint8_t rep[100];
	struct rec *r = cpair_request(p, 0, &ap, &bp, 40);

	CHECK(r != NULL, "%s: CONNECT_REQUEST with the private data and "
	      "service", tag);
	if (!r)
		return 0;
	p->cb = r->conn;
	CHECK(ntohs(r->local.sin_port) == p->service &&
	      r->remote.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "%s: the passive conn is on the listening port", tag);
	post_recv1(&p->b, 1, 0, 4096);
	post_recv1(&p->b, 2, 4096, 4096);
	fill((char *)rep, sizeof(rep), 5);
	CHECK(iwe_cm_accept(p->cb, p->b.qp, rep, sizeof(rep), on_event,
			    &p->lb) == 0 &&
	      wait_type(&p->la, 0, IWE_CM_ESTABLISHED) &&
	      wait_type(&p->lb, 0, IWE_CM_ESTABLISHED),
	      "%s: ESTABLISHED on both sides", tag);
	CHECK(p->la.r[0].pdata_len == sizeof(rep) &&
	      !memcmp(p->la.r[0].pdata, rep, sizeof(rep)),
	      "%s: the reply's private data reaches the initiator", tag);
	return evlog_count(&p->lb) > 0 && evlog_count(&p->la) > 0;
}

/* ------------------------------------------------------------- tests */

static void test_rtr_variants(void)
{
	static const struct { const char *tag; unsigned rtr; int graceful;
			      int passive; } v[] = {
		{ "rtr none", 0, 1, 0 }, { "rtr write", IW_RTR_WRITE, 1, 1 },
		{ "rtr read", IW_RTR_READ, 0, 0 },
		{ "rtr send", IW_RTR_SEND, 0, 1 },
	};
	struct ibv_wc wc;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct cpair p;

		cpair_open(&p);
		if (cpair_establish(&p, v[i].tag, v[i].rtr)) {
			cpair_traffic(&p, v[i].tag);
			CHECK(iwe_cm_disconnect(v[i].passive ? p.cb : p.ca,
						v[i].graceful) == 0 &&
			      wait_type(&p.la, 1, IWE_CM_DISCONNECTED) &&
			      wait_type(&p.lb, 1, IWE_CM_DISCONNECTED),
			      "%s: %s disconnect from the %s side: "
			      "DISCONNECTED on both (F)", v[i].tag,
			      v[i].graceful ? "graceful" : "abrupt",
			      v[i].passive ? "passive" : "active");
			CHECK(wait_cq(p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
			      wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR,
			      "%s: outstanding receive flushed", v[i].tag);
		}
		cpair_close(&p);
	}
}

static void test_reject(void)
{
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_WRITE);
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct cpair p;
	struct rec *r;

	cpair_open(&p);
	r = cpair_request(&p, 0, &ap, &bp, 8);
	CHECK(r && iwe_cm_reject(r->conn, "no thanks", 9) == 0 &&
	      wait_type(&p.la, 0, IWE_CM_REJECTED) &&
	      p.la.r[0].pdata_len == 9 && !memcmp(p.la.r[0].pdata,
						   "no thanks", 9),
	      "reject: REJECTED with the consumer's private data");
	if (r)
		iwe_cm_conn_destroy(r->conn);
	cpair_close(&p);
}

/* A listener goes while its connection lives, and comes back on the
 * same port: the port is ours, shared; someone else's is refused. */
static void test_relisten(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iwe_listener *l2 = NULL;
	struct evlog lp2;
	struct sockaddr_in a;
	struct cpair p;
	uint64_t svc;
	int raw;

	cpair_open(&p);
	evlog_init(&lp2);
	if (cpair_establish(&p, "relisten", IW_RTR_WRITE)) {
		svc = p.service;
		iwe_cm_listen_destroy(p.l);
		p.l = NULL;
		CHECK(iwe_cm_listen(g_dev, svc, &bp, 0, on_event, &lp2, &l2) ==
		      0, "a listener again on the port our connection holds");
		cpair_traffic(&p, "relisten");
		if (l2)
			iwe_cm_listen_destroy(l2);
	}
	raw = udp_bound(&a);
	CHECK(iwe_cm_listen(g_dev, ntohs(a.sin_port), &bp, 0, on_event, &lp2,
			    &l2) == EADDRINUSE,
	      "a UDP port bound by another socket: EADDRINUSE");
	close(raw);
	evlog_fini(&lp2);
	cpair_close(&p);
}

static void connect_to(struct cpair *p, uint16_t port, int timeout_ms)
{
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_WRITE);
	struct sockaddr_in dst = lo_addr(0);

	if (iwe_cm_connect(p->a.qp, &dst, port, "x", 1, timeout_ms, &ap,
			   on_event, &p->la, &p->ca))
		BAIL("connect");
}

static void test_failures(void)
{
	struct sockaddr_in a;
	struct cpair p;
	uint8_t buf[2048];
	int raw, n = 0;
	long t0, ms;

	/* Nobody on the port: ICMP port unreachable, once the grace for a
	 * peer about to listen (200 ms) is over. */
	cpair_open(&p);
	raw = udp_bound(&a);
	close(raw);
	t0 = now_ms();
	connect_to(&p, ntohs(a.sin_port), 3000);
	CHECK(wait_type(&p.la, 0, IWE_CM_UNREACHABLE),
	      "closed UDP port: UNREACHABLE");
	ms = now_ms() - t0;
	CHECK(ms >= 150 && ms <= 1500,
	      "closed UDP port: after the refusals' grace of 200 ms (%ld ms)",
	      ms);
	cpair_close(&p);

	/* A listener that comes 20 ms later gets the request. */
	cpair_open(&p);
	raw = udp_bound(&a);
	close(raw);
	connect_to(&p, ntohs(a.sin_port), 3000);
	{
		struct iwe_cm_params bp = cm_params(2, 0, 0);

		late_listen_accept(g_dev, ntohs(a.sin_port), &bp,
				   &(struct late_pair){ p.b.qp, &p.la, &p.lp,
							&p.lb, &p.l, &p.cb },
				   "late UDP listener");
	}
	cpair_close(&p);

	/* A silent peer: the request goes again, then TIMED_OUT. */
	cpair_open(&p);
	raw = udp_bound(&a);
	t0 = now_ms();
	connect_to(&p, ntohs(a.sin_port), 900);
	CHECK(wait_type(&p.la, 0, IWE_CM_TIMED_OUT) && now_ms() - t0 >= 850,
	      "silent peer: TIMED_OUT after the timeout");
	while (recv(raw, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		n++;
	CHECK(n >= 3, "the request was retransmitted with backoff (%d sent)",
	      n);
	close(raw);
	cpair_close(&p);

	/* A peer that answers with something else. */
	cpair_open(&p);
	raw = udp_bound(&a);
	connect_to(&p, ntohs(a.sin_port), 3000);
	{
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);

		if (recvfrom(raw, buf, sizeof(buf), 0,
			     (struct sockaddr *)&from, &fl) > 0)
			sendto(raw, "HELLO, WORLD!", 13, 0,
			       (struct sockaddr *)&from, fl);
	}
	CHECK(wait_type(&p.la, 0, IWE_CM_NON_PEER_REJECTED),
	      "a datagram that is not a TRP reply: NON_PEER_REJECTED");
	close(raw);
	cpair_close(&p);
}

/* A connection request grants the credits its QP will keep: its whole
 * window and no more (more, and the peer's first burst went partly into
 * drops beyond the reorder buffer: 1424 credits for a 1024-packet window
 * at MTU 1500 once). */
static void test_request_credits(void)
{
	static const uint32_t mtus[] = { 1500, 65535 };

	for (size_t i = 0; i < sizeof(mtus) / sizeof(mtus[0]); i++) {
		struct iw_trp_fields f = { 0 };
		struct sockaddr_in a;
		struct cpair p;
		uint8_t buf[2048];
		uint32_t win;
		ssize_t n;
		int raw;

		if (iwe_device_set_mtu(g_dev, mtus[i]))
			BAIL("mtu %u", mtus[i]);
		win = iwe_trp_window(g_dev);
		cpair_open(&p);
		raw = udp_bound(&a);
		connect_to(&p, ntohs(a.sin_port), 300);
		n = recv(raw, buf, sizeof(buf), 0);
		if (n >= IW_TRP_HDR_LEN)
			iw_trp_get(buf, &f);
		CHECK(n >= IW_TRP_HDR_LEN && (f.flags & IW_TRP_I) &&
		      f.credits == win && win >= 8 && win <= 2048 &&
		      !(win & (win - 1)),
		      "MTU %u: the request grants the QP's window (%u credits, "
		      "window %u)", mtus[i], f.credits, win);
		CHECK(wait_type(&p.la, 0, IWE_CM_TIMED_OUT),
		      "MTU %u: unanswered request: TIMED_OUT", mtus[i]);
		close(raw);
		cpair_close(&p);
	}
}

/* CPU time (user + system) this process uses over ms of sleeping. */
static long cpu_ms_over(int ms)
{
	struct rusage a, b;

	getrusage(RUSAGE_SELF, &a);
	sleep_ms(ms);
	getrusage(RUSAGE_SELF, &b);
	return (b.ru_utime.tv_sec - a.ru_utime.tv_sec) * 1000 +
	       (b.ru_utime.tv_usec - a.ru_utime.tv_usec) / 1000 +
	       (b.ru_stime.tv_sec - a.ru_stime.tv_sec) * 1000 +
	       (b.ru_stime.tv_usec - a.ru_stime.tv_usec) / 1000;
}

static void test_broken(void)
{
	struct cpair p;

	cpair_open(&p);
	if (cpair_establish(&p, "broken", IW_RTR_WRITE)) {
		/* b's two receives taken, then a third Send: fatal. */
		for (int i = 0; i < 3; i++)
			post_send1(&p.a, 20 + (uint64_t)i, IBV_WR_SEND, 0, 10,
				   0, 0, IBV_SEND_SIGNALED);
		CHECK(wait_type(&p.lb, 1, IWE_CM_BROKEN) &&
		      wait_type(&p.la, 1, IWE_CM_BROKEN),
		      "a Send with no receive: fatal Terminate, BROKEN on "
		      "both sides");
		/* Kept, the failed QPs cost nothing: their timers' deadlines
		 * (the idle probe's, past after a second) once fired again
		 * at once, for ever, a CPU spinning in the progress thread
		 * for every broken connection a consumer held on to. */
		sleep_ms(TRP_IDLE_PROBE_MS * 2);
		long cpu = cpu_ms_over(1000);
		CHECK(cpu < 300, "the broken QPs kept: the process used %ld ms "
		      "of CPU in a second", cpu);
	}
	cpair_close(&p);
}

static void test_service_hdr(void)
{
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_SEND);
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct cpair p;
	struct rec *r;

	cpair_open(&p);
	r = cpair_request(&p, 7000000123ULL, &ap, &bp, 30);
	CHECK(r && ntohs(r->local.sin_port) ==
	      IWE_CM_SERVICE_PORT_BASE + 7000000123ULL % IWE_CM_SERVICE_PORTS,
	      "service > 65535: routed through its hashed port, header "
	      "stripped");
	if (r) {
		p.cb = r->conn;
		CHECK(iwe_cm_accept(p.cb, p.b.qp, NULL, 0, on_event, &p.lb) ==
		      0 && wait_type(&p.la, 0, IWE_CM_ESTABLISHED) &&
		      wait_type(&p.lb, 0, IWE_CM_ESTABLISHED),
		      "service > 65535: ESTABLISHED");
	}
	cpair_close(&p);
}

/* ESTABLISHED before any completion: the initiator's Send goes out right
 * behind its RTR, from its ESTABLISHED handler. */
struct order {
	struct side *s;
	atomic_int est, cq_at_est;
};

static void order_active(const struct iwe_cm_event *ev, void *ctx)
{
	struct order *o = ctx;

	if (ev->type == IWE_CM_ESTABLISHED) {
		post_send1(o->s, 99, IBV_WR_SEND, 0, 16, 0, 0, 0);
		atomic_store(&o->est, 1);
	}
}

static void order_passive(const struct iwe_cm_event *ev, void *ctx)
{
	struct order *o = ctx;

	if (ev->type == IWE_CM_ESTABLISHED) {
		atomic_store(&o->cq_at_est, iwe_cq_count(o->s->rcq));
		atomic_store(&o->est, 1);
	}
}

static void test_established_first(void)
{
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_SEND);
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct sockaddr_in dst = lo_addr(0);
	struct order oa = { 0 }, ob = { 0 };
	struct cpair p;
	struct rec *r;

	cpair_open(&p);
	oa.s = &p.a;
	ob.s = &p.b;
	atomic_store(&ob.cq_at_est, -1);
	if (iwe_cm_listen_any(g_dev, &p.service, &bp, on_event, &p.lp, &p.l) ||
	    iwe_cm_connect(p.a.qp, &dst, p.service, NULL, 0, 3000, &ap,
			   order_active, &oa, &p.ca))
		BAIL("listen/connect");
	r = wait_ev(&p.lp, 0, WAIT_MS);
	if (r) {
		p.cb = r->conn;
		post_recv1(&p.b, 1, 0, 64);
		iwe_cm_accept(p.cb, p.b.qp, NULL, 0, order_passive, &ob);
	}
	CHECK(r && wait_cq(p.b.rcq, 1) && atomic_load(&ob.est) &&
	      atomic_load(&ob.cq_at_est) == 0,
	      "a Send right behind the RTR completes after ESTABLISHED");
	cpair_close(&p);
}

/* ------------------------------------- ESTABLISHED before a later end */

/* The responder's accept reply leaves from inside its QP's attach, on
 * its device's progress thread.  The test's sendmmsg and send (the
 * engine's, by symbol interposition: a lone datagram goes by send) run
 * a hook armed by the test right after that reply went out, with that
 * thread held: the initiator, on another device with its own thread,
 * answers with its RTR and closes an older connection to the same
 * responder meanwhile. */
static atomic_int g_reply_armed, g_reply_hooked;
static void (*g_reply_fn)(void);

/* Armed: the next data packet sent (flags none) is dropped -- the
 * initiator's RTR, as the responder sends no data before it; with
 * g_drop_data_all, every data packet. */
static atomic_int g_drop_data_armed, g_drop_data_done, g_drop_data_all;

static int drop_hook(const void *buf, size_t len)
{
	struct iw_trp_fields h;

	if (len <= IW_TRP_HDR_LEN || !atomic_load(&g_drop_data_armed))
		return 0;
	iw_trp_get(buf, &h);
	if (h.flags || !(atomic_load(&g_drop_data_all) ||
			 atomic_exchange(&g_drop_data_armed, 0)))
		return 0;
	atomic_store(&g_drop_data_done, 1);
	return 1;
}

static void reply_hook(const void *buf, size_t len)
{
	if (len >= IW_TRP_HDR_LEN + IW_MPA_KEY_LEN &&
	    !memcmp((const uint8_t *)buf + IW_TRP_HDR_LEN, IW_MPA_KEY_REP,
		    IW_MPA_KEY_LEN) &&
	    atomic_exchange(&g_reply_armed, 0)) {
		atomic_store(&g_reply_hooked, 1);
		g_reply_fn();
	}
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	int r;

	if (n && drop_hook(v[0].msg_hdr.msg_iov->iov_base,
			   v[0].msg_hdr.msg_iov->iov_len)) {
		/* Lost on the way; the rest goes. */
		v[0].msg_len = (unsigned)v[0].msg_hdr.msg_iov->iov_len;
		if (n == 1)
			return 1;
		r = (int)syscall(SYS_sendmmsg, fd, v + 1, n - 1, flags);
		return r < 0 ? 1 : r + 1;
	}
	r = (int)syscall(SYS_sendmmsg, fd, v, n, flags);

	if (r > 0)
		reply_hook(v[0].msg_hdr.msg_iov->iov_base,
			   v[0].msg_hdr.msg_iov->iov_len);
	return r;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t r;

	if (drop_hook(buf, len))
		return (ssize_t)len;
	r = syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);

	if (r > 0)
		reply_hook(buf, len);
	return r;
}

/* Sequence numbers of a passive conn's events, in delivery order. */
static atomic_int g_seq;

struct seen {
	atomic_int est, end;
};

static void seen_event(const struct iwe_cm_event *ev, void *ctx)
{
	struct seen *s = ctx;

	if (ev->type == IWE_CM_ESTABLISHED)
		atomic_store(&s->est, atomic_fetch_add(&g_seq, 1) + 1);
	else if (ev->type == IWE_CM_DISCONNECTED || ev->type == IWE_CM_BROKEN)
		atomic_store(&s->end, atomic_fetch_add(&g_seq, 1) + 1);
}

static int wait_set(atomic_int *v)
{
	long end = now_ms() + WAIT_MS;

	while (!atomic_load(v) && now_ms() < end)
		sleep_ms(1);
	return atomic_load(v) != 0;
}

/* A pair whose active side lives on another device (its own thread). */
static void cpair_open_split(struct cpair *p, struct iwe_device *adev)
{
	struct iwe_device *d = g_dev;

	cpair_open(p);
	side_close(&p->a);
	g_dev = adev;
	side_fresh(&p->a);
	g_dev = d;
}

static struct cpair *g_old, *g_new;

/* Inside the new connection's reply: its initiator has sent its RTR
 * (not yet established: that waits for the RTR's acknowledgement, which
 * this thread would send), then it closes the old connection. */
static void close_old_after_rtr(void)
{
	long end = now_ms() + WAIT_MS;
	struct iwe_trp_stats st = { 0 };

	while (!st.sent && now_ms() < end) {
		sleep_ms(1);
		iwe_trp_stats(g_new->a.qp, &st);
	}
	iwe_cm_disconnect(g_old->ca, 1);
	sleep_ms(50);
}

static void test_established_before_later_end(void)
{
	struct iwe_device *adev = iwe_device_open("127.0.0.1",
						  IWE_TRANSPORT_UDP);
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_SEND);
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct seen so = { 0 }, sn = { 0 };
	struct cpair old, new;
	struct rec *r;

	if (!adev)
		BAIL("second udp device: %s", strerror(errno));
	cpair_open_split(&old, adev);
	cpair_open_split(&new, adev);
	g_old = &old;
	g_new = &new;
	g_reply_fn = close_old_after_rtr;
	r = cpair_request(&old, 0, &ap, &bp, 0);
	if (r) {
		old.cb = r->conn;
		iwe_cm_accept(old.cb, old.b.qp, NULL, 0, seen_event, &so);
	}
	CHECK(r && wait_type(&old.la, 0, IWE_CM_ESTABLISHED) &&
	      wait_set(&so.est), "the older connection is established");
	r = cpair_request(&new, 0, &ap, &bp, 0);
	if (r) {
		new.cb = r->conn;
		atomic_store(&g_reply_armed, 1);
		iwe_cm_accept(new.cb, new.b.qp, NULL, 0, seen_event, &sn);
	}
	CHECK(r && atomic_load(&g_reply_hooked) && wait_set(&sn.est) &&
	      wait_set(&so.end),
	      "the hook ran in the reply; both events came (est %d, end %d)",
	      atomic_load(&sn.est), atomic_load(&so.end));
	CHECK(atomic_load(&sn.est) && atomic_load(&sn.est) < atomic_load(&so.end),
	      "ESTABLISHED of a connection whose RTR came first is delivered "
	      "before the end of one the peer closed after it");
	atomic_store(&g_reply_armed, 0);
	cpair_close(&new);
	cpair_close(&old);
	iwe_device_close(adev);
}

/* ------------------------------------------------------- delayed ack */

/* Until the byte at at reads v, or WAIT_MS: the target of an RDMA Write
 * spinning on its memory, as dtest -W and MPI's eager fast path do. */
static int spin_until(const char *at, char v)
{
	long end = now_ms() + WAIT_MS;

	while (*(const volatile char *)at != v) {
		if (now_ms() > end)
			return 0;
		sched_yield();
	}
	return 1;
}

/* One byte RDMA-written from s's buf + 8192 to byte off of d's buf. */
static int write1(struct side *s, struct side *d, uint64_t id, size_t off,
		  char v, unsigned flags)
{
	s->buf[8192] = v;
	return post_send1(s, id, IBV_WR_RDMA_WRITE, 8192, 1,
			  (uintptr_t)(d->buf + off), d->mr->rkey, flags) == 0;
}

/* An initiator is ESTABLISHED once the responder has its RTR (the RTR's
 * acknowledgement), not when it sent it: with the RTR lost, it waits for
 * its retransmission, and the responder's ESTABLISHED comes first. */
static void test_established_after_rtr_acked(void)
{
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_WRITE);
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct seen sa = { 0 }, sb = { 0 };
	struct sockaddr_in dst = lo_addr(0);
	uint8_t rep[24];
	struct cpair p;
	struct rec *r;

	cpair_open(&p);
	fill((char *)rep, sizeof(rep), 9);
	if (iwe_cm_listen_any(g_dev, &p.service, &bp, on_event, &p.lp, &p.l))
		BAIL("listen");
	atomic_store(&g_drop_data_done, 0);
	atomic_store(&g_drop_data_armed, 1);
	if (iwe_cm_connect(p.a.qp, &dst, p.service, NULL, 0, 3000, &ap,
			   seen_event, &sa, &p.ca))
		BAIL("connect");
	r = wait_ev(&p.lp, 0, WAIT_MS);
	if (r) {
		p.cb = r->conn;
		iwe_cm_accept(p.cb, p.b.qp, rep, sizeof(rep), seen_event, &sb);
	}
	CHECK(r && wait_set(&sa.est) && wait_set(&sb.est) &&
	      atomic_load(&g_drop_data_done),
	      "RTR lost once: both sides ESTABLISHED (active %d, passive %d)",
	      atomic_load(&sa.est), atomic_load(&sb.est));
	CHECK(atomic_load(&sb.est) && atomic_load(&sb.est) < atomic_load(&sa.est),
	      "the initiator's ESTABLISHED waits until the responder has the RTR");
	atomic_store(&g_drop_data_armed, 0);
	cpair_close(&p);

	/* Never acknowledged (every RTR lost): the connect times out. */
	cpair_open(&p);
	ap.mpa_timeout_ms = bp.mpa_timeout_ms = 300;
	atomic_store(&g_drop_data_all, 1);
	atomic_store(&g_drop_data_armed, 1);
	r = cpair_request(&p, 0, &ap, &bp, 0);
	if (r) {
		p.cb = r->conn;
		iwe_cm_accept(p.cb, p.b.qp, NULL, 0, on_event, &p.lb);
	}
	CHECK(r && wait_type(&p.la, 0, IWE_CM_TIMED_OUT) &&
	      wait_type(&p.lb, 0, IWE_CM_BROKEN),
	      "RTR never acknowledged: the initiator's connect TIMED_OUT, "
	      "the responder BROKEN (no RTR)");
	CHECK(evlog_count(&p.la) == 1,
	      "no ESTABLISHED before (%d events)", evlog_count(&p.la));
	atomic_store(&g_drop_data_all, 0);
	atomic_store(&g_drop_data_armed, 0);
	cpair_close(&p);
}

/* Writes answered by Writes, read by the progress thread while the
 * consumers spin on memory (dtest -W): once the peer's lone packets have
 * been answered within the delay, their acks may ride on the answers
 * (doc/trp.md, "Acknowledging"; bench/run.sh counts them).  Every Write
 * lands; and a lone Write nobody answers still completes: its ack comes
 * at the latest when the hold runs out (5 ms here). */
static void test_ack_answered(void)
{
	struct cpair p;
	long t0, dt;
	int i, ok = 1, other;

	setenv("IWDAPL_TRP_ACK_DELAY_US", "5000", 1);
	cpair_open(&p);
	if (!cpair_establish(&p, "answered acks", IW_RTR_WRITE))
		BAIL("answered acks: no connection");
	unsetenv("IWDAPL_TRP_ACK_DELAY_US");
	for (i = 1; i <= 52 && ok; i++)
		ok = write1(&p.a, &p.b, 100, 16384, (char)i, 0) &&
		     spin_until(p.b.buf + 16384, (char)i) &&
		     write1(&p.b, &p.a, 200, 16384, (char)i, 0) &&
		     spin_until(p.a.buf + 16384, (char)i);
	CHECK(ok, "52 Writes each way, each answered by a Write at once");
	sleep_ms(20);
	t0 = now_ms();
	ok = write1(&p.a, &p.b, 300, 16384, 'x', IBV_SEND_SIGNALED) &&
	     wait_cq(p.a.scq, 1);
	dt = now_ms() - t0;
	CHECK(ok && count_status(p.a.scq, IBV_WC_SUCCESS, &other) == 1 &&
	      other == 0 && p.b.buf[16384] == 'x',
	      "an unanswered Write after answered ones lands and completes "
	      "(after %ld ms)", dt);
	cpair_close(&p);
}

/* Until cq has a completion, polling it (the consumer's poll reads the
 * input itself); 1 when it does, with wc filled.  Under valgrind,
 * whose scheduler is not fair, a thread that spins can keep the others
 * from running: such a poll found nothing for seconds in 3 runs of 4
 * (the engine before this test's change alike), with a pause between
 * polls in none of 8. */
static int poll_until(struct iwe_cq *cq, struct ibv_wc *wc)
{
	long end = now_ms() + WAIT_MS;
	int vg = under_valgrind();

	while (!poll1(cq, wc)) {
		if (now_ms() > end)
			return 0;
		if (vg)
			usleep(100);
	}
	return 1;
}

/* Sends answered by Sends, read by the consumers' own polls (an MPI
 * ping-pong): the ack a consumer's read owes is held for its answer as
 * the progress thread's is.  What must hold whatever the machine's
 * pace: every round completes, and a Send nobody answers, read by a
 * poll, still completes -- acknowledged by the connection's timer when
 * the hold runs out (5 ms), or by a retransmission on a machine too
 * busy for that.  How many pure acks the answers save is the bench's
 * figure (bench/run.sh's udp table, "pure acks a round"). */
static void test_ack_answered_by_consumer(void)
{
	struct ibv_wc wc;
	struct cpair p;
	int i, ok = 1, n = 100;

	setenv("IWDAPL_TRP_ACK_DELAY_US", "5000", 1);
	cpair_open(&p);
	if (!cpair_establish(&p, "consumer acks", IW_RTR_WRITE))
		BAIL("consumer acks: no connection");
	unsetenv("IWDAPL_TRP_ACK_DELAY_US");
	while (poll1(p.b.rcq, &wc) || poll1(p.a.rcq, &wc))
		;
	for (i = 0; i < n && ok; i++) {
		ok = post_recv1(&p.a, 7, 0, 4096) == 0 &&
		     post_send1(&p.a, 10, IBV_WR_SEND, 8192, 8, 0, 0, 0) == 0 &&
		     poll_until(p.b.rcq, &wc) && wc.status == IBV_WC_SUCCESS &&
		     post_recv1(&p.b, 1, 0, 4096) == 0 &&
		     post_send1(&p.b, 11, IBV_WR_SEND, 8192, 8, 0, 0, 0) == 0 &&
		     poll_until(p.a.rcq, &wc) && wc.status == IBV_WC_SUCCESS;
	}
	CHECK(ok, "%d Sends each way answered at once, read by polls, all "
	      "complete (%d rounds)", n, i);
	ok = post_send1(&p.a, 12, IBV_WR_SEND, 8192, 8, 0, 0,
			IBV_SEND_SIGNALED) == 0 &&
	     poll_until(p.b.rcq, &wc) && wc.status == IBV_WC_SUCCESS &&
	     poll_until(p.a.scq, &wc) && wc.wr_id == 12 &&
	     wc.status == IBV_WC_SUCCESS;
	CHECK(ok, "an unanswered Send read by a poll completes, its sender "
	      "acknowledged");
	cpair_close(&p);
}

/* The receiver of a message many packets long may hold the pure ack of
 * a read that ended inside it (the message's next packets, on their
 * way, bring the next read), for a quarter of its credits at most
 * (bench/run.sh counts the acks).  Here 1 MiB Writes of 64 KiB packets,
 * credits 32: every Write completes, data intact. */
static void test_mid_message_acks(void)
{
	struct cpair p;
	int ok = 1;

	setenv("IWDAPL_TRP_ACK_DELAY_US", "5000", 1);
	cpair_open(&p);
	if (!cpair_establish(&p, "mid-message acks", IW_RTR_WRITE))
		BAIL("mid-message acks: no connection");
	unsetenv("IWDAPL_TRP_ACK_DELAY_US");
	fill(p.a.buf, BIG, 11);
	for (int i = 0; i < 4 && ok; i++) {
		struct ibv_wc wc;

		ok = post_send1(&p.a, 50 + (uint64_t)i, IBV_WR_RDMA_WRITE, 0,
				BIG, (uintptr_t)p.b.buf, p.b.mr->rkey,
				IBV_SEND_SIGNALED) == 0 &&
		     wait_cq(p.a.scq, 1) && poll1(p.a.scq, &wc) &&
		     wc.status == IBV_WC_SUCCESS;
	}
	CHECK(ok && !memcmp(p.b.buf, p.a.buf, BIG),
	      "mid-message acks: four 1 MiB Writes completed, data intact");
	cpair_close(&p);
}

/* ----------------------------------------------------------------- SSP */

static void test_ssp(void)
{
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_WRITE);
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iwe_device *tcpdev;
	struct cpair p;
	char fin[16] = { 0 };
	int x, y, t1, t2, fl;

	cpair_open(&p);
	udp_pair(&x, &y);
	CHECK(iwe_device_owns_socket(g_dev, y) == 0,
	      "a connected UDP socket on 127.0.0.1 belongs to the udp device");
	CHECK(iwe_cm_adopt_passive(g_dev, y, NULL, "final", 5, &bp, on_event,
				   &p.lp, &p.cb) == 0,
	      "SSP passive: adopt a connected UDP socket");
	CHECK(recv(x, fin, sizeof(fin), 0) == 5 && !memcmp(fin, "final", 5),
	      "the final streaming-mode message arrives as one datagram");
	CHECK(iwe_cm_adopt_active(p.a.qp, x, NULL, "hi", 2, 3000, &ap, on_event,
				  &p.la, &p.ca) == 0 &&
	      wait_type(&p.lp, 0, IWE_CM_CONNECT_REQUEST) &&
	      p.lp.r[0].pdata_len == 2,
	      "SSP active over the peer's socket: CONNECT_REQUEST");
	post_recv1(&p.b, 1, 0, 4096);
	post_recv1(&p.b, 2, 4096, 4096);
	CHECK(iwe_cm_accept(p.cb, p.b.qp, NULL, 0, on_event, &p.lb) == 0 &&
	      wait_type(&p.la, 0, IWE_CM_ESTABLISHED) &&
	      wait_type(&p.lb, 0, IWE_CM_ESTABLISHED),
	      "SSP over UDP: ESTABLISHED on both sides");
	if (evlog_count(&p.lb) && evlog_count(&p.la))
		cpair_traffic(&p, "ssp");
	cpair_close(&p);

	/* BAD_REQUEST leaves the datagram where it was. */
	memset(&p, 0, sizeof(p));
	evlog_init(&p.lp);
	udp_pair(&x, &y);
	send(x, "GET / HTTP/1.0", 14, 0);
	CHECK(iwe_cm_adopt_passive(g_dev, y, NULL, NULL, 0, &bp, on_event, &p.lp,
				   &p.cb) == 0 &&
	      wait_type(&p.lp, 0, IWE_CM_BAD_REQUEST) &&
	      iwe_cm_release_socket(p.cb) == y &&
	      recv(y, fin, sizeof(fin), 0) == 14,
	      "SSP: a datagram that is no request: BAD_REQUEST, left unread");
	iwe_cm_conn_destroy(p.cb);
	close(x);
	close(y);
	evlog_fini(&p.lp);

	/* Wrong socket types, refused untouched. */
	tcp_pair(&t1, &t2);
	fl = fcntl(t1, F_GETFL);
	CHECK(iwe_device_owns_socket(g_dev, t1) == EINVAL &&
	      iwe_cm_adopt_passive(g_dev, t1, NULL, NULL, 0, &bp, on_event, &p.lp,
				   &p.cb) == EINVAL && fcntl(t1, F_GETFL) == fl,
	      "a TCP socket given to a udp device: EINVAL, flags unchanged");
	close(t1);
	close(t2);
	tcpdev = iwe_device_open("127.0.0.1", IWE_TRANSPORT_TCP);
	udp_pair(&x, &y);
	fl = fcntl(x, F_GETFL);
	CHECK(tcpdev && iwe_device_owns_socket(tcpdev, x) == EINVAL &&
	      iwe_cm_adopt_passive(tcpdev, x, NULL, NULL, 0, &bp, on_event, &p.lp,
				   &p.cb) == EINVAL && fcntl(x, F_GETFL) == fl,
	      "a UDP socket given to a tcp device: EINVAL, flags unchanged");
	close(x);
	close(y);
	iwe_device_close(tcpdev);
}

/* ----------------------------------------------------- idle and silent */

/* Idle both ways, each side's probe keeps the other: a live peer is not
 * taken for gone.  Then the peer stops (its QP lock held here: its
 * progress cannot run, its socket stays open, so no ICMP answers): the
 * idle side ends BROKEN once the peer was silent for
 * IWDAPL_PEER_TIMEOUT_MS -- with nothing of its own unacknowledged,
 * no retransmission would ever have found out. */
static void test_silent_peer(void)
{
	const long timeout_ms = 2500;
	struct cpair p;
	struct rec *r;
	long t0, ms;

	setenv("IWDAPL_PEER_TIMEOUT_MS", "2500", 1);
	cpair_open(&p);
	if (cpair_establish(&p, "idle", IW_RTR_WRITE)) {
		sleep_ms(4 * 1000);
		CHECK(evlog_count(&p.la) == 1 && evlog_count(&p.lb) == 1,
		      "idle for 4 s with a %ld ms idle timeout: neither side "
		      "ends (the probes keep both)", timeout_ms);
		cpair_traffic(&p, "idle 4 s");
		iwe_qp_lock(iwe_qp_priv(p.b.qp));
		t0 = now_ms();
		r = wait_ev(&p.la, 1, (int)timeout_ms + 4000);
		ms = now_ms() - t0;
		iwe_qp_unlock(iwe_qp_priv(p.b.qp));
		CHECK(r && r->type == IWE_CM_BROKEN && ms >= timeout_ms - 100 &&
		      ms <= timeout_ms + 3000,
		      "the peer silent, its socket open: BROKEN after %ld ms "
		      "(idle timeout %ld ms)", ms, timeout_ms);
	}
	unsetenv("IWDAPL_PEER_TIMEOUT_MS");
	cpair_close(&p);
}

/* ---------------------------------------------------- many at once */

#define MANY 100

struct many {
	struct side a[MANY], b[MANY];
	struct iwe_conn *ca[MANY], *cb[MANY];
	atomic_int next_b, est_a, est_b, disc;
};

static void many_active(const struct iwe_cm_event *ev, void *ctx)
{
	struct many *m = ctx;

	if (ev->type == IWE_CM_ESTABLISHED)
		atomic_fetch_add(&m->est_a, 1);
	else if (ev->type == IWE_CM_DISCONNECTED)
		atomic_fetch_add(&m->disc, 1);
}

static void many_passive(const struct iwe_cm_event *ev, void *ctx)
{
	struct many *m = ctx;
	int i;

	switch (ev->type) {
	case IWE_CM_CONNECT_REQUEST:
		i = atomic_fetch_add(&m->next_b, 1);
		if (i < MANY) {
			m->cb[i] = ev->conn;
			post_recv1(&m->b[i], 1, 0, 64);
			iwe_cm_accept(ev->conn, m->b[i].qp, NULL, 0,
				      many_passive, m);
		}
		break;
	case IWE_CM_ESTABLISHED:
		atomic_fetch_add(&m->est_b, 1);
		break;
	case IWE_CM_DISCONNECTED:
		atomic_fetch_add(&m->disc, 1);
		break;
	default:
		break;
	}
}

static int wait_count(atomic_int *v, int n, int ms)
{
	long end = now_ms() + ms;

	while (atomic_load(v) < n && now_ms() < end)
		sleep_ms(2);
	return atomic_load(v) >= n;
}

static void test_many(void)
{
	struct iwe_cm_params prm = cm_params(2, 0, IW_RTR_WRITE);
	struct sockaddr_in dst = lo_addr(0);
	struct many *m = calloc(1, sizeof(*m));
	struct iwe_listener *l;
	uint64_t svc;
	int ok = 1, got = 0;

	for (int i = 0; i < MANY; i++) {
		side_fresh(&m->a[i]);
		side_fresh(&m->b[i]);
	}
	if (iwe_cm_listen_any(g_dev, &svc, &prm, many_passive, m, &l))
		BAIL("listen");
	for (int i = 0; i < MANY; i++)
		ok &= iwe_cm_connect(m->a[i].qp, &dst, svc, NULL, 0, 5000,
				     &prm, many_active, m, &m->ca[i]) == 0;
	CHECK(ok && wait_count(&m->est_a, MANY, 20000) &&
	      wait_count(&m->est_b, MANY, 20000),
	      "%d connections at once on one UDP port: all ESTABLISHED "
	      "(%d/%d)", MANY, atomic_load(&m->est_a), atomic_load(&m->est_b));
	for (int i = 0; i < MANY; i++)
		post_send1(&m->a[i], 5, IBV_WR_SEND, 0, 64, 0, 0, 0);
	for (int i = 0; i < MANY; i++)
		got += wait_cq(m->b[i].rcq, 1);
	CHECK(got == MANY, "each passive QP got its own peer's Send (%d)",
	      got);
	for (int i = 0; i < MANY; i++)
		iwe_cm_disconnect(m->ca[i], 1);
	CHECK(wait_count(&m->disc, 2 * MANY, 20000),
	      "all disconnected on both sides (%d)", atomic_load(&m->disc));
	for (int i = 0; i < MANY; i++) {
		iwe_cm_conn_destroy(m->ca[i]);
		if (m->cb[i])
			iwe_cm_conn_destroy(m->cb[i]);
	}
	iwe_cm_listen_destroy(l);
	for (int i = 0; i < MANY; i++) {
		side_close(&m->a[i]);
		side_close(&m->b[i]);
	}
	free(m);
}

/* ---------------------------------------- a port's backlog past a burst */

/* The listening port takes at most a burst of requests per turn of the
 * loop; the rest must come at the next turn, not at the next datagram
 * (the port is level-triggered in an epoll the loop waits on
 * edge-triggered: t_cm_hostile's backlog test for tcp).  These peers
 * send their request once, where an initiator would send it again after
 * 200 ms.  Over udp the burst's own CONNECT_REQUESTs, queued for
 * dispatch, gave the loop its next turn, so this passed before the
 * port's task as well: it guards the behaviour, whatever gives the
 * turn. */
#define FLOOD_PEERS 120

struct dgram_flood {
	int fd[FLOOD_PEERS];
	uint8_t req[2048];
	size_t req_len;
	struct sockaddr_in port;
	int sent;
	char answered[FLOOD_PEERS];
};

static atomic_int g_flood_requests;
static struct iwe_conn *g_flood_conns[FLOOD_PEERS];

/* A call of the loop: every request waits in the port's socket. */
static void send_all_requests(void *arg)
{
	struct dgram_flood *f = arg;

	for (f->sent = 0; f->sent < FLOOD_PEERS; f->sent++)
		if (sendto(f->fd[f->sent], f->req, f->req_len, 0,
			   (const struct sockaddr *)&f->port,
			   sizeof(f->port)) != (ssize_t)f->req_len)
			break;
}

/* Kept, answered once all came: the answers are the loop's work too. */
static void keep_request(const struct iwe_cm_event *ev, void *ctx)
{
	int i;

	(void)ctx;
	if (ev->type != IWE_CM_CONNECT_REQUEST)
		return;
	i = atomic_fetch_add(&g_flood_requests, 1);
	if (i < FLOOD_PEERS)
		g_flood_conns[i] = ev->conn;
	else
		iwe_cm_reject_forget(ev->conn, NULL, 0);
}

/* The request an initiator sends, caught by a plain socket. */
static size_t capture_request(uint8_t *buf, size_t cap)
{
	struct iwe_cm_params prm = cm_params(2, 0, 0);
	struct sockaddr_in sink;
	struct iwe_conn *c = NULL;
	struct side a;
	struct evlog la;
	ssize_t n = -1;
	int fd = udp_bound(&sink);

	side_fresh(&a);
	evlog_init(&la);
	if (iwe_cm_connect(a.qp, &sink, ntohs(sink.sin_port), NULL, 0, 3000,
			   &prm, on_event, &la, &c) == 0)
		n = recv(fd, buf, cap, 0);
	if (c)
		iwe_cm_conn_destroy(c);
	evlog_fini(&la);
	side_close(&a);
	close(fd);
	return n > 0 ? (size_t)n : 0;
}

/* Peer i's reject reply, if it came: acknowledged as an initiator does,
 * which ends the responder's linger (*acked counts the acks that went). */
static int take_reject(struct dgram_flood *f, int i,
		       const struct iw_trp_fields *req, int *acked)
{
	uint8_t buf[512], ack[IW_TRP_HDR_LEN];
	ssize_t n = recv(f->fd[i], buf, sizeof(buf), MSG_DONTWAIT);
	struct iw_trp_fields rep;

	if (n <= IW_TRP_HDR_LEN + IW_MPA_KEY_LEN ||
	    memcmp(buf + IW_TRP_HDR_LEN, IW_MPA_KEY_REP, IW_MPA_KEY_LEN))
		return 0;
	iw_trp_get(buf, &rep);
	iw_trp_put(ack, req->psn + 1, rep.psn, IW_TRP_A, 0);
	*acked += sendto(f->fd[i], ack, sizeof(ack), 0,
			 (const struct sockaddr *)&f->port,
			 sizeof(f->port)) == (ssize_t)sizeof(ack);
	return 1;
}

static void test_backlog_past_burst(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct dgram_flood *f = calloc(1, sizeof(*f));
	struct iwe_prog *prog = iwe_prog_get(g_dev);
	struct iwe_listener *l = NULL;
	struct iw_trp_fields req;
	uint64_t svc = 0;
	int answered = 0, acked = 0, nreq;

	if (!f)
		BAIL("backlog: out of memory");
	f->req_len = capture_request(f->req, sizeof(f->req));
	CHECK(f->req_len > IW_TRP_HDR_LEN + IW_MPA_KEY_LEN &&
	      !memcmp(f->req + IW_TRP_HDR_LEN, IW_MPA_KEY_REQ,
		      IW_MPA_KEY_LEN),
	      "backlog: an initiator's request caught (%zu bytes)",
	      f->req_len);
	bp.mpa_timeout_ms = 30000;
	if (!f->req_len || !prog ||
	    iwe_cm_listen_any(g_dev, &svc, &bp, keep_request, NULL, &l))
		BAIL("backlog: no request, loop or listener");
	f->port = lo_addr((uint16_t)svc);
	for (int i = 0; i < FLOOD_PEERS; i++) {
		struct sockaddr_in a;

		f->fd[i] = udp_bound(&a);
	}
	iwe_prog_call(prog, send_all_requests, f);
	CHECK(f->sent == FLOOD_PEERS, "backlog: %d requests from as many "
	      "peers queued while the loop was held", f->sent);
	wait_count(&g_flood_requests, f->sent, 1000);
	nreq = atomic_load(&g_flood_requests);
	CHECK(nreq == f->sent, "backlog: every peer's request taken in "
	      "within 1 s, none sent again (%d of %d)", nreq, f->sent);
	for (int i = 0; i < nreq && i < FLOOD_PEERS; i++)
		iwe_cm_reject_forget(g_flood_conns[i], NULL, 0);
	iw_trp_get(f->req, &req);
	for (long end = now_ms() + 5000; answered < nreq && now_ms() < end;
	     sleep_ms(5))
		for (int i = 0; i < FLOOD_PEERS; i++)
			if (!f->answered[i] &&
			    take_reject(f, i, &req, &acked)) {
				f->answered[i] = 1;
				answered++;
			}
	for (long end = now_ms() + 5000; cm_awaited_now() && now_ms() < end;)
		sleep_ms(10);
	CHECK(answered == nreq && acked == answered && cm_awaited_now() == 0,
	      "backlog: each peer rejected, its ack taken, no responder "
	      "lingers (%d answered, %d still)", answered, cm_awaited_now());
	for (int i = 0; i < FLOOD_PEERS; i++)
		close(f->fd[i]);
	iwe_cm_listen_destroy(l);
	free(f);
}

int main(void)
{
	/* The RFC's Terminate for a Send with no receive (the grace that
	 * delays it is t_rnr's). */
	setenv("IWDAPL_RNR_MS", "0", 1);
	g_dev = iwe_device_open("127.0.0.1", IWE_TRANSPORT_UDP);
	if (!g_dev)
		BAIL("udp device: %s", strerror(errno));
	test_rtr_variants();
	test_reject();
	test_relisten();
	test_failures();
	test_request_credits();
	test_broken();
	test_service_hdr();
	test_established_first();
	test_established_before_later_end();
	test_established_after_rtr_acked();
	test_ack_answered();
	test_ack_answered_by_consumer();
	test_mid_message_acks();
	test_silent_peer();
	/* TRP's idle probes are no traffic: a quiet connection gives
	 * back its queues as over tcp (they kept every one busy). */
	cpair_idle_case(31296, "udp idle give-back");
	test_ssp();
	test_many();
	test_backlog_past_burst();
	CHECK(cm_awaited_now() == 0,
	      "no conn left counted as awaited after every test (got %d)",
	      cm_awaited_now());
	iwe_device_close(g_dev);
	return tap_done();
}
