/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPI's RDMA "fast path" against the engine.
 *
 * The peer RDMA-writes small messages into a ring of slots in one
 * registered region; each message ends with a sequence word.  A receiver
 * thread spins on the next slot's last word and, the instant it matches,
 * checks every byte ahead of it and clears the slot -- as MVAPICH2's
 * eager fast path does.  Two things must hold, CRC on and off, for every
 * slot size:
 *   - no false Terminate: the CRC is checked over the bytes as they came
 *     off the wire, never over memory the receiver is already clearing;
 *   - no half-seen message: placement makes the last word visible after
 *     every byte ahead of it, whatever the copy routine.
 * A third thread drives the engine (sender's transmit, receiver's
 * receive) the way the progress thread does.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "qp_harness.h"

#define SLOTS    16		/* ring slots = writes in flight at most */
#define SEQ_LEN  8		/* the sequence word at each message's end */

struct ring {
	struct pair p;
	uint32_t size;		/* bytes per message, sequence word included */
	uint64_t n;		/* messages */
	atomic_uint_fast64_t consumed;	/* receiver: messages checked */
	atomic_int stop;
	uint64_t half_seen;	/* receiver: a message seen before its bytes */
};

static uint8_t pat(uint64_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131 + i * 7 + 1);
}

/* The receiver: spin on the sequence word of the next slot. */
static void *receiver(void *arg)
{
	struct ring *r = arg;
	uint64_t seq;

	for (seq = 1; seq <= r->n && !atomic_load(&r->stop); seq++) {
		volatile char *slot = r->p.b.buf +
			(size_t)(seq % SLOTS) * r->size;
		volatile uint64_t *word =
			(volatile uint64_t *)(slot + r->size - SEQ_LEN);
		uint32_t i;

		while (*word != seq) {
			if (atomic_load(&r->stop))
				return NULL;
			sched_yield();
		}
		atomic_thread_fence(memory_order_acquire);
		for (i = 0; i < r->size - SEQ_LEN; i++)
			if ((uint8_t)slot[i] != pat(seq, i))
				break;
		if (i < r->size - SEQ_LEN)
			r->half_seen++;
		/* Reuse the slot at once, as the fast path does. */
		memset((char *)slot, 0, r->size);
		atomic_store(&r->consumed, seq);
	}
	return NULL;
}

/* The engine's progress, as its thread would run it. */
static void *driver(void *arg)
{
	struct ring *r = arg;

	while (!atomic_load(&r->stop)) {
		iwe_qp_progress_tx(r->p.a.qp);
		iwe_qp_progress_rx(r->p.b.qp);
	}
	return NULL;
}

static void write_one(struct ring *r, uint64_t seq)
{
	size_t off = (size_t)(seq % SLOTS) * r->size;
	char *src = r->p.a.buf + off;
	uint32_t i;

	for (i = 0; i < r->size - SEQ_LEN; i++)
		src[i] = (char)pat(seq, i);
	memcpy(src + r->size - SEQ_LEN, &seq, SEQ_LEN);
	if (post_send1(&r->p.a, seq, IBV_WR_RDMA_WRITE, off, r->size,
		       (uintptr_t)(r->p.b.buf + off), r->p.b.mr->rkey,
		       IBV_SEND_SIGNALED))
		BAIL("post write %llu", (unsigned long long)seq);
}

/* Reap send completions; returns how many, or -1 on an error status. */
static int reap(struct ring *r)
{
	struct ibv_wc wc[16];
	int n = iwe_poll_cq(r->p.a.scq, 16, wc), i;

	for (i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			return -1;
	return n;
}

static void run(uint32_t size, int crc, uint64_t n)
{
	struct opts o = { .crc = crc };
	struct ring *r = calloc(1, sizeof(*r));
	pthread_t rt, dt;
	struct iwe_term_info ts_a, tr_a, ts_b, tr_b;
	uint64_t seq, done = 0;
	time_t give_up = time(NULL) + 300;
	int failed = 0, k;

	r->size = size;
	r->n = n;
	pair_open(&r->p, &o);
	pthread_create(&rt, NULL, receiver, r);
	pthread_create(&dt, NULL, driver, r);
	for (seq = 1; seq <= n && !failed; seq++) {
		/* The slot is free once the receiver cleared its last use,
		 * and its source once that write completed. */
		while ((seq > SLOTS && atomic_load(&r->consumed) < seq - SLOTS) ||
		       seq - 1 - done >= SLOTS) {
			k = reap(r);
			if (k < 0 || time(NULL) > give_up ||
			    iwe_qp_get_state(r->p.a.qp) == IWE_QPS_ERROR) {
				failed = 1;
				break;
			}
			done += (uint64_t)k;
			if (!k)
				sched_yield();
		}
		if (!failed)
			write_one(r, seq);
	}
	while (!failed && atomic_load(&r->consumed) < n &&
	       time(NULL) <= give_up &&
	       iwe_qp_get_state(r->p.b.qp) != IWE_QPS_ERROR)
		sched_yield();
	atomic_store(&r->stop, 1);
	pthread_join(rt, NULL);
	pthread_join(dt, NULL);
	iwe_qp_terminate_info(r->p.a.qp, &ts_a, &tr_a);
	iwe_qp_terminate_info(r->p.b.qp, &ts_b, &tr_b);
	CHECK(atomic_load(&r->consumed) == n && !failed,
	      "%u-byte slots, CRC %s: %llu of %llu messages seen", size,
	      crc ? "on" : "off",
	      (unsigned long long)atomic_load(&r->consumed),
	      (unsigned long long)n);
	CHECK(r->half_seen == 0,
	      "%u-byte slots, CRC %s: no message seen before its bytes "
	      "(%llu half-seen)", size, crc ? "on" : "off",
	      (unsigned long long)r->half_seen);
	CHECK(!ts_a.valid && !tr_a.valid && !ts_b.valid && !tr_b.valid &&
	      iwe_qp_get_state(r->p.a.qp) == IWE_QPS_RTS &&
	      iwe_qp_get_state(r->p.b.qp) == IWE_QPS_RTS,
	      "%u-byte slots, CRC %s: no Terminate, both QPs RTS "
	      "(sent %u/%u/0x%02x)", size, crc ? "on" : "off", ts_b.layer,
	      ts_b.etype, ts_b.ecode);
	pair_close(&r->p);
	free(r);
}

int main(void)
{
	static const uint32_t sizes[] = { 64, 256, 1024, 4096, 8192 };
	/* IW_FASTPATH_MSGS: messages per slot size; make check runs 2*10^4
	 * of each (doc/testing.md gives the 10^5 acceptance run). */
	const char *e = getenv("IW_FASTPATH_MSGS");
	uint64_t n = e ? strtoull(e, NULL, 10) : 20000;
	unsigned i;
	int crc;

	if (under_valgrind()) {
		printf("1..0 # SKIP racing threads under valgrind; the ASan build covers it\n");
		return 0;
	}
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	for (crc = 0; crc <= 1; crc++)
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			run(sizes[i], crc, n);
	iwe_device_close(g_dev);
	return tap_done();
}
