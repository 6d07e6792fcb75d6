/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager over TRP/UDP (a udp device; doc/trp.md
 * "Connection exchange").  A middle-floor part (iw_cm_priv.h): each
 * handler returns the state to enter.
 *
 * The exchange carries MPA's own request and reply frames (iw_mpa.c:
 * private data, IRD/ORD, RTR negotiation, reject) in I packets:
 *   initiator -> I, PSN x, ack 0, credits    MPA request
 *   responder -> I, PSN y, ack x, credits    MPA reply (accept or reject)
 *   initiator -> its first packet after the reply, acknowledging y: the
 *                RTR when one was negotiated, else a pure ack.
 * The responder sends nothing else until that packet came (its QP's
 * transmit gate opens when y is acknowledged).  The request is sent
 * again with backoff (TRP_RTO_INIT_US doubling up to TRP_RTO_MAX_US)
 * until the connect timeout; the accepting reply is the first packet of
 * the responder's QP, which retransmits it like any packet; a reject
 * reply is sent again for each repeated request while the conn lingers.
 *
 * Listeners: the listening port's unconnected socket receives the
 * requests of new peers; each one gets its own socket, bound to the same
 * port (SO_REUSEADDR) and connected to the peer, so the kernel hands the
 * peer's later datagrams to it and its QP owns one descriptor, as a TCP
 * connection's does.  Everything runs on the device's progress thread.
 *
 * Outcomes (initiator): a valid reply -> ESTABLISHED or REJECTED (with
 * an RTR, ESTABLISHED waits in CS_RTR_ACK_WAIT until the RTR is
 * acknowledged: so the responder has it before anything the consumer
 * does next, on any connection); a datagram that is not a TRP reply to
 * our request -> NON_PEER_REJECTED; ICMP port unreachable (the connected
 * socket's ECONNREFUSED) -> UNREACHABLE, once the grace for a peer about
 * to listen is over (cm_refused_pause_ms: the request goes again
 * meanwhile); no reply in time -> TIMED_OUT.  Established (iw_cm_est.c
 * runs it, as for TCP): the peer's F -> DISCONNECTED; retransmission
 * limit, a fatal Terminate, the peer's port gone -> BROKEN.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "iw_fdlimit.h"
#include "iw_cm_priv.h"
#include "iw_trp.h"

#define TRP_DGRAM_MAX 65536

/* A random initial PSN, so stale packets of an earlier connection on
 * the same addresses are unlikely to fit. */
static uint32_t random_isn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)iwe_now_ns() * 2654435761u;
	return v;
}

/* An I packet around an MPA frame: 0 or the socket's errno. */
static int send_init(struct iwe_conn *c, uint32_t psn, uint32_t ack,
		     const uint8_t *frame, size_t len)
{
	uint8_t pkt[IW_TRP_HDR_LEN + IW_MPA_MAX_RR_LEN];

	if (len > IW_MPA_MAX_RR_LEN)
		return EMSGSIZE;
	/* A fresh QP grants its whole window: more would let the peer send
	 * packets the QP drops as beyond it. */
	iw_trp_put(pkt, psn, ack, IW_TRP_I, iwe_trp_window(c->dev));
	memcpy(pkt + IW_TRP_HDR_LEN, frame, len);
	if (send(c->fd, pkt, IW_TRP_HDR_LEN + len, MSG_DONTWAIT) < 0)
		return errno;
	c->trp_tries++;
	return 0;
}

/* Parse an I packet's MPA frame into c->in (pdata then points there).
 * IW_MPA_OK or the parser's error. */
static int parse_frame(struct iwe_conn *c, const uint8_t *pkt, size_t len,
		       enum iw_mpa_expect expect, struct iw_mpa_frame *f)
{
	size_t body = len - IW_TRP_HDR_LEN, need = 0;
	int st;

	if (len < IW_TRP_HDR_LEN || body > sizeof(c->in))
		return IW_MPA_ERR_PD_LEN;
	memcpy(c->in, pkt + IW_TRP_HDR_LEN, body);
	c->in_len = body;
	st = iw_mpa_parse(c->in, body, expect, f, &need);
	if (st == IW_MPA_NEED_MORE || (st == IW_MPA_OK && f->frame_len != body))
		return IW_MPA_ERR_PD_LEN;	/* one datagram, one frame */
	return st;
}

/* ------------------------------------------------------------ active */

int cm_trp_socket(struct iwe_device *dev, int *fdp)
{
	struct sockaddr_in src = dev->attr.addr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return iwe_fd_limit_note(errno, "UDP connect");
	src.sin_port = 0;
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		int err = errno;

		close(fd);
		return err;
	}
	*fdp = fd;
	return 0;
}

int cm_trp_connect(struct iwe_conn *c, const struct sockaddr_in *dst)
{
	struct sockaddr_in to = *dst;

	to.sin_port = htons(cm_service_port(c->service));
	c->remote = to;
	if (connect(c->fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		c->final = 1;
		cm_queue_event(c, IWE_CM_UNREACHABLE, errno,
			       "UDP connect failed");
		return CS_IDLE;
	}
	cm_fill_addrs(c);
	return CS_MPA_SENT;
}

static int next_wake_ms(const struct iwe_conn *c)
{
	uint64_t now = iwe_now_ns(), when = c->trp_next_ns;

	if (c->trp_deadline_ns && c->trp_deadline_ns < when)
		when = c->trp_deadline_ns;
	return when > now ? (int)((when - now + 999999) / 1000000) : 0;
}

/* (Re)send the request; the next one waits twice as long. */
static void send_request(struct iwe_conn *c)
{
	uint64_t us = (uint64_t)TRP_RTO_INIT_US << (c->trp_tries < 4 ?
						    c->trp_tries : 4);

	if (us > TRP_RTO_MAX_US)
		us = TRP_RTO_MAX_US;
	/* A send error (ICMP already back) shows again at the next recv. */
	send_init(c, c->trp_isn, 0, c->out, c->out_len);
	c->trp_next_ns = iwe_now_ns() + us * 1000u;
}

int cm_trp_active_arm(struct iwe_conn *c)
{
	if (!c->trp_tries) {
		c->trp_isn = random_isn();
		if (c->timeout_ms > 0)
			c->trp_deadline_ns = iwe_now_ns() +
					     (uint64_t)c->timeout_ms * 1000000u;
		send_request(c);
		if (!c->trp_tries)
			c->trp_tries = 1;	/* the timer sends it again */
	}
	return next_wake_ms(c);
}

static int active_fail(struct iwe_conn *c, int type, int status,
		       const char *reason)
{
	return cm_end(c, type, status, reason, NULL, 0);
}

/* The reject reply came: a pure ack of it lets the responder close its
 * lingering socket now rather than after the linger (best effort). */
static void ack_reject(struct iwe_conn *c, uint32_t reply_psn)
{
	uint8_t b[IW_TRP_HDR_LEN];

	iw_trp_put(b, c->trp_isn + 1, reply_psn, IW_TRP_A, 0);
	if (send(c->fd, b, sizeof(b), MSG_DONTWAIT) < 0) {
		/* Lost: the responder lingers its full time. */
	}
}

static int on_reply(struct iwe_conn *c, const uint8_t *pkt, size_t len)
{
	struct iw_trp_fields h;
	struct iw_mpa_frame f;
	int st;

	iw_trp_get(pkt, &h);
	st = parse_frame(c, pkt, len, IW_MPA_EXPECT_REP, &f);
	if (st != IW_MPA_OK)
		return active_fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
				   iw_mpa_strerror(st));
	st = iw_mpa_check_reply(&c->req, &f);
	if (st != IW_MPA_OK)
		return active_fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
				   iw_mpa_strerror(st));
	if (f.reject) {
		ack_reject(c, h.psn);
		return cm_end(c, IWE_CM_REJECTED, ECONNREFUSED,
			      "rejected by the peer", f.pdata, f.pdata_len);
	}
	iw_mpa_initiator_conn(&c->req, &f, &c->neg);
	c->trp_peer_isn = h.psn;
	c->trp_peer_credits = h.credits;
	if (c->neg.rtr) {
		/* ESTABLISHED once the responder has our RTR (its
		 * acknowledgement; iw_cm_est.c): the private data waits at
		 * the start of c->in, where the frame was parsed. */
		memmove(c->in, f.pdata, f.pdata_len);
		c->in_len = f.pdata_len;
		return CS_RTR_ACK_WAIT;
	}
	c->pend = (struct cm_pend){ IWE_CM_ESTABLISHED, 0, NULL, f.pdata,
				    f.pdata_len };
	return CS_ESTABLISHED;
}

/* What a datagram before the reply means: the reply, a pure ack of our
 * request (the responder got it; ignored), or not TRP at all. */
static int active_dgram(struct iwe_conn *c, const uint8_t *pkt, size_t len)
{
	struct iw_trp_fields h;

	if (len < IW_TRP_HDR_LEN)
		return active_fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
				   "not a TRP reply");
	iw_trp_get(pkt, &h);
	if (h.flags == IW_TRP_A && h.ack == c->trp_isn)
		return CS_MPA_SENT;
	if (h.flags != IW_TRP_I || h.ack != c->trp_isn)
		return active_fail(c, IWE_CM_NON_PEER_REJECTED, EPROTO,
				   "not a TRP reply to our request");
	return on_reply(c, pkt, len);
}

int cm_trp_active_io(struct iwe_conn *c)
{
	static uint8_t buf[TRP_DGRAM_MAX];	/* progress thread only */
	int next = CS_MPA_SENT;
	ssize_t n;

	while (next == CS_MPA_SENT) {
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == ECONNREFUSED) {
			int ms = cm_refused_pause_ms(c);

			if (ms < 0)
				return active_fail(c, IWE_CM_UNREACHABLE,
						   ECONNREFUSED,
						   "port unreachable");
			/* Nobody listens yet: the request goes again
			 * soon (cm_refused_pause_ms). */
			c->trp_next_ns = iwe_now_ns() +
					 (uint64_t)ms * 1000000u;
			break;
		}
		if (n < 0)
			return active_fail(c, IWE_CM_UNREACHABLE, errno,
					   "UDP error before the reply");
		next = active_dgram(c, buf, (size_t)n);
	}
	return next;
}

int cm_trp_active_timeout(struct iwe_conn *c)
{
	if (c->trp_deadline_ns && iwe_now_ns() >= c->trp_deadline_ns)
		return active_fail(c, IWE_CM_TIMED_OUT, ETIMEDOUT,
				   "no TRP reply in time");
	if (iwe_now_ns() >= c->trp_next_ns)
		send_request(c);
	return CS_MPA_SENT;
}

/* ----------------------------------------------------------- passive */

/* A conn of this port already serves the sender: the datagram reached
 * the listening socket in the instant before the peer's own socket was
 * connected. */
static int peer_known(const struct cm_port *p, const struct sockaddr_in *a)
{
	const struct iwe_conn *c;

	for (c = p->dev->cm->conns; c; c = c->next)
		if (c->udp && !c->dead && c->local.sin_port == htons(p->port) &&
		    c->remote.sin_port == a->sin_port &&
		    c->remote.sin_addr.s_addr == a->sin_addr.s_addr)
			return 1;
	return 0;
}

int cm_trp_port_recv(struct cm_port *p, uint8_t *buf, size_t cap,
		     size_t *len, struct sockaddr_in *from)
{
	socklen_t fl = sizeof(*from);
	struct iw_trp_fields h;
	ssize_t n;

	do {
		n = recvfrom(p->fd, buf, cap, MSG_DONTWAIT,
			     (struct sockaddr *)from, &fl);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	if ((size_t)n < IW_TRP_HDR_LEN || fl != sizeof(*from) ||
	    from->sin_family != AF_INET)
		return -1;
	iw_trp_get(buf, &h);
	if (h.flags != IW_TRP_I || peer_known(p, from))
		return -1;	/* only a new peer's request counts here */
	*len = (size_t)n;
	return 1;
}

/* A socket bound to port p (on addr, or on the wildcard address when
 * wild) and connected to the peer, or -1. */
static int peer_socket_on(const struct sockaddr_in *addr, uint16_t port,
			  int wild, const struct sockaddr_in *peer)
{
	struct sockaddr_in a = *addr, got;
	socklen_t gl = sizeof(got);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0) {
		iwe_fd_limit_note(errno, "UDP accept");
		return -1;
	}
	a.sin_port = htons(port);
	if (wild)
		a.sin_addr.s_addr = htonl(INADDR_ANY);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    connect(fd, (const struct sockaddr *)peer, sizeof(*peer)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&got, &gl) < 0 ||
	    got.sin_addr.s_addr != addr->sin_addr.s_addr) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Between bind and connect, a socket bound to the listener's own address
 * and port ties with the listener, and the kernel gives the newer one
 * the datagrams of every peer: another peer's request or first packet
 * (its RTR) would land in this socket and be lost until retransmitted
 * (at least the 20 ms RTO; dtestcm's 1000 connections saw one connection
 * established 8 disconnects late).  Bound to the wildcard address first,
 * the socket loses to the listener until it is connected (then it wins:
 * connect binds it to the address the route gives); when that is not
 * the device's address (several addresses on the link), it is bound to
 * the device's address as before. */
int cm_trp_peer_socket(struct cm_port *p, const struct sockaddr_in *from)
{
	int fd = peer_socket_on(&p->dev->attr.addr, p->port, 1, from);

	return fd >= 0 ? fd : peer_socket_on(&p->dev->attr.addr, p->port, 0,
					     from);
}

/* The peer's PSN and credits from its I packet, and our own ISN: the
 * reply, accepting or rejecting, goes out with them. */
static void take_peer(struct iwe_conn *c, const struct iw_trp_fields *h)
{
	c->trp_peer_isn = h->psn;
	c->trp_peer_credits = h->credits;
	c->trp_isn = random_isn();
}

/* A new peer's request: its listener is found, and refuses or takes it,
 * as over TCP (iw_cm_passive.c); only the framing differs. */
int cm_trp_passive_request(struct iwe_conn *c, struct cm_port *p,
			   const uint8_t *pkt, size_t len)
{
	struct iw_trp_fields h;
	struct iw_mpa_frame f;
	int st;

	iw_trp_get(pkt, &h);
	c->orphan = 1;
	cm_fill_addrs(c);
	st = parse_frame(c, pkt, len, IW_MPA_EXPECT_REQ, &f);
	if (st != IW_MPA_OK) {
		cm_log(c, IW_LOG_ERROR, "MPA request dropped: %s",
		       iw_mpa_strerror(st));
		cm_conn_drop(c);	/* not for us: silence */
		return CS_DROPPED;
	}
	take_peer(c, &h);
	return cm_passive_request(c, p, &f);
}

int cm_trp_reject_enter(struct iwe_conn *c)
{
	send_init(c, c->trp_isn, c->trp_peer_isn, c->out, c->out_len);
	return CS_REJECTING;
}

/* The linger ends early: the descriptor goes at once (as after the
 * linger's timeout, cm_passive_reply_timeout). */
static int reject_over(struct iwe_conn *c)
{
	c->final = 1;
	return CS_IDLE;
}

int cm_trp_reject_io(struct iwe_conn *c)
{
	static uint8_t buf[TRP_DGRAM_MAX];	/* progress thread only */
	struct iw_trp_fields h;
	ssize_t n;

	while ((n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT)) >= 0 ||
	       errno == EINTR) {
		if (n < (ssize_t)IW_TRP_HDR_LEN)
			continue;
		iw_trp_get(buf, &h);
		if (h.flags == IW_TRP_I && h.psn == c->trp_peer_isn)
			return cm_trp_reject_enter(c);	/* it was lost */
		if (h.flags == IW_TRP_A && h.ack == c->trp_isn)
			return reject_over(c);	/* it arrived */
	}
	/* The initiator's port is gone: nobody will ask again. */
	return errno == ECONNREFUSED ? reject_over(c) : CS_REJECTING;
}

/* ------------------------------------------------------- adopted (SSP) */

static int ssp_down(struct iwe_conn *c, int err)
{
	return cm_end(c, IWE_CM_SOCKET_DOWN, err,
		      "socket error before the TRP request", NULL, 0);
}

static int ssp_bad(struct iwe_conn *c, const char *why)
{
	return cm_end(c, IWE_CM_BAD_REQUEST, EPROTO, why, NULL, 0);
}

/* The next datagram is looked at with MSG_PEEK and consumed only when it
 * is a whole, acceptable request: BAD_REQUEST leaves it in the socket. */
static int ssp_peek(struct iwe_conn *c)
{
	static uint8_t buf[TRP_DGRAM_MAX];	/* progress thread only */
	struct iw_trp_fields h;
	struct iw_mpa_frame f;
	struct iw_mpa_local loc;
	ssize_t n;
	int st;

	do {
		n = recv(c->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ?
		       CS_REQ_WAIT : ssp_down(c, errno);
	if ((size_t)n < IW_TRP_HDR_LEN)
		return ssp_bad(c, "not a TRP packet");
	iw_trp_get(buf, &h);
	if (h.flags != IW_TRP_I)
		return ssp_bad(c, "not a TRP request");
	st = parse_frame(c, buf, (size_t)n, IW_MPA_EXPECT_REQ, &f);
	if (st == IW_MPA_OK) {
		take_peer(c, &h);
		cm_local_from_params(&c->params, &loc);
		st = iw_mpa_negotiate(&loc, &f, &c->rep, &c->neg);
	}
	if (st != IW_MPA_OK) {
		c->pend.type = -1;
		return ssp_bad(c, iw_mpa_strerror(st));
	}
	c->pend = (struct cm_pend){ IWE_CM_CONNECT_REQUEST, 0, NULL, f.pdata,
				    f.pdata_len };
	if (recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT) != n)
		return ssp_down(c, EIO);	/* cannot happen */
	return CS_REQ_RCVD;
}

int cm_trp_ssp_io(struct iwe_conn *c)
{
	if (c->out) {
		/* The final streaming-mode message, as one datagram. */
		if (send(c->fd, c->out, c->out_len, MSG_DONTWAIT) < 0)
			return errno == EAGAIN ? CS_REQ_WAIT : ssp_down(c, errno);
		cm_out_set(c, NULL, 0);
	}
	return ssp_peek(c);
}
