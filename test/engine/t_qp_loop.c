/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Engine QP data path over a byte stream, without connection manager or
 * progress thread (see qp_harness.h): transfers, ordering, reads, errors
 * seen end to end, flushes, unsignaled WRs, posting from another thread.
 * TAP output. */
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdatomic.h>
#include <sys/ioctl.h>

#include "qp_harness.h"
#include "iw_vring.h"

/* ------------------------------------------------------------ tests */

static void test_send_sizes(const struct opts *o, const char *tag)
{
	static const uint32_t sizes[] = { 0, 1, 4096, BIG / 2 };
	struct pair p;
	struct ibv_wc wc;
	unsigned i;

	pair_open(&p, o);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];

		fill(p.a.buf, n, i + 1);
		memset(p.b.buf, 0, BIG);
		CHECK(post_recv1(&p.b, 100 + i, 0, BIG) == 0,
		      "%s: post recv for %u bytes", tag, n);
		CHECK(post_send1(&p.a, 200 + i, IBV_WR_SEND, 0, n, 0, 0,
				 IBV_SEND_SIGNALED) == 0,
		      "%s: post send of %u bytes", tag, n);
		CHECK(pump_cq(&p, p.b.rcq, 1) && pump_cq(&p, p.a.scq, 1),
		      "%s: %u-byte send completes on both sides", tag, n);
		CHECK(poll1(p.b.rcq, &wc) && wc.wr_id == 100 + i &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == n && wc.qp_num == p.b.qp->qp_num,
		      "%s: recv wc of %u bytes (id %llu st %d op %d len %u)",
		      tag, n, (unsigned long long)wc.wr_id, wc.status,
		      wc.opcode, wc.byte_len);
		CHECK(memcmp(p.a.buf, p.b.buf, n) == 0 &&
		      (n == BIG || p.b.buf[n] == 0),
		      "%s: %u bytes arrive intact, nothing beyond", tag, n);
		CHECK(poll1(p.a.scq, &wc) && wc.wr_id == 200 + i &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
		      "%s: send wc for %u bytes", tag, n);
	}
	/* The full 1 MiB too, as a single message. */
	fill(p.a.buf, BIG, 99);
	post_recv1(&p.b, 1, 0, BIG);
	post_send1(&p.a, 2, IBV_WR_SEND, 0, BIG, 0, 0, IBV_SEND_SIGNALED);
	CHECK(pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.byte_len == BIG && wc.status == IBV_WC_SUCCESS &&
	      memcmp(p.a.buf, p.b.buf, BIG) == 0,
	      "%s: 1 MiB send arrives intact", tag);
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_RTS &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_RTS,
	      "%s: both QPs still RTS", tag);
	pair_close(&p);
}

static void test_sgl(void)
{
	struct opts o = { .crc = 1, .mulpdu = 1000 };
	struct pair p;
	struct ibv_sge ss[3], rs[3];
	struct ibv_send_wr swr = { 0 }, *sbad;
	struct ibv_recv_wr rwr = { 0 }, *rbad;
	struct ibv_wc wc;
	static const uint32_t slen[3] = { 100, 5000, 33 };
	static const uint32_t rlen[3] = { 2000, 17, 4000 };
	size_t soff[3] = { 10, 20000, 7 }, roff[3] = { 50000, 3, 90000 };
	char want[5133], got[5133];
	size_t k = 0;
	int i;

	pair_open(&p, &o);
	fill(p.a.buf, BIG, 5);
	for (i = 0; i < 3; i++) {
		ss[i] = (struct ibv_sge){ (uintptr_t)(p.a.buf + soff[i]),
					  slen[i], p.a.mr->lkey };
		rs[i] = (struct ibv_sge){ (uintptr_t)(p.b.buf + roff[i]),
					  rlen[i], p.b.mr->lkey };
		memcpy(want + k, p.a.buf + soff[i], slen[i]);
		k += slen[i];
	}
	rwr = (struct ibv_recv_wr){ .wr_id = 7, .sg_list = rs, .num_sge = 3 };
	swr = (struct ibv_send_wr){ .wr_id = 8, .sg_list = ss, .num_sge = 3,
				    .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_SIGNALED };
	CHECK(iwe_post_recv(p.b.qp, &rwr, &rbad) == 0 &&
	      iwe_post_send(p.a.qp, &swr, &sbad) == 0,
	      "sgl: post 3-SGE send and 3-SGE receive");
	CHECK(pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.byte_len == 5133 && wc.status == IBV_WC_SUCCESS,
	      "sgl: receive of 5133 bytes completes");
	k = 0;
	for (i = 0; i < 3 && k < 5133; i++) {
		size_t t = rlen[i] < 5133 - k ? rlen[i] : 5133 - k;

		memcpy(got + k, p.b.buf + roff[i], t);
		k += t;
	}
	CHECK(memcmp(want, got, 5133) == 0,
	      "sgl: bytes gathered and scattered in order");
	pair_close(&p);
}

/* RDMA Write and Read with a gather/scatter list whose segments do not
 * abut (dapltest's layout: 1000-byte segments 1024 bytes apart) against
 * one contiguous remote range. */
static void sgl_rdma_run(int crc, int is_read)
{
	struct opts o = { .crc = crc, .mulpdu = 1400, .ird = 4, .ord = 4 };
	const char *tag = is_read ? "sgl read" : "sgl write";
	struct pair p;
	struct ibv_sge sg[3];
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	char *local, *remote;
	int i, ok = 1;

	pair_open(&p, &o);
	local = p.a.buf + 8192;
	remote = p.b.buf + 777;
	fill(p.a.buf, 65536, 11);
	fill(p.b.buf, 65536, 12);
	for (i = 0; i < 3; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)(local + 1024 * i), 1000,
					  p.a.mr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 3, .sg_list = sg, .num_sge = 3,
				   .opcode = is_read ? IBV_WR_RDMA_READ
						     : IBV_WR_RDMA_WRITE,
				   .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)remote;
	wr.wr.rdma.rkey = p.b.mr->rkey;
	/* A Send after the Write: placement is done when it arrives. */
	post_recv1(&p.b, 1, 0, 64);
	CHECK(iwe_post_send(p.a.qp, &wr, &bad) == 0 && pump_cq(&p, p.a.scq, 1) &&
	      poll1(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS &&
	      post_send1(&p.a, 4, IBV_WR_SEND, 0, 8, 0, 0, 0) == 0 &&
	      pump_cq(&p, p.b.rcq, 1),
	      "%s (crc %d): 3 x 1000 bytes, 1024 apart, complete", tag, crc);
	for (i = 0; i < 3; i++)
		ok &= memcmp(local + 1024 * i, remote + 1000 * i, 1000) == 0;
	CHECK(ok, "%s (crc %d): each segment matches its remote range",
	      tag, crc);
	pair_close(&p);
}

static void test_sgl_rdma(void)
{
	sgl_rdma_run(0, 0);
	sgl_rdma_run(1, 0);
	sgl_rdma_run(0, 1);
	sgl_rdma_run(1, 1);
}

static void test_write_then_send(void)
{
	struct opts o = { .crc = 1, .mulpdu = 4096 };
	struct pair p;
	struct ibv_wc wc;
	uint64_t raddr;

	pair_open(&p, &o);
	raddr = (uintptr_t)(p.b.buf + 4096);
	fill(p.a.buf, 65536, 3);
	post_recv1(&p.b, 1, 0, 64);
	CHECK(post_send1(&p.a, 10, IBV_WR_RDMA_WRITE, 0, 65536, raddr,
			 p.b.mr->rkey, IBV_SEND_SIGNALED) == 0 &&
	      post_send1(&p.a, 11, IBV_WR_SEND, 0, 8, 0, 0,
			 IBV_SEND_SIGNALED) == 0,
	      "write+send: post RDMA Write of 64 KiB then Send");
	CHECK(pump_cq(&p, p.b.rcq, 1) &&
	      memcmp(p.b.buf + 4096, p.a.buf, 65536) == 0,
	      "write+send: Write data visible when the Send completes");
	CHECK(pump_cq(&p, p.a.scq, 2) && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 10 && wc.opcode == IBV_WC_RDMA_WRITE &&
	      wc.status == IBV_WC_SUCCESS && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 11,
	      "write+send: send completions in posting order");
	pair_close(&p);
}

static int spares_held(const struct iwe_device *dev)
{
	int n = 0;

	for (int i = 0; i < IWE_TX_SPARES; i++)
		n += atomic_load(&((struct iwe_device *)dev)->tx_spare[i]) != NULL;
	return n;
}

/* A message staged for its CRC leaves its transmit batch (and the 64 KiB
 * or more of staging) as the device's spare for the next; the device's
 * last QP gone, the spares go too (they were kept until the device
 * closed, half a MiB a process after its connections were freed). */
static void test_spares_given_back(void)
{
	struct opts o = { .crc = 1, .mulpdu = 4096 };
	struct pair p;

	pair_open(&p, &o);
	fill(p.a.buf, 65536, 5);
	post_recv1(&p.b, 1, 65536, 64);
	CHECK(post_send1(&p.a, 1, IBV_WR_RDMA_WRITE, 0, 65536,
			 (uintptr_t)p.b.buf, p.b.mr->rkey, 0) == 0 &&
	      post_send1(&p.a, 2, IBV_WR_SEND, 0, 8, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      pump_cq(&p, p.b.rcq, 1) && pump_cq(&p, p.a.scq, 1) &&
	      memcmp(p.b.buf, p.a.buf, 65536) == 0,
	      "spares: a 64 KiB Write with CRC arrives");
	CHECK(spares_held(g_dev) >= 1,
	      "spares: its batch waits as the device's spare (%d)",
	      spares_held(g_dev));
	pair_close(&p);
	CHECK(spares_held(g_dev) == 0,
	      "spares: none left once the device has no QP (%d)",
	      spares_held(g_dev));
}

/* The Read rings hold a power of two >= ORD (IRD) entries: ORD 4 fills
 * its ring exactly, 3 leaves one slot spare, 1 is the least. */
static void test_reads(uint32_t rd)
{
	struct opts o = { .crc = 1, .mulpdu = 1500, .ird = rd, .ord = rd };
	struct pair p;
	struct ibv_wc wc;
	int i, ok = 1;

	pair_open(&p, &o);
	fill(p.b.buf, BIG, 11);
	CHECK(post_send1(&p.a, 1, IBV_WR_RDMA_READ, 0, 65536,
			 (uintptr_t)p.b.buf, p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0, "read (ORD %u): post 64 KiB read", rd);
	CHECK(pump_cq(&p, p.a.scq, 1) && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == 65536,
	      "read (ORD %u): completion (st %d op %d len %u)", rd, wc.status,
	      wc.opcode, wc.byte_len);
	CHECK(memcmp(p.a.buf, p.b.buf, 65536) == 0, "read (ORD %u): data correct", rd);
	/* Ten reads against the ORD: they queue and complete in order. */
	memset(p.a.buf, 0, BIG);
	for (i = 0; i < 10; i++)
		ok &= post_send1(&p.a, 100 + i, IBV_WR_RDMA_READ, i * 8192,
				 4096, (uintptr_t)(p.b.buf + i * 1000),
				 p.b.mr->rkey, IBV_SEND_SIGNALED) == 0;
	CHECK(ok, "reads: post 10 reads with ORD %u", rd);
	CHECK(pump_cq(&p, p.a.scq, 10), "reads (ORD %u): all 10 complete", rd);
	for (i = 0; i < 10; i++) {
		ok = poll1(p.a.scq, &wc) && wc.wr_id == 100u + (unsigned)i &&
		     wc.status == IBV_WC_SUCCESS &&
		     memcmp(p.a.buf + i * 8192, p.b.buf + i * 1000, 4096) == 0;
		if (!ok)
			break;
	}
	CHECK(ok, "reads (ORD %u): in order with correct data", rd);
	pair_close(&p);
}

static void test_send_inv(void)
{
	struct opts o = { .crc = 0 };
	struct pair p;
	struct iwe_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;
	struct iwe_term_info ts;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	CHECK(mw && iwe_mw_bind(mw, p.b.mr, (uintptr_t)p.b.buf, 4096,
				IBV_ACCESS_REMOTE_WRITE) == 0,
	      "send-inv: bind a window on the receiver");
	rkey = mw->rkey;
	post_recv1(&p.b, 1, 8192, 64);
	{
		struct ibv_sge sg = { (uintptr_t)p.a.buf, 16, p.a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sg,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_INV,
					  .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;

		wr.invalidate_rkey = rkey;
		CHECK(iwe_post_send(p.a.qp, &wr, &bad) == 0,
		      "send-inv: post Send with Invalidate");
	}
	CHECK(pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
	      wc.invalidated_rkey == rkey && wc.byte_len == 16,
	      "send-inv: receive reports the invalidated STag");
	CHECK(mw->rkey == 0 &&
	      iwe_mr_check(g_dev, p.b.pd, rkey, (uintptr_t)p.b.buf, 1,
			   IBV_ACCESS_REMOTE_WRITE, NULL) == IWE_ACCESS_BAD_STAG,
	      "send-inv: the window's STag no longer resolves");
	/* Invalidating an MR STag is refused with a Terminate. */
	post_recv1(&p.b, 3, 8192, 64);
	{
		struct ibv_sge sg = { (uintptr_t)p.a.buf, 16, p.a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 4, .sg_list = &sg,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_INV };
		struct ibv_send_wr *bad;

		wr.invalidate_rkey = p.b.mr->rkey;
		iwe_post_send(p.a.qp, &wr, &bad);
	}
	pump(&p, 100);
	iwe_qp_terminate_info(p.b.qp, &ts, NULL);
	CHECK(ts.valid && ts.layer == IW_TERM_LAYER_RDMAP &&
	      ts.etype == IW_TERM_RDMAP_ETYPE_REMOTE_OP &&
	      ts.ecode == IW_TERM_RDMAP_CANT_INVALIDATE &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR,
	      "send-inv: MR STag cannot be invalidated -> Terminate");
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

static void test_byte_relay(void)
{
	struct opts o = { .crc = 1, .mulpdu = 200, .relay = 1, .ird = 2,
			  .ord = 2 };
	struct pair p;
	struct ibv_wc wc;

	pair_open(&p, &o);
	fill(p.a.buf, 4096, 21);
	fill(p.b.buf + 100000, 4096, 22);
	post_recv1(&p.b, 1, 0, 1000);
	CHECK(post_send1(&p.a, 2, IBV_WR_SEND, 0, 700, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      post_send1(&p.a, 3, IBV_WR_RDMA_WRITE, 1000, 333,
			 (uintptr_t)(p.b.buf + 5000), p.b.mr->rkey, 0) == 0 &&
	      post_send1(&p.a, 4, IBV_WR_RDMA_READ, 2000, 450,
			 (uintptr_t)(p.b.buf + 100000), p.b.mr->rkey,
			 IBV_SEND_SIGNALED) == 0,
	      "1-byte: post send, write, read");
	CHECK(pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.byte_len == 700 && memcmp(p.b.buf, p.a.buf, 700) == 0,
	      "1-byte: 700-byte send in 200-byte FPDUs arrives intact");
	CHECK(pump_cq(&p, p.a.scq, 2) && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 2 && poll1(p.a.scq, &wc) && wc.wr_id == 4 &&
	      wc.status == IBV_WC_SUCCESS && wc.byte_len == 450,
	      "1-byte: send and read complete (unsignaled write silent)");
	CHECK(memcmp(p.b.buf + 5000, p.a.buf + 1000, 333) == 0 &&
	      memcmp(p.a.buf + 2000, p.b.buf + 100000, 450) == 0,
	      "1-byte: write and read data correct");
	pair_close(&p);
}

/* Without CRC, one byte at a time: a connection's first reads go to
 * its few inline bytes (iw_mpa_rx.c), a small Send stays there, a large
 * Write moves it to a page and then reads its payload in place, and a
 * small Send after it ends the run -- every byte where it belongs. */
static void test_byte_relay_plain(void)
{
	struct opts o = { .crc = 0, .relay = 1, .ird = 2, .ord = 2 };
	struct pair p;
	struct ibv_wc wc;

	pair_open(&p, &o);
	fill(p.a.buf, 65536, 23);
	post_recv1(&p.b, 1, 0, 100);
	post_recv1(&p.b, 2, 200, 300);
	CHECK(post_send1(&p.a, 1, IBV_WR_SEND, 0, 8, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.wr_id == 1 && wc.byte_len == 8 &&
	      memcmp(p.b.buf, p.a.buf, 8) == 0,
	      "1-byte, no CRC: an 8-byte Send arrives intact");
	CHECK(post_send1(&p.a, 2, IBV_WR_RDMA_WRITE, 100, 20000,
			 (uintptr_t)(p.b.buf + 4096), p.b.mr->rkey, 0) == 0 &&
	      post_send1(&p.a, 3, IBV_WR_SEND, 30000, 250, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.wr_id == 2 && wc.byte_len == 250,
	      "1-byte, no CRC: a 20000-byte Write, then a Send");
	CHECK(memcmp(p.b.buf + 4096, p.a.buf + 100, 20000) == 0 &&
	      memcmp(p.b.buf + 200, p.a.buf + 30000, 250) == 0,
	      "1-byte, no CRC: the Write's and the Send's bytes are right");
	pair_close(&p);
}

static void test_bad_crc(void)
{
	struct opts o = { .crc = 1, .relay = 1 };
	struct pair p;
	struct iwe_term_info ts, tr;
	int other;

	pair_open(&p, &o);
	p.flip_at = 30;		/* inside the first FPDU's payload */
	fill(p.a.buf, 100, 1);
	post_recv1(&p.b, 1, 0, 1000);
	post_recv1(&p.b, 2, 0, 1000);
	post_recv1(&p.a, 3, 0, 1000);
	post_send1(&p.a, 4, IBV_WR_SEND, 0, 100, 0, 0, IBV_SEND_SIGNALED);
	pump(&p, 5000);
	iwe_qp_terminate_info(p.b.qp, &ts, NULL);
	iwe_qp_terminate_info(p.a.qp, NULL, &tr);
	CHECK(ts.valid && ts.layer == IW_TERM_LAYER_LLP &&
	      ts.etype == IW_TERM_LLP_ETYPE_MPA && ts.ecode == IW_TERM_LLP_CRC,
	      "crc: receiver sends LLP/MPA/CRC Terminate (%u/%u/%u)",
	      ts.layer, ts.etype, ts.ecode);
	CHECK(tr.valid && tr.layer == IW_TERM_LAYER_LLP &&
	      tr.ecode == IW_TERM_LLP_CRC, "crc: sender receives it");
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_ERROR &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR,
	      "crc: both QPs in ERROR");
	CHECK(count_status(p.b.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 2 &&
	      !other, "crc: receiver's receives flushed, none succeeded");
	CHECK(count_status(p.a.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 1 &&
	      !other, "crc: sender's receive flushed");
	pair_close(&p);
}

struct werr {
	const char *what;
	int b_access;
	uint32_t (*rkey)(const struct pair *p);
	uint64_t off;		/* from b's buffer */
	uint32_t len;
	unsigned layer, etype, ecode;
};

static uint32_t rk_good(const struct pair *p) { return p->b.mr->rkey; }
static uint32_t rk_badidx(const struct pair *p)
{
	(void)p;
	return IWE_STAG_MAKE(0xABCDE, 1);
}
static uint32_t rk_badkey(const struct pair *p)
{
	return p->b.mr->rkey ^ 0x5A;
}
static uint32_t rk_other_pd(const struct pair *p) { return p->a.mr->rkey; }

static void run_werr(const struct werr *e, int is_read)
{
	struct opts o = { .crc = 1, .mulpdu = 1024, .b_access = e->b_access };
	struct pair p;
	struct iwe_term_info ts, tr;
	struct ibv_wc wc;
	uint64_t raddr;
	int other;

	pair_open(&p, &o);
	raddr = (uintptr_t)p.b.buf + e->off;
	if (e->rkey == rk_other_pd)
		raddr = (uintptr_t)p.a.buf + e->off;
	post_recv1(&p.b, 1, 0, 64);
	post_send1(&p.a, 50, is_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		   0, e->len, raddr, e->rkey(&p), IBV_SEND_SIGNALED);
	post_send1(&p.a, 51, IBV_WR_SEND, 0, 8, 0, 0, IBV_SEND_SIGNALED);
	pump(&p, 3000);
	iwe_qp_terminate_info(p.b.qp, &ts, NULL);
	iwe_qp_terminate_info(p.a.qp, NULL, &tr);
	CHECK(ts.valid && ts.layer == e->layer && ts.etype == e->etype &&
	      ts.ecode == e->ecode,
	      "%s %s: Terminate %u/%u/%u sent (got %u/%u/%u)",
	      is_read ? "read" : "write", e->what, e->layer, e->etype,
	      e->ecode, ts.layer, ts.etype, ts.ecode);
	CHECK(tr.valid && tr.layer == e->layer && tr.ecode == e->ecode,
	      "%s %s: requester receives it", is_read ? "read" : "write",
	      e->what);
	CHECK(poll1(p.a.scq, &wc) && wc.wr_id == 50 &&
	      wc.status == IBV_WC_REM_ACCESS_ERR,
	      "%s %s: the WR completes with REM_ACCESS_ERR (st %d)",
	      is_read ? "read" : "write", e->what, wc.status);
	CHECK(poll1(p.a.scq, &wc) && wc.wr_id == 51 &&
	      wc.status == IBV_WC_WR_FLUSH_ERR,
	      "%s %s: the next WR is flushed", is_read ? "read" : "write",
	      e->what);
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_ERROR &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR &&
	      count_status(p.b.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 1,
	      "%s %s: both QPs ERROR, responder's receive flushed",
	      is_read ? "read" : "write", e->what);
	pair_close(&p);
}

static void test_access_errors(void)
{
	/* Writes of 1 MiB so the WR is still being sent when the
	 * Terminate arrives (a fully sent Write has completed already). */
	static const struct werr w[] = {
		{ "bad STag", 0, rk_badidx, 0, BIG, IW_TERM_LAYER_DDP,
		  IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_INV_STAG },
		{ "wrong key", 0, rk_badkey, 0, BIG, IW_TERM_LAYER_DDP,
		  IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_INV_STAG },
		{ "other PD", 0, rk_other_pd, 0, BIG, IW_TERM_LAYER_DDP,
		  IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_STAG_NOT_ASSOC },
		{ "out of bounds", 0, rk_good, BIG - 100, BIG, IW_TERM_LAYER_DDP,
		  IW_TERM_DDP_ETYPE_TAGGED, IW_TERM_DDP_TAG_BASE_BOUNDS },
		{ "no remote write", IBV_ACCESS_LOCAL_WRITE |
		  IBV_ACCESS_REMOTE_READ, rk_good, 0, BIG,
		  IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
		  IW_TERM_RDMAP_ACCESS },
	};
	static const struct werr r[] = {
		{ "bad STag", 0, rk_badidx, 0, 4096, IW_TERM_LAYER_RDMAP,
		  IW_TERM_RDMAP_ETYPE_REMOTE_PROT, IW_TERM_RDMAP_INV_STAG },
		{ "out of bounds", 0, rk_good, BIG - 100, 4096,
		  IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
		  IW_TERM_RDMAP_BASE_BOUNDS },
		{ "no remote read", IBV_ACCESS_LOCAL_WRITE |
		  IBV_ACCESS_REMOTE_WRITE, rk_good, 0, 4096,
		  IW_TERM_LAYER_RDMAP, IW_TERM_RDMAP_ETYPE_REMOTE_PROT,
		  IW_TERM_RDMAP_ACCESS },
	};
	unsigned i;

	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		run_werr(&w[i], 0);
	for (i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		run_werr(&r[i], 1);
}

static void test_no_recv(void)
{
	struct opts o = { .crc = 1 };
	struct pair p;
	struct iwe_term_info ts, tr;
	int other;

	pair_open(&p, &o);
	post_recv1(&p.a, 9, 0, 64);
	post_send1(&p.a, 1, IBV_WR_SEND, 0, 10, 0, 0, IBV_SEND_SIGNALED);
	pump(&p, 100);
	iwe_qp_terminate_info(p.b.qp, &ts, NULL);
	iwe_qp_terminate_info(p.a.qp, NULL, &tr);
	CHECK(ts.valid && ts.layer == IW_TERM_LAYER_DDP &&
	      ts.etype == IW_TERM_DDP_ETYPE_UNTAGGED &&
	      ts.ecode == IW_TERM_DDP_UNTAG_NO_BUF,
	      "no-recv: DDP untagged code 2 Terminate sent (%u/%u/%u)",
	      ts.layer, ts.etype, ts.ecode);
	CHECK(tr.valid && tr.ecode == IW_TERM_DDP_UNTAG_NO_BUF,
	      "no-recv: sender receives it");
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_ERROR &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR &&
	      count_status(p.a.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 1,
	      "no-recv: both QPs ERROR, sender's receive flushed");
	pair_close(&p);
}

static void test_peer_close(void)
{
	struct opts o = { .crc = 1, .relay = 1 };
	struct pair p;
	int other, err = 0;
	long i;

	pair_open(&p, &o);
	p.cut_after = 40;	/* inside the first FPDU */
	post_recv1(&p.b, 1, 0, 1000);
	post_recv1(&p.b, 2, 0, 1000);
	post_send1(&p.a, 3, IBV_WR_SEND, 0, 500, 0, 0, IBV_SEND_SIGNALED);
	for (i = 0; i < 2000 && !err; i++) {
		iwe_qp_progress_tx(p.a.qp);
		relay_step(&p);
		err = iwe_qp_progress_rx(p.b.qp);
	}
	CHECK(err == ECONNABORTED, "close: peer gone mid-FPDU -> ECONNABORTED "
	      "(%d)", err);
	CHECK(iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR &&
	      count_status(p.b.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 2 &&
	      !other, "close: QP ERROR, both receives flushed");
	CHECK(iwe_qp_progress_rx(p.b.qp) == ECONNABORTED,
	      "close: later progress keeps reporting it");
	pair_close(&p);

	/* Closed between FPDUs: ENOTCONN. */
	pair_open(&p, &(struct opts){ .crc = 0 });
	post_recv1(&p.b, 1, 0, 1000);
	close(p.a.fd);
	p.a.fd = -1;
	CHECK(iwe_qp_progress_rx(p.b.qp) == ENOTCONN &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR,
	      "close: clean close between FPDUs -> ENOTCONN, ERROR");
	pair_close(&p);
}

static void test_unsignaled(void)
{
	struct pair p;
	struct ibv_wc wc;
	int i, ok = 1;

	pair_open(&p, &(struct opts){ .crc = 0 });
	for (i = 0; i < 100; i++) {
		post_recv1(&p.b, (uint64_t)i, 0, 64);
		/* 32-deep SQ: only possible if unsignaled WRs retire. */
		ok &= post_send1(&p.a, (uint64_t)i, IBV_WR_SEND, 0, 8, 0, 0,
				 i % 10 == 9 ? IBV_SEND_SIGNALED : 0) == 0;
		pump(&p, 2);
		while (poll1(p.b.rcq, &wc))
			;
	}
	pump(&p, 10);
	CHECK(ok, "unsignaled: 100 sends through a 32-deep SQ");
	CHECK(iwe_cq_count(p.a.scq) == 10,
	      "unsignaled: only the 10 signaled WRs complete (%d)",
	      iwe_cq_count(p.a.scq));
	for (i = 0; i < 10 && ok; i++)
		ok = poll1(p.a.scq, &wc) && wc.wr_id == 10u * (unsigned)i + 9;
	CHECK(ok, "unsignaled: completions carry the signaled wr_ids");
	pair_close(&p);

	pair_open(&p, &(struct opts){ .crc = 0, .sig_all = 1 });
	post_recv1(&p.b, 1, 0, 64);
	post_send1(&p.a, 5, IBV_WR_SEND, 0, 8, 0, 0, 0);
	CHECK(pump_cq(&p, p.a.scq, 1) && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 5, "unsignaled: sq_sig_all completes every WR");
	pair_close(&p);
}

static void test_validation(void)
{
	struct side s;
	struct ibv_sge sg[5];
	struct ibv_send_wr wr = { 0 }, *bad = NULL;
	struct ibv_recv_wr rwr = { 0 }, *rbad = NULL;
	struct ibv_wc wc;
	int i, other;

	memset(&s, 0, sizeof(s));
	side_init(&s, 0, ALL_ACCESS);
	s.fd = -1;
	for (i = 0; i < 5; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)s.buf, 8, s.mr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 1, .sg_list = sg, .num_sge = 1,
				   .opcode = IBV_WR_SEND };
	CHECK(iwe_post_send(s.qp, &wr, &bad) == EINVAL && bad == &wr,
	      "validate: post send in RESET fails");
	CHECK(iwe_modify_qp(s.qp, IWE_QPS_RTS) == EINVAL,
	      "validate: RESET -> RTS refused");
	CHECK(iwe_modify_qp(s.qp, IWE_QPS_INIT) == 0 &&
	      iwe_modify_qp(s.qp, IWE_QPS_RTR) == 0 &&
	      iwe_modify_qp(s.qp, IWE_QPS_RTS) == 0 &&
	      iwe_modify_qp(s.qp, IWE_QPS_SQD) == 0 &&
	      iwe_modify_qp(s.qp, IWE_QPS_RTS) == 0,
	      "validate: INIT, RTR, RTS, SQD, RTS accepted");
	wr.num_sge = 5;
	CHECK(iwe_post_send(s.qp, &wr, &bad) == EINVAL && bad == &wr,
	      "validate: too many SGEs refused");
	wr.num_sge = 1;
	{
		struct ibv_send_wr w2 = wr, w3 = wr;

		wr.next = &w2;
		w2.next = &w3;
		w2.num_sge = 9;
		CHECK(iwe_post_send(s.qp, &wr, &bad) == EINVAL && bad == &w2,
		      "validate: chain stops at the bad WR, bad_wr names it");
		wr.next = NULL;
	}
	sg[0].lkey ^= 0x11;
	CHECK(iwe_post_send(s.qp, &wr, &bad) == EINVAL,
	      "validate: bad lkey refused");
	sg[0].lkey ^= 0x11;
	sg[0].length = BIG + 1;
	CHECK(iwe_post_send(s.qp, &wr, &bad) == EINVAL,
	      "validate: SGE beyond the MR refused");
	sg[0].length = 8;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK(iwe_post_send(s.qp, &wr, &bad) == EINVAL,
	      "validate: unsupported opcode refused");
	wr.opcode = IBV_WR_SEND;
	for (i = 0; i < 31; i++)	/* one is in from the chain */
		iwe_post_send(s.qp, &wr, &bad);
	CHECK(iwe_post_send(s.qp, &wr, &bad) == ENOMEM,
	      "validate: 33rd WR on a 32-deep SQ -> ENOMEM");
	rwr = (struct ibv_recv_wr){ .wr_id = 9, .sg_list = sg, .num_sge = 1 };
	CHECK(iwe_post_recv(s.qp, &rwr, &rbad) == 0, "validate: post recv");
	CHECK(iwe_modify_qp(s.qp, IWE_QPS_ERROR) == 0 &&
	      count_status(s.scq, IBV_WC_WR_FLUSH_ERR, &other) == 32 &&
	      count_status(s.rcq, IBV_WC_WR_FLUSH_ERR, &other) == 1,
	      "validate: ERROR flushes 32 sends and the receive");
	CHECK(iwe_post_recv(s.qp, &rwr, &rbad) == 0 && poll1(s.rcq, &wc) &&
	      wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 9,
	      "validate: a receive posted in ERROR flushes at once");
	CHECK(iwe_dealloc_pd(s.pd) == EBUSY && iwe_destroy_cq(s.scq) == EBUSY,
	      "validate: PD and CQ busy while the QP lives");
	CHECK(iwe_modify_qp(s.qp, IWE_QPS_RESET) == 0 &&
	      iwe_qp_get_state(s.qp) == IWE_QPS_RESET,
	      "validate: ERROR -> RESET");
	side_close(&s);
}

static int chan_event(struct iwe_comp_channel *ch)
{
	struct iwe_cq *cq;
	void *ctx;

	if (iwe_get_cq_event(ch, &cq, &ctx))
		return 0;
	iwe_ack_cq_events(cq, 1);
	return 1;
}

/* A receive CQ armed for solicited events fires for Send with SE only. */
static void test_solicited(void)
{
	struct iwe_comp_channel *ch = iwe_create_comp_channel(g_dev);
	struct pair p;
	struct ibv_wc wc;

	fcntl(ch->fd, F_SETFL, O_NONBLOCK);
	pair_open(&p, &(struct opts){ .crc = 1, .b_chan = ch });
	iwe_req_notify_cq(p.b.rcq, 1);
	post_recv1(&p.b, 1, 0, 64);
	post_recv1(&p.b, 2, 0, 64);
	post_send1(&p.a, 3, IBV_WR_SEND, 0, 8, 0, 0, 0);
	CHECK(pump_cq(&p, p.b.rcq, 1) && !chan_event(ch),
	      "solicited: plain Send does not wake a solicited-only CQ");
	post_send1(&p.a, 4, IBV_WR_SEND, 0, 8, 0, 0, IBV_SEND_SOLICITED);
	CHECK(pump_cq(&p, p.b.rcq, 2) && chan_event(ch),
	      "solicited: Send with SE does");
	CHECK(poll1(p.b.rcq, &wc) && wc.wr_id == 1 && poll1(p.b.rcq, &wc) &&
	      wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS,
	      "solicited: both receives complete in order");
	pair_close(&p);
	iwe_destroy_comp_channel(ch);
}

static int bytes_queued(int fd)
{
	int n = 0;

	ioctl(fd, FIONREAD, &n);
	return n;
}

/* A fenced WR waits for earlier Reads; an unfenced one does not. */
static void test_fence_and_sqd(void)
{
	struct pair p;
	struct ibv_wc wc;
	int rr = (int)iw_fpdu_len(sizeof(struct iw_read_req));
	int snd = (int)iw_fpdu_len(IW_UNTAGGED_HDR_LEN + 8);

	pair_open(&p, &(struct opts){ .crc = 1, .ord = 2, .ird = 2 });
	fill(p.b.buf, 4096, 9);
	post_recv1(&p.b, 1, 0, 64);
	post_recv1(&p.b, 2, 0, 64);
	post_send1(&p.a, 10, IBV_WR_RDMA_READ, 0, 512, (uintptr_t)p.b.buf,
		   p.b.mr->rkey, IBV_SEND_SIGNALED);
	post_send1(&p.a, 11, IBV_WR_SEND, 0, 8, 0, 0, IBV_SEND_SIGNALED);
	post_send1(&p.a, 12, IBV_WR_SEND, 0, 8, 0, 0,
		   IBV_SEND_SIGNALED | IBV_SEND_FENCE);
	iwe_qp_progress_tx(p.a.qp);
	CHECK(bytes_queued(p.b.fd) == rr + snd,
	      "fence: Read Request and unfenced Send out, fenced Send held "
	      "(%d bytes queued, want %d)", bytes_queued(p.b.fd), rr + snd);
	CHECK(pump_cq(&p, p.a.scq, 3) && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 10 && poll1(p.a.scq, &wc) && wc.wr_id == 11 &&
	      poll1(p.a.scq, &wc) && wc.wr_id == 12 &&
	      wc.status == IBV_WC_SUCCESS,
	      "fence: all complete in order once the Read is done");

	/* SQD: posted WRs wait; back to RTS they go. */
	CHECK(iwe_modify_qp(p.a.qp, IWE_QPS_SQD) == 0,
	      "sqd: RTS -> SQD");
	post_recv1(&p.b, 3, 0, 64);
	post_send1(&p.a, 13, IBV_WR_SEND, 0, 8, 0, 0, IBV_SEND_SIGNALED);
	pump(&p, 20);
	CHECK(iwe_cq_count(p.a.scq) == 0 && bytes_queued(p.b.fd) == 0,
	      "sqd: a Send posted in SQD is not transmitted");
	CHECK(iwe_modify_qp(p.a.qp, IWE_QPS_RTS) == 0 &&
	      pump_cq(&p, p.a.scq, 1) && pump_cq(&p, p.b.rcq, 3),
	      "sqd: back in RTS it goes out");
	/* Zero-length Read (what a Read RTR looks like). */
	while (poll1(p.a.scq, &wc))
		;
	post_send1(&p.a, 14, IBV_WR_RDMA_READ, 0, 0, 0, 0,
		   IBV_SEND_SIGNALED);
	CHECK(pump_cq(&p, p.a.scq, 1) && poll1(p.a.scq, &wc) &&
	      wc.wr_id == 14 && wc.status == IBV_WC_SUCCESS &&
	      wc.byte_len == 0, "read: zero-length Read completes");
	pair_close(&p);
}

/* Posting from this thread while another one drives progress. */
struct prog_arg {
	struct pair *p;
	atomic_int stop;
};

static void *progress_thread(void *v)
{
	struct prog_arg *a = v;

	while (!atomic_load(&a->stop)) {
		iwe_qp_progress_tx(a->p->a.qp);
		iwe_qp_progress_rx(a->p->b.qp);
		iwe_qp_progress_tx(a->p->b.qp);
		iwe_qp_progress_rx(a->p->a.qp);
	}
	return NULL;
}

static void test_threads(void)
{
	enum { N = 3000, WIN = 16 };
	struct pair p;
	struct prog_arg arg = { .p = NULL };
	pthread_t th;
	struct ibv_wc wc;
	int sent = 0, got = 0, ok = 1, r;
	time_t give_up = time(NULL) + 120;	/* slow under valgrind */

	pair_open(&p, &(struct opts){ .crc = 1, .mulpdu = 512 });
	arg.p = &p;
	pthread_create(&th, NULL, progress_thread, &arg);
	while (got < N && time(NULL) < give_up) {
		sched_yield();	/* valgrind runs one thread at a time */
		while (poll1(p.b.rcq, &wc)) {
			uint32_t v;

			memcpy(&v, p.b.buf + (wc.wr_id % 32) * 1024, 4);
			ok &= wc.status == IBV_WC_SUCCESS &&
			      wc.wr_id == (uint64_t)got && v == (uint32_t)got &&
			      wc.byte_len == 700;
			got++;
		}
		while (poll1(p.a.scq, &wc))
			ok &= wc.status == IBV_WC_SUCCESS;
		if (sent == N || sent - got >= WIN)
			continue;
		memcpy(p.a.buf + (sent % 32) * 1024, &sent, 4);
		post_recv1(&p.b, (uint64_t)sent, (size_t)(sent % 32) * 1024,
			   1024);
		r = post_send1(&p.a, (uint64_t)sent, IBV_WR_SEND,
			       (size_t)(sent % 32) * 1024, 700, 0, 0,
			       sent % 8 == 7 ? IBV_SEND_SIGNALED : 0);
		ok &= r == 0;
		sent++;
	}
	atomic_store(&arg.stop, 1);
	pthread_join(th, NULL);
	CHECK(ok && got == N,
	      "threads: %d sends posted while another thread drives "
	      "progress arrive in order (%d)", N, got);
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_RTS &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_RTS,
	      "threads: both QPs still RTS");
	pair_close(&p);
}

#define RING_PROBE (16u << 10)	/* a ring size to ask whether rings work */

/* A stream of Writes whose FPDUs end anywhere in the receive buffer
 * (60 B to a full 64 KiB FPDU, mixed): every byte lands where it
 * belongs, and the buffer, a mirrored ring, never moves a partly read
 * FPDU to its front (CRC on: 81 % of 64 KiB Writes' bytes were moved so
 * by the flat buffer). */
static void test_ring_wrap(int crc)
{
	static const uint32_t sizes[] = { 65536, 60, 4096, 17000, 65512,
					  1, 40000, 300, 65536, 9000 };
	enum { N = 160, WIN = 8 };
	const size_t span = BIG - 70000;	/* destinations wrap here */
	struct pair p;
	struct ibv_wc wc;
	struct iwe_qp_stats st;
	uint8_t *probe;
	size_t off = 0, covered = 0;
	int posted = 0, done = 0, ok = 1;

	pair_open(&p, &(struct opts){ .crc = crc });
	fill(p.a.buf, BIG, 31 + (unsigned)crc);
	memset(p.b.buf, 0, BIG);
	while (done < N && ok) {
		while (posted < N && posted - done < WIN) {
			uint32_t len = sizes[posted % 10];

			ok &= post_send1(&p.a, (uint64_t)posted,
					 IBV_WR_RDMA_WRITE, off, len,
					 (uintptr_t)(p.b.buf + off),
					 p.b.mr->rkey, IBV_SEND_SIGNALED) == 0;
			covered += len;
			off = (off + len) % span;
			posted++;
		}
		ok &= pump_cq(&p, p.a.scq, 1) && poll1(p.a.scq, &wc) &&
		      wc.status == IBV_WC_SUCCESS;
		done++;
	}
	/* A Send behind them: once it is in, every Write is placed. */
	ok &= post_recv1(&p.b, 999, BIG - 64, 64) == 0 &&
	      post_send1(&p.a, 999, IBV_WR_SEND, 0, 8, 0, 0, 0) == 0 &&
	      pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.status == IBV_WC_SUCCESS;
	CHECK(ok && covered > span && memcmp(p.a.buf, p.b.buf, span) == 0,
	      "ring, CRC %s: %d Writes of 1 B to 64 KiB, %zu bytes, placed "
	      "intact", crc ? "on" : "off", N, covered);
	iwe_qp_query_stats(p.b.qp, &st);
	probe = iw_vring_map(RING_PROBE);
	if (!probe) {
		/* AddressSanitizer builds keep the flat buffer (iw_vring.c). */
		CHECK(1, "# SKIP ring, CRC %s: no mirrored ring here (%s)",
		      crc ? "on" : "off", strerror(errno));
	} else {
		iw_vring_unmap(probe, RING_PROBE);
		CHECK(st.rx_moved == 0 && st.crc_errors == 0,
		      "ring, CRC %s: no receive buffer move (%llu bytes moved)",
		      crc ? "on" : "off", (unsigned long long)st.rx_moved);
	}
	pair_close(&p);
}

int main(void)
{
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_validation();
	test_send_sizes(&(struct opts){ .crc = 0 }, "nocrc");
	test_send_sizes(&(struct opts){ .crc = 1, .mulpdu = 1460 }, "crc");
	test_send_sizes(&(struct opts){ .crc = 1, .sndbuf = 4096 },
			"short-writes");
	test_sgl();
	test_sgl_rdma();
	test_write_then_send();
	test_spares_given_back();
	test_reads(4);
	test_reads(3);
	test_reads(1);
	test_send_inv();
	test_byte_relay();
	test_byte_relay_plain();
	test_bad_crc();
	test_access_errors();
	test_no_recv();
	test_peer_close();
	test_unsignaled();
	test_solicited();
	test_fence_and_sqd();
	test_threads();
	test_ring_wrap(1);
	test_ring_wrap(0);
	iwe_device_close(g_dev);
	return tap_done();
}

