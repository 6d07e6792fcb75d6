/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: one process's IA, shared by all its connections, as an MPI
 * library sets one up: one request EVD and one receive EVD for every EP's
 * completions, one EVD for every connection event (requests too), and one
 * registered region holding every connection's buffers.  Everything the
 * run needs is allocated and touched here, before the first memory
 * snapshot, so the snapshots see only what the provider adds. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "iwscale.h"

/* Events a side can have pending at once on each EVD: the connection
 * EVD holds every DISCONNECTED of the teardown, besides a window of
 * requests and ESTABLISHED; the DTO EVDs a window of connections in use
 * (three requests and a receive each) or the busy stream's window. */
static DAT_COUNT cm_qlen(const struct scale_opts *o)
{
	return (DAT_COUNT)(o->n + 2 * o->inflight + 64);
}

static DAT_COUNT req_qlen(const struct scale_opts *o)
{
	return (DAT_COUNT)(4 * o->inflight + 2 * SCALE_STREAM_WINDOW + 64);
}

static DAT_COUNT recv_qlen(const struct scale_opts *o)
{
	return (DAT_COUNT)(2 * o->inflight + 64);
}

long side_stream_window(const struct scale_opts *o)
{
	/* The EP's request queue holds the window and the final Send. */
	long depth = o->depth ? o->depth : 64, w = depth - 2;

	if (w > SCALE_STREAM_WINDOW)
		w = SCALE_STREAM_WINDOW;
	return w < 1 ? 1 : w;
}

static int evd_new(struct scale_side *s, DAT_COUNT qlen, DAT_CNO_HANDLE cno,
		   DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd, const char *what)
{
	char call[64];

	snprintf(call, sizeof call, "dat_evd_create(%s, qlen %d)", what, (int)qlen);
	return du_check(dat_evd_create(s->d.ia, qlen, cno, flags, evd), call);
}

/* The region: per connection a slot of BUF_COUNT buffers, then the busy
 * connection's small buffers and the stream's area (the active side's
 * source with room for the pattern's offsets, the passive side's window
 * of targets). */
static size_t region_bytes(struct scale_side *s)
{
	const struct scale_opts *o = s->o;
	size_t stream = (size_t)SCALE_STREAM_WINDOW * SCALE_STREAM_SIZE + PAT_SLACK;

	s->buf_size = (o->size + 63) & ~(size_t)63;
	s->busy_off = (size_t)o->n * BUF_COUNT * s->buf_size;
	return s->busy_off + BB_COUNT * 64 + stream;
}

/* The OS wait proxy agent: the provider calls it (once, until set again)
 * when an event comes to an EVD of the CNO. */
static void poke(DAT_PVOID fd, DAT_EVD_HANDLE evd)
{
	uint64_t one = 1;

	(void)evd;
	(void)!write((int)(intptr_t)fd, &one, sizeof one);
}

static DAT_OS_WAIT_PROXY_AGENT agent_of(const struct scale_side *s)
{
	DAT_OS_WAIT_PROXY_AGENT a = { (DAT_PVOID)(intptr_t)s->cno_fd, poke };

	return a;
}

/* The SSP loops wait for connection events and sockets together: the
 * connection EVD feeds a CNO whose agent makes an eventfd readable.
 * (Debian's libdat2 does not export dat_cno_fd_create, the fd flavour.) */
static int cm_notifier(struct scale_side *s)
{
	s->cno_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->cno_fd < 0) {
		perror("iwscale: eventfd");
		return -1;
	}
	return du_check(dat_cno_create(s->d.ia, agent_of(s), &s->cno), "dat_cno_create");
}

int side_cm_rearm(struct scale_side *s)
{
	uint64_t n;

	(void)!read(s->cno_fd, &n, sizeof n);
	return du_check(dat_cno_modify_agent(s->cno, agent_of(s)), "dat_cno_modify_agent");
}

int side_open(struct scale_side *s)
{
	const struct scale_opts *o = s->o;
	DAT_EVD_FLAGS cm_flags = DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG;
	size_t n = (size_t)o->n;

	s->d.tmo_us = (DAT_TIMEOUT)(o->wait_s * 1e6);
	s->cno_fd = -1;
	for (int j = 0; j < SCALE_MAX_LISTENERS; j++)
		s->lfd[j] = -1;
	s->ep = calloc(n, sizeof *s->ep);
	s->t_start = calloc(n, sizeof *s->t_start);
	s->t_up = calloc(n, sizeof *s->t_up);
	s->lat_cap = o->n > o->pp_iters ? o->n : o->pp_iters;
	s->lat = calloc((size_t)s->lat_cap, sizeof *s->lat);
	if (!s->ep || !s->t_start || !s->t_up || !s->lat) {
		fprintf(stderr, "iwscale: out of memory for %ld connections\n", o->n);
		return -1;
	}
	/* Touched now, not by the connections. */
	memset(s->ep, 0, n * sizeof *s->ep);
	memset(s->t_start, 0, n * sizeof *s->t_start);
	memset(s->t_up, 0, n * sizeof *s->t_up);
	memset(s->lat, 0, (size_t)s->lat_cap * sizeof *s->lat);
	if (du_check(dat_ia_open((const DAT_NAME_PTR)o->ia, 8, &s->d.async_evd, &s->d.ia),
		     "dat_ia_open")) {
		fprintf(stderr, "iwscale: is %s in the dat.conf that DAT_OVERRIDE names?\n", o->ia);
		s->d.ia = DAT_HANDLE_NULL;
		return -1;
	}
	if (du_check(dat_pz_create(s->d.ia, &s->d.pz), "dat_pz_create"))
		return -1;
	if (o->ssp && cm_notifier(s))
		return -1;
	if (evd_new(s, req_qlen(o), DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->req_evd, "request") ||
	    evd_new(s, recv_qlen(o), DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->recv_evd, "receive") ||
	    evd_new(s, cm_qlen(o), o->ssp ? s->cno : DAT_HANDLE_NULL, cm_flags, &s->cm_evd,
		    "connection"))
		return -1;
	s->d.cr_evd = s->cm_evd;
	return du_reg(&s->d, &s->reg, region_bytes(s));
}

static void evd_free(DAT_EVD_HANDLE *evd)
{
	if (*evd != DAT_HANDLE_NULL)
		du_check(dat_evd_free(*evd), "dat_evd_free");
	*evd = DAT_HANDLE_NULL;
}

/* Everything side_open made, in reverse; the EPs are teardown's. */
void side_close(struct scale_side *s)
{
	if (s->reg.lmr != DAT_HANDLE_NULL)
		du_check(dat_lmr_free(s->reg.lmr), "dat_lmr_free");
	free(s->reg.buf);
	s->reg.buf = NULL;
	s->reg.lmr = DAT_HANDLE_NULL;
	evd_free(&s->cm_evd);
	evd_free(&s->recv_evd);
	evd_free(&s->req_evd);
	if (s->cno != DAT_HANDLE_NULL)
		du_check(dat_cno_free(s->cno), "dat_cno_free");
	s->cno = DAT_HANDLE_NULL;
	if (s->cno_fd >= 0)
		close(s->cno_fd);
	s->cno_fd = -1;
	if (s->d.pz != DAT_HANDLE_NULL)
		du_check(dat_pz_free(s->d.pz), "dat_pz_free");
	if (s->d.ia != DAT_HANDLE_NULL &&
	    du_check(dat_ia_close(s->d.ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close(graceful)"))
		dat_ia_close(s->d.ia, DAT_CLOSE_ABRUPT_FLAG);
	memset(&s->d, 0, sizeof s->d);
	free(s->ep);
	free(s->t_start);
	free(s->t_up);
	free(s->lat);
	s->ep = NULL;
	s->t_start = s->t_up = s->lat = NULL;
}

void side_ep_set_index(DAT_EP_HANDLE ep, long idx)
{
	DAT_CONTEXT c;

	c.as_64 = (DAT_UINT64)idx;
	dat_set_consumer_context(ep, c);
}

long side_ep_index(DAT_EP_HANDLE ep)
{
	DAT_CONTEXT c;

	if (dat_get_consumer_context(ep, &c) != DAT_SUCCESS)
		return -1;
	return (long)c.as_64;
}

int side_ep_create(struct scale_side *s, long idx, DAT_EP_HANDLE *ep)
{
	/* Small queues: `depth` DTOs each way, one IOV, one RDMA Read. */
	struct du_ep_sizes z = { .max_recv = s->o->depth, .max_req = s->o->depth, .rdma_read = 1 };
	DAT_EP_ATTR a;
	DAT_RETURN r;

	du_ep_attr(&z, &a);
	r = dat_ep_create(s->d.ia, s->d.pz, s->recv_evd, s->req_evd, s->cm_evd,
			  s->o->depth ? &a : NULL, ep);
	if (r != DAT_SUCCESS) {
		side_fail(s, idx, "dat_ep_create", r);
		return -1;
	}
	side_ep_set_index(*ep, idx);
	return 0;
}

void side_fail(struct scale_side *s, long idx, const char *what, DAT_RETURN r)
{
	char msg[sizeof s->fail];

	if (r != DAT_SUCCESS)
		snprintf(msg, sizeof msg, "connection %ld: %s: %s", idx, what, du_err(r));
	else
		snprintf(msg, sizeof msg, "connection %ld: %s", idx, what);
	fprintf(stderr, "iwscale: %s side: %s\n", s->active ? "active" : "passive", msg);
	if (!s->fail[0])
		memcpy(s->fail, msg, sizeof msg);
}

DAT_LMR_TRIPLET side_busy_buf(const struct scale_side *s, int b, size_t len)
{
	DAT_LMR_TRIPLET t = {
		.lmr_context = s->reg.lctx,
		.virtual_address = (DAT_VADDR)(uintptr_t)side_busy_ptr(s, b),
		.segment_length = (DAT_SEG_LENGTH)len,
	};
	return t;
}

void *side_busy_ptr(const struct scale_side *s, int b)
{
	return (char *)s->reg.buf + s->busy_off + (size_t)b * 64;
}

void *side_buf_ptr(const struct scale_side *s, long idx, int b)
{
	return (char *)s->reg.buf + ((size_t)idx * BUF_COUNT + (size_t)b) * s->buf_size;
}

DAT_LMR_TRIPLET side_buf(const struct scale_side *s, long idx, int b, size_t len)
{
	DAT_LMR_TRIPLET t = {
		.lmr_context = s->reg.lctx,
		.virtual_address = (DAT_VADDR)(uintptr_t)side_buf_ptr(s, idx, b),
		.segment_length = (DAT_SEG_LENGTH)len,
	};
	return t;
}

/* Both sides lay out their regions alike: an offset here is one there. */
static DAT_RMR_TRIPLET peer_at(const struct scale_side *s, size_t off, size_t len)
{
	DAT_RMR_TRIPLET r = {
		.rmr_context = s->peer.rmr_context,
		.virtual_address = s->peer.virtual_address + off,
		.segment_length = (DAT_SEG_LENGTH)len,
	};
	return r;
}

DAT_RMR_TRIPLET side_peer_buf(const struct scale_side *s, long idx, int b, size_t len)
{
	return peer_at(s, ((size_t)idx * BUF_COUNT + (size_t)b) * s->buf_size, len);
}

void *side_stream_ptr(const struct scale_side *s)
{
	return (char *)s->reg.buf + s->busy_off + BB_COUNT * 64;
}

DAT_LMR_TRIPLET side_stream_src(const struct scale_side *s, size_t off)
{
	DAT_LMR_TRIPLET t = {
		.lmr_context = s->reg.lctx,
		.virtual_address = (DAT_VADDR)(uintptr_t)((char *)side_stream_ptr(s) + off),
		.segment_length = SCALE_STREAM_SIZE,
	};
	return t;
}

DAT_RMR_TRIPLET side_peer_stream(const struct scale_side *s, long k)
{
	return peer_at(s, s->busy_off + BB_COUNT * 64 + (size_t)k * SCALE_STREAM_SIZE,
		       SCALE_STREAM_SIZE);
}

int side_listener_of(const struct scale_side *s, long idx)
{
	return (int)(idx % s->o->listeners);
}

/* Waits are cut into slices this long, to notice a peer that gave up. */
#define WAIT_SLICE_US 100000

int side_wait(struct scale_side *s, DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *what)
{
	DAT_TIMEOUT left = s->d.tmo_us;
	DAT_COUNT more;

	for (;;) {
		DAT_TIMEOUT slice = left < WAIT_SLICE_US ? left : WAIT_SLICE_US;
		DAT_RETURN r = dat_evd_wait(evd, slice, 1, ev, &more);

		if (r == DAT_SUCCESS)
			return 0;
		if (DAT_GET_TYPE(r) != DAT_TIMEOUT_EXPIRED)
			return du_check(r, "dat_evd_wait");
		left -= slice;
		if (left == 0) {
			fprintf(stderr, "iwscale: timed out after %.1f s waiting for %s\n",
				s->o->wait_s, what);
			return -1;
		}
		if (ctl_peer_gone(s->ctl, what))
			return -1;
	}
}

const DAT_DTO_COMPLETION_EVENT_DATA *side_dto(struct scale_side *s, const DAT_EVENT *ev)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *c = &ev->event_data.dto_completion_event_data;
	char what[96];

	if (ev->event_number != DAT_DTO_COMPLETION_EVENT) {
		snprintf(what, sizeof what, "expected a DTO completion, got %s",
			 du_event_name(ev->event_number));
		side_fail(s, -1, what, DAT_SUCCESS);
		return NULL;
	}
	if (c->status != DAT_DTO_SUCCESS) {
		snprintf(what, sizeof what, "DTO (op %d) completed with status %d",
			 SCALE_COOKIE_OP(c->user_cookie.as_64), (int)c->status);
		side_fail(s, SCALE_COOKIE_IDX(c->user_cookie.as_64), what, DAT_SUCCESS);
		return NULL;
	}
	return c;
}

long side_async_errors(struct scale_side *s)
{
	DAT_EVENT ev;
	long n = 0;

	while (dat_evd_dequeue(s->d.async_evd, &ev) == DAT_SUCCESS) {
		fprintf(stderr, "iwscale: asynchronous event 0x%x\n", (unsigned)ev.event_number);
		n++;
	}
	return n;
}

void side_log(const struct scale_side *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->o->verbose)
		return;
	fprintf(stderr, "[%8.3f] %s: ", (double)(lat_now_ns() - s->o->t0) / 1e9,
		s->active ? "active" : "passive");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void side_progress(const struct scale_side *s, const char *what, long done, long total)
{
	if (total >= 10 && done % (total / 10) == 0)
		side_log(s, "%s: %ld of %ld", what, done, total);
}
