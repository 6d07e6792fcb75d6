/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libFuzzer target: the connection manager's active side over TRP/UDP
 * -- what comes back to a connect (iwe_cm_connect on a udp device on
 * 127.0.0.1) from a peer this target plays with a UDP socket of its own
 * (doc/trp.md, "Connection exchange").
 *
 * Input: data[0] bit 0: the peer writes the request's PSN into each
 * datagram's acknowledgement field and grants at least one credit (so
 * that answers can be on topic: the PSN is random); bit 1: the peer
 * acknowledges the RTR of an accepted connection; bits 2-3: the RTR
 * types the connect offers (none, Write, Read, all three).  The rest:
 * datagrams, each a BE16 length and that many bytes, sent in turn up
 * to the first that decides the connect's outcome.
 *
 * The oracle is iw_trp_get, iw_mpa_parse, iw_mpa_check_reply and
 * iw_mpa_initiator_conn on the request the peer received and on each
 * datagram:
 *  - the request is an I packet holding exactly one MPA request;
 *  - an A packet acknowledging the request decides nothing;
 *  - an I packet acknowledging the request whose body is exactly one
 *    MPA reply that the request accepts decides: a reject -> REJECTED
 *    with the reply's private data; an accept -> ESTABLISHED with them
 *    -- with an RTR negotiated, only once the peer acknowledged the RTR
 *    (a data packet, PSN request + 1, acknowledging the reply), else
 *    TIMED_OUT at the MPA timeout;
 *  - any other datagram -> NON_PEER_REJECTED;
 *  - nothing decisive -> no event (the conn is destroyed after 1 ms).
 * Each outcome comes once and within DEADLINE_MS. */
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

/* The MPA timeout when the peer leaves the RTR unacknowledged (bit 1
 * clear); any other wait, the connect's timeout included, is
 * DEADLINE_MS: a busy machine must not turn an answer into a timeout. */
#define RTR_TIMEOUT_MS	60
#define DEADLINE_MS	2000
#define MAX_DGRAMS	16

struct outcome {
	pthread_mutex_t lock;
	int type, count;
	uint8_t pdata[IW_MPA_MAX_PRIVATE_DATA];
	size_t pdata_len;
};

static struct outcome g_out = { .lock = PTHREAD_MUTEX_INITIALIZER };
static struct iwe_device *g_dev;
static struct iwe_pd *g_pd;
static struct iwe_cq *g_cq;

static void handler(const struct iwe_cm_event *ev, void *ctx)
{
	struct outcome *o = &g_out;

	(void)ctx;
	pthread_mutex_lock(&o->lock);
	if (!o->count++) {
		o->type = ev->type;
		FUZZ_CHECK(ev->pdata_len <= sizeof(o->pdata), "pdata_len %zu",
			   ev->pdata_len);
		o->pdata_len = ev->pdata_len;
		if (ev->pdata_len)
			memcpy(o->pdata, ev->pdata, ev->pdata_len);
	}
	pthread_mutex_unlock(&o->lock);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_cm_open("fuzz_cm_trp_active", "127.0.0.1", IWE_TRANSPORT_UDP,
		     &g_dev, &g_pd, &g_cq);
	return 0;
}

/* The outcome, once; -1 past the deadline. */
static int wait_outcome(void)
{
	long end = fuzz_now_ms() + DEADLINE_MS;
	int t = -1;

	while (fuzz_now_ms() < end) {
		pthread_mutex_lock(&g_out.lock);
		if (g_out.count)
			t = g_out.type;
		pthread_mutex_unlock(&g_out.lock);
		if (t >= 0)
			return t;
		usleep(200);
	}
	return -1;
}

enum verdict { V_NONE, V_NON_PEER, V_REJECTED, V_ACCEPTED };

/* What one datagram decides; *f: the reply (V_REJECTED, V_ACCEPTED). */
static enum verdict judge(const uint8_t *d, size_t n, uint32_t x,
			  const struct iw_mpa_params *req,
			  struct iw_mpa_frame *f)
{
	struct iw_trp_fields h;
	size_t body = n - IW_TRP_HDR_LEN;

	if (n < IW_TRP_HDR_LEN)
		return V_NON_PEER;
	iw_trp_get(d, &h);
	if (h.flags == IW_TRP_A && h.ack == x)
		return V_NONE;
	if (h.flags != IW_TRP_I || h.ack != x || body > IW_MPA_MAX_RR_LEN ||
	    iw_mpa_parse(d + IW_TRP_HDR_LEN, body, IW_MPA_EXPECT_REP, f,
			 NULL) != IW_MPA_OK ||
	    f->frame_len != body || iw_mpa_check_reply(req, f) != IW_MPA_OK)
		return V_NON_PEER;
	return f->reject ? V_REJECTED : V_ACCEPTED;
}

/* The request the peer got: an I packet of exactly one MPA request, as
 * params; *x: its PSN. */
static void take_request(const uint8_t *d, ssize_t n, uint32_t *x,
			 struct iw_mpa_params *req, struct iw_mpa_frame *f)
{
	struct iw_trp_fields h;

	FUZZ_CHECK(n >= (ssize_t)IW_TRP_HDR_LEN, "no request (%zd)", n);
	iw_trp_get(d, &h);
	FUZZ_CHECK(h.flags == IW_TRP_I, "request flags 0x%x", h.flags);
	FUZZ_CHECK(iw_mpa_parse(d + IW_TRP_HDR_LEN, (size_t)n - IW_TRP_HDR_LEN,
				IW_MPA_EXPECT_REQ, f, NULL) == IW_MPA_OK &&
		   f->frame_len == (size_t)n - IW_TRP_HDR_LEN,
		   "the request is not one MPA request");
	*x = h.psn;
	*req = (struct iw_mpa_params){ .rev = f->rev, .crc = f->crc,
				       .p2p = f->p2p, .ird = f->ird,
				       .ord = f->ord, .rtr = f->rtr,
				       .pdata = f->pdata,
				       .pdata_len = f->pdata_len };
}

/* Accepted: the RTR (if negotiated) and the event that follows. */
static int after_accept(int fd, uint32_t x, const uint8_t *reply,
			const struct iw_mpa_params *req,
			const struct iw_mpa_frame *f, int ack_rtr,
			const struct sockaddr_in *peer)
{
	static uint8_t buf[FUZZ_DGRAM_MAX];
	struct iw_trp_fields h, r;
	struct iw_mpa_conn neg;
	struct sockaddr_in from;
	uint8_t a[IW_TRP_HDR_LEN];
	ssize_t n;

	iw_mpa_initiator_conn(req, f, &neg);
	if (!neg.rtr)
		return IWE_CM_ESTABLISHED;
	iw_trp_get(reply, &r);
	/* Pure acks may come first; the RTR is the first data packet. */
	do {
		n = fuzz_dgram_within(fd, buf, sizeof(buf), DEADLINE_MS, &from);
		FUZZ_CHECK(n >= (ssize_t)IW_TRP_HDR_LEN, "no RTR (%zd)", n);
		iw_trp_get(buf, &h);
	} while (h.flags == IW_TRP_A);
	FUZZ_CHECK(h.flags == 0 && h.psn == x + 1 && h.ack == r.psn &&
		   n > (ssize_t)IW_TRP_HDR_LEN,
		   "RTR: flags 0x%x psn %u (want %u) ack %u (want %u)",
		   h.flags, h.psn, x + 1, h.ack, r.psn);
	if (!ack_rtr)
		return IWE_CM_TIMED_OUT;
	iw_trp_put(a, r.psn + 1, x + 1, IW_TRP_A, 16);
	sendto(fd, a, sizeof(a), 0, (const struct sockaddr *)peer,
	       sizeof(*peer));
	return IWE_CM_ESTABLISHED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned rtr_offers[] = {
		0, IWE_RTR_WRITE, IWE_RTR_READ,
		IWE_RTR_WRITE | IWE_RTR_READ | IWE_RTR_SEND };
	static uint8_t buf[FUZZ_DGRAM_MAX], dgram[FUZZ_DGRAM_MAX];
	const uint8_t *dg[MAX_DGRAMS];
	size_t len[MAX_DGRAMS];
	struct iwe_cm_params prm = { .mpa_rev = 2, .crc = 0,
				     .ird = 4, .ord = 4 };
	struct sockaddr_in peer = { .sin_family = AF_INET }, me;
	socklen_t ml = sizeof(me);
	struct iw_mpa_params req;
	struct iw_mpa_frame rf, f;
	enum verdict v = V_NONE;
	struct iwe_conn *conn = NULL;
	struct iwe_qp *qp;
	int fd, k, i, want, got;
	uint32_t x;
	ssize_t n;

	if (size < 1)
		return 0;
	prm.rtr = rtr_offers[data[0] >> 2 & 3];
	prm.mpa_timeout_ms = data[0] & 2 ? DEADLINE_MS : RTR_TIMEOUT_MS;
	k = fuzz_split_dgrams(data + 1, size - 1, dg, len, MAX_DGRAMS);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	me = (struct sockaddr_in){ .sin_family = AF_INET };
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	FUZZ_CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&me, sizeof(me)) &&
		   !getsockname(fd, (struct sockaddr *)&me, &ml),
		   "peer socket: %s", strerror(errno));
	qp = fuzz_make_qp(g_pd, g_cq);
	pthread_mutex_lock(&g_out.lock);
	g_out.count = 0;
	pthread_mutex_unlock(&g_out.lock);
	peer = me;
	peer.sin_port = 0;	/* the service names the port */
	FUZZ_CHECK(iwe_cm_connect(qp, &peer, ntohs(me.sin_port), "fz", 2,
				  DEADLINE_MS, &prm, handler, NULL,
				  &conn) == 0, "connect: %s", strerror(errno));

	n = fuzz_dgram_within(fd, buf, sizeof(buf), DEADLINE_MS, &peer);
	take_request(buf, n, &x, &req, &rf);
	for (i = 0; i < k && v == V_NONE; i++) {
		memcpy(dgram, dg[i], len[i]);
		if ((data[0] & 1) && len[i] >= IW_TRP_HDR_LEN) {
			struct iw_trp_fields h;

			iw_trp_get(dgram, &h);
			iw_trp_put(dgram, h.psn, x, h.flags,
				   h.credits ? h.credits : 1);
		}
		v = judge(dgram, len[i], x, &req, &f);
		sendto(fd, dgram, len[i], 0, (struct sockaddr *)&peer,
		       sizeof(peer));
	}
	want = v == V_NONE ? -1 :
	       v == V_NON_PEER ? IWE_CM_NON_PEER_REJECTED :
	       v == V_REJECTED ? IWE_CM_REJECTED :
	       after_accept(fd, x, dgram, &req, &f, data[0] & 2, &peer);
	if (want < 0) {
		usleep(1000);	/* what the datagrams did, by now */
		pthread_mutex_lock(&g_out.lock);
		got = g_out.count ? g_out.type : -1;
		pthread_mutex_unlock(&g_out.lock);
	} else
		got = wait_outcome();
	FUZZ_CHECK(got == want, "outcome %d, expected %d (verdict %d)", got,
		   want, v);
	if (want == IWE_CM_REJECTED || want == IWE_CM_ESTABLISHED)
		FUZZ_CHECK(g_out.pdata_len == f.pdata_len &&
			   !memcmp(g_out.pdata, f.pdata, f.pdata_len),
			   "the reply's private data changed on its way");
	usleep(1000);	/* a second event would come by now */
	pthread_mutex_lock(&g_out.lock);
	FUZZ_CHECK(g_out.count == (want >= 0) || want == IWE_CM_ESTABLISHED,
		   "%d events (outcome expected: %d)", g_out.count, want);
	pthread_mutex_unlock(&g_out.lock);
	iwe_cm_conn_destroy(conn);
	iwe_destroy_qp(qp);
	close(fd);
	return 0;
}
