/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket adoption (the engine side of Socket Service Points) over
 * loopback TCP: passive with a final streaming message, the request
 * peeked until whole (even one byte at a time), BAD_REQUEST leaving the
 * bytes in the socket, SOCKET_DOWN, release_socket handing back a
 * socket still blocking (its flags are never changed: 4 MiB of Writes
 * cross adopted sockets left blocking), and adopt_active's accept,
 * reject and timeout paths.
 * TAP output. */
#include "cm_harness.h"

static const char final_msg[] = "SERVER READY: switching to RDMA";

static int is_blocking(int fd)
{
	return !(fcntl(fd, F_GETFL) & O_NONBLOCK);
}

static void small_bufs(int fd)
{
	int n = 16 << 10;

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof(n));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof(n));
}

/* Four signaled 1 MiB RDMA Writes from a into b, every byte checked. */
static int writes_cross(struct side *a, struct side *b)
{
	struct ibv_wc wc;
	int k, ok = 1;

	while (poll1(a->scq, &wc))
		;	/* the Send's before */
	fill(a->buf, BIG, 5);
	for (k = 0; k < 4; k++)
		ok &= post_send1(a, 10 + k, IBV_WR_RDMA_WRITE, 0, BIG,
				 (uintptr_t)b->buf, b->mr->rkey,
				 IBV_SEND_SIGNALED) == 0;
	ok &= wait_cq(a->scq, 4);
	for (k = 0; k < 4; k++)
		ok &= poll1(a->scq, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == (uint64_t)(10 + k);
	return ok && !memcmp(a->buf, b->buf, BIG);
}

/* Both sides adopted: the passive sends the final message, the active
 * reads it and then starts MPA on the same TCP connection. */
static void test_adopt_both(void)
{
	struct iwe_cm_params pp = cm_params(2, 1, 0);
	struct iwe_cm_params ap = cm_params(2, 0, IW_RTR_READ);
	struct iwe_conn *cx = NULL, *cy = NULL;
	struct evlog lx, ly, ly2;
	struct side a, b;
	char got[sizeof(final_msg)];
	struct ibv_wc wc;
	int x, y;

	evlog_init(&lx);
	evlog_init(&ly);
	evlog_init(&ly2);
	side_fresh(&a);
	side_fresh(&b);
	tcp_pair(&x, &y);
	/* Small socket buffers, so that the Writes below find them full
	 * again and again: they must still cross whole while the sockets
	 * stay blocking (the consumer's flags, which the engine leaves). */
	small_bufs(x);
	small_bufs(y);
	CHECK(iwe_cm_adopt_passive(g_dev, y, NULL, final_msg, sizeof(final_msg), &pp,
				   on_event, &ly, &cy) == 0,
	      "adopt: passive adopts with a final message");
	CHECK(read_full(x, got, sizeof(got)) == 0 &&
	      !memcmp(got, final_msg, sizeof(got)),
	      "adopt: the peer reads the final message first");
	CHECK(iwe_cm_adopt_active(a.qp, x, NULL, "abc", 3, 2000, &ap, on_event, &lx,
				  &cx) == 0, "adopt: active adopts and sends "
	      "the request");
	CHECK(wait_type(&ly, 0, IWE_CM_CONNECT_REQUEST) &&
	      ly.r[0].pdata_len == 3 && !memcmp(ly.r[0].pdata, "abc", 3),
	      "adopt: CONNECT_REQUEST with the private data");
	post_recv1(&b, 1, 0, 64);
	post_recv1(&b, 2, 64, 64);
	CHECK(iwe_cm_accept(cy, b.qp, "ok", 2, on_event, &ly2) == 0 &&
	      wait_type(&lx, 0, IWE_CM_ESTABLISHED) &&
	      wait_type(&ly2, 0, IWE_CM_ESTABLISHED),
	      "adopt: ESTABLISHED on both sides");
	CHECK(iwe_cm_release_socket(cx) == -1 && errno == EBUSY,
	      "adopt: an established socket cannot be released (EBUSY)");
	fill(a.buf, 32, 9);
	post_send1(&a, 5, IBV_WR_SEND, 0, 32, 0, 0, IBV_SEND_SIGNALED);
	CHECK(wait_cq(b.rcq, 1) && poll1(b.rcq, &wc) && wc.wr_id == 1 &&
	      wc.byte_len == 32 && !memcmp(b.buf, a.buf, 32),
	      "adopt: a Send crosses the adopted connection");
	CHECK(writes_cross(&a, &b) && is_blocking(x) && is_blocking(y),
	      "adopt: 4 MiB of Writes cross sockets left blocking, as the "
	      "consumer made them");
	CHECK(iwe_cm_disconnect(cy, 1) == 0 &&
	      wait_type(&lx, 1, IWE_CM_DISCONNECTED) &&
	      wait_type(&ly2, 1, IWE_CM_DISCONNECTED),
	      "adopt: graceful disconnect");
	iwe_cm_conn_destroy(cx);
	iwe_cm_conn_destroy(cy);
	side_close(&a);
	side_close(&b);
	evlog_fini(&lx);
	evlog_fini(&ly);
	evlog_fini(&ly2);
}

/* A raw initiator that writes its request one byte at a time. */
static void test_trickle(void)
{
	struct iwe_cm_params pp = cm_params(2, 0, 0);
	struct iw_mpa_params rq = { .rev = 2, .ird = 1, .ord = 1,
				    .pdata = "trickle", .pdata_len = 7 };
	uint8_t req[IW_MPA_MAX_RR_LEN], buf[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	struct iwe_conn *cy = NULL;
	struct evlog ly;
	struct side b;
	ssize_t n = iw_mpa_build(req, sizeof(req), 0, &rq), i;
	int x, y, ok = 1;

	evlog_init(&ly);
	side_fresh(&b);
	tcp_pair(&x, &y);
	iwe_cm_adopt_passive(g_dev, y, NULL, NULL, 0, &pp, on_event, &ly, &cy);
	for (i = 0; i < n; i++) {
		ok &= send(x, req + i, 1, 0) == 1;
		sleep_ms(2);
		ok &= evlog_count(&ly) == (i == n - 1 ? evlog_count(&ly) : 0);
	}
	CHECK(ok && wait_type(&ly, 0, IWE_CM_CONNECT_REQUEST) &&
	      ly.r[0].pdata_len == 7,
	      "trickle: a request written byte by byte is seen once whole");
	CHECK(iwe_cm_accept(cy, b.qp, NULL, 0, on_event, &ly) == 0 &&
	      raw_read_frame(x, buf, &f) == 0 && f.is_reply && !f.reject &&
	      wait_type(&ly, 1, IWE_CM_ESTABLISHED),
	      "trickle: accepted, the reply reaches the raw initiator");
	iwe_cm_conn_destroy(cy);
	close(x);
	side_close(&b);
	evlog_fini(&ly);
}

/* Bytes that are not MPA: BAD_REQUEST, nothing consumed. */
static void test_bad_request(void)
{
	static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
	struct iwe_cm_params pp = cm_params(2, 0, 0);
	struct iwe_conn *cy = NULL;
	struct evlog ly;
	char got[sizeof(junk)];
	int x, y, fd;

	evlog_init(&ly);
	tcp_pair(&x, &y);
	CHECK(send(x, junk, sizeof(junk), 0) == sizeof(junk) &&
	      iwe_cm_adopt_passive(g_dev, y, NULL, NULL, 0, &pp, on_event, &ly,
				   &cy) == 0 &&
	      wait_type(&ly, 0, IWE_CM_BAD_REQUEST),
	      "bad request: BAD_REQUEST (%s)", ly.r[0].reason);
	fd = iwe_cm_release_socket(cy);
	CHECK(fd == y && is_blocking(fd), "bad request: released, blocking "
	      "again");
	CHECK(read_full(fd, got, sizeof(got)) == 0 &&
	      !memcmp(got, junk, sizeof(junk)),
	      "bad request: the bytes are still there to read");
	CHECK(send(fd, "pong", 4, 0) == 4 && read_full(x, got, 4) == 0 &&
	      !memcmp(got, "pong", 4), "bad request: the socket still works");
	iwe_cm_conn_destroy(cy);
	close(x);
	close(y);
	evlog_fini(&ly);
}

/* The peer closes before (or in the middle of) its request. */
static void test_socket_down(int partial)
{
	const char *tag = partial ? "partial request" : "no request";
	struct iwe_cm_params pp = cm_params(2, 0, 0);
	struct iwe_conn *cy = NULL;
	struct evlog ly;
	int x, y;

	evlog_init(&ly);
	tcp_pair(&x, &y);
	CHECK(iwe_cm_adopt_passive(g_dev, y, NULL, final_msg, 5, &pp, on_event, &ly,
				   &cy) == 0, "%s: adopted", tag);
	if (partial && send(x, "MPA ID Req Fr", 13, 0) != 13)
		BAIL("send");
	sleep_ms(20);
	CHECK(evlog_count(&ly) == 0, "%s: nothing yet", tag);
	close(x);
	CHECK(wait_type(&ly, 0, IWE_CM_SOCKET_DOWN),
	      "%s: SOCKET_DOWN when the peer closes", tag);
	iwe_cm_conn_destroy(cy);	/* closes y: it was not released */
	evlog_fini(&ly);
}

/* Reject between two adopted sockets; both go back to streaming. */
static void test_reject_stream(void)
{
	struct iwe_cm_params p = cm_params(2, 0, IW_RTR_WRITE);
	struct iwe_conn *cx = NULL, *cy = NULL;
	struct evlog lx, ly;
	struct side a;
	char got[8];
	int x, y, fx, fy;

	evlog_init(&lx);
	evlog_init(&ly);
	side_fresh(&a);
	tcp_pair(&x, &y);
	iwe_cm_adopt_passive(g_dev, y, NULL, NULL, 0, &p, on_event, &ly, &cy);
	iwe_cm_adopt_active(a.qp, x, NULL, NULL, 0, 2000, &p, on_event, &lx, &cx);
	CHECK(wait_type(&ly, 0, IWE_CM_CONNECT_REQUEST) &&
	      iwe_cm_reject(cy, "later", 5) == 0 &&
	      wait_type(&lx, 0, IWE_CM_REJECTED) && lx.r[0].pdata_len == 5 &&
	      !memcmp(lx.r[0].pdata, "later", 5),
	      "adopt reject: REJECTED with the private data");
	fx = iwe_cm_release_socket(cx);
	fy = iwe_cm_release_socket(cy);
	CHECK(fx == x && fy == y && is_blocking(fx) && is_blocking(fy),
	      "adopt reject: both sockets released, blocking");
	CHECK(send(fx, "ping", 4, 0) == 4 && read_full(fy, got, 4) == 0 &&
	      !memcmp(got, "ping", 4) && send(fy, "pong", 4, 0) == 4 &&
	      read_full(fx, got, 4) == 0 && !memcmp(got, "pong", 4),
	      "adopt reject: plain streaming works both ways afterwards");
	iwe_cm_conn_destroy(cx);
	iwe_cm_conn_destroy(cy);
	close(x);
	close(y);
	side_close(&a);
	evlog_fini(&lx);
	evlog_fini(&ly);
}

static void test_active_timeout(void)
{
	struct iwe_cm_params p = cm_params(2, 0, 0);
	struct iwe_conn *cx = NULL;
	struct iw_mpa_frame f;
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct evlog lx;
	struct side a;
	long t0 = now_ms();
	char got[4];
	int x, y;

	evlog_init(&lx);
	side_fresh(&a);
	tcp_pair(&x, &y);
	CHECK(iwe_cm_adopt_active(a.qp, x, NULL, "q", 1, 300, &p, on_event, &lx,
				  &cx) == 0 &&
	      raw_read_frame(y, buf, &f) == 0 && !f.is_reply,
	      "adopt timeout: the peer reads the request, answers nothing");
	CHECK(wait_type(&lx, 0, IWE_CM_TIMED_OUT) && now_ms() - t0 >= 280,
	      "adopt timeout: TIMED_OUT after %ld ms", now_ms() - t0);
	CHECK(iwe_cm_release_socket(cx) == x && is_blocking(x) &&
	      send(x, "more", 4, 0) == 4 && read_full(y, got, 4) == 0 &&
	      !memcmp(got, "more", 4),
	      "adopt timeout: released socket still streams");
	iwe_cm_conn_destroy(cx);
	close(x);
	close(y);
	side_close(&a);
	evlog_fini(&lx);
}

static void test_bad_args(void)
{
	struct iwe_cm_params p = cm_params(2, 0, 0);
	struct iwe_conn *c = NULL;
	struct evlog l;
	int u = socket(AF_INET, SOCK_DGRAM, 0);

	evlog_init(&l);
	CHECK(iwe_cm_adopt_passive(g_dev, u, NULL, NULL, 0, &p, on_event, &l,
				   &c) == EINVAL &&
	      iwe_cm_adopt_passive(g_dev, -1, NULL, NULL, 0, &p, on_event, &l,
				   &c) == EINVAL,
	      "adopt: a UDP socket or a bad fd is EINVAL");
	close(u);
	evlog_fini(&l);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_adopt_both();
	test_trickle();
	test_bad_request();
	test_socket_down(0);
	test_socket_down(1);
	test_reject_stream();
	test_active_timeout();
	test_bad_args();
	iwe_device_close(g_dev);
	return tap_done();
}
