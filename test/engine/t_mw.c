/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Engine memory-window binds posted on a send queue (IBV_WR_BIND_MW):
 * bind and unbind in order with other WRs, the rkey handed back at post
 * time, remote Write and Read through the window and their failure after
 * unbind or outside it, the pins a pending bind holds, the flush rule,
 * Send with Invalidate of a window, and a window as an RDMA Read sink.
 * Runs over qp_harness.h's socket pair.  TAP output. */
#include "qp_harness.h"

#define RW (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

static int post_bind(struct side *s, struct iwe_mw *mw, struct iwe_mr *mr,
		     uint64_t addr, uint64_t len, unsigned access,
		     uint64_t id, unsigned flags, uint32_t *rkey)
{
	struct ibv_send_wr wr, *bad = NULL;
	int err;

	memset(&wr, 0, sizeof(wr));
	iwe_wr_set_bind_mw(&wr, mw, mr, addr, len, access);
	wr.wr_id = id;
	wr.send_flags = flags;
	wr.bind_mw.rkey = 0xdeadbeef;	/* overwritten by the engine */
	err = iwe_post_send(s->qp, &wr, &bad);
	if (rkey)
		*rkey = wr.bind_mw.rkey;
	return err;
}

/* The active side sends 16 bytes with Invalidate of rkey. */
static int post_send_inv(struct pair *p, uint64_t id, uint32_t rkey)
{
	struct ibv_sge sg = { (uintptr_t)p->a.buf, 16, p->a.mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = rkey;
	return iwe_post_send(p->a.qp, &wr, &bad);
}

static int wc_is(struct iwe_cq *cq, uint64_t id, enum ibv_wc_status st,
		 enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	if (!poll1(cq, &wc))
		return 0;
	return wc.wr_id == id && wc.status == st &&
	       (st != IBV_WC_SUCCESS || wc.opcode == op);
}

/* The active side RDMA-Writes len bytes from its buffer's start to wva
 * under rkey; 1 when that completes successfully. */
static int write_completes(struct pair *p, uint64_t id, uint32_t len,
			   uint64_t wva, uint32_t rkey)
{
	return post_send1(&p->a, id, IBV_WR_RDMA_WRITE, 0, len, wva, rkey,
			  IBV_SEND_SIGNALED) == 0 && pump_cq(p, p->a.scq, 1) &&
	       wc_is(p->a.scq, id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

static int term_is(struct iwe_qp *qp, uint8_t layer, uint8_t etype,
		   uint8_t ecode)
{
	struct iwe_term_info ts;

	iwe_qp_terminate_info(qp, &ts, NULL);
	return ts.valid && ts.layer == layer && ts.etype == etype &&
	       ts.ecode == ecode;
}

/* ------------------------------------------------------------ tests */

static void test_post_checks(void)
{
	struct opts o = { 0 };
	struct pair p;
	struct iwe_mw *mw;
	struct iwe_mr *nobind;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg = { 0 };

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	nobind = iwe_reg_mr(p.b.pd, p.b.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(post_bind(&p.b, mw, p.a.mr, (uintptr_t)p.a.buf, 64, RW, 1, 0,
			NULL) == EINVAL, "bind to an MR of another PD -> EINVAL");
	CHECK(post_bind(&p.a, mw, p.a.mr, (uintptr_t)p.a.buf, 64, RW, 1, 0,
			NULL) == EINVAL, "bind a window of another PD -> EINVAL");
	CHECK(post_bind(&p.b, mw, p.b.mr, (uintptr_t)p.b.buf + BIG - 8, 16,
			RW, 1, 0, NULL) == EINVAL,
	      "bind beyond the MR -> EINVAL");
	CHECK(post_bind(&p.b, mw, nobind, (uintptr_t)p.b.buf, 16,
			IBV_ACCESS_REMOTE_READ, 1, 0, NULL) == EINVAL,
	      "bind over an MR without MW_BIND -> EINVAL");
	CHECK(post_bind(&p.b, mw, p.b.mr, (uintptr_t)p.b.buf, 16,
			IBV_ACCESS_LOCAL_WRITE, 1, 0, NULL) == EINVAL,
	      "local rights in a bind -> EINVAL");
	memset(&wr, 0, sizeof(wr));
	iwe_wr_set_bind_mw(&wr, mw, p.b.mr, (uintptr_t)p.b.buf, 16, RW);
	wr.sg_list = &sg;
	wr.num_sge = 1;
	CHECK(iwe_post_send(p.b.qp, &wr, &bad) == EINVAL && bad == &wr,
	      "bind with SGEs -> EINVAL");
	CHECK(iwe_cq_count(p.b.scq) == 0 && mw->rkey == 0,
	      "refused binds leave no trace");
	iwe_dereg_mr(nobind);
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

static void test_bind_write_read_unbind(void)
{
	struct opts o = { .crc = 1, .ord = 4, .ird = 4 };
	struct pair p;
	struct iwe_mw *mw;
	uint32_t rkey = 0, rkey2 = 0, urkey = 1;
	uint64_t wva;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	wva = (uintptr_t)p.b.buf + 65536;
	CHECK(post_bind(&p.b, mw, p.b.mr, wva, 8192, RW, 1, IBV_SEND_SIGNALED,
			&rkey) == 0 && rkey != 0 && rkey != 0xdeadbeef,
	      "bind posted; the new rkey comes back in the WR (0x%x)", rkey);
	CHECK(pump_cq(&p, p.b.scq, 1) &&
	      wc_is(p.b.scq, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW),
	      "bind completes with IBV_WC_BIND_MW");
	CHECK(mw->rkey == rkey && IWE_STAG_INDEX(rkey) ==
	      IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub)->index,
	      "the window answers to the new rkey, on its own index");
	fill(p.a.buf, 8192, 5);
	CHECK(write_completes(&p, 2, 8192, wva, rkey),
	      "peer's RDMA Write through the window completes");
	pump(&p, 20);
	CHECK(memcmp(p.b.buf + 65536, p.a.buf, 8192) == 0,
	      "the Write landed in the window's memory");
	memset(p.a.buf, 0, 8192);
	CHECK(post_send1(&p.a, 3, IBV_WR_RDMA_READ, 0, 4096, wva + 4096, rkey,
			 IBV_SEND_SIGNALED) == 0 && pump_cq(&p, p.a.scq, 1) &&
	      wc_is(p.a.scq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ) &&
	      memcmp(p.a.buf, p.b.buf + 65536 + 4096, 4096) == 0,
	      "peer's RDMA Read through the window returns its bytes");
	/* Rebind: a new key; the old STag stops working. */
	CHECK(post_bind(&p.b, mw, p.b.mr, wva, 4096, IBV_ACCESS_REMOTE_READ, 4,
			IBV_SEND_SIGNALED, &rkey2) == 0 && rkey2 != rkey &&
	      IWE_STAG_INDEX(rkey2) == IWE_STAG_INDEX(rkey) &&
	      pump_cq(&p, p.b.scq, 1) &&
	      wc_is(p.b.scq, 4, IBV_WC_SUCCESS, IBV_WC_BIND_MW),
	      "rebind: same index, new key");
	CHECK(iwe_mr_check(g_dev, p.b.pd, rkey, wva, 8,
			   IBV_ACCESS_REMOTE_READ, NULL) == IWE_ACCESS_BAD_STAG,
	      "the old rkey no longer resolves");
	/* Unbind through the send queue: length 0. */
	CHECK(post_bind(&p.b, mw, NULL, 0, 0, 0, 5, IBV_SEND_SIGNALED,
			&urkey) == 0 && urkey == 0 && pump_cq(&p, p.b.scq, 1) &&
	      wc_is(p.b.scq, 5, IBV_WC_SUCCESS, IBV_WC_BIND_MW) &&
	      mw->rkey == 0, "unbind (length 0) completes; rkey 0");
	CHECK(post_bind(&p.b, mw, NULL, 0, 0, 0, 6, IBV_SEND_SIGNALED,
			NULL) == 0 && pump_cq(&p, p.b.scq, 1) &&
	      wc_is(p.b.scq, 6, IBV_WC_SUCCESS, IBV_WC_BIND_MW),
	      "unbinding an unbound window succeeds");
	CHECK(iwe_dereg_mr(p.b.mr) == 0, "nothing pins the MR any more");
	/* dereg above succeeded: register again for the harness. */
	p.b.mr = iwe_reg_mr(p.b.pd, p.b.buf, BIG, ALL_ACCESS);
	CHECK(post_send1(&p.a, 7, IBV_WR_RDMA_READ, 0, 64, wva, rkey2,
			 IBV_SEND_SIGNALED) == 0 && pump_cq(&p, p.a.scq, 1) &&
	      wc_is(p.a.scq, 7, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ),
	      "a Read through the unbound window fails: remote access error");
	CHECK(term_is(p.b.qp, IW_TERM_LAYER_RDMAP,
		      IW_TERM_RDMAP_ETYPE_REMOTE_PROT, IW_TERM_RDMAP_INV_STAG),
	      "its Terminate: RDMAP protection, invalid STag");
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

static void test_write_errors(void)
{
	struct opts o = { 0 };
	struct pair p;
	struct iwe_mw *mw;
	uint32_t rkey = 0;
	uint64_t wva;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	wva = (uintptr_t)p.b.buf + 4096;
	post_bind(&p.b, mw, p.b.mr, wva, 4096, IBV_ACCESS_REMOTE_READ, 1, 0,
		  &rkey);
	pump(&p, 10);
	CHECK(post_send1(&p.a, 2, IBV_WR_RDMA_WRITE, 0, 16, wva, rkey,
			 IBV_SEND_SIGNALED) == 0, "Write to a read-only window");
	pump(&p, 200);
	CHECK(term_is(p.b.qp, IW_TERM_LAYER_RDMAP,
		      IW_TERM_RDMAP_ETYPE_REMOTE_PROT, IW_TERM_RDMAP_ACCESS) &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR,
	      "-> RDMAP access-rights Terminate");
	iwe_dealloc_mw(mw);
	pair_close(&p);

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	wva = (uintptr_t)p.b.buf;
	post_bind(&p.b, mw, p.b.mr, wva, 4096, RW, 1, 0, &rkey);
	pump(&p, 10);
	CHECK(post_send1(&p.a, 2, IBV_WR_RDMA_WRITE, 0, 64, wva + 4090, rkey,
			 IBV_SEND_SIGNALED) == 0, "Write across the window's end");
	pump(&p, 200);
	CHECK(term_is(p.b.qp, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
		      IW_TERM_DDP_TAG_BASE_BOUNDS),
	      "-> DDP tagged base/bounds Terminate");
	CHECK(memcmp(p.b.buf + 4096, "\0\0\0\0\0\0\0\0", 8) == 0,
	      "nothing written past the window");
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

/* A bind that waits (the QP is in SQD) pins its window and MR; a flush
 * completes it in error and leaves the window unbound. */
static void test_pending_and_flush(void)
{
	struct opts o = { 0 };
	struct pair p;
	struct iwe_mw *mw;
	uint32_t rkey = 0, rkey2 = 0;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	post_bind(&p.b, mw, p.b.mr, (uintptr_t)p.b.buf, 4096, RW, 1, 0, &rkey);
	pump(&p, 10);
	CHECK(mw->rkey == rkey && rkey, "window bound");
	CHECK(iwe_modify_qp(p.b.qp, IWE_QPS_SQD) == 0, "QP to SQD");
	CHECK(post_bind(&p.b, mw, p.b.mr, (uintptr_t)p.b.buf + 8192, 4096, RW,
			2, IBV_SEND_SIGNALED, &rkey2) == 0 && rkey2 &&
	      rkey2 != rkey, "a rebind is accepted in SQD, rkey known at once");
	pump(&p, 10);
	CHECK(mw->rkey == rkey && iwe_cq_count(p.b.scq) == 0,
	      "it waits: the window keeps its old STag");
	CHECK(iwe_dealloc_mw(mw) == EBUSY && iwe_dereg_mr(p.b.mr) == EBUSY,
	      "a pending bind pins the window and the MR (EBUSY)");
	CHECK(iwe_modify_qp(p.b.qp, IWE_QPS_ERROR) == 0 &&
	      wc_is(p.b.scq, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_BIND_MW),
	      "ERROR flushes the bind");
	CHECK(mw->rkey == 0 &&
	      iwe_mr_check(g_dev, p.b.pd, rkey, (uintptr_t)p.b.buf, 8,
			   IBV_ACCESS_REMOTE_READ, NULL) == IWE_ACCESS_BAD_STAG,
	      "the flushed bind left the window unbound");
	CHECK(iwe_dealloc_mw(mw) == 0, "and the window can be freed");
	pair_close(&p);
}

static void test_order_and_unsignaled(void)
{
	struct opts o = { 0 };
	struct pair p;
	struct iwe_mw *mw;
	uint32_t rkey = 0;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	post_recv1(&p.a, 10, 0, 64);
	CHECK(iwe_modify_qp(p.b.qp, IWE_QPS_SQD) == 0 &&
	      post_bind(&p.b, mw, p.b.mr, (uintptr_t)p.b.buf, 64, RW, 1, 0,
			&rkey) == 0 &&
	      post_send1(&p.b, 2, IBV_WR_SEND, 0, 8, 0, 0,
			 IBV_SEND_SIGNALED) == 0 &&
	      post_bind(&p.b, mw, NULL, 0, 0, 0, 3, IBV_SEND_SIGNALED,
			NULL) == 0, "queue: unsignaled bind, send, unbind");
	iwe_modify_qp(p.b.qp, IWE_QPS_RTS);
	CHECK(pump_cq(&p, p.b.scq, 2) &&
	      wc_is(p.b.scq, 2, IBV_WC_SUCCESS, IBV_WC_SEND) &&
	      wc_is(p.b.scq, 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW) &&
	      iwe_cq_count(p.b.scq) == 0,
	      "completions in order; the unsignaled bind is silent");
	CHECK(mw->rkey == 0, "the final unbind took effect last");
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

static void test_send_inv_window(void)
{
	struct opts o = { .crc = 1 };
	struct pair p;
	struct iwe_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey = 0;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	post_bind(&p.b, mw, p.b.mr, (uintptr_t)p.b.buf, 4096, RW, 1, 0, &rkey);
	pump(&p, 10);
	post_recv1(&p.b, 2, 8192, 64);
	CHECK(post_send_inv(&p, 3, rkey) == 0,
	      "Send with Invalidate of a window bound by a WR");
	CHECK(pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
	      wc.invalidated_rkey == rkey && mw->rkey == 0,
	      "receiver reports it; the window is unbound");
	CHECK(iwe_dereg_mr(p.b.mr) == 0, "the MR is no longer pinned");
	p.b.mr = iwe_reg_mr(p.b.pd, p.b.buf, BIG, ALL_ACCESS);
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

/* A Write that passed leaves its STag check cached in the target QP; the
 * window's invalidation (here the peer's Send with Invalidate, on the
 * same QP) must end that: the next Write to the same STag, inside the old
 * bounds, is refused and writes nothing. */
static void test_stale_after_invalidate(void)
{
	static const char zero[64];
	struct opts o = { 0 };
	struct pair p;
	struct iwe_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey = 0;
	uint64_t wva;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.b.pd);
	wva = (uintptr_t)p.b.buf;
	post_bind(&p.b, mw, p.b.mr, wva, 4096, RW, 1, 0, &rkey);
	pump(&p, 10);
	fill(p.a.buf, 64, 3);
	CHECK(write_completes(&p, 2, 64, wva, rkey),
	      "stale STag: a Write to the window completes");
	pump(&p, 20);
	CHECK(memcmp(p.b.buf, p.a.buf, 64) == 0,
	      "stale STag: and lands (its check is cached)");
	post_recv1(&p.b, 3, 8192, 64);
	CHECK(post_send_inv(&p, 4, rkey) == 0 &&
	      pump_cq(&p, p.b.rcq, 1) && poll1(p.b.rcq, &wc) &&
	      wc.status == IBV_WC_SUCCESS && mw->rkey == 0,
	      "stale STag: the peer invalidates the window");
	CHECK(post_send1(&p.a, 5, IBV_WR_RDMA_WRITE, 0, 64, wva + 1024, rkey,
			 IBV_SEND_SIGNALED) == 0,
	      "stale STag: a second Write to it, inside the old bounds");
	pump(&p, 200);
	CHECK(term_is(p.b.qp, IW_TERM_LAYER_DDP, IW_TERM_DDP_ETYPE_TAGGED,
		      IW_TERM_DDP_TAG_INV_STAG) &&
	      memcmp(p.b.buf + 1024, zero, sizeof(zero)) == 0,
	      "stale STag: -> invalid-STag Terminate, nothing written");
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

/* iWARP places Read Responses through the sink STag: a window that grants
 * remote write may be the sink. */
static void test_read_to_window(void)
{
	struct opts o = { .ord = 2, .ird = 2 };
	struct pair p;
	struct iwe_mw *mw;
	uint32_t rkey = 0;
	struct ibv_sge sg;
	struct ibv_send_wr wr, *bad;

	pair_open(&p, &o);
	mw = iwe_alloc_mw(p.a.pd);
	post_bind(&p.a, mw, p.a.mr, (uintptr_t)p.a.buf + 4096, 4096,
		  IBV_ACCESS_REMOTE_WRITE, 1, 0, &rkey);
	pump(&p, 10);
	fill(p.b.buf, 1024, 9);
	sg = (struct ibv_sge){ (uintptr_t)p.a.buf + 4096 + 100, 1024, rkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)p.b.buf;
	wr.wr.rdma.rkey = p.b.mr->rkey;
	CHECK(iwe_post_send(p.a.qp, &wr, &bad) == 0 &&
	      pump_cq(&p, p.a.scq, 1) &&
	      wc_is(p.a.scq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ) &&
	      memcmp(p.a.buf + 4096 + 100, p.b.buf, 1024) == 0,
	      "RDMA Read into a remote-writable window");
	post_bind(&p.a, mw, p.a.mr, (uintptr_t)p.a.buf + 4096, 4096,
		  IBV_ACCESS_REMOTE_READ, 3, 0, &rkey);
	pump(&p, 10);
	sg.lkey = rkey;
	CHECK(iwe_post_send(p.a.qp, &wr, &bad) == EINVAL,
	      "a read-only window is no Read sink -> EINVAL");
	sg.lkey = rkey;
	sg.addr = (uintptr_t)p.a.buf + 8000;
	CHECK(iwe_post_send(p.a.qp, &wr, &bad) == EINVAL,
	      "nor is a sink outside the window");
	iwe_dealloc_mw(mw);
	pair_close(&p);
}

int main(void)
{
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_post_checks();
	test_bind_write_read_unbind();
	test_write_errors();
	test_pending_and_flush();
	test_order_and_unsignaled();
	test_send_inv_window();
	test_stale_after_invalidate();
	test_read_to_window();
	iwe_device_close(g_dev);
	return tap_done();
}
