/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A poller's yield (iw_poll_cpu.c): a thread whose yields keep coming
 * back late -- another busy thread holds its CPU -- moves itself to
 * another CPU of its affinity, and its affinity is as it was afterwards;
 * a thread allowed one CPU stays there, its affinity untouched.
 *
 * Both tests poll beside a busy thread pinned to CPU c (and running
 * there before they start), so the poller's yields come back late every
 * second or third time.  The only other CPU, d, runs a busy thread
 * pinned there too: moving the poller would not even out the CPUs'
 * loads, and the kernel leaves it on c.  The move is counted where it is
 * made (iwe_poll_moves): on a busy machine the kernel may take the
 * poller back before the test looks.  The bound is a count of yields,
 * not a time. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "iw_engine.h"
#include "qp_harness.h"
#include "tap.h"

#define YIELDS 100	/* a move takes a few late yields */

static atomic_int stop, busy_ready;

/* A busy thread on CPU *arg; counted in busy_ready once it runs there
 * (a thread not yet on its CPU leaves the poller's yields quick). */
static void *busy(void *arg)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(*(int *)arg, &one);
	if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one))
		return NULL;
	while (sched_getcpu() != *(int *)arg)
		sched_yield();
	atomic_fetch_add(&busy_ready, 1);
	while (!atomic_load(&stop))
		;
	return NULL;
}

/* Two CPUs this process may use, into c and d; 0 when it has fewer. */
static int two_cpus(int *c, int *d)
{
	cpu_set_t all;
	int n = 0;

	if (sched_getaffinity(0, sizeof(all), &all))
		return 0;
	for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &all))
			*(n++ ? d : c) = i;
	return n == 2;
}

/* CPU a, and b when it is not -1. */
static cpu_set_t cpus(int a, int b)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(a, &s);
	if (b >= 0)
		CPU_SET(b, &s);
	return s;
}

static int set_cpus(int a, int b)
{
	cpu_set_t s = cpus(a, b);

	return sched_setaffinity(0, sizeof(s), &s);
}

static int affinity_is(int a, int b)
{
	cpu_set_t s, want = cpus(a, b);

	return !sched_getaffinity(0, sizeof(s), &s) && CPU_EQUAL(&s, &want);
}

static void test_one_cpu_stays(int c)
{
	int off = 0;

	if (set_cpus(c, -1)) {
		CHECK(0, "pin the poller to CPU %d", c);
		return;
	}
	for (int i = 0; i < YIELDS / 4; i++) {
		iwe_poll_yield();
		off |= sched_getcpu() != c;
	}
	CHECK(!off && affinity_is(c, -1), "a poller allowed one CPU, shared "
	      "with a busy thread, stays on it, its affinity untouched");
}

static void test_moves_off_shared_cpu(int c, int d)
{
	unsigned long before = iwe_poll_moves();
	int i = 0, seen_d = 0;

	/* On c, then allowed both: the kernel leaves it where it is. */
	if (set_cpus(c, -1) || set_cpus(c, d)) {
		CHECK(0, "place the poller on CPU %d, allowed %d too", c, d);
		return;
	}
	while (i < YIELDS && iwe_poll_moves() == before) {
		iwe_poll_yield();
		i++;
		seen_d |= sched_getcpu() == d;
	}
	printf("# %lu move(s) in %d yields; on CPU %d after: %s\n",
	       iwe_poll_moves() - before, i, d, seen_d ? "yes" : "no");
	CHECK(iwe_poll_moves() > before, "a poller sharing CPU %d with a "
	      "busy thread moves off it within %d yields", c, YIELDS);
	CHECK(affinity_is(c, d), "its affinity is both CPUs again after "
	      "the move");
}

int main(void)
{
	pthread_t t[2];
	int c, d, on[2];

	if (!two_cpus(&c, &d) || under_valgrind()) {
		/* valgrind runs one thread at a time: its yields say
		 * nothing of CPUs. */
		printf("1..0 # SKIP fewer than 2 CPUs, or valgrind\n");
		return 0;
	}
	on[0] = c;
	on[1] = d;
	for (int k = 0; k < 2; k++)
		if (pthread_create(&t[k], NULL, busy, &on[k]))
			BAIL("pthread_create");
	while (atomic_load(&busy_ready) < 2)
		sched_yield();
	test_one_cpu_stays(c);
	test_moves_off_shared_cpu(c, d);
	atomic_store(&stop, 1);
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	return tap_done();
}
