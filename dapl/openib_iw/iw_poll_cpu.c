/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A polling consumer's yield, and its move off a CPU it shares.
 *
 * A consumer that polls an empty EVD yields its CPU now and then (evd.c,
 * IWDAPL_POLL_YIELD_US).  A yield that comes back late says another
 * runnable thread held the CPU meanwhile.  Linux leaves the two polling
 * processes of a ping-pong stacked on one CPU, each spinning out its
 * stretch before the other sees its answer (230-260 us one way instead
 * of 9), while the other CPU runs a low-priority job: beside a busy loop
 * at nice 19, 16 of 30 short runs of the 8-byte polling ping-pong stayed
 * so for the whole run, none of 40 on the quiet machine.
 *
 * So a poller whose yields keep coming back late -- at one that does,
 * when at least POLL_LATE_OF of its last POLL_LATE_WINDOW did -- moves
 * itself once to another CPU it may run on: its affinity less the CPU it
 * is on, then its affinity as it was (the kernel leaves it where it
 * landed; an affinity of one CPU is left alone).  Beside one other busy
 * thread a yield comes back late every second or third time, not in a
 * row (the other runs a time slice, then must wait its turn).  Both
 * pollers of a stacked pair see the same late yields, in turn: were both
 * to move, they would land on the other CPU together, so each late yield
 * that qualifies moves with a chance of one half -- the first that moves
 * leaves the other's yields quick.  One move a thread in
 * POLL_MOVE_EVERY_NS at most: with more pollers than CPUs every yield
 * comes back late, and a move there only trades one CPU's sharing for
 * another's. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "iw_priv.h"

#define POLL_LATE_NS 100000u		/* a yield this long: CPU shared */
#define POLL_LATE_WINDOW 8u		/* of the last this many yields, */
#define POLL_LATE_OF 2u			/* this many late */
#define POLL_MOVE_EVERY_NS 100000000u

struct poll_cpu {
	uint32_t late;			/* one bit a yield, 1: late */
	uint32_t draw;
	uint64_t moved_ns;
};

static __thread struct poll_cpu me;
static atomic_ulong moves;		/* the process's, for its tests */

unsigned long iwe_poll_moves(void)
{
	return atomic_load(&moves);
}

/* This thread to another CPU of its affinity, if it has one: 1 when it
 * moved. */
static int move_off_cpu(void)
{
	cpu_set_t all, others;
	int cpu = sched_getcpu();

	if (cpu < 0 || sched_getaffinity(0, sizeof(all), &all))
		return 0;
	others = all;
	CPU_CLR(cpu, &others);
	if (!CPU_COUNT(&others) ||
	    sched_setaffinity(0, sizeof(others), &others))
		return 0;
	(void)sched_setaffinity(0, sizeof(all), &all);
	return 1;
}

void iwe_poll_yield(void)
{
	uint64_t t0 = iwe_now_ns(), t1;
	uint32_t window = (1u << POLL_LATE_WINDOW) - 1;

	sched_yield();
	t1 = iwe_now_ns();
	me.late = (me.late << 1 | (t1 - t0 >= POLL_LATE_NS)) & window;
	if (!(me.late & 1) ||
	    (uint32_t)__builtin_popcount(me.late) < POLL_LATE_OF ||
	    (me.moved_ns && t1 - me.moved_ns < POLL_MOVE_EVERY_NS))
		return;
	me.draw = me.draw * 1103515245u + 12345u + (uint32_t)t1;
	if (me.draw & 0x10000)
		return;		/* the other poller's turn, perhaps */
	me.late = 0;
	if (move_off_cpu()) {
		me.moved_ns = t1;
		atomic_fetch_add(&moves, 1);
	}
}
