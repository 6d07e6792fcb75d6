/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Every Terminate the receive path sends, checked on the wire: the test
 * writes hand-made FPDUs into one end of a socket pair whose other end
 * is a QP, and decodes what comes back.  TAP output. */
#include "qp_harness.h"

/* ------------------------------------------------ raw FPDU injection */


/* One side is a QP, the other a bare socket the test writes FPDUs to and
 * reads the QP's Terminate from. */
struct rawp {
	struct side b;
	int x;
	uint8_t term[256];	/* the last Terminate FPDU read */
};

static void raw_open(struct rawp *r, uint32_t ird)
{
	struct iwe_stream_params sp = { .crc = 1, .ird = ird, .ord = 1,
					.mpa_rev = 2 };

	memset(r, 0, sizeof(*r));
	side_init(&r->b, 0, ALL_ACCESS);
	sock_pair(&r->x, &r->b.fd);
	if (iwe_modify_qp(r->b.qp, IWE_QPS_INIT) ||
	    iwe_qp_attach_stream(r->b.qp, r->b.fd, &sp))
		BAIL("raw attach");
}

static void raw_close(struct rawp *r)
{
	side_close(&r->b);
	close(r->x);
}

/* Frame ulpdu (header + payload) as an FPDU with a good or bad CRC. */
static void raw_send(struct rawp *r, const void *ulpdu, size_t n, int badcrc)
{
	uint8_t f[2048];
	uint16_t len_be = iw_be16((uint16_t)n);
	size_t pad = iw_fpdu_pad((unsigned)n), tot = 2 + n + pad;
	uint32_t crc;

	memcpy(f, &len_be, 2);
	memcpy(f + 2, ulpdu, n);
	memset(f + 2 + n, 0, pad);
	crc = iw_crc32c(0, f, tot) ^ (badcrc ? 1u : 0u);
	iw_fpdu_put_crc(f + tot, crc);
	if (write(r->x, f, tot + 4) != (ssize_t)(tot + 4))
		BAIL("raw write");
}

/* Read the QP's answer: a Terminate with a good CRC; returns its control
 * word, or 0 when none came. */
static uint32_t raw_term(struct rawp *r)
{
	uint8_t *f = r->term;
	ssize_t n;
	struct iw_terminate_hdr th;
	uint16_t len;

	iwe_qp_progress_rx(r->b.qp);
	iwe_qp_progress_tx(r->b.qp);
	n = read(r->x, f, sizeof(r->term));
	if (n < 2 + (ssize_t)sizeof(th) + 4)
		return 0;
	memcpy(&len, f, 2);
	len = iw_be16(len);
	if ((size_t)n != iw_fpdu_len(len) ||
	    iw_crc32c(0, f, 2 + len + iw_fpdu_pad(len)) !=
	    iw_fpdu_get_crc(f + 2 + len + iw_fpdu_pad(len)))
		return 0;
	memcpy(&th, f + 2, sizeof(th));
	if (iw_ctrl_opcode(iw_be16(th.hdr.ctrl_be)) != IW_OP_TERMINATE ||
	    iw_be32(th.hdr.qn_be) != IW_QN_TERMINATE ||
	    iw_be32(th.hdr.msn_be) != 1)
		return 0;
	return iw_be32(th.term_ctrl_be);
}

static size_t untagged(uint8_t *p, uint16_t ctrl, uint32_t qn, uint32_t msn,
		       uint32_t mo)
{
	struct iw_untagged_hdr h = { .ctrl_be = iw_be16(ctrl),
				     .qn_be = iw_be32(qn),
				     .msn_be = iw_be32(msn),
				     .mo_be = iw_be32(mo) };

	memcpy(p, &h, sizeof(h));
	return sizeof(h);
}

static size_t tagged(uint8_t *p, uint16_t ctrl, uint32_t stag, uint64_t to)
{
	struct iw_tagged_hdr h = { .ctrl_be = iw_be16(ctrl),
				   .stag_be = iw_be32(stag),
				   .to_be = iw_be64(to) };

	memcpy(p, &h, sizeof(h));
	return sizeof(h);
}

static size_t read_req(uint8_t *p, uint32_t msn, uint32_t stag, uint64_t to,
		       uint32_t size)
{
	struct iw_read_req_body b = { .sink_stag_be = iw_be32(0x100),
				      .sink_to_be = 0,
				      .size_be = iw_be32(size),
				      .src_stag_be = iw_be32(stag),
				      .src_to_be = iw_be64(to) };
	size_t n = untagged(p, iw_ctrl_make(0, 1, IW_OP_READ_REQ),
			    IW_QN_READ_REQ, msn, 0);

	memcpy(p + n, &b, sizeof(b));
	return n + sizeof(b);
}

struct rawcase {
	const char *what;
	int post_recv;
	unsigned layer, etype, ecode;
};

/* Returns the Terminate's control word. */
static uint32_t raw_check(struct rawp *r, const struct rawcase *c)
{
	uint32_t t = raw_term(r);
	int other;

	CHECK(t && iw_term_layer(t) == c->layer &&
	      iw_term_etype(t) == c->etype && iw_term_ecode(t) == c->ecode,
	      "raw %s: Terminate %u/%u/%u on the wire (got %u/%u/%u)",
	      c->what, c->layer, c->etype, c->ecode, iw_term_layer(t),
	      iw_term_etype(t), iw_term_ecode(t));
	CHECK(iwe_qp_get_state(r->b.qp) == IWE_QPS_ERROR &&
	      (!c->post_recv ||
	       count_status(r->b.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 1),
	      "raw %s: QP in ERROR, receive flushed", c->what);
	return t;
}

static void test_raw_terminates(void)
{
	struct rawp r;
	uint8_t u[512];
	size_t n;
	struct rawcase c;
	uint16_t send_l = iw_ctrl_make(0, 1, IW_OP_SEND);

	memset(u, 0, sizeof(u));

	/* DDP version 2 on an untagged segment. */
	raw_open(&r, 1);
	post_recv1(&r.b, 1, 0, 64);
	n = untagged(u, (uint16_t)((send_l & ~IW_CTRL_DV_MASK) | 0x0200),
		     0, 1, 0);
	raw_send(&r, u, n + 4, 0);
	c = (struct rawcase){ "DDP version", 1, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_UNTAGGED,
			      IW_TERM_DDP_UNTAG_INV_VERSION };
	raw_check(&r, &c);
	raw_close(&r);

	/* DDP version 0 on a tagged segment. */
	raw_open(&r, 1);
	n = tagged(u, (uint16_t)(iw_ctrl_make(1, 1, IW_OP_WRITE) &
				 ~IW_CTRL_DV_MASK), r.b.mr->rkey,
		   (uintptr_t)r.b.buf);
	raw_send(&r, u, n + 8, 0);
	c = (struct rawcase){ "tagged DDP version", 0, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_TAGGED,
			      IW_TERM_DDP_TAG_INV_VERSION };
	raw_check(&r, &c);
	raw_close(&r);

	/* RDMAP version 0. */
	raw_open(&r, 1);
	n = untagged(u, (uint16_t)(send_l & ~IW_CTRL_RV_MASK), 0, 1, 0);
	raw_send(&r, u, n, 0);
	c = (struct rawcase){ "RDMAP version", 0, IW_TERM_LAYER_RDMAP,
			      IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			      IW_TERM_RDMAP_INV_VERSION };
	raw_check(&r, &c);
	raw_close(&r);

	/* Opcode 12, and a Send on the tagged model. */
	raw_open(&r, 1);
	n = untagged(u, iw_ctrl_make(0, 1, 12), 0, 1, 0);
	raw_send(&r, u, n, 0);
	c = (struct rawcase){ "opcode 12", 0, IW_TERM_LAYER_RDMAP,
			      IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			      IW_TERM_RDMAP_UNEXP_OPCODE };
	raw_check(&r, &c);
	raw_close(&r);
	raw_open(&r, 1);
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_SEND), 1, 0);
	raw_send(&r, u, n, 0);
	c.what = "tagged Send";
	raw_check(&r, &c);
	raw_close(&r);

	/* Send on QN 1. */
	raw_open(&r, 1);
	post_recv1(&r.b, 1, 0, 64);
	n = untagged(u, send_l, 1, 1, 0);
	raw_send(&r, u, n, 0);
	c = (struct rawcase){ "QN", 1, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_UNTAGGED,
			      IW_TERM_DDP_UNTAG_INV_QN };
	raw_check(&r, &c);
	raw_close(&r);

	/* MSN 2 first. */
	raw_open(&r, 1);
	post_recv1(&r.b, 1, 0, 64);
	n = untagged(u, send_l, 0, 2, 0);
	raw_send(&r, u, n, 0);
	c = (struct rawcase){ "MSN", 1, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_UNTAGGED,
			      IW_TERM_DDP_UNTAG_INV_MSN };
	raw_check(&r, &c);
	raw_close(&r);

	/* MO 8 first. */
	raw_open(&r, 1);
	post_recv1(&r.b, 1, 0, 64);
	n = untagged(u, send_l, 0, 1, 8);
	raw_send(&r, u, n + 8, 0);
	c = (struct rawcase){ "MO", 1, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_UNTAGGED,
			      IW_TERM_DDP_UNTAG_INV_MO };
	raw_check(&r, &c);
	raw_close(&r);

	/* 100 bytes into a 64-byte receive. */
	raw_open(&r, 1);
	post_recv1(&r.b, 1, 0, 64);
	n = untagged(u, send_l, 0, 1, 0);
	raw_send(&r, u, n + 100, 0);
	c = (struct rawcase){ "too long", 1, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_UNTAGGED,
			      IW_TERM_DDP_UNTAG_TOO_LONG };
	raw_check(&r, &c);
	raw_close(&r);

	/* Two Read Requests against IRD 1 (the first is answered only when
	 * TX runs, which raw_term does after RX). */
	raw_open(&r, 1);
	n = read_req(u, 1, r.b.mr->rkey, (uintptr_t)r.b.buf, 16);
	raw_send(&r, u, n, 0);
	n = read_req(u, 2, r.b.mr->rkey, (uintptr_t)r.b.buf, 16);
	raw_send(&r, u, n, 0);
	{
		/* Both arrive before TX runs: the second overflows IRD, the
		 * stream is terminated and the owed response is dropped. */
		uint32_t t = raw_term(&r);

		CHECK(iw_term_layer(t) == IW_TERM_LAYER_DDP &&
		      iw_term_etype(t) == IW_TERM_DDP_ETYPE_UNTAGGED &&
		      iw_term_ecode(t) == IW_TERM_DDP_UNTAG_INV_MSN &&
		      (t & IW_TERM_HDRCT_R) && (t & IW_TERM_HDRCT_D) &&
		      (t & IW_TERM_HDRCT_M),
		      "raw IRD: read beyond IRD -> DDP/2/3 with M, D and R");
	}
	raw_close(&r);

	/* A Read Response nobody asked for. */
	raw_open(&r, 1);
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_READ_RESP), r.b.mr->rkey,
		   (uintptr_t)r.b.buf);
	raw_send(&r, u, n + 4, 0);
	c = (struct rawcase){ "unexpected Read Response", 0,
			      IW_TERM_LAYER_RDMAP,
			      IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			      IW_TERM_RDMAP_UNEXP_OPCODE };
	raw_check(&r, &c);
	raw_close(&r);

	/* Tagged offset wrap. */
	raw_open(&r, 1);
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_WRITE), r.b.mr->rkey,
		   UINT64_MAX - 2);
	raw_send(&r, u, n + 8, 0);
	c = (struct rawcase){ "TO wrap", 0, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_TAGGED,
			      IW_TERM_DDP_TAG_TO_WRAP };
	raw_check(&r, &c);
	raw_close(&r);

	/* A segment shorter than its header (its CRC intact): answered as
	 * soon as it is whole, with nothing after it. */
	raw_open(&r, 1);
	memset(u, 0, 64);
	n = untagged(u, send_l, 0, 1, 0);
	raw_send(&r, u, 10, 0);
	c = (struct rawcase){ "short segment", 0, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_CATASTROPHIC,
			      IW_TERM_DDP_CATASTROPHIC };
	raw_check(&r, &c);
	raw_close(&r);

	/* An empty ULPDU: an 8-byte FPDU, then silence. */
	raw_open(&r, 1);
	raw_send(&r, u, 0, 0);
	c = (struct rawcase){ "empty ULPDU", 0, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_CATASTROPHIC,
			      IW_TERM_DDP_CATASTROPHIC };
	raw_check(&r, &c);
	raw_close(&r);

	/* A short segment whose CRC is wrong: the CRC speaks first. */
	raw_open(&r, 1);
	raw_send(&r, u, 10, 1);
	c = (struct rawcase){ "short segment, bad CRC", 0, IW_TERM_LAYER_LLP,
			      IW_TERM_LLP_ETYPE_MPA, IW_TERM_LLP_CRC };
	raw_check(&r, &c);
	raw_close(&r);

	/* A damaged FPDU is never placed: a Write with a bad CRC leaves its
	 * target exactly as it was. */
	raw_open(&r, 1);
	memset(r.b.buf, 0xAB, 4096);
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_WRITE), r.b.mr->rkey,
		   (uintptr_t)r.b.buf);
	memset(u + n, 0x11, 40);
	raw_send(&r, u, n + 40, 1);
	c = (struct rawcase){ "bad CRC on a Write", 0, IW_TERM_LAYER_LLP,
			      IW_TERM_LLP_ETYPE_MPA, IW_TERM_LLP_CRC };
	raw_check(&r, &c);
	{
		size_t k = 0;

		while (k < 4096 && (uint8_t)r.b.buf[k] == 0xAB)
			k++;
		CHECK(k == 4096, "raw bad CRC on a Write: target untouched "
		      "(first changed byte %zu of 4096)", k);
	}
	raw_close(&r);

	/* A corrupted header is a CRC error, not a header error. */
	raw_open(&r, 1);
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_WRITE), 0xdead00,
		   (uintptr_t)r.b.buf);
	raw_send(&r, u, n + 8, 1);
	c = (struct rawcase){ "bad CRC over bad STag", 0, IW_TERM_LAYER_LLP,
			      IW_TERM_LLP_ETYPE_MPA, IW_TERM_LLP_CRC };
	raw_check(&r, &c);
	raw_close(&r);

	/* A Terminate received: ERROR, no Terminate in answer. */
	raw_open(&r, 1);
	post_recv1(&r.b, 1, 0, 64);
	n = untagged(u, iw_ctrl_make(0, 1, IW_OP_TERMINATE),
		     IW_QN_TERMINATE, 1, 0);
	{
		uint32_t tc = iw_be32(iw_term_ctrl(IW_TERM_LAYER_RDMAP,
					IW_TERM_RDMAP_ETYPE_CATASTROPHIC, 0, 0));
		struct iwe_term_info tr;
		int other;

		memcpy(u + n, &tc, 4);
		raw_send(&r, u, n + 4, 0);
		CHECK(raw_term(&r) == 0 &&
		      iwe_qp_get_state(r.b.qp) == IWE_QPS_ERROR &&
		      count_status(r.b.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 1,
		      "raw Terminate in: ERROR, flushed, nothing sent back");
		iwe_qp_terminate_info(r.b.qp, NULL, &tr);
		CHECK(tr.valid && tr.layer == IW_TERM_LAYER_RDMAP &&
		      tr.etype == IW_TERM_RDMAP_ETYPE_CATASTROPHIC,
		      "raw Terminate in: recorded");
	}
	raw_close(&r);

	/* A zero-length Write to STag 1 (the MPA Write RTR) is accepted. */
	raw_open(&r, 1);
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_WRITE), IW_RTR_WRITE_STAG, 0);
	raw_send(&r, u, n, 0);
	CHECK(raw_term(&r) == 0 && iwe_qp_get_state(r.b.qp) == IWE_QPS_RTS,
	      "raw: zero-length Write RTR accepted");
	raw_close(&r);
}

/* ------------------------------------ Read Responses off their Read */

/* What a Terminate echoes of the terminated segment (RFC 5040 4.8):
 * after its control word, the segment length (M), the DDP header (D) and
 * a Read Request's body (R). */
static const uint8_t *term_echo(const struct rawp *r)
{
	return r->term + IW_FPDU_LEN_FIELD + sizeof(struct iw_terminate_hdr);
}

static int all_bytes(const char *p, size_t n, int v)
{
	while (n--)
		if (*p++ != (char)v)
			return 0;
	return 1;
}

/* The QP reads 16 bytes into buf[0..16); take its Read Request off the
 * wire.  Returns whether one came. */
static int raw_issue_read(struct rawp *r)
{
	uint8_t f[128];
	struct iw_untagged_hdr h;
	ssize_t want = (ssize_t)iw_fpdu_len(sizeof(struct iw_read_req));

	if (post_send1(&r->b, 7, IBV_WR_RDMA_READ, 0, 16, 0x10000, 0x4242,
		       IBV_SEND_SIGNALED))
		return 0;
	iwe_qp_progress_tx(r->b.qp);
	if (read(r->x, f, sizeof(f)) != want)
		return 0;
	memcpy(&h, f + IW_FPDU_LEN_FIELD, sizeof(h));
	return iw_ctrl_opcode(iw_be16(h.ctrl_be)) == IW_OP_READ_REQ;
}

struct rrcase {
	const char *what;
	int other_stag;		/* aim at a second MR over buf + 4096 */
	int64_t to_off;		/* TO minus the one the Read asked for */
	uint32_t len;		/* payload, with L set */
	unsigned ecode;		/* DDP tagged buffer error */
	uint32_t placed;	/* bytes legitimately at the sink's start */
};

/* The Read WR completes with a bad-response status (not a mere flush),
 * nothing else completes, and no byte of the buffer but the first
 * c->placed changed. */
static void read_resp_aftermath(struct rawp *r, const struct rrcase *c)
{
	struct ibv_wc wc, more;
	int got = poll1(r->b.scq, &wc);

	CHECK(got && wc.wr_id == 7 && wc.status == IBV_WC_BAD_RESP_ERR &&
	      !poll1(r->b.scq, &more),
	      "raw %s: the Read WR completes with BAD_RESP_ERR (status %d)", c->what,
	      got ? (int)wc.status : -1);
	CHECK(all_bytes(r->b.buf, c->placed, 0xAB) &&
	      all_bytes(r->b.buf + c->placed, 8192 - c->placed, 0),
	      "raw %s: nothing placed outside the Read's sink", c->what);
}

static void run_read_resp(const struct rrcase *c)
{
	struct rawp r;
	uint8_t u[64];
	struct iwe_mr *mr2;
	uint64_t to;
	size_t n;
	struct rawcase rc = { c->what, 0, IW_TERM_LAYER_DDP,
			      IW_TERM_DDP_ETYPE_TAGGED, c->ecode };

	raw_open(&r, 1);
	mr2 = iwe_reg_mr(r.b.pd, r.b.buf + 4096, 4096, ALL_ACCESS);
	if (!mr2)
		BAIL("second MR");
	CHECK(raw_issue_read(&r), "raw %s: the QP sends its Read Request",
	      c->what);
	to = (uint64_t)(uintptr_t)(c->other_stag ? mr2->addr : r.b.buf) +
	     (uint64_t)c->to_off;
	n = tagged(u, iw_ctrl_make(1, 1, IW_OP_READ_RESP),
		   c->other_stag ? mr2->rkey : r.b.mr->rkey, to);
	memset(u + n, 0xAB, c->len);
	raw_send(&r, u, n + c->len, 0);
	raw_check(&r, &rc);
	read_resp_aftermath(&r, c);
	iwe_dereg_mr(mr2);
	raw_close(&r);
}

/* The requester checks each Read Response against its oldest Read
 * Request: same sink STag, TO where the last segment stopped, no more
 * and no fewer bytes than asked.  A sink mismatch is a DDP tagged
 * buffer error (RFC 5041 section 7). */
static void test_raw_read_resp_mismatch(void)
{
	static const struct rrcase c[] = {
		{ "Read Response to another STag", 1, 0, 16,
		  IW_TERM_DDP_TAG_INV_STAG, 0 },
		{ "Read Response past the sink's TO", 0, 8, 8,
		  IW_TERM_DDP_TAG_BASE_BOUNDS, 0 },
		{ "Read Response before the sink's TO", 0, -8, 16,
		  IW_TERM_DDP_TAG_BASE_BOUNDS, 0 },
		{ "Read Response longer than the Read", 0, 0, 32,
		  IW_TERM_DDP_TAG_BASE_BOUNDS, 0 },
		{ "Read Response shorter than the Read", 0, 0, 8,
		  IW_TERM_DDP_TAG_BASE_BOUNDS, 8 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_read_resp(&c[i]);
}

/* ------------------------------------------ Read Requests in error */

/* A Read Request whose segment ends inside its 28-byte body: DDP hands
 * RDMAP a message that is no Read Request; RDMAP reports it as a remote
 * operation error.  The echo has M and D but no R (no whole body). */
static void test_raw_short_read_req(void)
{
	static const unsigned body[] = { 0, 10,
		sizeof(struct iw_read_req_body) - 1 };
	struct rawcase c = { NULL, 1, IW_TERM_LAYER_RDMAP,
			     IW_TERM_RDMAP_ETYPE_REMOTE_OP,
			     IW_TERM_RDMAP_UNSPECIFIED };
	char what[64];
	struct rawp r;
	uint8_t u[64];
	uint16_t seglen;
	uint32_t t;
	size_t i, n;

	for (i = 0; i < sizeof(body) / sizeof(body[0]); i++) {
		snprintf(what, sizeof(what), "Read Request with %u body bytes",
			 body[i]);
		c.what = what;
		raw_open(&r, 1);
		post_recv1(&r.b, 1, 0, 64);
		n = read_req(u, 1, r.b.mr->rkey, (uintptr_t)r.b.buf, 16);
		n -= sizeof(struct iw_read_req_body) - body[i];
		raw_send(&r, u, n, 0);
		t = raw_check(&r, &c);
		memcpy(&seglen, term_echo(&r), 2);
		CHECK((t & IW_TERM_HDRCT_M) && (t & IW_TERM_HDRCT_D) &&
		      !(t & IW_TERM_HDRCT_R) && iw_be16(seglen) == n &&
		      !memcmp(term_echo(&r) + 2, u, IW_UNTAGGED_HDR_LEN),
		      "raw %s: echoes length %zu and DDP header, no body",
		      what, n);
		raw_close(&r);
	}
}

struct srccase {
	const char *what;
	int other_pd;		/* the source region is another PD's */
	int from_top;		/* TO = UINT64_MAX - off, else base + off */
	uint64_t off;
	uint32_t size;
	unsigned ecode;		/* RDMAP remote protection error */
};

/* Source on a 64-byte heap block of its own, so that a byte read
 * outside it is a sanitizer error. */
static void run_read_src(const struct srccase *c)
{
	struct rawcase rc = { c->what, 1, IW_TERM_LAYER_RDMAP,
			      IW_TERM_RDMAP_ETYPE_REMOTE_PROT, c->ecode };
	struct iwe_pd *pd2 = iwe_alloc_pd(g_dev);
	char *src = calloc(1, 64);
	struct rawp r;
	struct iwe_mr *mr;
	uint8_t u[64];
	uint64_t to;
	uint32_t t;
	size_t n;

	raw_open(&r, 1);
	mr = iwe_reg_mr(c->other_pd ? pd2 : r.b.pd, src, 64,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!pd2 || !src || !mr)
		BAIL("source region");
	post_recv1(&r.b, 1, 0, 64);
	to = c->from_top ? UINT64_MAX - c->off : (uintptr_t)src + c->off;
	n = read_req(u, 1, mr->rkey, to, c->size);
	raw_send(&r, u, n, 0);
	/* raw_term takes exactly one FPDU: no Read Response went first. */
	t = raw_check(&r, &rc);
	CHECK((t & IW_TERM_HDRCT_R) &&
	      !memcmp(term_echo(&r) + 2, u, n),
	      "raw %s: echoes the Read Request, body included", c->what);
	iwe_dereg_mr(mr);	/* before its PD goes */
	raw_close(&r);
	iwe_dealloc_pd(pd2);
	free(src);
}

/* The responder validates a Read Request's source itself: these are
 * RDMAP remote protection errors (RFC 5040 section 7), not DDP ones: no
 * DDP header names the source. */
static void test_raw_read_src_errors(void)
{
	static const struct srccase c[] = {
		{ "Read source of another PD", 1, 0, 0, 16,
		  IW_TERM_RDMAP_STAG_NOT_ASSOC },
		{ "Read source TO wrap", 0, 1, 7, 16,
		  IW_TERM_RDMAP_TO_WRAP },
		{ "Read source past its region", 0, 0, 32, 64,
		  IW_TERM_RDMAP_BASE_BOUNDS },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_read_src(&c[i]);
}

int main(void)
{
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_raw_terminates();
	test_raw_read_resp_mismatch();
	test_raw_short_read_req();
	test_raw_read_src_errors();
	iwe_device_close(g_dev);
	return tap_done();
}
