/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: plain TCP sockets -- the baseline the connection setup rate is
 * held against (socket, connect and accept of as many connections, with as
 * many connects in flight, between the same two processes), and the
 * non-blocking connects and listeners the SSP mode builds on. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iwscale.h"

int tcp_start_connect(unsigned port, int *connected)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, SCALE_HOST, &to.sin_addr);
	if (fd < 0)
		return -1;
	*connected = connect(fd, (struct sockaddr *)&to, sizeof to) == 0;
	if (!*connected && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int tcp_listen_nonblocking(unsigned port)
{
	/* The kernel caps the backlog at net.core.somaxconn. */
	int fd = du_tcp_listen(port, 4096);

	if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)) {
		close(fd);
		return -1;
	}
	return fd;
}

int tcp_wait(struct scale_side *s, int epfd, struct epoll_event *evs, int max,
	     uint64_t *progress, const char *what)
{
	int n = epoll_wait(epfd, evs, max, 100);

	if (n > 0) {
		*progress = lat_now_ns();
		return n;
	}
	if (n < 0 && errno != EINTR) {
		perror("iwscale: epoll_wait");
		return -1;
	}
	if ((double)(lat_now_ns() - *progress) > s->o->wait_s * 1e9) {
		fprintf(stderr, "iwscale: nothing happened for %.1f s waiting for %s\n",
			s->o->wait_s, what);
		return -1;
	}
	return ctl_peer_gone(s->ctl, what) ? -1 : 0;
}

static unsigned baseline_port(const struct scale_side *s, long idx)
{
	return (unsigned)(s->o->qual + SCALE_TCP_PORT_OFFSET + side_listener_of(s, idx));
}

/* Closes n sockets; the active side resets its connections (SO_LINGER
 * 0), so neither side leaves TIME_WAIT sockets on the ports that the
 * DAT connections take next. */
static void close_all(int *fds, long n, int reset)
{
	struct linger off = { .l_onoff = 1, .l_linger = 0 };

	for (long k = 0; k < n; k++) {
		if (reset)
			setsockopt(fds[k], SOL_SOCKET, SO_LINGER, &off, sizeof off);
		close(fds[k]);
	}
}

/* Completes the connects epoll reported; -1 on a failed one. */
static int connects_done(struct scale_side *s, int epfd, const struct epoll_event *evs, int n,
			 const int *fds, long *done, struct scale_msg *m)
{
	for (int k = 0; k < n; k++) {
		long idx = (long)evs[k].data.u64;
		int err = 0;
		socklen_t len = sizeof err;

		getsockopt(fds[idx], SOL_SOCKET, SO_ERROR, &err, &len);
		epoll_ctl(epfd, EPOLL_CTL_DEL, fds[idx], NULL);
		if (err) {
			side_fail(s, idx, strerror(err), DAT_SUCCESS);
			return -1;
		}
		(*done)++;
		m->t_end = lat_now_ns();
	}
	return 0;
}

int tcp_baseline_active(struct scale_side *s, long count, struct scale_msg *m)
{
	int *fds = calloc((size_t)count + 1, sizeof *fds);
	int epfd = epoll_create1(EPOLL_CLOEXEC), rc = -1;
	long started = 0, done = 0;
	uint64_t progress;
	struct scale_msg peer;
	struct epoll_event evs[64];

	if (!fds || epfd < 0 || ctl_recv(s->ctl, STEP_TCP_READY, s->o->wait_s, &peer))
		goto out;
	m->t_begin = progress = lat_now_ns();
	while (done < count) {
		int n, now;

		while (started < count && started - done < s->o->inflight) {
			struct epoll_event e = { .events = EPOLLOUT, .data.u64 = (uint64_t)started };
			int fd = tcp_start_connect(baseline_port(s, started), &now);

			if (fd < 0) {
				side_fail(s, started, strerror(errno), DAT_SUCCESS);
				goto out;
			}
			fds[started++] = fd;
			if (now) {
				done++;
				m->t_end = lat_now_ns();
			} else if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e)) {
				goto out;
			}
		}
		n = tcp_wait(s, epfd, evs, 64, &progress, "TCP connects");
		if (n < 0 || connects_done(s, epfd, evs, n, fds, &done, m))
			goto out;
	}
	m->count = done;
	if (ctl_recv(s->ctl, STEP_TCP_DONE, s->o->wait_s, &peer))
		goto out;
	if (peer.t_end > m->t_end)
		m->t_end = peer.t_end;
	rc = peer.count == count ? 0 : -1;
out:
	close_all(fds, started, 1);
	if (rc == 0)
		rc = ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_TCP_CLOSED });
	if (epfd >= 0)
		close(epfd);
	free(fds);
	return rc;
}

/* Accepts what the listener has; -1 on an error other than "no more". */
static int accept_burst(struct scale_side *s, int lfd, int *fds, long *got, long count,
			struct scale_msg *m)
{
	while (*got < count) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			side_fail(s, *got, strerror(errno), DAT_SUCCESS);
			return -1;
		}
		if (*got == 0)
			m->t_begin = lat_now_ns();
		fds[(*got)++] = fd;
		m->t_end = lat_now_ns();
	}
	return 0;
}

int tcp_baseline_passive(struct scale_side *s, long count, struct scale_msg *m)
{
	int *fds = calloc((size_t)count + 1, sizeof *fds), lfd[SCALE_MAX_LISTENERS];
	int epfd = epoll_create1(EPOLL_CLOEXEC), nl = s->o->listeners, rc = -1, j;
	long got = 0;
	uint64_t progress = lat_now_ns();
	struct scale_msg peer;
	struct epoll_event evs[SCALE_MAX_LISTENERS];

	for (j = 0; fds && epfd >= 0 && j < nl; j++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)j };

		lfd[j] = tcp_listen_nonblocking(baseline_port(s, j));
		if (lfd[j] < 0)
			goto out;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd[j], &e)) {
			j++;
			goto out;
		}
	}
	if (j < nl || ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_TCP_READY }))
		goto out;
	while (got < count) {
		int n = tcp_wait(s, epfd, evs, SCALE_MAX_LISTENERS, &progress, "TCP connections");

		for (int k = 0; k < n; k++)
			if (accept_burst(s, lfd[evs[k].data.u32], fds, &got, count, m))
				goto out;
		if (n < 0)
			goto out;
	}
	m->step = STEP_TCP_DONE;
	m->count = got;
	if (ctl_send(s->ctl, m) == 0 && ctl_recv(s->ctl, STEP_TCP_CLOSED, s->o->wait_s, &peer) == 0)
		rc = 0;
out:
	close_all(fds, got, 0);
	while (j-- > 0)
		close(lfd[j]);
	if (epfd >= 0)
		close(epfd);
	free(fds);
	return rc;
}
