/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Socket Service Points: adopting a consumer's connected TCP socket.
 *
 * Passive: the final streaming-mode message goes out first; then the
 * socket is watched (edge-triggered, with EPOLLRDHUP) and the request is
 * looked at with MSG_PEEK only: one peek of as many bytes as the largest
 * request has (the header and the private data in one system call; a
 * peek consumes nothing, so what follows the request stays unread).
 * Only when a whole request is there and acceptable are its bytes
 * consumed, exactly its own, so BAD_REQUEST and SOCKET_DOWN leave the
 * stream exactly as the peer sent it.  Edge-triggered because unconsumed
 * bytes keep a level-triggered fd readable forever: the next edge is the
 * next arrival (or close).
 *
 * Active: the MPA request goes out at once; then it is the ordinary
 * active side (iw_cm_active.c).
 *
 * The socket's file status flags are never changed (every call on it
 * passes MSG_DONTWAIT): release hands it back blocking or not, as it
 * came; TCP_NODELAY, once set, stays.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"

static int down(struct iwe_conn *c, int err)
{
	return cm_end(c, IWE_CM_SOCKET_DOWN, err,
		      err ? "socket error before the MPA request" :
		      "closed by the peer before the MPA request", NULL, 0);
}

/* A whole request is in the socket (peeked into c->in): negotiate,
 * then consume exactly its bytes. */
static int on_request(struct iwe_conn *c, const struct iw_mpa_frame *f)
{
	struct iw_mpa_local loc;
	uint8_t sink[IW_MPA_MAX_RR_LEN];
	ssize_t n;
	int st;

	cm_local_from_params(&c->params, &loc);
	st = iw_mpa_negotiate(&loc, f, &c->rep, &c->neg);
	if (st != IW_MPA_OK)
		return cm_end(c, IWE_CM_BAD_REQUEST, EPROTO,
			      iw_mpa_strerror(st), NULL, 0);
	do {
		n = recv(c->fd, sink, f->frame_len, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)f->frame_len)
		return down(c, n < 0 ? errno : EIO);	/* cannot happen */
	c->in_len = c->in_frame = f->frame_len;
	c->pend = (struct cm_pend){ IWE_CM_CONNECT_REQUEST, 0, NULL, f->pdata,
				    f->pdata_len };
	return CS_REQ_RCVD;
}

static int peek(struct iwe_conn *c, uint32_t revents)
{
	int hup = !!(revents & (EPOLLRDHUP | EPOLLHUP));
	struct iw_mpa_frame f;
	size_t need = 0;
	ssize_t n;
	int st;

	do {
		n = recv(c->fd, c->in, sizeof(c->in), MSG_PEEK | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return hup ? down(c, 0) : CS_REQ_WAIT;
	if (n <= 0)
		return down(c, n < 0 ? errno : 0);
	st = iw_mpa_parse(c->in, (size_t)n, IW_MPA_EXPECT_REQ, &f, &need);
	if (st == IW_MPA_OK)
		return on_request(c, &f);
	if (st != IW_MPA_NEED_MORE)
		return cm_end(c, IWE_CM_BAD_REQUEST, EPROTO,
			      iw_mpa_strerror(st), NULL, 0);
	/* The largest request fits c->in: everything there is was seen.
	 * Wait for more, unless no more can come. */
	return hup ? down(c, 0) : CS_REQ_WAIT;
}

int cm_ssp_io(struct iwe_conn *c, uint32_t revents)
{
	int err;

	if (c->out) {
		err = cm_out_flush(c);
		if (err == EAGAIN)
			return CS_REQ_WAIT;
		if (err)
			return down(c, err);
	}
	if (c->watch.events != CM_SSP_PEEK_EVENTS) {
		/* cm_enter adds the edge-triggered interest, which reports
		 * data that is already there as the first edge. */
		return CS_REQ_WAIT;
	}
	return peek(c, revents);
}

/* Hand the socket back as it was. */
int cm_ssp_release(struct iwe_conn *c)
{
	if (c->attached || c->state == CS_ACCEPTING ||
	    c->state == CS_REJECTING)
		return EBUSY;
	cm_quiesce(c);
	c->released = 1;
	c->final = 1;
	return 0;
}
