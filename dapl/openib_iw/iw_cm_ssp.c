/* Socket Service Points: adopting a consumer's connected TCP socket.
 *
 * Passive: the final streaming-mode message goes out first; then the
 * socket is watched (edge-triggered, with EPOLLRDHUP) and the request is
 * looked at with MSG_PEEK only.  A peek always returns bytes from the
 * start of the stream, so each peek asks for exactly as many bytes as
 * the parser needs so far and never more than one request.  Only when a
 * whole request is there and acceptable are its bytes consumed, so
 * BAD_REQUEST and SOCKET_DOWN leave the stream exactly as the peer sent
 * it.  Edge-triggered because unconsumed bytes keep a level-triggered
 * fd readable forever: the next edge is the next arrival (or close).
 *
 * Active: the MPA request goes out at once; then it is the ordinary
 * active side (iw_cm.c).
 *
 * release hands the socket back with its original file status flags
 * (O_NONBLOCK as it was); TCP_NODELAY, once set, stays.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "iw_cm_priv.h"

#define PEEK_EVENTS (EPOLLIN | EPOLLRDHUP | EPOLLET)

/* ---------------------------------------------------------- helpers */

static int is_tcp_stream(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 ||
	    v != SOCK_STREAM)
		return 0;
	l = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) == 0 &&
	       v == IPPROTO_TCP;
}

/* Make fd usable by the loop; *saved gets the flags to restore. */
static int adopt_fd(int fd, int *saved)
{
	int fl;

	if (fd < 0 || !is_tcp_stream(fd))
		return EINVAL;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return EBADF;
	*saved = fl;
	return 0;
}

/* ---------------------------------------------------------- passive */

static void ssp_down(struct iwe_conn *c, int err)
{
	cm_finish(c, IWE_CM_SOCKET_DOWN, err,
		  err ? "socket error before the MPA request" :
		  "closed by the peer before the MPA request", NULL, 0);
}

static void ssp_bad(struct iwe_conn *c, int st)
{
	cm_finish(c, IWE_CM_BAD_REQUEST, EPROTO, iw_mpa_strerror(st), NULL,
		  0);
}

/* A whole request is in the socket (peeked into c->in): negotiate,
 * then consume exactly its bytes. */
static void ssp_request(struct iwe_conn *c, const struct iw_mpa_frame *f)
{
	struct iw_mpa_local loc;
	uint8_t sink[IW_MPA_MAX_RR_LEN];
	ssize_t n;
	int st;

	cm_local_from_params(&c->params, &loc);
	st = iw_mpa_negotiate(&loc, f, &c->rep, &c->neg);
	if (st != IW_MPA_OK) {
		ssp_bad(c, st);
		return;
	}
	do {
		n = recv(c->fd, sink, f->frame_len, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)f->frame_len) {
		ssp_down(c, n < 0 ? errno : EIO);	/* cannot happen */
		return;
	}
	c->in_len = f->frame_len;
	c->state = CS_REQ_RCVD;
	cm_quiesce(c);
	cm_event(c, IWE_CM_CONNECT_REQUEST, 0, NULL, f->pdata, f->pdata_len);
}

static void ssp_peek(struct iwe_conn *c, uint32_t revents)
{
	int hup = !!(revents & (EPOLLRDHUP | EPOLLHUP));
	size_t want = IW_MPA_RR_HDR_LEN, need = 0;
	struct iw_mpa_frame f;
	ssize_t n;
	int st;

	for (;;) {
		n = recv(c->fd, c->in, want, MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (hup)
				ssp_down(c, 0);
			return;
		}
		if (n <= 0) {
			ssp_down(c, n < 0 ? errno : 0);
			return;
		}
		st = iw_mpa_parse(c->in, (size_t)n, IW_MPA_EXPECT_REQ, &f,
				  &need);
		if (st == IW_MPA_OK) {
			ssp_request(c, &f);
			return;
		}
		if (st != IW_MPA_NEED_MORE) {
			ssp_bad(c, st);
			return;
		}
		if ((size_t)n < want) {
			/* Everything there is was seen: wait for more,
			 * unless no more can come. */
			if (hup)
				ssp_down(c, 0);
			return;
		}
		want = (size_t)n + need;
	}
}

void cm_ssp_passive_io(struct iwe_conn *c, uint32_t revents)
{
	int err;

	if (c->out) {
		err = cm_out_flush(c);
		if (err == EAGAIN) {
			cm_watch(c, EPOLLOUT);
			return;
		}
		if (err) {
			ssp_down(c, err);
			return;
		}
	}
	if (c->watch.events != PEEK_EVENTS) {
		/* Adding the edge-triggered interest reports data that is
		 * already there as the first edge. */
		cm_watch(c, PEEK_EVENTS);
		return;
	}
	ssp_peek(c, revents);
}

struct adopt_args {
	struct iwe_device *dev;
	struct iwe_prog *prog;
	int fd, saved_fl;
	const void *buf;		/* final message, or private data */
	size_t len;
	int timeout_ms;
	struct iwe_qp *qp;
	const struct iwe_cm_params *params;
	iwe_cm_handler handler;
	void *ctx;
	struct iwe_conn *out;
	int err;
};

static struct iwe_conn *adopt_conn(struct adopt_args *a)
{
	struct iwe_conn *c = cm_conn_new(a->dev, a->prog, a->fd);

	if (!c)
		return NULL;
	c->adopted = 1;
	c->saved_fl = a->saved_fl;
	c->handler = a->handler;
	c->ctx = a->ctx;
	c->params = *a->params;
	c->qp = a->qp;
	cm_fill_addrs(c);
	return c;
}

static void do_adopt_passive(void *arg)
{
	struct adopt_args *a = arg;
	struct iwe_conn *c = adopt_conn(a);

	if (!c || cm_out_set(c, a->buf, a->len)) {
		if (c) {
			c->released = 1;	/* the consumer keeps fd */
			cm_conn_drop(c);
		}
		a->err = ENOMEM;
		return;
	}
	c->state = CS_REQ_WAIT;
	c->io = cm_ssp_passive_io;
	/* From the loop: the final message first, then the peeking. */
	cm_watch(c, c->out ? EPOLLOUT : PEEK_EVENTS);
	a->out = c;
}

static int adopt_run(struct adopt_args *a, void (*fn)(void *),
		     struct iwe_conn **out)
{
	a->prog = iwe_prog_get(a->dev);
	if (!a->prog)
		return errno;
	a->err = adopt_fd(a->fd, &a->saved_fl);
	if (a->err)
		return a->err;
	iwe_prog_call(a->prog, fn, a);
	if (a->err) {
		fcntl(a->fd, F_SETFL, a->saved_fl);
		return a->err;
	}
	*out = a->out;
	return 0;
}

int iwe_cm_adopt_passive(struct iwe_device *dev, int fd,
			 const void *final_msg, size_t final_len,
			 const struct iwe_cm_params *params,
			 iwe_cm_handler handler, void *ctx,
			 struct iwe_conn **out)
{
	struct adopt_args a = { .dev = dev, .fd = fd, .buf = final_msg,
				.len = final_len, .params = params,
				.handler = handler, .ctx = ctx };

	if (!dev || !handler || !out || !cm_params_valid(params) ||
	    (final_len && !final_msg))
		return EINVAL;
	return adopt_run(&a, do_adopt_passive, out);
}

/* ----------------------------------------------------------- active */

static void do_adopt_active(void *arg)
{
	struct adopt_args *a = arg;
	struct iwe_conn *c = adopt_conn(a);

	if (!c) {
		a->err = ENOMEM;
		return;
	}
	c->active = 1;
	a->err = cm_active_start(c, a->buf, a->len, 0);
	if (a->err) {
		c->released = 1;
		cm_conn_drop(c);
		return;
	}
	cm_set_nodelay(a->fd);
	c->state = CS_MPA_SENT;
	c->io = cm_active_io;
	c->on_timer = cm_active_timeout;
	if (a->timeout_ms > 0)
		iwe_prog_timer_arm(c->prog, &c->timer, a->timeout_ms);
	cm_watch(c, EPOLLIN | EPOLLOUT);	/* the loop writes it */
	a->out = c;
}

int iwe_cm_adopt_active(struct iwe_qp *qp, int fd, const void *pdata,
			size_t pdata_len, int timeout_ms,
			const struct iwe_cm_params *params,
			iwe_cm_handler handler, void *ctx,
			struct iwe_conn **out)
{
	struct adopt_args a = { .fd = fd, .buf = pdata, .len = pdata_len,
				.timeout_ms = timeout_ms, .qp = qp,
				.params = params, .handler = handler,
				.ctx = ctx };

	if (!qp || !handler || !out || !cm_params_valid(params) ||
	    (pdata_len && !pdata) ||
	    pdata_len > IWE_MAX_PRIVATE_DATA - 4 - IWE_CM_SERVICE_HDR_LEN ||
	    iwe_qp_get_state(qp) != IWE_QPS_INIT)
		return EINVAL;
	a.dev = qp->pd->dev;
	return adopt_run(&a, do_adopt_active, out);
}

/* ---------------------------------------------------------- release */

struct release_args {
	struct iwe_conn *c;
	int ret, err;
};

static void do_release(void *arg)
{
	struct release_args *a = arg;
	struct iwe_conn *c = a->c;

	a->ret = -1;
	if (c->dead || !c->adopted || c->released) {
		a->err = EINVAL;
		return;
	}
	if (c->attached || c->state == CS_ACCEPTING ||
	    c->state == CS_REJECTING) {
		a->err = EBUSY;
		return;
	}
	cm_quiesce(c);
	fcntl(c->fd, F_SETFL, c->saved_fl);
	c->released = 1;
	c->state = CS_IDLE;
	c->final = 1;
	a->ret = c->fd;
}

int iwe_cm_release_socket(struct iwe_conn *c)
{
	struct release_args a = { c, -1, EINVAL };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	iwe_prog_call(c->prog, do_release, &a);
	if (a.ret < 0)
		errno = a.err;
	return a.ret;
}
