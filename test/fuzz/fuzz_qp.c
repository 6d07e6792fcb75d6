/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The receive-path fuzz rig (see fuzz_qp.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_qp.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "fuzz_check.h"
#include "iw_crc32c.h"
#include "iw_wire.h"

#define OUT_CAP (1u << 18)	/* what the QP sends, until parsed */

static const uint32_t mulpdus[] = { 0, 128, 1024, 4096 };
static const unsigned chunk_maxes[] = { 1, 7, 64, 0 };

/* ------------------------------------------------------ configuration */

void fq_cfg_decode(const uint8_t *h, struct fq_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->crc = h[0] & 1;
	c->post_read = !!(h[0] & 2);
	c->close_at_end = !!(h[0] & 4);
	c->srq = !!(h[0] & 8);
	c->fix_crc = c->crc && (h[0] & 0x40);
	c->mulpdu = mulpdus[(h[0] >> 4) & 3];
	c->nrecv = h[1] & 7;
	c->ird = 1 + ((h[1] >> 3) & 7);
	c->ord = 1u << ((h[1] >> 6) & 3);
	c->chunk_max = chunk_maxes[h[2] & 3];
	c->chunk_seed = h[2] >> 2;
}

static unsigned index_of(const uint32_t *v, unsigned n, uint32_t x)
{
	unsigned i;

	for (i = 0; i < n && v[i] != x; i++)
		;
	return i < n ? i : 0;
}

void fq_cfg_encode(const struct fq_cfg *c, uint8_t *h)
{
	static const uint32_t cm[] = { 1, 7, 64, 0 };
	unsigned lg = 0;

	while ((1u << lg) < c->ord && lg < 3)
		lg++;
	h[0] = (uint8_t)((c->crc ? 1 : 0) | (c->post_read ? 2 : 0) |
			 (c->close_at_end ? 4 : 0) | (c->srq ? 8 : 0) |
			 (c->fix_crc ? 0x40 : 0) |
			 index_of(mulpdus, 4, c->mulpdu) << 4);
	h[1] = (uint8_t)((c->nrecv & 7) | ((c->ird - 1) & 7) << 3 | lg << 6);
	h[2] = (uint8_t)(index_of(cm, 4, c->chunk_max) | (c->chunk_seed & 63) << 2);
}

/* ------------------------------------------------------------- memory */

/* The reference contents of the whole mapping, and the mapping. */
static uint8_t *g_map;
static uint8_t g_ref[FQ_MAP_LEN];

uint8_t *fq_region(enum fq_region r)
{
	return g_map + FQ_PAGE + (size_t)r * (FQ_REGION + FQ_PAGE);
}

static void map_once(void)
{
	size_t i;

	if (g_map)
		return;
	/* A fixed address makes tagged offsets reproducible; fall back to
	 * any address (then only within one run) if it is taken. */
	g_map = mmap((void *)FQ_BASE, FQ_MAP_LEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (g_map == MAP_FAILED || g_map != (uint8_t *)FQ_BASE) {
		fprintf(stderr, "fuzz_qp: cannot map at %#lx, TOs will differ\n",
			(unsigned long)FQ_BASE);
		if (g_map != MAP_FAILED)
			munmap(g_map, FQ_MAP_LEN);
		g_map = mmap(NULL, FQ_MAP_LEN, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FUZZ_CHECK(g_map != MAP_FAILED, "mmap: %s", strerror(errno));
	}
	for (i = 0; i < FQ_MAP_LEN; i++)
		g_ref[i] = (uint8_t)(i * 131 + (i >> 9) + 7);
}

/* ---------------------------------------------------------------- setup */

static void setup_fail(const char *what)
{
	fprintf(stderr, "fuzz_qp: setup failed: %s: %s\n", what,
		strerror(errno));
	abort();
}

static void make_objects(struct fq *q)
{
	static const int access[FQ_NREGIONS] = {
		[FQ_RECV] = IBV_ACCESS_LOCAL_WRITE,
		[FQ_RW] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND,
		[FQ_RO] = IBV_ACCESS_REMOTE_READ,
		[FQ_OTHER] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ,
	};
	struct iwe_qp_init_attr at = { 0 };
	int r;

	q->dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!q->dev)
		setup_fail("iwe_device_open(lo)");
	q->pd = iwe_alloc_pd(q->dev);
	q->pd2 = iwe_alloc_pd(q->dev);
	q->scq = iwe_create_cq(q->dev, 64, NULL, NULL);
	q->rcq = iwe_create_cq(q->dev, 64, NULL, NULL);
	if (!q->pd || !q->pd2 || !q->scq || !q->rcq)
		setup_fail("pd/cq");
	for (r = 0; r < FQ_NREGIONS; r++) {
		q->mr[r] = iwe_reg_mr(r == FQ_OTHER ? q->pd2 : q->pd,
				      fq_region((enum fq_region)r), FQ_REGION,
				      access[r]);
		if (!q->mr[r])
			setup_fail("iwe_reg_mr");
	}
	q->mw = iwe_alloc_mw(q->pd);
	if (!q->mw)
		setup_fail("iwe_alloc_mw");
	if (q->cfg.srq) {
		struct iwe_srq_init_attr sa = {
			.attr = { .max_wr = 16, .max_sge = 4 } };

		q->srq = iwe_create_srq(q->pd, &sa);
		if (!q->srq)
			setup_fail("iwe_create_srq");
	}
	at.send_cq = q->scq;
	at.recv_cq = q->rcq;
	at.srq = q->srq;
	at.cap = (struct iwe_qp_cap){ .max_send_wr = 16, .max_recv_wr = 16,
				      .max_send_sge = 4, .max_recv_sge = 4 };
	at.sq_sig_all = 1;
	q->qp = iwe_create_qp(q->pd, &at);
	if (!q->qp)
		setup_fail("iwe_create_qp");
}

static void attach(struct fq *q)
{
	struct iwe_stream_params sp = {
		.crc = q->cfg.crc, .mulpdu = q->cfg.mulpdu,
		.ird = q->cfg.ird, .ord = q->cfg.ord, .mpa_rev = 2,
	};
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
		setup_fail("socketpair");
	q->fd = sv[0];
	q->peer = sv[1];
	if (iwe_modify_qp(q->qp, IWE_QPS_INIT) ||
	    iwe_qp_attach_stream(q->qp, q->fd, &sp))
		setup_fail("attach");
}

static void post_recvs(struct fq *q)
{
	uint8_t *b = fq_region(FQ_RECV);
	unsigned i;

	for (i = 0; i < q->cfg.nrecv; i++) {
		struct ibv_sge sg[2] = {
			{ .addr = (uintptr_t)(b + i * FQ_RECV_STRIDE),
			  .length = FQ_RECV_SGE0, .lkey = q->mr[FQ_RECV]->lkey },
			{ .addr = (uintptr_t)(b + i * FQ_RECV_STRIDE + 256),
			  .length = FQ_RECV_SGE1, .lkey = q->mr[FQ_RECV]->lkey },
		};
		struct ibv_recv_wr wr = { .wr_id = FQ_WR_RECV0 + i,
					  .sg_list = sg, .num_sge = 2 };
		struct ibv_recv_wr *bad;
		int rc = q->srq ? iwe_post_srq_recv(q->srq, &wr, &bad)
				: iwe_post_recv(q->qp, &wr, &bad);

		if (rc)
			setup_fail("post receive");
	}
}

static void post_send_wr(struct fq *q, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	if (iwe_post_send(q->qp, wr, &bad))
		setup_fail("post send");
}

static void bind_window(struct fq *q)
{
	struct ibv_send_wr wr = { .wr_id = FQ_WR_BIND };
	struct ibv_wc wc;

	iwe_wr_set_bind_mw(&wr, q->mw, q->mr[FQ_RW],
			   (uintptr_t)(fq_region(FQ_RW) + FQ_MW_OFF), FQ_MW_LEN,
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	post_send_wr(q, &wr);
	q->mw_rkey = wr.bind_mw.rkey;
	iwe_qp_progress_tx(q->qp);
	if (iwe_poll_cq(q->scq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
	    wc.wr_id != FQ_WR_BIND)
		setup_fail("memory window bind");
}

static void post_read(struct fq *q)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)(fq_region(FQ_RECV) + FQ_READ_SINK),
		.length = FQ_READ_LEN, .lkey = q->mr[FQ_RECV]->lkey };
	struct ibv_send_wr wr = { .wr_id = FQ_WR_READ, .sg_list = &sg,
				  .num_sge = 1, .opcode = IBV_WR_RDMA_READ };

	wr.wr.rdma.remote_addr = FQ_PEER_TO;
	wr.wr.rdma.rkey = FQ_PEER_STAG;
	post_send_wr(q, &wr);
}

static void drain(struct fq *q);

void fq_open(struct fq *q, const struct fq_cfg *c)
{
	map_once();
	memcpy(g_map, g_ref, FQ_MAP_LEN);
	memset(q, 0, sizeof(*q));
	q->cfg = *c;
	q->fd = q->peer = -1;
	q->rng = c->chunk_seed * 2654435761u + 1;
	q->out = malloc(OUT_CAP);
	if (!q->out)
		setup_fail("malloc");
	make_objects(q);
	attach(q);
	post_recvs(q);
	bind_window(q);
	if (c->post_read)
		post_read(q);
	iwe_qp_progress_tx(q->qp);
	drain(q);
}

void fq_close(struct fq *q)
{
	int r;

	iwe_destroy_qp(q->qp);
	if (q->srq)
		iwe_destroy_srq(q->srq);
	iwe_dealloc_mw(q->mw);
	for (r = 0; r < FQ_NREGIONS; r++)
		iwe_dereg_mr(q->mr[r]);
	iwe_destroy_cq(q->scq);
	iwe_destroy_cq(q->rcq);
	iwe_dealloc_pd(q->pd);
	iwe_dealloc_pd(q->pd2);
	iwe_device_close(q->dev);
	close(q->fd);
	close(q->peer);
	free(q->out);
}

/* ------------------------------------------------ what the QP sends */

/* One whole FPDU the QP sent: framing, CRC, versions, MULPDU. */
static void check_out_fpdu(struct fq *q, const uint8_t *f, unsigned ulen)
{
	unsigned body = IW_FPDU_LEN_FIELD + ulen + iw_fpdu_pad(ulen);
	uint32_t mulpdu = q->cfg.mulpdu ? q->cfg.mulpdu : IWE_DEFAULT_MULPDU;
	uint16_t ctrl_be, ctrl;

	FUZZ_CHECK(ulen >= IW_TAGGED_HDR_LEN, "sent a %u-byte ULPDU", ulen);
	FUZZ_CHECK(ulen <= mulpdu, "sent a %u-byte ULPDU, MULPDU %u", ulen,
		   mulpdu);
	if (q->cfg.crc)
		FUZZ_CHECK(iw_crc32c(0, f, body) == iw_fpdu_get_crc(f + body),
			   "sent an FPDU with a bad CRC");
	memcpy(&ctrl_be, f + IW_FPDU_LEN_FIELD, 2);
	ctrl = iw_be16(ctrl_be);
	FUZZ_CHECK(iw_ctrl_dv(ctrl) == IW_DDP_VERSION &&
		   iw_ctrl_rv(ctrl) == IW_RDMAP_VERSION,
		   "sent control word %#x", ctrl);
	if (iw_ctrl_opcode(ctrl) == IW_OP_TERMINATE && !iw_ctrl_tagged(ctrl)) {
		uint32_t t;

		FUZZ_CHECK(ulen >= sizeof(struct iw_terminate_hdr),
			   "short Terminate sent");
		memcpy(&t, f + IW_FPDU_LEN_FIELD + IW_UNTAGGED_HDR_LEN, 4);
		FUZZ_CHECK(!q->term_seen, "two Terminates sent");
		q->term_seen = 1;
		q->term_ctrl = iw_be32(t);
	}
}

static void parse_out(struct fq *q)
{
	size_t off = 0;

	while (q->out_len - off >= IW_FPDU_LEN_FIELD) {
		uint16_t len_be;
		unsigned ulen, total;

		memcpy(&len_be, q->out + off, 2);
		ulen = iw_be16(len_be);
		total = iw_fpdu_len(ulen);
		if (q->out_len - off < total)
			break;
		check_out_fpdu(q, q->out + off, ulen);
		off += total;
	}
	memmove(q->out, q->out + off, q->out_len - off);
	q->out_len -= off;
}

/* Read everything the QP wrote. */
static void drain(struct fq *q)
{
	for (;;) {
		ssize_t n = read(q->peer, q->out + q->out_len,
				 OUT_CAP - q->out_len);

		if (n <= 0)
			return;
		q->out_len += (size_t)n;
		parse_out(q);
		FUZZ_CHECK(q->out_len < OUT_CAP, "unframed bytes sent");
	}
}

/* ------------------------------------------------------------- driving */

static void note_err(struct fq *q, int err)
{
	if (err && !q->err)
		q->err = err;
}

static void step(struct fq *q)
{
	note_err(q, iwe_qp_progress_rx(q->qp));
	note_err(q, iwe_qp_progress_tx(q->qp));
	drain(q);
}

/* Writes cut as the header says, up to MAX_CUTS of them (each costs a
 * few system calls); then the rest at once. */
#define MAX_CUTS 96

static size_t next_chunk(struct fq *q, size_t left)
{
	size_t n;

	if (!q->cfg.chunk_max || q->cuts++ >= MAX_CUTS)
		return left;
	q->rng ^= q->rng << 13;
	q->rng ^= q->rng >> 17;
	q->rng ^= q->rng << 5;
	n = 1 + q->rng % q->cfg.chunk_max;
	return n < left ? n : left;
}

/* Walk the bytes as FPDUs and give each whole one a good CRC. */
static void fix_crcs(uint8_t *b, size_t n)
{
	size_t off = 0;

	while (n - off >= IW_FPDU_LEN_FIELD) {
		uint16_t len_be;
		size_t body, total;

		memcpy(&len_be, b + off, 2);
		body = IW_FPDU_LEN_FIELD + iw_be16(len_be) +
		       iw_fpdu_pad(iw_be16(len_be));
		total = body + IW_FPDU_CRC_LEN;
		if (n - off < total)
			return;
		iw_fpdu_put_crc(b + off + body, iw_crc32c(0, b + off, body));
		off += total;
	}
}

void fq_feed(struct fq *q, const uint8_t *in, size_t n)
{
	uint8_t *data = malloc(n ? n : 1);
	size_t off = 0;

	FUZZ_CHECK(data != NULL, "malloc");
	memcpy(data, in, n);
	if (q->cfg.fix_crc)
		fix_crcs(data, n);

	while (off < n) {
		size_t k = next_chunk(q, n - off);
		ssize_t w = write(q->peer, data + off, k);

		if (w <= 0)
			break;	/* the QP stopped reading and the pipe is full */
		off += (size_t)w;
		step(q);
	}
	free(data);
}

/* ---------------------------------------------------------------- checks */

/* Compare [from, to) of the mapping with the reference. */
static void check_unchanged(size_t from, size_t to)
{
	size_t i;

	if (from >= to || !memcmp(g_map + from, g_ref + from, to - from))
		return;
	for (i = from; g_map[i] == g_ref[i]; i++)
		;
	FUZZ_CHECK(0, "byte %#zx of the mapping written: region %zd "
		   "offset %zd (-1: a guard page)", i,
		   i % (FQ_REGION + FQ_PAGE) >= FQ_PAGE ?
			   (ssize_t)(i / (FQ_REGION + FQ_PAGE)) : -1,
		   (ssize_t)(i % (FQ_REGION + FQ_PAGE)) - (ssize_t)FQ_PAGE);
}

/* Everything but the RW region, the posted receive SGEs and the Read
 * sink keeps its reference bytes. */
static void check_memory(const struct fq *q)
{
	size_t recv = (size_t)(fq_region(FQ_RECV) - g_map);
	size_t rw = (size_t)(fq_region(FQ_RW) - g_map);
	size_t at = 0, r;

	for (r = 0; r < q->cfg.nrecv; r++) {
		size_t sge0 = recv + r * FQ_RECV_STRIDE, sge1 = sge0 + 256;

		check_unchanged(at, sge0);
		check_unchanged(sge0 + FQ_RECV_SGE0, sge1);
		at = sge1 + FQ_RECV_SGE1;
	}
	if (q->cfg.post_read) {
		check_unchanged(at, recv + FQ_READ_SINK);
		at = recv + FQ_READ_SINK + FQ_READ_LEN;
	}
	check_unchanged(at, rw);
	check_unchanged(rw + FQ_REGION, FQ_MAP_LEN);
}

static int recv_id(uint64_t id, const struct fq *q)
{
	return id >= FQ_WR_RECV0 && id < FQ_WR_RECV0 + q->cfg.nrecv;
}

static void note_wc(struct fq *q, const struct ibv_wc *wc)
{
	q->outcome.wc[wc->wr_id].status = (int)wc->status + 1;
	q->outcome.wc[wc->wr_id].opcode = (int)wc->opcode;
	q->outcome.wc[wc->wr_id].byte_len = wc->byte_len;
}

static void check_completions(struct fq *q)
{
	struct ibv_wc wc;

	while (iwe_poll_cq(q->rcq, 1, &wc) == 1) {
		FUZZ_CHECK(recv_id(wc.wr_id, q) && !q->done[wc.wr_id],
			   "receive completion for wr_id %llu",
			   (unsigned long long)wc.wr_id);
		FUZZ_CHECK(wc.qp_num == q->qp->qp_num, "qp_num");
		FUZZ_CHECK(wc.status != IBV_WC_SUCCESS ||
			   (wc.opcode == IBV_WC_RECV &&
			    wc.byte_len <= FQ_RECV_CAP),
			   "receive of %u bytes, opcode %d", wc.byte_len,
			   (int)wc.opcode);
		q->done[wc.wr_id] = 1;
		note_wc(q, &wc);
	}
	while (iwe_poll_cq(q->scq, 1, &wc) == 1) {
		FUZZ_CHECK(wc.wr_id == FQ_WR_READ && q->cfg.post_read &&
			   !q->done[FQ_WR_READ],
			   "send completion for wr_id %llu",
			   (unsigned long long)wc.wr_id);
		q->done[FQ_WR_READ] = 1;
		note_wc(q, &wc);
	}
	FUZZ_CHECK(!iwe_cq_overflowed(q->scq) && !iwe_cq_overflowed(q->rcq),
		   "CQ overflow");
}

/* In ERROR every WR the QP holds has completed. */
static void check_flushed(const struct fq *q)
{
	unsigned i;

	if (q->cfg.post_read)
		FUZZ_CHECK(q->done[FQ_WR_READ], "Read not completed in ERROR");
	if (q->srq)
		return;		/* the SRQ keeps its WRs */
	for (i = 0; i < q->cfg.nrecv; i++)
		FUZZ_CHECK(q->done[FQ_WR_RECV0 + i],
			   "receive %u not completed in ERROR", i);
}

static int stream_closed(int err)
{
	return err == ENOTCONN || err == ECONNABORTED || err == ECONNRESET ||
	       err == EPIPE;
}

/* Bytes waiting in a socket's receive queue. */
static int unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) ? -1 : n;
}

static void check_state(struct fq *q)
{
	struct iwe_term_info sent, rcvd;
	enum iwe_qp_state st = iwe_qp_get_state(q->qp);

	iwe_qp_terminate_info(q->qp, &sent, &rcvd);
	FUZZ_CHECK(!(sent.valid && rcvd.valid),
		   "a Terminate both sent and received");
	if (st != IWE_QPS_ERROR) {
		FUZZ_CHECK(!q->cfg.close_at_end, "EOF left the QP in state %d",
			   (int)st);
		FUZZ_CHECK(unread(q->fd) == 0, "the QP left %d bytes unread "
			   "in its socket (state %d)", unread(q->fd), (int)st);
		FUZZ_CHECK(!sent.valid && !rcvd.valid && !q->err,
			   "Terminate or error %d outside ERROR", q->err);
		FUZZ_CHECK(!q->term_seen, "Terminate on the wire, QP state %d",
			   (int)st);
		return;
	}
	if (q->err == EPROTO)
		FUZZ_CHECK_KNOWN("term-unrecorded", sent.valid || rcvd.valid,
				 "EPROTO, but no Terminate sent or received");
	else
		FUZZ_CHECK(sent.valid || rcvd.valid || stream_closed(q->err),
			   "ERROR with no Terminate and stream error %d (%s)",
			   q->err, strerror(q->err));
	if (sent.valid)
		FUZZ_CHECK(q->term_seen &&
			   iw_term_layer(q->term_ctrl) == sent.layer &&
			   iw_term_etype(q->term_ctrl) == sent.etype &&
			   iw_term_ecode(q->term_ctrl) == sent.ecode,
			   "Terminate %u/%u/%u reported, wire %d %#x",
			   sent.layer, sent.etype, sent.ecode, q->term_seen,
			   q->term_ctrl);
	check_flushed(q);
}

void fq_finish(struct fq *q)
{
	int i;

	if (q->cfg.close_at_end)
		shutdown(q->peer, SHUT_WR);
	/* Enough rounds for a queued Read Response or Terminate to go out. */
	for (i = 0; i < 4; i++)
		step(q);
	check_completions(q);
	check_state(q);
	check_memory(q);
	q->outcome.state = (int)iwe_qp_get_state(q->qp);
	q->outcome.err = q->err;
	iwe_qp_terminate_info(q->qp, &q->outcome.sent, &q->outcome.rcvd);
	q->outcome.mem_crc = iw_crc32c(0, g_map, FQ_MAP_LEN);
}
