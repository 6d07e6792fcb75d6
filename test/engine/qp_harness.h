/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared harness of the engine QP tests: two QPs joined by non-blocking
 * AF_UNIX stream socket pairs, driven by calling the progress functions;
 * an optional relay between two socket pairs moves the stream one byte
 * per step, can flip a byte in transit, and can cut the stream.
 * Header-only (static inline) so each test builds from one .c file. */
#ifndef IW_TEST_QP_HARNESS_H
#define IW_TEST_QP_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "iw_priv.h"
#include "iw_wire.h"
#include "tap.h"
#include "iw_crc32c.h"

#define BIG (1u << 20)

struct side {
	struct iwe_pd *pd;
	struct iwe_cq *scq, *rcq;
	struct iwe_qp *qp;
	int fd;			/* the QP's end of the stream */
	char *buf;		/* BIG bytes, registered as mr */
	struct iwe_mr *mr;
	struct iwe_comp_channel *ch;	/* for the receive CQ, or NULL */
	atomic_int idle_events;		/* IWE_EVENT_QP_IDLE heard */
};

struct pair {
	struct iwe_device *dev;
	struct side a, b;
	int relay;		/* 0: direct; 1: one byte per step */
	int ra, rb;		/* relay ends facing a and b */
	long flip_at;		/* a->b byte offset to corrupt, -1 none */
	long cut_after;		/* a->b bytes to pass before closing, -1 */
	long moved_ab;
};

static struct iwe_device *g_dev;

/* ------------------------------------------------------------ setup */

static inline void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static inline void sock_pair(int *x, int *y)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		BAIL("socketpair: %s", strerror(errno));
	nonblock(sv[0]);
	nonblock(sv[1]);
	*x = sv[0];
	*y = sv[1];
}

static inline void side_on_event(const struct iwe_async_event *ev)
{
	struct side *s = ev->context;

	if (ev->type == IWE_EVENT_QP_IDLE)
		atomic_fetch_add(&s->idle_events, 1);
}

/* both: a CQ for both of the QP's queues (one DAT EVD for requests and
 * receives), else the side's own scq and rcq (made either way, so that
 * side_close is the same). */
static inline void side_init_on(struct side *s, uint32_t sq_sig_all,
				int mr_access, struct iwe_cq *both)
{
	struct iwe_qp_init_attr at = { 0 };

	s->pd = iwe_alloc_pd(g_dev);
	s->scq = iwe_create_cq(g_dev, 256, NULL, NULL);
	s->rcq = iwe_create_cq(g_dev, 256, NULL, s->ch);
	at.send_cq = both ? both : s->scq;
	at.recv_cq = both ? both : s->rcq;
	at.cap = (struct iwe_qp_cap){ .max_send_wr = 32, .max_recv_wr = 32,
				      .max_send_sge = 4, .max_recv_sge = 4 };
	at.sq_sig_all = (int)sq_sig_all;
	at.qp_context = s;
	at.event_handler = side_on_event;
	atomic_store(&s->idle_events, 0);
	s->qp = iwe_create_qp(s->pd, &at);
	s->buf = calloc(1, BIG);
	s->mr = iwe_reg_mr(s->pd, s->buf, BIG, mr_access);
	if (!s->pd || !s->scq || !s->rcq || !s->qp || !s->buf || !s->mr)
		BAIL("side setup: %s", strerror(errno));
}

static inline void side_init(struct side *s, uint32_t sq_sig_all, int mr_access)
{
	side_init_on(s, sq_sig_all, mr_access, NULL);
}

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND)

struct opts {
	int crc;
	uint32_t mulpdu, ird, ord;
	int relay;
	int sig_all;
	int b_access;
	struct iwe_comp_channel *b_chan;
	int sndbuf;		/* SO_SNDBUF of both ends, 0: default */
};

static inline void pair_open(struct pair *p, const struct opts *o)
{
	struct iwe_stream_params sp = { .crc = o->crc, .mulpdu = o->mulpdu,
					.ird = o->ird, .ord = o->ord,
					.mpa_rev = 2 };

	memset(p, 0, sizeof(*p));
	p->flip_at = p->cut_after = -1;
	p->ra = p->rb = -1;
	p->b.ch = o->b_chan;
	side_init(&p->a, (uint32_t)o->sig_all, ALL_ACCESS);
	side_init(&p->b, (uint32_t)o->sig_all,
		  o->b_access ? o->b_access : ALL_ACCESS);
	p->relay = o->relay;
	if (o->relay) {
		sock_pair(&p->a.fd, &p->ra);
		sock_pair(&p->b.fd, &p->rb);
	} else {
		sock_pair(&p->a.fd, &p->b.fd);
	}
	if (o->sndbuf) {
		/* Small buffers: FPDUs go out in several short writes. */
		setsockopt(p->a.fd, SOL_SOCKET, SO_SNDBUF, &o->sndbuf,
			   sizeof(o->sndbuf));
		setsockopt(p->b.fd, SOL_SOCKET, SO_SNDBUF, &o->sndbuf,
			   sizeof(o->sndbuf));
	}
	if (iwe_modify_qp(p->a.qp, IWE_QPS_INIT) ||
	    iwe_modify_qp(p->b.qp, IWE_QPS_INIT) ||
	    iwe_qp_attach_stream(p->a.qp, p->a.fd, &sp) ||
	    iwe_qp_attach_stream(p->b.qp, p->b.fd, &sp))
		BAIL("attach");
}

static inline void side_close(struct side *s)
{
	iwe_destroy_qp(s->qp);
	iwe_dereg_mr(s->mr);
	iwe_destroy_cq(s->scq);
	iwe_destroy_cq(s->rcq);
	iwe_dealloc_pd(s->pd);
	free(s->buf);
	if (s->fd >= 0)
		close(s->fd);
}

static inline void pair_close(struct pair *p)
{
	side_close(&p->a);
	side_close(&p->b);
	if (p->ra >= 0)
		close(p->ra);
	if (p->rb >= 0)
		close(p->rb);
}

/* ---------------------------------------------------------- driving */

/* Move one byte each way through the relay. */
static inline void relay_step(struct pair *p)
{
	unsigned char c;

	if (p->rb >= 0 && read(p->ra, &c, 1) == 1) {
		if (p->moved_ab == p->flip_at)
			c ^= 0x01;
		if (write(p->rb, &c, 1) != 1)
			BAIL("relay write");
		p->moved_ab++;
		if (p->moved_ab == p->cut_after) {
			close(p->rb);
			p->rb = -1;
			p->b.fd = p->b.fd;	/* b keeps its end */
		}
	}
	if (p->rb >= 0 && read(p->rb, &c, 1) == 1 && write(p->ra, &c, 1) != 1)
		BAIL("relay write");
}

static inline void step(struct pair *p)
{
	iwe_qp_progress_tx(p->a.qp);
	iwe_qp_progress_tx(p->b.qp);
	if (p->relay)
		relay_step(p);
	iwe_qp_progress_rx(p->a.qp);
	iwe_qp_progress_rx(p->b.qp);
}

/* Step until cq holds n completions (or give up). */
static inline int pump_cq(struct pair *p, struct iwe_cq *cq, int n)
{
	long i, max = p->relay ? 4000000 : 200000;

	for (i = 0; i < max; i++) {
		if (iwe_cq_count(cq) >= n)
			return 1;
		step(p);
	}
	return iwe_cq_count(cq) >= n;
}

static inline void pump(struct pair *p, long rounds)
{
	while (rounds-- > 0)
		step(p);
}

static inline int poll1(struct iwe_cq *cq, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	return iwe_poll_cq(cq, 1, wc) == 1;
}

static inline void fill(char *b, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (char)(seed + i * 7 + (i >> 8));
}

/* valgrind runs one thread at a time: tests of spinning threads racing
 * cannot finish in bounded time there, nor time anything (the ASan build
 * covers their memory safety). */
static inline int under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload") != NULL;
}

/* A sanitizer build: several times slower, so a count of scheduler-driven
 * events (wake-ups) says little there. */
static inline int under_sanitizer(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return 1;
#else
	return 0;
#endif
}

static inline int post_recv1(struct side *s, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(s->buf + off),
			      .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return iwe_post_recv(s->qp, &wr, &bad);
}

static inline int post_send1(struct side *s, uint64_t id, enum ibv_wr_opcode op,
		      size_t off, uint32_t len, uint64_t raddr, uint32_t rkey,
		      unsigned flags)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(s->buf + off),
			      .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1,
				  .opcode = op, .send_flags = flags };
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (len == 0)
		wr.num_sge = 0;
	return iwe_post_send(s->qp, &wr, &bad);
}


static inline int count_status(struct iwe_cq *cq, enum ibv_wc_status st, int *other)
{
	struct ibv_wc wc;
	int n = 0;

	*other = 0;
	while (poll1(cq, &wc)) {
		if (wc.status == st)
			n++;
		else
			(*other)++;
	}
	return n;
}

#endif
