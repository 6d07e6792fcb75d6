/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: the connection manager's passive side over TRP/UDP
 * (iwe_cm_listen_any on a udp device on 127.0.0.1) reading a new peer's
 * datagrams (doc/trp.md, "Connection exchange").
 *
 * Input: data[0] bit 2: the consumer accepts a request it is given (else
 * it rejects).  The rest: datagrams, each a BE16 length and that many
 * bytes.  The first goes to the listening port from a client socket of
 * its own; once it is answered, the others follow from the same socket
 * (to the conn's own socket: a reject's linger, or the accepted QP).
 *
 * The oracle is iw_trp_get and iw_mpa_parse on the first datagram:
 *  - an I packet whose body is exactly one MPA request reaches the
 *    consumer as CONNECT_REQUEST with its private data, and the client
 *    gets an I packet acknowledging the request's PSN that carries the
 *    consumer's accept or reject -- or the CM's own reject when the
 *    request is peer-to-peer and offers no RTR type;
 *  - anything else is dropped in silence: nothing reaches the consumer
 *    and no datagram comes back by the time a request sent after it from
 *    another socket (the probe) has been delivered and answered;
 *  - every answer comes within DEADLINE_MS (the probe also shows the
 *    listener still serves).
 * The client then ends the conn as a peer would: it acknowledges a
 * reject (a reject's conn lingers until then, holding the client's port:
 * a later request from that port would reach the linger, not the
 * listener), and the consumer destroys what it was given. */
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
#include <sys/socket.h>

#include "fuzz_check.h"
#include "fuzz_cm_util.h"
#include "iw_engine.h"
#include "iw_mpa.h"
#include "iw_wire.h"

#define DEADLINE_MS	2000
#define MAX_DGRAMS	16
/* Client ports, in turn: a port comes back only after every other one
 * was used, long after the conn of its last use ended (a datagram from
 * the port of a live conn goes to that conn, not to the listener). */
#define CLIENT_PORT_FIRST 20000
#define CLIENT_PORTS	  12000

/* The consumer; and the probe's source port (BE), its conn, requests. */
static struct fuzz_consumer g_seen = { .lock = PTHREAD_MUTEX_INITIALIZER };
static uint16_t g_probe_port;
static struct iwe_conn *g_probe_conn;
static int g_probes;
static struct iwe_device *g_dev;
static struct iwe_pd *g_pd;
static struct iwe_cq *g_cq;
static struct iwe_listener *g_listener;
static uint64_t g_port;
static unsigned g_next_port;

static void listen_handler(const struct iwe_cm_event *ev, void *ctx)
{
	(void)ctx;
	if (ev->type != IWE_CM_CONNECT_REQUEST)
		return;
	pthread_mutex_lock(&g_seen.lock);
	if (ev->remote.sin_port == g_probe_port) {
		g_probes++;
		g_probe_conn = ev->conn;
		iwe_cm_reject(ev->conn, NULL, 0);
	} else
		fuzz_consumer_answer(&g_seen, ev);
	pthread_mutex_unlock(&g_seen.lock);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct iwe_cm_params prm = fuzz_cm_params(DEADLINE_MS);
	int err;

	(void)argc;
	(void)argv;
	fuzz_cm_open("fuzz_cm_trp", "127.0.0.1", IWE_TRANSPORT_UDP, &g_dev,
		     &g_pd, &g_cq);
	/* A plain port, outside the range shared by services above 65535
	 * (whose requests must carry the service header). */
	do {
		if (g_listener)
			iwe_cm_listen_destroy(g_listener);
		err = iwe_cm_listen_any(g_dev, &g_port, &prm,
					listen_handler, NULL, &g_listener);
		FUZZ_CHECK(!err, "iwe_cm_listen_any: %s", strerror(err));
	} while (g_port >= IWE_CM_SERVICE_PORT_BASE &&
		 g_port < IWE_CM_SERVICE_PORT_BASE + IWE_CM_SERVICE_PORTS);
	return 0;
}

static struct sockaddr_in lo(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A UDP socket on the next free client port, connected to the
 * listener; *port: its port (BE). */
static int client_socket(uint16_t *port)
{
	struct sockaddr_in dst = lo((uint16_t)g_port);

	for (unsigned tries = 0; tries < CLIENT_PORTS; tries++) {
		struct sockaddr_in a = lo((uint16_t)(CLIENT_PORT_FIRST +
					 g_next_port++ % CLIENT_PORTS));
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		FUZZ_CHECK(fd >= 0, "socket: %s", strerror(errno));
		if (!bind(fd, (struct sockaddr *)&a, sizeof(a))) {
			FUZZ_CHECK(!connect(fd, (struct sockaddr *)&dst,
					    sizeof(dst)),
				   "connect: %s", strerror(errno));
			*port = a.sin_port;
			return fd;
		}
		close(fd);
	}
	FUZZ_CHECK(0, "no client port free");
	return -1;
}

/* The next datagram from the server, within the deadline. */
static size_t recv_reply(int fd, uint8_t *buf, size_t cap, const char *who)
{
	ssize_t n = fuzz_dgram_within(fd, buf, cap, DEADLINE_MS, NULL);

	FUZZ_CHECK(n >= 0, "no answer to the %s within %d ms", who,
		   DEADLINE_MS);
	return (size_t)n;
}

/* Acknowledge a reject reply (PSN y): the linger ends at once. */
static void ack_reject(int fd, uint32_t our_next, uint32_t y)
{
	uint8_t a[IW_TRP_HDR_LEN];

	iw_trp_put(a, our_next, y, IW_TRP_A, 0);
	send(fd, a, sizeof(a), 0);
}

/* What the oracle expects of the first datagram. */
enum expect { EXP_DROP, EXP_CM_REJECT, EXP_CONSUMER };

static enum expect expected(const uint8_t *d, size_t n,
			    struct iw_mpa_frame *f, uint32_t *psn)
{
	struct iw_trp_fields h;
	int rc;

	if (n < IW_TRP_HDR_LEN)
		return EXP_DROP;
	iw_trp_get(d, &h);
	*psn = h.psn;
	if (h.flags != IW_TRP_I || n - IW_TRP_HDR_LEN > IW_MPA_MAX_RR_LEN)
		return EXP_DROP;
	rc = iw_mpa_parse(d + IW_TRP_HDR_LEN, n - IW_TRP_HDR_LEN,
			  IW_MPA_EXPECT_REQ, f, NULL);
	if (rc != IW_MPA_OK || f->frame_len != n - IW_TRP_HDR_LEN)
		return EXP_DROP;	/* one datagram, one frame */
	if (f->enhanced && f->p2p && !f->rtr)
		return EXP_CM_REJECT;
	return EXP_CONSUMER;
}

/* The answer to a request of PSN x: an I packet acknowledging x whose
 * body is an MPA reply, rejecting or not as expected.  Returns its PSN. */
static uint32_t check_reply(const uint8_t *r, size_t n, uint32_t x,
			    int reject, const uint8_t *pd, size_t pd_len)
{
	struct iw_trp_fields h;
	struct iw_mpa_frame f;
	int rc;

	FUZZ_CHECK(n >= IW_TRP_HDR_LEN, "a %zu-byte answer", n);
	iw_trp_get(r, &h);
	FUZZ_CHECK(h.flags == IW_TRP_I && h.ack == x,
		   "answer flags 0x%x ack %u, expected an I packet acking %u",
		   h.flags, h.ack, x);
	rc = iw_mpa_parse(r + IW_TRP_HDR_LEN, n - IW_TRP_HDR_LEN,
			  IW_MPA_EXPECT_REP, &f, NULL);
	FUZZ_CHECK(rc == IW_MPA_OK && f.frame_len == n - IW_TRP_HDR_LEN,
		   "no valid MPA reply (%s)", iw_mpa_strerror(rc));
	FUZZ_CHECK(f.reject == reject, "reply reject=%d, expected %d",
		   f.reject, reject);
	if (pd)
		FUZZ_CHECK(f.pdata_len == pd_len &&
			   !memcmp(f.pdata, pd, pd_len),
			   "reply does not carry the consumer's data");
	return h.psn;
}

/* A valid request from a fresh socket: once it is delivered and
 * answered, the listener has read everything sent to it before. */
static void probe(void)
{
	static uint8_t buf[FUZZ_DGRAM_MAX];
	struct iw_mpa_params p = { .rev = 2, .ird = 1, .ord = 1 };
	uint8_t req[IW_TRP_HDR_LEN + IW_MPA_MAX_RR_LEN];
	struct iwe_conn *conn;
	ssize_t len = iw_mpa_build(req + IW_TRP_HDR_LEN, IW_MPA_MAX_RR_LEN, 0,
				   &p);
	uint16_t port;
	int fd = client_socket(&port);
	uint32_t y;
	size_t n;

	FUZZ_CHECK(len > 0, "probe request does not build");
	iw_trp_put(req, 7, 0, IW_TRP_I, 16);
	pthread_mutex_lock(&g_seen.lock);
	g_probe_port = port;
	g_probes = 0;
	pthread_mutex_unlock(&g_seen.lock);
	send(fd, req, IW_TRP_HDR_LEN + (size_t)len, 0);
	n = recv_reply(fd, buf, sizeof(buf), "probe");
	y = check_reply(buf, n, 7, 1, NULL, 0);
	pthread_mutex_lock(&g_seen.lock);
	FUZZ_CHECK(g_probes == 1, "%d probe requests", g_probes);
	conn = g_probe_conn;
	g_probe_conn = NULL;
	g_probe_port = 0;
	pthread_mutex_unlock(&g_seen.lock);
	ack_reject(fd, 8, y);
	if (conn)
		iwe_cm_conn_destroy(conn);
	close(fd);
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[FUZZ_DGRAM_MAX];
	const uint8_t *dg[MAX_DGRAMS];
	size_t len[MAX_DGRAMS], n;
	struct fuzz_consumer *s = &g_seen;
	struct iw_mpa_frame f;
	uint32_t x = 0, y = 0;
	enum expect e;
	uint16_t port;
	int fd, k, accepted = 0;

	if (size < 1)
		return 0;
	k = fuzz_split_dgrams(data + 1, size - 1, dg, len, MAX_DGRAMS);
	if (k == 0)
		return 0;
	fuzz_consumer_reset(s, !!(data[0] & 4), g_pd, g_cq);

	e = expected(dg[0], len[0], &f, &x);
	fd = client_socket(&port);
	send(fd, dg[0], len[0], 0);
	if (e == EXP_DROP) {
		probe();
		FUZZ_CHECK(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0,
			   "an answer to a datagram the listener must drop");
	} else {
		n = recv_reply(fd, buf, sizeof(buf), "request");
		accepted = e == EXP_CONSUMER && s->accept;
		y = check_reply(buf, n, x, !accepted,
				e == EXP_CONSUMER ? (accepted ? fuzz_accept_pd
							      : fuzz_reject_pd)
						  : NULL,
				sizeof(fuzz_accept_pd));
		/* What the peer sends next, to the conn's own socket. */
		for (int i = 1; i < k; i++)
			send(fd, dg[i], len[i], 0);
	}

	pthread_mutex_lock(&s->lock);
	if (e == EXP_CONSUMER)
		fuzz_consumer_check(s, 1, f.pdata, f.pdata_len);
	else
		fuzz_consumer_check(s, 0, NULL, 0);
	pthread_mutex_unlock(&s->lock);
	/* The reject's linger ends with its acknowledgement (else it would
	 * hold the client's port for the MPA timeout). */
	if (e != EXP_DROP && !accepted)
		ack_reject(fd, x + 1, y);
	fuzz_consumer_end(s);
	close(fd);
	return 0;
}
