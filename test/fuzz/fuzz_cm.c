/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: the connection manager's passive side reading an MPA
 * request from a real TCP connection (iwe_cm_listen on 127.0.0.1).
 *
 * Input: data[0] bits 0-1: largest client write 1 / 7 / 64 bytes / all
 * at once; bit 2: the consumer accepts a request it is given (else it
 * rejects); bit 3: connect to a listener of a service above 65535 (its
 * requests carry the engine's service header); bits 4-7: seed of the
 * write sizes.  The rest is what the client sends; then it closes its
 * sending side and reads until the server closes.
 *
 * The oracle is iw_mpa_parse on the same bytes:
 *  - a complete request the listener can route reaches the consumer as
 *    CONNECT_REQUEST with exactly its private data, and the client gets
 *    the consumer's accept or reject reply -- or, when the request is
 *    peer-to-peer and offers no RTR type, a reject from the CM itself;
 *  - a malformed request (markers, bad revision, private data too long,
 *    no room for the IRD/ORD words) gets a reject reply, then a close;
 *  - bytes that are not an MPA request, and requests cut short by the
 *    close, get a close and no reply;
 *  - whatever happens, the server closes within DEADLINE_MS: never a
 *    hang.
 * After an accept the rest of the input reaches the QP as FPDUs; the QP
 * posts no receive, so a Send waits the receiver-not-ready grace (50 ms
 * here) and then ends the connection with a Terminate. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "fuzz_check.h"
#include "fuzz_cm_util.h"
#include "fuzz_svc.h"
#include "iw_engine.h"
#include "iw_mpa.h"

#define DEADLINE_MS	5000
#define REPLY_MAX	(1u << 16)

/* What the progress thread saw of this input's connection. */
static struct fuzz_consumer g_seen = { .lock = PTHREAD_MUTEX_INITIALIZER };
static struct iwe_device *g_dev;
static struct iwe_pd *g_pd;
static struct iwe_cq *g_cq;
static struct iwe_listener *g_plain, *g_hashed;
static uint64_t g_plain_svc, g_hashed_svc;
static uint8_t g_magic[FUZZ_SVC_MAGIC_LEN];

static void listen_handler(const struct iwe_cm_event *ev, void *ctx)
{
	(void)ctx;
	if (ev->type != IWE_CM_CONNECT_REQUEST)
		return;
	pthread_mutex_lock(&g_seen.lock);
	fuzz_consumer_answer(&g_seen, ev);
	pthread_mutex_unlock(&g_seen.lock);
}

static void init_fail(const char *what, int err)
{
	fprintf(stderr, "fuzz_cm: %s: %s\n", what, strerror(err));
	exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct iwe_cm_params prm = fuzz_cm_params(DEADLINE_MS);
	uint64_t k;
	int err;

	(void)argc;
	(void)argv;
	/* The receiver-not-ready grace kept short: well inside DEADLINE_MS
	 * (the default 5 s is all of it). */
	fuzz_cm_open("fuzz_cm", "lo", IWE_TRANSPORT_TCP, &g_dev, &g_pd,
		     &g_cq);
	err = iwe_cm_listen_any(g_dev, &g_plain_svc, &prm, listen_handler,
				NULL, &g_plain);
	if (err)
		init_fail("iwe_cm_listen_any", err);
	/* A service above 65535 shares a port of a fixed range: take the
	 * first one free (none free just disables that mode). */
	err = fuzz_learn_svc_magic(g_dev, g_magic);
	if (err)
		fprintf(stderr, "fuzz_cm: no service header (%s): plain "
			"listener only\n", strerror(err));
	for (k = 0; k < 64 && !err && !g_hashed; k++) {
		g_hashed_svc = FUZZ_CM_HASHED_SVC + k * 37;
		if (iwe_cm_listen(g_dev, g_hashed_svc, &prm, 0,
				  listen_handler, NULL, &g_hashed))
			g_hashed = NULL;
	}
	return 0;
}

static uint16_t service_port(uint64_t svc)
{
	return svc <= 65535 ? (uint16_t)svc
			    : (uint16_t)(IWE_CM_SERVICE_PORT_BASE +
					 svc % IWE_CM_SERVICE_PORTS);
}

/* A connect that a signal interrupts (libFuzzer's timer or its SIGINT)
 * goes on in the kernel: wait for its outcome rather than call the
 * interruption a failure. */
static int connect_wait(int fd, const struct sockaddr_in *a)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0;

	if (!connect(fd, (const struct sockaddr *)a, sizeof(*a)))
		return 0;
	if (errno != EINTR)
		return -1;
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -1;
	errno = err;
	return err ? -1 : 0;
}

static int client_connect(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	FUZZ_CHECK(fd >= 0, "socket: %s", strerror(errno));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	FUZZ_CHECK(connect_wait(fd, &a) == 0,
		   "connect to the listener: %s", strerror(errno));
	return fd;
}

/* Send the input in pieces; a server that closed early ends it (a
 * signal does not: the rest would go unsent and the check against the
 * parser would judge bytes the server never saw). */
static void client_write(int fd, const uint8_t *d, size_t n, unsigned max,
			 uint32_t rng)
{
	size_t off = 0;

	while (off < n) {
		size_t k = n - off;
		ssize_t w;

		if (max) {
			rng ^= rng << 13;
			rng ^= rng >> 17;
			rng ^= rng << 5;
			k = 1 + rng % max < k ? 1 + rng % max : k;
		}
		w = send(fd, d + off, k, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;	/* a signal, as in connect_wait */
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

/* Everything the server sends until it closes; fails past the
 * deadline.  Returns the byte count. */
static size_t client_read_all(int fd, uint8_t *buf, size_t cap)
{
	long end = fuzz_now_ms() + DEADLINE_MS;
	uint8_t sink[4096];
	size_t got = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = end - fuzz_now_ms();
		ssize_t n;

		FUZZ_CHECK(left > 0, "the server neither answered nor closed "
			   "within %d ms (%zu bytes so far)", DEADLINE_MS, got);
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		/* Past cap (FPDUs after an accept): read on, keep nothing. */
		if (got < cap)
			n = recv(fd, buf + got, cap - got, MSG_DONTWAIT);
		else
			n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return got;
		if (n > 0 && got < cap)
			got += (size_t)n;
	}
}

static void client_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	/* A reset: no TIME_WAIT left behind by thousands of runs. */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/* What the oracle expects of one input. */
enum expect { EXP_CLOSE, EXP_CM_REJECT, EXP_CONSUMER };

static enum expect expected(const uint8_t *d, size_t n, int hashed,
			    struct iw_mpa_frame *f)
{
	int rc = iw_mpa_parse(d, n, IW_MPA_EXPECT_REQ, f, NULL), has_hdr;

	if (rc == IW_MPA_NEED_MORE || rc == IW_MPA_ERR_BAD_KEY ||
	    rc == IW_MPA_ERR_WRONG_KEY)
		return EXP_CLOSE;
	if (rc != IW_MPA_OK)
		return EXP_CM_REJECT;
	has_hdr = f->pdata_len >= IWE_CM_SERVICE_HDR_LEN &&
		  !memcmp(f->pdata, g_magic, FUZZ_SVC_MAGIC_LEN);
	/* A plain port inside the shared range refuses the header. */
	if (!hashed && has_hdr &&
	    service_port(g_plain_svc) >= IWE_CM_SERVICE_PORT_BASE &&
	    service_port(g_plain_svc) <
		    IWE_CM_SERVICE_PORT_BASE + IWE_CM_SERVICE_PORTS)
		return EXP_CLOSE;
	if (hashed) {
		uint64_t svc_be;

		if (!has_hdr)
			return EXP_CLOSE;
		memcpy(&svc_be, f->pdata + FUZZ_SVC_MAGIC_LEN, 8);
		if (iw_be64(svc_be) != g_hashed_svc)
			return EXP_CLOSE;
	}
	/* We accept every RTR type, so only a p2p request that offers
	 * none cannot be answered. */
	if (f->enhanced && f->p2p && !f->rtr)
		return EXP_CM_REJECT;
	return EXP_CONSUMER;
}

static void check_reply(const uint8_t *r, size_t n, enum expect e,
			int accepted)
{
	struct iw_mpa_frame f;
	int rc = iw_mpa_parse(r, n, IW_MPA_EXPECT_REP, &f, NULL);

	if (e == EXP_CLOSE) {
		FUZZ_CHECK(n == 0, "%zu bytes sent on a request to close", n);
		return;
	}
	FUZZ_CHECK(rc == IW_MPA_OK, "no valid MPA reply (%s), %zu bytes",
		   iw_mpa_strerror(rc), n);
	FUZZ_CHECK(f.reject == !(e == EXP_CONSUMER && accepted),
		   "reply reject=%d, expected %s", f.reject,
		   e == EXP_CM_REJECT ? "the CM's reject" :
		   accepted ? "accept" : "the consumer's reject");
	if (e == EXP_CONSUMER) {
		const uint8_t *pd = accepted ? fuzz_accept_pd : fuzz_reject_pd;

		FUZZ_CHECK(f.pdata_len == sizeof(fuzz_accept_pd) &&
			   !memcmp(f.pdata, pd, f.pdata_len),
			   "reply does not carry the consumer's data");
	}
}

static void check_request(const struct iw_mpa_frame *f, enum expect e,
			  int hashed)
{
	const struct fuzz_consumer *s = &g_seen;
	size_t skip = hashed ? IWE_CM_SERVICE_HDR_LEN : 0;

	if (e != EXP_CONSUMER) {
		fuzz_consumer_check(s, 0, NULL, 0);
		return;
	}
	fuzz_consumer_check(s, 1, f->pdata + skip, f->pdata_len - skip);
	FUZZ_CHECK(s->service == (hashed ? g_hashed_svc : g_plain_svc),
		   "service %llu", (unsigned long long)s->service);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t reply[REPLY_MAX];
	struct fuzz_consumer *s = &g_seen;
	struct iw_mpa_frame f;
	enum expect e;
	int fd, hashed;
	size_t n;

	if (size < 1)
		return 0;
	hashed = (data[0] & 8) && g_hashed;
	fuzz_consumer_reset(s, !!(data[0] & 4), g_pd, g_cq);

	fd = client_connect(service_port(hashed ? g_hashed_svc : g_plain_svc));
	client_write(fd, data + 1, size - 1,
		     (unsigned[]){ 1, 7, 64, 0 }[data[0] & 3],
		     (uint32_t)(data[0] >> 4) * 2654435761u + 1);
	shutdown(fd, SHUT_WR);
	n = client_read_all(fd, reply, sizeof(reply));
	e = expected(data + 1, size - 1, hashed, &f);

	/* The handler is done: the reply or the close came after it. */
	pthread_mutex_lock(&s->lock);
	check_request(&f, e, hashed);
	check_reply(reply, n, e, s->accept);
	pthread_mutex_unlock(&s->lock);
	fuzz_consumer_end(s);
	client_close(fd);
	return 0;
}
