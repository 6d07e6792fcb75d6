/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Regression test: with MPA CRC on, a consumer that writes to a source
 * buffer while an operation reading it is in flight (RDMA Semantics leave
 * the data undefined then; Debian's dtest does it) must not break the
 * connection.  The CRC has to cover exactly the bytes put on the wire: if
 * it were computed over the consumer's memory and the kernel then copied
 * that memory again, the peer would see a bad CRC and send an MPA CRC
 * Terminate.
 *
 * A scribbler thread keeps rewriting the source regions while large RDMA
 * Writes (a -> b), RDMA Reads (a reads b's memory: b's Read Responses
 * come from the scribbled region) and Sends (a -> b) run with CRC on,
 * over small socket buffers so that every FPDU leaves in many short
 * writes (the window between framing and the kernel's copy is then
 * long).  Another thread drives progress.  Every WR must complete
 * successfully, both QPs must stay in RTS, and no Terminate may be sent.
 * TAP output. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "qp_harness.h"

#define XFER (256u << 10)	/* bytes per operation */
#define SRC_OFF 0		/* a: Write/Send source; b: Read source */
#define DST_OFF (512u << 10)	/* b: Write target and receive buffers */
#define READ_DST (512u << 10)	/* a: Read sink */

struct ctl {
	struct pair *p;
	atomic_int stop;
	atomic_long scribbles;
};

static void *progress_thread(void *v)
{
	struct ctl *c = v;

	while (!atomic_load(&c->stop)) {
		iwe_qp_progress_tx(c->p->a.qp);
		iwe_qp_progress_rx(c->p->b.qp);
		iwe_qp_progress_tx(c->p->b.qp);
		iwe_qp_progress_rx(c->p->a.qp);
		sched_yield();	/* valgrind runs one thread at a time */
	}
	return NULL;
}

/* Rewrites both source regions, word by word, with ever-changing values
 * (volatile: every store happens, at no particular moment). */
static void *scribbler(void *v)
{
	struct ctl *c = v;
	volatile uint32_t *a = (volatile uint32_t *)(void *)(c->p->a.buf + SRC_OFF);
	volatile uint32_t *b = (volatile uint32_t *)(void *)(c->p->b.buf + SRC_OFF);
	uint32_t k = 1;

	while (!atomic_load(&c->stop)) {
		for (size_t i = 0; i < XFER / 4; i += 7) {
			a[i] = k * 2654435761u + (uint32_t)i;
			b[i] = k * 40503u ^ (uint32_t)i;
		}
		k++;
		atomic_fetch_add(&c->scribbles, 1);
		sched_yield();
	}
	return NULL;
}

/* Wait until cq has produced n completions, counting the failed ones. */
static int reap(struct iwe_cq *cq, int n, int *bad, time_t give_up)
{
	struct ibv_wc wc;
	int got = 0;

	while (got < n && time(NULL) < give_up) {
		if (!poll1(cq, &wc)) {
			sched_yield();
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			(*bad)++;
		got++;
	}
	return got;
}

static void run(const char *what, enum ibv_wr_opcode op, int rounds,
		uint32_t mulpdu, int sndbuf)
{
	struct pair p;
	struct ctl c = { .p = NULL };
	pthread_t pt, st;
	struct iwe_term_info sa, ra, sb, rb;
	time_t give_up = time(NULL) + 120;	/* slow under valgrind */
	int posted = 0, done = 0, recvd = 0, bad = 0, r, i;

	pair_open(&p, &(struct opts){ .crc = 1, .mulpdu = mulpdu,
				      .sndbuf = sndbuf, .ird = 4, .ord = 4 });
	c.p = &p;
	fill(p.a.buf, BIG, 1);
	fill(p.b.buf, BIG, 2);
	pthread_create(&pt, NULL, progress_thread, &c);
	pthread_create(&st, NULL, scribbler, &c);
	for (i = 0; i < rounds && time(NULL) < give_up; i++) {
		if (op == IBV_WR_SEND &&
		    post_recv1(&p.b, (uint64_t)i, DST_OFF, XFER))
			break;
		if (op == IBV_WR_RDMA_READ)
			r = post_send1(&p.a, (uint64_t)i, op, READ_DST, XFER,
				       (uintptr_t)(p.b.buf + SRC_OFF),
				       p.b.mr->rkey, IBV_SEND_SIGNALED);
		else
			r = post_send1(&p.a, (uint64_t)i, op, SRC_OFF, XFER,
				       (uintptr_t)(p.b.buf + DST_OFF),
				       p.b.mr->rkey, IBV_SEND_SIGNALED);
		if (r)
			break;
		posted++;
		/* Keep a few in flight; the scribbler runs all along. */
		if (posted - done >= 3)
			done += reap(p.a.scq, 1, &bad, give_up);
	}
	done += reap(p.a.scq, posted - done, &bad, give_up);
	if (op == IBV_WR_SEND)
		recvd = reap(p.b.rcq, posted, &bad, give_up);
	atomic_store(&c.stop, 1);
	pthread_join(st, NULL);
	pthread_join(pt, NULL);
	iwe_qp_terminate_info(p.a.qp, &sa, &ra);
	iwe_qp_terminate_info(p.b.qp, &sb, &rb);
	CHECK(posted == rounds && done == posted && bad == 0 &&
	      (op != IBV_WR_SEND || recvd == posted),
	      "%s: %d of %d ops of %u KiB completed successfully while the "
	      "source was rewritten %ld times (%d failed)", what, done, rounds,
	      XFER >> 10, atomic_load(&c.scribbles), bad);
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_RTS &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_RTS,
	      "%s: both QPs still RTS", what);
	CHECK(!sa.valid && !sb.valid,
	      "%s: no Terminate sent (a: %d %u/%u/0x%02x, b: %d %u/%u/0x%02x)",
	      what, sa.valid, sa.layer, sa.etype, sa.ecode, sb.valid, sb.layer,
	      sb.etype, sb.ecode);
	pair_close(&p);
}

/* The fused copy-and-CRC helpers give the CRC of the bytes copied. */
static void test_copy_crc(void)
{
	static char src[20000], dst[20000];
	size_t lens[] = { 0, 1, 7, 8, 100, 1535, 1536, 6144, 6145, 20000 };
	int ok = 1;

	fill(src, sizeof(src), 3);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint32_t want = iw_crc32c(0x1234u, src + 0, lens[i]);

		memset(dst, 0, sizeof(dst));
		ok &= iw_crc32c_copy(0x1234u, dst, src, lens[i]) == want &&
		      !memcmp(dst, src, lens[i]);
		memset(dst, 0, sizeof(dst));
		ok &= iw_crc32c_copy_src(0x1234u, dst, src, lens[i]) == want &&
		      !memcmp(dst, src, lens[i]);
	}
	CHECK(ok, "iw_crc32c_copy / _copy_src copy and chain the CRC");
}

int main(void)
{
	if (under_valgrind()) {
		printf("1..0 # SKIP three racing threads under valgrind; ASan build covers it\n");
		return 0;
	}
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_copy_crc();
	run("write", IBV_WR_RDMA_WRITE, 40, 0, 8192);
	run("read", IBV_WR_RDMA_READ, 40, 0, 8192);
	run("send", IBV_WR_SEND, 40, 0, 8192);
	run("write, MULPDU 1460", IBV_WR_RDMA_WRITE, 20, 1460, 4096);
	run("write, default buffers", IBV_WR_RDMA_WRITE, 100, 0, 0);
	iwe_device_close(g_dev);
	return tap_done();
}
