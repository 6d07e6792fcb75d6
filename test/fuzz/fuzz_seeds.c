/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Writes the seed corpora of the fuzz targets: real FPDUs (Send, Send
 * with Invalidate, RDMA Write, Read Request, Read Response, Terminate;
 * CRC on and off; in one piece and cut into small writes), the same
 * segments in sequenced TRP datagrams with acks, F, reordering and
 * duplicates, and real MPA frames, built with the engine's own STags and the rig's fixed
 * addresses, so that each seed gets past the checks a valid peer's
 * bytes would pass.
 *
 * Usage: fuzz_seeds DIR -- creates DIR/fuzz_<target>/<name> files.
 * test/fuzz/run.sh runs it before fuzzing; the committed
 * test/fuzz/corpus/ was made by it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_fpdu.h"
#include "fuzz_qp.h"
#include "fuzz_svc.h"
#include "iw_mpa.h"

#define SEED_MAX 8192

static const char *g_dir;

static void put(const char *target, const char *name, const uint8_t *b,
		size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", g_dir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", g_dir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* ------------------------------------------------------------ fuzz_rx */

/* The STags an input meets: the same in every fresh rig. */
struct stags {
	uint32_t recv, rw, ro, other, mw;
};

static void learn_stags(struct stags *s)
{
	struct fq_cfg c = { .nrecv = 1, .ird = 1, .ord = 1 };
	struct fq q;

	fq_open(&q, &c);
	s->recv = q.mr[FQ_RECV]->rkey;
	s->rw = q.mr[FQ_RW]->rkey;
	s->ro = q.mr[FQ_RO]->rkey;
	s->other = q.mr[FQ_OTHER]->rkey;
	s->mw = q.mw_rkey;
	fq_close(&q);
}

static uint64_t va(enum fq_region r, size_t off)
{
	return (uint64_t)(uintptr_t)(fq_region(r) + off);
}

/* A stream being built: header, then FPDUs, or over TRP datagrams
 * (fuzz_trp.c), each behind its BE16 length. */
struct stream {
	uint8_t b[SEED_MAX];
	size_t n;
	int crc;
	int trp;
	uint32_t psn;			/* TRP: of the next sequenced one */
};

/* The credits the peer grants in every datagram of a seed. */
#define TRP_SEED_CREDITS 64

static void stream_start(struct stream *s, const struct fq_cfg *c)
{
	fq_cfg_encode(c, s->b);
	s->n = FQ_HDR_LEN;
	s->crc = c->crc;
	s->trp = c->transport == FQ_TRP;
	s->psn = c->rx_psn;
}

/* Append one datagram: a TRP header (psn, acknowledging ack) and body. */
static void datagram(struct stream *s, uint32_t psn, uint32_t ack,
		     uint16_t flags, const uint8_t *body, size_t n)
{
	uint16_t len_be = iw_be16((uint16_t)(IW_TRP_HDR_LEN + n));

	memcpy(s->b + s->n, &len_be, 2);
	iw_trp_put(s->b + s->n + 2, psn, ack, flags, TRP_SEED_CREDITS);
	if (n)
		memcpy(s->b + s->n + 2 + IW_TRP_HDR_LEN, body, n);
	s->n += 2 + IW_TRP_HDR_LEN + n;
}

/* Append one segment: hdr (hl bytes) then len payload bytes, as an FPDU
 * or the next sequenced datagram (acknowledging nothing). */
static void fpdu(struct stream *s, const uint8_t *hdr, size_t hl, size_t len)
{
	uint8_t u[SEED_MAX];
	size_t i;

	memcpy(u, hdr, hl);
	for (i = 0; i < len; i++)
		u[hl + i] = (uint8_t)(i * 7 + 3);
	if (s->trp)
		datagram(s, s->psn++, FQ_TRP_TX_PSN - 1, 0, u, hl + len);
	else
		s->n += fp_frame(s->b + s->n, u, hl + len, s->crc);
}

static void send_fpdu(struct stream *s, unsigned op, int last, uint32_t inv,
		      uint32_t msn, uint32_t mo, size_t len)
{
	uint8_t h[IW_UNTAGGED_HDR_LEN];

	fp_untagged(h, op, last, inv, IW_QN_SEND, msn, mo);
	fpdu(s, h, sizeof(h), len);
}

static void tagged_fpdu(struct stream *s, unsigned op, int last,
			uint32_t stag, uint64_t to, size_t len)
{
	uint8_t h[IW_TAGGED_HDR_LEN];

	fp_tagged(h, op, last, stag, to);
	fpdu(s, h, sizeof(h), len);
}

static void read_req_fpdu(struct stream *s, uint32_t msn, uint32_t size,
			  uint32_t src_stag, uint64_t src_to)
{
	uint8_t h[sizeof(struct iw_read_req)];
	size_t n = fp_untagged(h, IW_OP_READ_REQ, 1, 0, IW_QN_READ_REQ, msn,
			       0);

	n += fp_read_req_body(h + n, 0x00beef01u, 0x2000, size, src_stag,
			      src_to);
	fpdu(s, h, n, 0);
}

/* A Terminate naming the Read Request the rig posted (RDMAP remote
 * protection, invalid STag), with its DDP and RDMAP headers echoed. */
static void term_fpdu(struct stream *s, const struct stags *t, int echo)
{
	uint8_t h[IW_TERM_MAX_ULPDU];
	size_t n = fp_untagged(h, IW_OP_TERMINATE, 1, 0, IW_QN_TERMINATE, 1, 0);
	uint16_t seglen_be = iw_be16(sizeof(struct iw_read_req));

	n += fp_be32(h + n, iw_term_ctrl(IW_TERM_LAYER_RDMAP,
					 IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
					 IW_TERM_RDMAP_INV_STAG,
					 echo ? IW_TERM_HDRCT_M | IW_TERM_HDRCT_D |
						IW_TERM_HDRCT_R : 0));
	if (echo) {
		memcpy(h + n, &seglen_be, 2);
		n += 2;
		n += fp_untagged(h + n, IW_OP_READ_REQ, 1, 0, IW_QN_READ_REQ,
				 1, 0);
		n += fp_read_req_body(h + n, t->recv, va(FQ_RECV, FQ_READ_SINK),
				      FQ_READ_LEN, FQ_PEER_STAG, FQ_PEER_TO);
	}
	fpdu(s, h, n, 0);
}

struct rx_seed {
	const char *name;
	void (*build)(struct stream *s, const struct stags *t);
	int post_read, srq;
	unsigned nrecv;
};

static void rx_send(struct stream *s, const struct stags *t)
{
	(void)t;
	send_fpdu(s, IW_OP_SEND, 1, 0, 1, 0, 64);
}

static void rx_send_segments(struct stream *s, const struct stags *t)
{
	(void)t;
	send_fpdu(s, IW_OP_SEND_SE, 0, 0, 1, 0, 100);
	send_fpdu(s, IW_OP_SEND_SE, 1, 0, 1, 100, 150);
	send_fpdu(s, IW_OP_SEND, 1, 0, 2, 0, 0);
}

static void rx_send_inv(struct stream *s, const struct stags *t)
{
	send_fpdu(s, IW_OP_SEND_INV, 1, t->mw, 1, 0, 32);
	send_fpdu(s, IW_OP_SEND_SE_INV, 1, t->rw, 2, 0, 8);
}

static void rx_write(struct stream *s, const struct stags *t)
{
	tagged_fpdu(s, IW_OP_WRITE, 1, t->rw, va(FQ_RW, 16), 100);
	tagged_fpdu(s, IW_OP_WRITE, 0, t->mw, va(FQ_RW, FQ_MW_OFF + 8), 40);
	tagged_fpdu(s, IW_OP_WRITE, 1, t->mw, va(FQ_RW, FQ_MW_OFF + 48), 40);
	send_fpdu(s, IW_OP_SEND, 1, 0, 1, 0, 4);
}

static void rx_write_denied(struct stream *s, const struct stags *t)
{
	tagged_fpdu(s, IW_OP_WRITE, 1, t->ro, va(FQ_RO, 0), 16);
}

static void rx_write_other_pd(struct stream *s, const struct stags *t)
{
	tagged_fpdu(s, IW_OP_WRITE, 1, t->other, va(FQ_OTHER, 0), 16);
}

static void rx_rtr_write(struct stream *s, const struct stags *t)
{
	(void)t;
	tagged_fpdu(s, IW_OP_WRITE, 1, IW_RTR_WRITE_STAG, 0, 0);
	send_fpdu(s, IW_OP_SEND, 1, 0, 1, 0, 10);
}

static void rx_read_req(struct stream *s, const struct stags *t)
{
	read_req_fpdu(s, 1, 64, t->rw, va(FQ_RW, 32));
	read_req_fpdu(s, 2, 1000, t->ro, va(FQ_RO, 0));
	read_req_fpdu(s, 3, 16, t->mw, va(FQ_RW, FQ_MW_OFF));
	read_req_fpdu(s, 4, 0, 0, 0);	/* the Read RTR */
}

static void rx_read_req_bad(struct stream *s, const struct stags *t)
{
	read_req_fpdu(s, 1, 64, t->other, va(FQ_OTHER, 0));
}

static void rx_read_resp(struct stream *s, const struct stags *t)
{
	tagged_fpdu(s, IW_OP_READ_RESP, 0, t->recv, va(FQ_RECV, FQ_READ_SINK),
		    128);
	tagged_fpdu(s, IW_OP_READ_RESP, 1, t->recv,
		    va(FQ_RECV, FQ_READ_SINK + 128), 128);
	send_fpdu(s, IW_OP_SEND, 1, 0, 1, 0, 16);
}

static void rx_terminate(struct stream *s, const struct stags *t)
{
	term_fpdu(s, t, 1);
}

static void rx_terminate_bare(struct stream *s, const struct stags *t)
{
	term_fpdu(s, t, 0);
}

static void rx_mixed(struct stream *s, const struct stags *t)
{
	tagged_fpdu(s, IW_OP_WRITE, 1, IW_RTR_WRITE_STAG, 0, 0);
	tagged_fpdu(s, IW_OP_WRITE, 1, t->rw, va(FQ_RW, 0), 200);
	send_fpdu(s, IW_OP_SEND, 1, 0, 1, 0, 20);
	read_req_fpdu(s, 1, 300, t->rw, va(FQ_RW, 100));
	send_fpdu(s, IW_OP_SEND_SE, 1, 0, 2, 0, 328);
	tagged_fpdu(s, IW_OP_READ_RESP, 1, t->recv, va(FQ_RECV, FQ_READ_SINK),
		    FQ_READ_LEN);
}

static const struct rx_seed rx_seeds[] = {
	{ "send", rx_send, 0, 0, 2 },
	{ "send_segments", rx_send_segments, 0, 0, 3 },
	{ "send_srq", rx_send_segments, 0, 1, 3 },
	{ "send_inv", rx_send_inv, 0, 0, 2 },
	{ "send_no_recv", rx_send, 0, 0, 0 },
	{ "write", rx_write, 0, 0, 1 },
	{ "write_denied", rx_write_denied, 0, 0, 0 },
	{ "write_other_pd", rx_write_other_pd, 0, 0, 0 },
	{ "rtr_write", rx_rtr_write, 0, 0, 1 },
	{ "read_req", rx_read_req, 0, 0, 0 },
	{ "read_req_other_pd", rx_read_req_bad, 0, 0, 0 },
	{ "read_resp", rx_read_resp, 1, 0, 1 },
	{ "terminate", rx_terminate, 1, 0, 2 },
	{ "terminate_bare", rx_terminate_bare, 0, 0, 1 },
	{ "mixed", rx_mixed, 1, 0, 4 },
};

static void rx_variant(const struct rx_seed *r, const struct stags *t,
		       const struct fq_cfg *c, const char *suffix)
{
	struct stream s;
	char name[128];

	stream_start(&s, c);
	r->build(&s, t);
	if (c->transport == FQ_TRP) {
		snprintf(name, sizeof(name), "%s%s", r->name, suffix);
		put("fuzz_trp", name, s.b, s.n);
		return;
	}
	snprintf(name, sizeof(name), "%s_%s%s", r->name,
		 c->crc ? "crc" : "nocrc", suffix);
	put("fuzz_rx", name, s.b, s.n);
}

static void rx_corpus(const struct stags *t)
{
	size_t i;

	for (i = 0; i < sizeof(rx_seeds) / sizeof(rx_seeds[0]); i++) {
		const struct rx_seed *r = &rx_seeds[i];
		struct fq_cfg c = { .post_read = r->post_read, .srq = r->srq,
				    .nrecv = r->nrecv, .ird = 4, .ord = 2 };

		for (c.crc = 0; c.crc <= 1; c.crc++)
			rx_variant(r, t, &c, "");
		/* CRC, cut into 1..7-byte writes, EOF after, small MULPDU. */
		c.crc = 1;
		c.chunk_max = 7;
		c.chunk_seed = (unsigned)i;
		c.close_at_end = 1;
		c.mulpdu = 128;
		c.fix_crc = 1;
		rx_variant(r, t, &c, "_cut");
	}
}

/* ----------------------------------------------------------- fuzz_trp */

/* The QP answers three Read Requests; we acknowledge the first and
 * selectively the third. */
static void trp_read_acked(struct stream *s, const struct stags *t)
{
	uint8_t sack[IW_TRP_SACK_BLOCK];

	read_req_fpdu(s, 1, 64, t->rw, va(FQ_RW, 32));
	read_req_fpdu(s, 2, 32, t->rw, va(FQ_RW, 128));
	read_req_fpdu(s, 3, 16, t->mw, va(FQ_RW, FQ_MW_OFF));
	fp_be32(sack, FQ_TRP_TX_PSN + 2);
	fp_be32(sack + 4, FQ_TRP_TX_PSN + 2);
	datagram(s, s->psn, FQ_TRP_TX_PSN, IW_TRP_A, sack, sizeof(sack));
}

static void trp_fin(struct stream *s, const struct stags *t)
{
	rx_send(s, t);
	datagram(s, s->psn++, FQ_TRP_TX_PSN - 1, IW_TRP_F, NULL, 0);
}

/* A Send's segments out of order, one of them twice. */
static void trp_reorder(struct stream *s, const struct stags *t)
{
	uint32_t first = s->psn;

	(void)t;
	s->psn = first + 1;
	send_fpdu(s, IW_OP_SEND, 1, 0, 1, 100, 50);
	s->psn = first;
	send_fpdu(s, IW_OP_SEND, 0, 0, 1, 0, 100);
	s->psn = first;
	send_fpdu(s, IW_OP_SEND, 0, 0, 1, 0, 100);
	s->psn = first + 2;
	send_fpdu(s, IW_OP_SEND, 1, 0, 2, 0, 8);
}

/* A fatal Terminate (quiet time set) naming nothing. */
static void trp_fatal_term(struct stream *s, const struct stags *t)
{
	uint8_t h[IW_UNTAGGED_HDR_LEN + 4];
	size_t n = fp_untagged(h, IW_OP_TERMINATE, 1, 0, IW_QN_TERMINATE, 1, 0);

	rx_write(s, t);
	n += fp_be32(h + n, iw_term_ctrl(IW_TERM_LAYER_DDP,
					 IW_TERM_DDP_ETYPE_UNTAGGED, 1, 0) |
				    500u);
	fpdu(s, h, n, 0);
}

/* The reserved bit: a protocol error, answered by a fatal Terminate. */
static void trp_reserved(struct stream *s, const struct stags *t)
{
	uint8_t h[IW_UNTAGGED_HDR_LEN];

	(void)t;
	fp_untagged(h, IW_OP_SEND, 1, 0, IW_QN_SEND, 1, 0);
	datagram(s, s->psn++, FQ_TRP_TX_PSN - 1, IW_TRP_R, h, sizeof(h));
}

static const struct rx_seed trp_seeds[] = {
	{ "read_acked", trp_read_acked, 0, 0, 0 },
	{ "fin", trp_fin, 0, 0, 2 },
	{ "reorder", trp_reorder, 0, 0, 2 },
	{ "fatal_terminate", trp_fatal_term, 1, 0, 2 },
	{ "reserved_bit", trp_reserved, 0, 0, 1 },
};

static void trp_seeds_of(const struct rx_seed *v, size_t n,
			 const struct stags *t)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct fq_cfg c = { .transport = FQ_TRP, .mtu = 1500,
				    .rx_psn = fq_trp_psns[0],
				    .peer_credits = TRP_SEED_CREDITS,
				    .post_read = v[i].post_read,
				    .srq = v[i].srq, .nrecv = v[i].nrecv,
				    .ird = 4, .ord = 2 };

		rx_variant(&v[i], t, &c, "");
		/* PSNs that wrap, renumbered by the rig; small packets;
		 * one credit. */
		c.rx_psn = fq_trp_psns[1];
		c.fix_psn = 1;
		c.mtu = 576;
		c.peer_credits = 1;
		rx_variant(&v[i], t, &c, "_wrap");
	}
}

/* The segments of fuzz_rx's seeds, then TRP's own. */
static void trp_corpus(const struct stags *t)
{
	trp_seeds_of(rx_seeds, sizeof(rx_seeds) / sizeof(rx_seeds[0]), t);
	trp_seeds_of(trp_seeds, sizeof(trp_seeds) / sizeof(trp_seeds[0]), t);
}

/* ----------------------------------------------------------- fuzz_term */

static void term_seed(const char *name, uint8_t flags, uint32_t ctrl,
		      const uint8_t *echo, size_t n)
{
	uint8_t b[256];

	b[0] = flags;
	fp_be32(b + 1, ctrl);
	if (n)
		memcpy(b + 5, echo, n);
	put("fuzz_term", name, b, 5 + n);
}

static void term_corpus(const struct stags *t)
{
	const uint32_t mdr = IW_TERM_HDRCT_M | IW_TERM_HDRCT_D |
			     IW_TERM_HDRCT_R;
	uint8_t e[128];
	uint16_t seglen_be = iw_be16(sizeof(struct iw_read_req));
	size_t n;

	term_seed("ctrl_only", 1, iw_term_ctrl(IW_TERM_LAYER_RDMAP, 0, 0, 0),
		  NULL, 0);
	term_seed("llp_crc", 0, iw_term_ctrl(IW_TERM_LAYER_LLP, 0,
					     IW_TERM_LLP_CRC, 0), NULL, 0);
	/* Echoing our Read Request, which is outstanding (flag bit 1). */
	memcpy(e, &seglen_be, 2);
	n = 2 + fp_untagged(e + 2, IW_OP_READ_REQ, 1, 0, IW_QN_READ_REQ, 1, 0);
	n += fp_read_req_body(e + n, t->recv, va(FQ_RECV, FQ_READ_SINK),
			      FQ_READ_LEN, FQ_PEER_STAG, FQ_PEER_TO);
	term_seed("read_named", 3, iw_term_ctrl(IW_TERM_LAYER_RDMAP, 1, 0, mdr),
		  e, n);
	term_seed("read_named_cut", 0x16,
		  iw_term_ctrl(IW_TERM_LAYER_DDP, 2, 3, mdr), e, n);
	/* Echoing a tagged header (a Write we sent). */
	seglen_be = iw_be16(IW_TAGGED_HDR_LEN + 64);
	memcpy(e, &seglen_be, 2);
	n = 2 + fp_tagged(e + 2, IW_OP_WRITE, 1, 0x00abcd01u, 0x1000);
	term_seed("tagged_echo", 1,
		  iw_term_ctrl(IW_TERM_LAYER_DDP, 1, 0,
			       IW_TERM_HDRCT_M | IW_TERM_HDRCT_D), e, n);
	/* Echoing an untagged Send. */
	seglen_be = iw_be16(IW_UNTAGGED_HDR_LEN + 8);
	memcpy(e, &seglen_be, 2);
	n = 2 + fp_untagged(e + 2, IW_OP_SEND, 1, 0, IW_QN_SEND, 1, 0);
	term_seed("send_echo", 5,
		  iw_term_ctrl(IW_TERM_LAYER_DDP, 2, 2,
			       IW_TERM_HDRCT_M | IW_TERM_HDRCT_D), e, n);
}

/* ------------------------------------------------------------ fuzz_mpa */

static void mpa_seed(const char *name, const uint8_t prefix[6], int reply,
		     const struct iw_mpa_params *p)
{
	uint8_t b[6 + IW_MPA_MAX_RR_LEN];
	ssize_t n = iw_mpa_build(b + 6, sizeof(b) - 6, reply, p);

	if (n < 0) {
		fprintf(stderr, "fuzz_seeds: %s does not build\n", name);
		exit(1);
	}
	memcpy(b, prefix, 6);
	put("fuzz_mpa", name, b, 6 + (size_t)n);
}

static void mpa_corpus(void)
{
	static const char pd[] = "private data of the consumer";
	/* expect REQ, responder rev 2 + CRC, accepts all RTRs; IRD/ORD. */
	const uint8_t req_pfx[6] = { 0x7C, 0x02, 4, 4, 8, 8 };
	/* expect REP; our request rev 2, p2p, offered Write + Read. */
	const uint8_t rep_pfx[6] = { 0x81, 0x38, 4, 4, 8, 8 };
	const uint8_t any_pfx[6] = { 0x03, 0x00, 0, 0, 0, 0 };
	struct iw_mpa_params p = { .rev = 1, .pdata = pd,
				   .pdata_len = sizeof(pd) };

	mpa_seed("req_rev1", req_pfx, 0, &p);
	p.crc = 1;
	mpa_seed("req_rev1_crc", any_pfx, 0, &p);
	p = (struct iw_mpa_params){ .rev = 2, .p2p = 1, .ird = 16, .ord = 16,
				    .rtr = IW_RTR_WRITE | IW_RTR_READ |
					   IW_RTR_SEND,
				    .pdata = pd, .pdata_len = sizeof(pd) };
	mpa_seed("req_rev2_p2p", req_pfx, 0, &p);
	p.p2p = 0;
	p.rtr = 0;
	mpa_seed("req_rev2", req_pfx, 0, &p);
	p.pdata_len = 0;
	mpa_seed("req_rev2_empty", req_pfx, 0, &p);

	p = (struct iw_mpa_params){ .rev = 2, .p2p = 1, .ird = 8, .ord = 4,
				    .rtr = IW_RTR_WRITE, .pdata = pd,
				    .pdata_len = 5 };
	mpa_seed("rep_rev2_write", rep_pfx, 1, &p);
	p.rtr = IW_RTR_READ;
	p.crc = 1;
	mpa_seed("rep_rev2_read_crc", rep_pfx, 1, &p);
	p.reject = 1;
	mpa_seed("rep_rev2_reject", any_pfx, 1, &p);
	p = (struct iw_mpa_params){ .rev = 1, .pdata = pd, .pdata_len = 9 };
	mpa_seed("rep_rev1", rep_pfx, 1, &p);
}

/* ------------------------------------------------------------- fuzz_cm */

static void cm_seed(const char *name, uint8_t flags, const uint8_t *tail,
		    size_t tail_len, const struct iw_mpa_params *p)
{
	uint8_t b[1 + IW_MPA_MAX_RR_LEN + 256];
	ssize_t n = iw_mpa_build(b + 1, IW_MPA_MAX_RR_LEN, 0, p);

	if (n < 0) {
		fprintf(stderr, "fuzz_seeds: %s does not build\n", name);
		exit(1);
	}
	b[0] = flags;
	if (tail_len)
		memcpy(b + 1 + n, tail, tail_len);
	put("fuzz_cm", name, b, 1 + (size_t)n + tail_len);
}

/* Requests the CM itself must refuse (a reject reply) or drop. */
static void cm_malformed_seeds(const struct iw_mpa_params *p)
{
	static const char http[] = "GET / HTTP/1.0\r\n\r\n";
	uint8_t b[1 + IW_MPA_MAX_RR_LEN];
	ssize_t n = iw_mpa_build(b + 1, sizeof(b) - 1, 0, p);

	if (n < 0)
		exit(1);
	b[0] = 0x03;
	b[1 + 16] |= IW_MPA_FLAG_MARKERS;
	put("fuzz_cm", "req_markers", b, 1 + (size_t)n);
	b[1 + 16] &= (uint8_t)~IW_MPA_FLAG_MARKERS;
	b[1 + 17] = 3;
	put("fuzz_cm", "req_rev3", b, 1 + (size_t)n);
	b[1 + 17] = 1;
	b[1 + 18] = 0x02;	/* private data length 513 */
	b[1 + 19] = 0x01;
	put("fuzz_cm", "req_pd_too_long", b, 1 + (size_t)n);
	memcpy(b + 1, IW_MPA_KEY_REP, IW_MPA_KEY_LEN);
	put("fuzz_cm", "reply_not_request", b, 1 + (size_t)n);
	b[0] = 0x00;
	memcpy(b + 1, http, sizeof(http) - 1);
	put("fuzz_cm", "not_mpa", b, sizeof(http));
}

static void cm_corpus(void)
{
	static const char pd[] = "hello";
	uint8_t svc_pd[IWE_CM_SERVICE_HDR_LEN + sizeof(pd)];
	/* What an initiator sends after the reply: a Write RTR, a Send. */
	uint8_t fp[128], u[IW_UNTAGGED_HDR_LEN + 8];
	size_t nf;
	struct iw_mpa_params p = { .rev = 2, .p2p = 1, .ird = 4, .ord = 4,
				   .rtr = IW_RTR_WRITE, .pdata = pd,
				   .pdata_len = sizeof(pd) };
	struct iwe_device *dev;

	fp_tagged(u, IW_OP_WRITE, 1, IW_RTR_WRITE_STAG, 0);
	nf = fp_frame(fp, u, IW_TAGGED_HDR_LEN, 0);
	fp_untagged(u, IW_OP_SEND, 1, 0, IW_QN_SEND, 1, 0);
	memset(u + IW_UNTAGGED_HDR_LEN, 'x', 8);
	nf += fp_frame(fp + nf, u, sizeof(u), 0);

	cm_seed("req_p2p_write", 0x03, NULL, 0, &p);
	cm_seed("req_p2p_accept_rtr", 0x07, fp, nf, &p);
	cm_seed("req_p2p_cut", 0x11, NULL, 0, &p);
	p.rtr = 0;
	p.p2p = 0;
	cm_seed("req_rev2_accept", 0x07, fp + IW_TAGGED_HDR_LEN + 8,
		nf - IW_TAGGED_HDR_LEN - 8, &p);
	p.rev = 1;
	p.ird = p.ord = 0;
	cm_seed("req_rev1", 0x03, NULL, 0, &p);
	p.crc = 1;
	cm_seed("req_rev1_crc_accept", 0x27, NULL, 0, &p);
	cm_malformed_seeds(&p);

	/* The service header of the service above 65535 that fuzz_cm
	 * listens on, as the engine sends it. */
	dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (dev && !fuzz_learn_svc_magic(dev, svc_pd)) {
		uint64_t svc_be = iw_be64(FUZZ_CM_HASHED_SVC);

		memcpy(svc_pd + FUZZ_SVC_MAGIC_LEN, &svc_be, 8);
		memcpy(svc_pd + IWE_CM_SERVICE_HDR_LEN, pd, sizeof(pd));
		p = (struct iw_mpa_params){ .rev = 2, .p2p = 1, .ird = 4,
					    .ord = 4, .rtr = IW_RTR_READ,
					    .pdata = svc_pd,
					    .pdata_len = sizeof(svc_pd) };
		cm_seed("req_hashed", 0x0B, NULL, 0, &p);
	}
	if (dev)
		iwe_device_close(dev);
}

/* --------------------------------------------------------- fuzz_cm_trp */

/* Datagrams behind BE16 lengths, after the flags byte. */
struct dg_seed {
	uint8_t b[4096];
	size_t n;
};

static void dg_add(struct dg_seed *d, const uint8_t *p, size_t n)
{
	d->b[d->n++] = (uint8_t)(n >> 8);
	d->b[d->n++] = (uint8_t)n;
	memcpy(d->b + d->n, p, n);
	d->n += n;
}

/* A packet of PSN psn around the MPA request or reply p (plus extra
 * bytes). */
static size_t trp_frame(uint8_t *out, uint32_t psn, uint16_t flags,
			int reply, const struct iw_mpa_params *p, size_t extra)
{
	ssize_t n = iw_mpa_build(out + IW_TRP_HDR_LEN, IW_MPA_MAX_RR_LEN,
				 reply, p);

	if (n < 0)
		exit(1);
	iw_trp_put(out, psn, 0, flags, 64);
	memset(out + IW_TRP_HDR_LEN + n, 0, extra);
	return IW_TRP_HDR_LEN + (size_t)n + extra;
}

static void cm_trp_seed(const char *name, uint8_t flags, uint16_t trp_flags,
			const struct iw_mpa_params *p, size_t extra, int again)
{
	uint8_t req[IW_TRP_HDR_LEN + IW_MPA_MAX_RR_LEN + 8];
	uint8_t u[IW_TRP_HDR_LEN + IW_TAGGED_HDR_LEN];
	struct dg_seed d = { .n = 0 };
	size_t n = trp_frame(req, 1000, trp_flags, 0, p, extra);

	d.b[d.n++] = flags;
	dg_add(&d, req, n);
	if (again)
		dg_add(&d, req, n);	/* a repeated request */
	/* The initiator's RTR (a zero-length Write to STag 1), PSN 1001. */
	iw_trp_put(u, 1001, 0, 0, 64);
	fp_tagged(u + IW_TRP_HDR_LEN, IW_OP_WRITE, 1, IW_RTR_WRITE_STAG, 0);
	dg_add(&d, u, sizeof(u));
	put("fuzz_cm_trp", name, d.b, d.n);
}

static void cm_trp_corpus(void)
{
	static const char pd[] = "hello";
	struct iw_mpa_params p = { .rev = 2, .p2p = 1, .ird = 4, .ord = 4,
				   .rtr = IW_RTR_WRITE, .pdata = pd,
				   .pdata_len = sizeof(pd) };

	cm_trp_seed("trp_req_accept", 0x04, IW_TRP_I, &p, 0, 0);
	cm_trp_seed("trp_req_reject_again", 0x00, IW_TRP_I, &p, 0, 1);
	cm_trp_seed("trp_req_trailing", 0x04, IW_TRP_I, &p, 4, 0);
	cm_trp_seed("trp_req_not_init", 0x04, IW_TRP_A, &p, 0, 0);
	p.rtr = 0;
	p.p2p = 0;
	cm_trp_seed("trp_req_no_p2p", 0x04, IW_TRP_I, &p, 0, 1);
	p.rev = 1;
	p.ird = p.ord = 0;
	cm_trp_seed("trp_req_rev1", 0x04, IW_TRP_I, &p, 0, 0);
}

/* Answers to a connect: flags byte, then datagrams (ack fields are
 * rewritten by the target, bit 0). */
static void cm_trp_active_seed(const char *name, uint8_t flags, int ack_first,
			       const struct iw_mpa_params *rep)
{
	uint8_t r[IW_TRP_HDR_LEN + IW_MPA_MAX_RR_LEN], a[IW_TRP_HDR_LEN];
	struct dg_seed d = { .n = 0 };
	size_t n = trp_frame(r, 500, IW_TRP_I, 1, rep, 0);

	d.b[d.n++] = flags;
	if (ack_first) {
		iw_trp_put(a, 500, 0, IW_TRP_A, 64);
		dg_add(&d, a, sizeof(a));
	}
	dg_add(&d, r, n);
	put("fuzz_cm_trp_active", name, d.b, d.n);
}

static void cm_trp_active_corpus(void)
{
	static const char pd[] = "welcome";
	struct iw_mpa_params p = { .rev = 2, .p2p = 1, .ird = 4, .ord = 4,
				   .rtr = IW_RTR_WRITE, .pdata = pd,
				   .pdata_len = sizeof(pd) };

	static const char long_pd[200] = "a reply's private data longer "
					 "than the MPA header before it";

	cm_trp_active_seed("rep_write_acked", 0x07, 0, &p);
	/* Moved within c->in while the RTR waits: overlapping ranges (a
	 * memcpy there once; AddressSanitizer saw it in CI). */
	p.pdata = long_pd;
	p.pdata_len = sizeof(long_pd);
	cm_trp_active_seed("rep_write_long_pd", 0x07, 0, &p);
	p.pdata = pd;
	p.pdata_len = sizeof(pd);
	cm_trp_active_seed("rep_write_unacked", 0x05, 1, &p);
	p.rtr = IW_RTR_READ;
	cm_trp_active_seed("rep_read_acked", 0x0b, 0, &p);
	p.rtr = IW_RTR_SEND;
	cm_trp_active_seed("rep_send_acked", 0x0f, 0, &p);
	p.rtr = 0;
	p.p2p = 0;
	cm_trp_active_seed("rep_no_p2p", 0x03, 0, &p);
	p.reject = 1;
	cm_trp_active_seed("rep_reject", 0x07, 0, &p);
}

/* ------------------------------------------------------- fuzz_instance */

static void instance_corpus(void)
{
	static const char *const seeds[] = {
		"lo tcp",
		"127.0.0.1 udp",
		"lo tcp mpa_rev=1 crc=off rtr=none mpa_timeout=100",
		"eth0\ttcp rtr=send crc=yes mpa_rev=2",
		"lo tcp rtr=read crc=0 mpa_timeout=3600000",
		"lo tcp mpa_timeout=0",
		"lo tcp unknown=1",
		"lo sctp",
		"lo",
	};
	char name[32];
	size_t i;

	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		snprintf(name, sizeof(name), "instance_%zu", i);
		put("fuzz_instance", name, (const uint8_t *)seeds[i],
		    strlen(seeds[i]));
	}
}

int main(int argc, char **argv)
{
	struct stags t;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	g_dir = argv[1];
	mkdir(g_dir, 0755);
	learn_stags(&t);
	rx_corpus(&t);
	trp_corpus(&t);
	term_corpus(&t);
	mpa_corpus();
	cm_corpus();
	cm_trp_corpus();
	cm_trp_active_corpus();
	instance_corpus();
	return 0;
}
