/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale --ssp: each connection a plain TCP connection first, then
 * upgraded (doc/ssp.md), many at a time.  The passive side accepts TCP
 * connections and gives each to a Socket Service Point with a fresh EP;
 * the SSP writes the upgrade offer (iwd_ssp.c's line), and the active
 * side, having read it, calls dat_iw_socket_connect on its socket with
 * the connection's index as private data.  Both sides wait on sockets and
 * on the connection EVD together: the EVD feeds a CNO whose agent makes
 * an eventfd in the same epoll set as the sockets readable. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dat2/dat_iw_extensions.h>

#include "iwscale.h"

/* epoll tags: the CNO, and (passive) listener j as LISTENER_TAG + j;
 * other tags are (active) a socket awaiting its offer: idx << 32 | fd. */
#define CNO_TAG UINT64_MAX
#define LISTENER_TAG (UINT64_MAX - SCALE_MAX_LISTENERS - 1)

int ssp_listen(struct scale_side *s)
{
	for (int j = 0; j < s->o->listeners; j++) {
		s->lfd[j] = tcp_listen_nonblocking((unsigned)(s->o->qual + (DAT_CONN_QUAL)j));
		if (s->lfd[j] < 0) {
			side_fail(s, -1, "no TCP listener", DAT_SUCCESS);
			return -1;
		}
	}
	return 0;
}

static int epoll_add(int epfd, int fd, uint64_t tag)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = tag };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) == 0)
		return 0;
	perror("iwscale: epoll_ctl");
	return -1;
}

/* The connection events the CNO announced, once its agent is set again
 * (an event coming meanwhile calls it, and this loop runs again), until
 * `up` connections are: what follows belongs to the next phase. */
static int drain_cm(struct scale_side *s, long from, long to, long up)
{
	DAT_EVENT ev;

	if (side_cm_rearm(s))
		return -1;
	while (s->up < up && dat_evd_dequeue(s->cm_evd, &ev) == DAT_SUCCESS) {
		if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT) {
			/* The CR holds the socket now; its SSP has done its part. */
			dat_iw_ssp_free(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle);
			if (conn_accept(s, &ev, from, to))
				return -1;
		} else if (conn_established(s, &ev)) {
			return -1;
		}
	}
	return 0;
}

/* Active: connection idx's TCP connect, its EP, and its socket in the
 * epoll set until the offer comes. */
static int start_one(struct scale_side *s, int epfd, long idx)
{
	int now, fd = tcp_start_connect((unsigned)(s->o->qual + (DAT_CONN_QUAL)side_listener_of(s, idx)),
					&now);

	if (fd < 0) {
		side_fail(s, idx, strerror(errno), DAT_SUCCESS);
		return -1;
	}
	s->t_start[idx] = lat_now_ns();
	if (side_ep_create(s, idx, &s->ep[idx]) ||
	    epoll_add(epfd, fd, (uint64_t)idx << 32 | (uint32_t)fd)) {
		close(fd);
		return -1;
	}
	return 0;
}

/* Active: the offer came on connection idx's socket: upgrade it. */
static int upgrade_one(struct scale_side *s, int epfd, uint64_t tag)
{
	long idx = (long)(tag >> 32);
	int fd = (int)(uint32_t)tag;
	uint64_t pd = (uint64_t)idx;
	DAT_RETURN r;

	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	/* Closes fd when no offer is there. */
	if (du_ssp_await_offer(&s->d, fd)) {
		side_fail(s, idx, "no upgrade offer", DAT_SUCCESS);
		return -1;
	}
	r = dat_iw_socket_connect(s->ep[idx], fd, s->d.tmo_us, (DAT_COUNT)sizeof pd, &pd);
	if (r != DAT_SUCCESS) {
		close(fd);
		side_fail(s, idx, "dat_iw_socket_connect", r);
		return -1;
	}
	return 0;
}

/* Runs epoll until `to - from` more connections are up; `on` handles
 * a socket's event.  Shared by both sides. */
static int ssp_loop(struct scale_side *s, int epfd, long from, long to, struct scale_msg *m,
		    int (*on)(struct scale_side *, int, uint64_t, long *), long *next)
{
	long base = s->up;
	uint64_t progress = lat_now_ns();
	struct epoll_event evs[64];

	while (s->up - base < to - from) {
		int n;

		while (s->active && *next < to && *next - from - (s->up - base) < s->o->inflight)
			if (start_one(s, epfd, (*next)++))
				return -1;
		n = tcp_wait(s, epfd, evs, 64, &progress, "upgrades");
		if (n < 0)
			return -1;
		for (int k = 0; k < n; k++) {
			int rc = evs[k].data.u64 == CNO_TAG ? drain_cm(s, from, to, base + to - from)
							    : on(s, epfd, evs[k].data.u64, next);
			if (rc)
				return -1;
			if (!m->t_begin && !s->active)
				m->t_begin = lat_now_ns();
		}
	}
	m->count = s->up - base;
	m->t_end = s->t_up[s->up - 1];
	return 0;
}

static int on_offer(struct scale_side *s, int epfd, uint64_t tag, long *next)
{
	(void)next;
	return upgrade_one(s, epfd, tag);
}

/* Passive: every connection listener j has queued gets an EP and an SSP
 * that offers the upgrade. */
static int on_listener(struct scale_side *s, int epfd, uint64_t tag, long *next)
{
	int lfd = s->lfd[tag - LISTENER_TAG];

	(void)epfd;
	(void)next;
	for (;;) {
		DAT_IW_SSP_HANDLE ssp;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			side_fail(s, -1, strerror(errno), DAT_SUCCESS);
			return -1;
		}
		if (side_ep_create(s, -1, &s->d.ep) || du_ssp_offer(&s->d, fd, &ssp)) {
			side_fail(s, -1, "an SSP for an accepted socket", DAT_SUCCESS);
			close(fd);
			return -1;
		}
	}
}

static int loop_with(struct scale_side *s, long from, long to, struct scale_msg *m,
		     int (*on)(struct scale_side *, int, uint64_t, long *))
{
	int epfd = epoll_create1(EPOLL_CLOEXEC), rc = -1;
	long next = from;

	if (epfd < 0 || epoll_add(epfd, s->cno_fd, CNO_TAG))
		goto out;
	for (int j = 0; !s->active && j < s->o->listeners; j++)
		if (epoll_add(epfd, s->lfd[j], LISTENER_TAG + (uint64_t)j))
			goto out;
	if (s->active)
		m->t_begin = lat_now_ns();
	/* Events queued before this phase set no agent off: take them. */
	if (drain_cm(s, from, to, s->up + to - from))
		goto out;
	rc = ssp_loop(s, epfd, from, to, m, on, &next);
out:
	if (epfd >= 0)
		close(epfd);
	return rc;
}

int ssp_connect_range(struct scale_side *s, long from, long to, struct scale_msg *m)
{
	return loop_with(s, from, to, m, on_offer);
}

int ssp_accept_range(struct scale_side *s, long from, long to, struct scale_msg *m)
{
	return loop_with(s, from, to, m, on_listener);
}
