/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Placement never waits for the consumer (doc/semantics.md, "Progress:
 * what a consumer may rely on").  The receiving side's consumer first
 * polls its EVDs for a while (as a consumer of a ping-pong does), then
 * calls nothing for a second -- it sleeps, as one that computes or
 * spins on memory would -- while the peer RDMA-writes 64 KiB and 1 MiB
 * into its memory.  A watcher thread of the receiving process, which
 * only reads memory, sees the last word of each Write land, and the
 * data must be whole well before the consumer wakes (a quarter of the
 * second: the engine once left a poller's input to its polls for up to
 * 8 ms, and a spin of its progress thread held 64 KiB Writes 2 ms each).
 * Then the same after a consumer that waited: blocking waits that spin
 * (the progress thread leaves a spinner's input to it), sleep and time
 * out, before it calls nothing -- the thread must have the input back.
 * CRC off and on; over tcp here, over udp in dapltest_progs_udp.sh. */
#define TSIDE_BUF_SIZE (4u << 20)
#include "tside.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define SLEEP_MS 1000
#define BOUND_MS (SLEEP_MS / 4)

static const struct write_case {
	size_t off, len;
} writes[] = {
	{ 0, 64u << 10 },
	{ 1u << 20, 1u << 20 },
};
#define NWRITES (sizeof(writes) / sizeof(writes[0]))

static struct side S, C;	/* S: the sleeping receiver */
static DAT_PSP_HANDLE psp;
static DAT_CONN_QUAL qual;
static atomic_long landed_ms[NWRITES];
static atomic_int watch_stop;

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Reads S's memory only: the last word of each Write, until it changes. */
static void *watcher(void *arg)
{
	size_t left = NWRITES;

	(void)arg;
	while (left && !atomic_load(&watch_stop)) {
		for (size_t i = 0; i < NWRITES; i++) {
			const volatile unsigned char *last =
				S.buf + writes[i].off + writes[i].len - 1;

			if (atomic_load(&landed_ms[i]) || !*last)
				continue;
			atomic_store(&landed_ms[i], mono_ms());
			left--;
		}
		sched_yield();
	}
	return NULL;
}

static void connect_pair(void)
{
	S.ep = side_ep(&S);
	C.ep = side_ep(&C);
	side_connect(&S, &C, qual, "placement");
}

/* What S's consumer did before it went quiet. */
enum before { POLLED, WAITED };

static void be_consumer(enum before how)
{
	DAT_EVENT ev;
	DAT_COUNT n;
	long end;

	if (how == WAITED) {
		/* Each wait spins, then sleeps, then times out. */
		for (int i = 0; i < 5; i++) {
			dat_evd_wait(S.rcv, 2000, 1, &ev, &n);
			dat_evd_wait(S.req, 2000, 1, &ev, &n);
		}
		return;
	}
	for (end = mono_ms() + 20; mono_ms() < end;) {
		dat_evd_dequeue(S.rcv, &ev);
		dat_evd_dequeue(S.req, &ev);
	}
}

static void run_case(const char *crc, enum before how)
{
	const char *what = how == WAITED ? "waited" : "polled";
	pthread_t th;
	long t0;
	int posted = 1, done = 1;

	setenv("IWDAPL_CRC", crc, 1);
	memset(S.buf, 0, TSIDE_BUF_SIZE);
	connect_pair();
	be_consumer(how);
	for (size_t i = 0; i < NWRITES; i++) {
		side_fill(C.buf + writes[i].off, writes[i].len,
			  (unsigned)(i + 3));
		C.buf[writes[i].off + writes[i].len - 1] = 0xA5;
		atomic_store(&landed_ms[i], 0);
	}
	atomic_store(&watch_stop, 0);
	pthread_create(&th, NULL, watcher, NULL);
	t0 = mono_ms();
	for (size_t i = 0; i < NWRITES; i++) {
		DAT_LMR_TRIPLET l = side_lseg(&C, writes[i].off,
					      writes[i].len);
		DAT_RMR_TRIPLET r = side_rseg(&S, writes[i].off,
					      writes[i].len);

		posted &= dat_ep_post_rdma_write(C.ep, 1, &l, side_ck(i), &r,
						 DAT_COMPLETION_DEFAULT_FLAG) ==
			  DAT_SUCCESS;
	}
	/* Nothing of S is called for a second (the sender's thread sleeps
	 * too: its completions wait for it). */
	usleep(SLEEP_MS * 1000);
	atomic_store(&watch_stop, 1);
	pthread_join(th, NULL);
	CHECK(posted, "CRC %s, %s: a 64 KiB and a 1 MiB RDMA Write posted",
	      crc, what);
	for (size_t i = 0; i < NWRITES; i++) {
		long at = atomic_load(&landed_ms[i]);
		int whole = side_same(S.buf + writes[i].off,
				      writes[i].len - 1, (unsigned)(i + 3));

		CHECK(at && at - t0 < BOUND_MS && whole,
		      "CRC %s, %s: the %zu KiB Write was in the sleeping "
		      "receiver's memory, whole, %ld ms after the post (the "
		      "consumer slept %d ms)", crc, what, writes[i].len >> 10,
		      at ? at - t0 : -1, SLEEP_MS);
	}
	for (size_t i = 0; i < NWRITES; i++)
		done &= side_dto_ok(C.req, i, writes[i].len);
	CHECK(done, "CRC %s, %s: both Writes completed at the sender", crc,
	      what);
	side_disconnect_free(&S, &C);
	unsetenv("IWDAPL_CRC");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	side_open(&S);
	side_open(&C);
	psp = side_psp(&S, &qual);
	run_case("0", POLLED);
	run_case("1", POLLED);
	run_case("0", WAITED);
	run_case("1", WAITED);
	dat_psp_free(psp);
	side_close(&C);
	side_close(&S);
	return tap_done();
}
