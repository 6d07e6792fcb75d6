/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* One side of a connection in a DAT test: IA, PZ, EVDs, a registered
 * buffer and an EP, with bounded waits.  Header-only for the test
 * programs that set up connections. */
#ifndef IW_TSIDE_H
#define IW_TSIDE_H

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "tcommon.h"

#ifndef TSIDE_BUF_SIZE
#define TSIDE_BUF_SIZE (1u << 20)
#endif
#define TSIDE_WAIT_US 5000000	/* one event: 5 s at most */

struct side {
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async, req, rcv, conn, cr;
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lctx;
	DAT_RMR_CONTEXT rctx;
	unsigned char *buf;
	DAT_EP_HANDLE ep;
};

static inline DAT_EVD_HANDLE side_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS f,
				      int qlen)
{
	DAT_EVD_HANDLE h = DAT_HANDLE_NULL;

	if (dat_evd_create(ia, qlen, DAT_HANDLE_NULL, f, &h) != DAT_SUCCESS)
		BAIL("dat_evd_create");
	return h;
}

/* Open a side whose request EVD carries req_flags (DTO, maybe RMR bind). */
static inline void side_open_req(struct side *s, DAT_EVD_FLAGS req_flags)
{
	DAT_REGION_DESCRIPTION rd;
	DAT_VLEN rsize;
	DAT_VADDR raddr;

	memset(s, 0, sizeof(*s));
	s->ia = test_open_ia(&s->async);
	if (dat_pz_create(s->ia, &s->pz) != DAT_SUCCESS)
		BAIL("dat_pz_create");
	s->req = side_evd(s->ia, req_flags, 256);
	s->rcv = side_evd(s->ia, DAT_EVD_DTO_FLAG, 256);
	s->conn = side_evd(s->ia, DAT_EVD_CONNECTION_FLAG, 16);
	s->cr = side_evd(s->ia, DAT_EVD_CR_FLAG, 16);
	s->buf = aligned_alloc(4096, TSIDE_BUF_SIZE);
	if (!s->buf)
		BAIL("out of memory");
	memset(s->buf, 0, TSIDE_BUF_SIZE);
	rd.for_va = s->buf;
	if (dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, rd, TSIDE_BUF_SIZE,
			   s->pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
			   &s->lmr, &s->lctx, &s->rctx, &rsize,
			   &raddr) != DAT_SUCCESS)
		BAIL("dat_lmr_create");
}

static inline void side_open(struct side *s)
{
	side_open_req(s, DAT_EVD_DTO_FLAG);
}

static inline void side_close(struct side *s)
{
	dat_ia_close(s->ia, DAT_CLOSE_ABRUPT_FLAG);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

static inline DAT_EP_HANDLE side_ep(struct side *s)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;

	if (dat_ep_create(s->ia, s->pz, s->rcv, s->req, s->conn, NULL, &ep) !=
	    DAT_SUCCESS)
		BAIL("dat_ep_create");
	return ep;
}

static inline DAT_EP_STATE side_ep_state(DAT_EP_HANDLE ep)
{
	DAT_EP_STATE st = (DAT_EP_STATE)-1;

	dat_ep_get_status(ep, &st, NULL, NULL);
	return st;
}

/* Wait for one event; event_number 0 when none came in time. */
static inline DAT_EVENT side_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT us)
{
	DAT_EVENT ev;
	DAT_COUNT more;

	memset(&ev, 0, sizeof(ev));
	if (dat_evd_wait(evd, us, 1, &ev, &more) != DAT_SUCCESS)
		ev.event_number = 0;
	return ev;
}

/* A PSP of s on a free qualifier (*qual), its requests to s->cr; BAIL
 * on failure. */
static inline DAT_PSP_HANDLE side_psp(struct side *s, DAT_CONN_QUAL *qual)
{
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;

	if (dat_psp_create_any(s->ia, qual, s->cr, DAT_PSP_CONSUMER_FLAG,
			       &psp) != DAT_SUCCESS)
		BAIL("dat_psp_create_any");
	return psp;
}

/* cli's EP connected to srv's (both made already) through srv's PSP on
 * qual, whose requests go to srv->cr, each event waited for up to us:
 * NULL, or what failed. */
static inline const char *side_connect_within(struct side *srv,
					      struct side *cli,
					      DAT_CONN_QUAL qual,
					      DAT_TIMEOUT us)
{
	DAT_IA_ATTR ia;
	DAT_EVENT ev;

	if (dat_ia_query(srv->ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia, 0,
			 NULL) != DAT_SUCCESS ||
	    dat_ep_connect(cli->ep, ia.ia_address_ptr, qual, us, 0, NULL,
			   DAT_QOS_BEST_EFFORT,
			   DAT_CONNECT_DEFAULT_FLAG) != DAT_SUCCESS)
		return "dat_ep_connect";
	ev = side_wait(srv->cr, us);
	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
			  srv->ep, 0, NULL) != DAT_SUCCESS)
		return "no connection request to accept";
	if (side_wait(cli->conn, us).event_number !=
	    DAT_CONNECTION_EVENT_ESTABLISHED ||
	    side_wait(srv->conn, us).event_number !=
	    DAT_CONNECTION_EVENT_ESTABLISHED)
		return "not established";
	return NULL;
}

/* side_connect_within TSIDE_WAIT_US; BAIL naming tag on any failure. */
static inline void side_connect(struct side *srv, struct side *cli,
				DAT_CONN_QUAL qual, const char *tag)
{
	const char *err = side_connect_within(srv, cli, qual, TSIDE_WAIT_US);

	if (err)
		BAIL("%s: %s", tag, err);
}

/* The connection of side_connect ended (abruptly, by cli) and both EPs
 * freed. */
static inline void side_disconnect_free(struct side *srv, struct side *cli)
{
	dat_ep_disconnect(cli->ep, DAT_CLOSE_ABRUPT_FLAG);
	side_wait(cli->conn, TSIDE_WAIT_US);
	side_wait(srv->conn, TSIDE_WAIT_US);
	dat_ep_free(cli->ep);
	dat_ep_free(srv->ep);
	cli->ep = srv->ep = DAT_HANDLE_NULL;
}

/* Segments of a side's buffer: local (its LMR) and remote (its RMR). */
static inline DAT_LMR_TRIPLET side_lseg(const struct side *s, size_t off,
				       size_t len)
{
	DAT_LMR_TRIPLET t;

	t.lmr_context = s->lctx;
	t.virtual_address = (DAT_VADDR)(uintptr_t)(s->buf + off);
	t.segment_length = (DAT_SEG_LENGTH)len;
	return t;
}

static inline DAT_RMR_TRIPLET side_rseg(const struct side *s, size_t off,
				       size_t len)
{
	DAT_RMR_TRIPLET t;

	t.rmr_context = s->rctx;
	t.virtual_address = (DAT_VADDR)(uintptr_t)(s->buf + off);
	t.segment_length = (DAT_SEG_LENGTH)len;
	return t;
}

static inline DAT_DTO_COOKIE side_ck(uint64_t v)
{
	DAT_DTO_COOKIE c;

	c.as_64 = v;
	return c;
}

/* Post a receive of len bytes at offset off of the side's buffer. */
static inline DAT_RETURN side_recv(struct side *s, size_t off, size_t len,
				   uint64_t cookie)
{
	DAT_LMR_TRIPLET iov = side_lseg(s, off, len);

	return dat_ep_post_recv(s->ep, 1, &iov, side_ck(cookie),
				DAT_COMPLETION_DEFAULT_FLAG);
}

static inline DAT_RETURN side_send(struct side *s, size_t off, size_t len,
				   uint64_t cookie)
{
	DAT_LMR_TRIPLET iov = side_lseg(s, off, len);

	return dat_ep_post_send(s->ep, 1, &iov, side_ck(cookie),
				DAT_COMPLETION_DEFAULT_FLAG);
}

/* A DTO completion of the given cookie with success and length. */
static inline int side_dto_ok(DAT_EVD_HANDLE evd, uint64_t cookie,
			      size_t len)
{
	DAT_EVENT ev = side_wait(evd, TSIDE_WAIT_US);
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev.event_data.dto_completion_event_data;

	return ev.event_number == DAT_DTO_COMPLETION_EVENT &&
	       d->status == DAT_DTO_SUCCESS && d->user_cookie.as_64 == cookie &&
	       d->transfered_length == len;
}


/* A byte pattern; two seeds that differ modulo 256 differ at every byte. */
static inline unsigned char side_pat(size_t i, unsigned seed)
{
	return (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

static inline void side_fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = side_pat(i, seed);
}

static inline int side_same(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != side_pat(i, seed))
			return 0;
	return 1;
}

#endif
