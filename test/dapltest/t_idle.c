/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A connection that goes quiet gives back what its traffic allocated --
 * the engine's queues, and the DAT layer's work slots once nothing it
 * posted is outstanding (ep_qp.c, IWE_EVENT_QP_IDLE) -- and takes them
 * again at its next post.  Checked here from the outside: after each
 * quiet spell every completion still names its own cookie and length,
 * in order, and the data is whole; a receive posted before the spell,
 * and a Write posted without a completion of its own before it, are
 * still accounted for after it (their slots must not go).  The
 * give-back itself is checked in the engine's t_cm; under AddressSanitizer
 * a slot freed while in use would fail here.  Over tcp here, over udp
 * in dapltest_progs_udp.sh. */
#include "tside.h"

#include <time.h>

#define QUIET_MS 2500		/* past the engine's idle period (1-2 s) */
#define SEND_OFF 0
#define RECV_OFF 65536
#define WRITE_OFF (128u << 10)
#define READ_OFF (256u << 10)
#define WRITE_LEN 4096

static struct side S, C;	/* S: the server, C: the client */
static DAT_PSP_HANDLE psp;
static DAT_CONN_QUAL qual;

static void quiet(void)
{
	nanosleep(&(struct timespec){ .tv_sec = QUIET_MS / 1000,
				      .tv_nsec = QUIET_MS % 1000 * 1000000L },
		  NULL);
}

/* One round from C: a Send into S's receive, a Write, a Read of it back;
 * every completion with its cookie (base + 0..3) and the data whole. */
static int round_trip(uint64_t base, unsigned seed)
{
	DAT_LMR_TRIPLET wl = side_lseg(&C, WRITE_OFF, WRITE_LEN);
	DAT_LMR_TRIPLET rl = side_lseg(&C, READ_OFF, WRITE_LEN);
	DAT_RMR_TRIPLET rr = side_rseg(&S, WRITE_OFF, WRITE_LEN);
	int ok = 1;

	side_fill(C.buf + SEND_OFF, 64, seed);
	side_fill(C.buf + WRITE_OFF, WRITE_LEN, seed + 1);
	memset(C.buf + READ_OFF, 0, WRITE_LEN);
	ok &= side_recv(&S, RECV_OFF, 64, base) == DAT_SUCCESS;
	ok &= side_send(&C, SEND_OFF, 64, base + 1) == DAT_SUCCESS;
	ok &= dat_ep_post_rdma_write(C.ep, 1, &wl, side_ck(base + 2), &rr,
				     DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS;
	ok &= dat_ep_post_rdma_read(C.ep, 1, &rl, side_ck(base + 3), &rr,
				    DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS;
	ok &= side_dto_ok(S.rcv, base, 64);
	ok &= side_dto_ok(C.req, base + 1, 64);
	ok &= side_dto_ok(C.req, base + 2, WRITE_LEN);
	ok &= side_dto_ok(C.req, base + 3, WRITE_LEN);
	return ok && side_same(S.buf + RECV_OFF, 64, seed) &&
	       side_same(S.buf + WRITE_OFF, WRITE_LEN, seed + 1) &&
	       side_same(C.buf + READ_OFF, WRITE_LEN, seed + 1);
}

static void test_rounds_after_quiet(void)
{
	for (int i = 0; i < 3; i++) {
		CHECK(round_trip(100 + 10 * (uint64_t)i, 10 + (unsigned)i),
		      "round %d%s: Send, Write and Read complete with their "
		      "cookies and lengths, data whole", i,
		      i ? " after a quiet spell" : "");
		quiet();
	}
}

/* Receives posted ahead of a quiet spell stay posted and complete, in
 * order, with their cookies. */
static void test_receives_across_quiet(void)
{
	int ok;

	ok = side_recv(&S, RECV_OFF, 64, 201) == DAT_SUCCESS &&
	     side_recv(&S, RECV_OFF + 64, 64, 202) == DAT_SUCCESS;
	quiet();
	side_fill(C.buf + SEND_OFF, 64, 40);
	side_fill(C.buf + SEND_OFF + 64, 64, 41);
	ok &= side_send(&C, SEND_OFF, 64, 203) == DAT_SUCCESS &&
	      side_send(&C, SEND_OFF + 64, 64, 204) == DAT_SUCCESS;
	CHECK(ok && side_dto_ok(S.rcv, 201, 64) &&
	      side_dto_ok(S.rcv, 202, 64) && side_dto_ok(C.req, 203, 64) &&
	      side_dto_ok(C.req, 204, 64) &&
	      side_same(S.buf + RECV_OFF, 64, 40) &&
	      side_same(S.buf + RECV_OFF + 64, 64, 41),
	      "receives posted before a quiet spell complete after it, in "
	      "order, with their cookies");
}

/* A Write without a completion of its own holds its slot through a
 * quiet spell: a later signalled request completes it (DAT frees it
 * then), and the request ring counts only what is outstanding. */
static void test_suppressed_across_quiet(void)
{
	DAT_LMR_TRIPLET wl = side_lseg(&C, WRITE_OFF, WRITE_LEN);
	DAT_RMR_TRIPLET rr = side_rseg(&S, WRITE_OFF, WRITE_LEN);
	DAT_EVENT ev;
	int ok;

	side_fill(C.buf + WRITE_OFF, WRITE_LEN, 50);
	ok = dat_ep_post_rdma_write(C.ep, 1, &wl, side_ck(301), &rr,
				    DAT_COMPLETION_SUPPRESS_FLAG) ==
	     DAT_SUCCESS;
	quiet();
	CHECK(ok && dat_evd_dequeue(C.req, &ev) == DAT_QUEUE_EMPTY,
	      "a suppressed Write: no completion across a quiet spell");
	CHECK(round_trip(310, 51),
	      "after it, a round completes with its own cookies, data whole");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	side_open(&S);
	side_open(&C);
	psp = side_psp(&S, &qual);
	S.ep = side_ep(&S);
	C.ep = side_ep(&C);
	side_connect(&S, &C, qual, "idle");
	test_rounds_after_quiet();
	test_receives_across_quiet();
	test_suppressed_across_quiet();
	side_disconnect_free(&S, &C);
	dat_psp_free(psp);
	side_close(&C);
	side_close(&S);
	return tap_done();
}
