/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress thread's weight (iw_prog_cpu.h) follows what it finds to
 * do: it starts urgent; 16 wake-ups in a row that found the input taken
 * by a consumer's call, or did a connection's work (the consumers'
 * too), make it polite; input nobody read, or a consumer going to
 * sleep, makes it urgent again.  The rule is driven here by hand, on a
 * thread of the test's own, as the progress loop drives it; the
 * thread's nice is checked too where the process may raise it (root),
 * the rule's state everywhere.
 *
 * Where it runs: while input nobody read comes, the thread keeps off
 * the CPU its consumer last called from -- but it never moves itself off
 * the CPU it runs on (a migration of a runnable thread is no wake-up,
 * and it waited there for the tick of whatever ran); it leaves that
 * move to the consumer's next call.  TAP output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "iw_prog_cpu.h"
#include "tap.h"

#define AFTER 16	/* the rule's "in a row" */

static struct iwe_prog_cpu g_cpu;
static int g_may_raise;		/* claim could raise its priority */

static int nice_now(void)
{
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)g_cpu.tid);

	return errno ? 99 : n;
}

/* Polite (1) or urgent (0); where the thread could raise its priority,
 * its nice says so too. */
static int weight_is(int polite)
{
	if (atomic_load(&g_cpu.polite) != polite)
		return 0;
	return !g_may_raise || nice_now() == (polite ? 19 : -10);
}

static void taken(int n)
{
	while (n-- > 0)
		iwe_prog_cpu_input(&g_cpu, 0);
}

static void conn_work(int n)
{
	while (n-- > 0)
		iwe_prog_cpu_conn(&g_cpu);
}

static void *thread_main(void *arg)
{
	(void)arg;
	iwe_prog_cpu_claim(&g_cpu);
	g_may_raise = g_cpu.may_renice;
	if (!g_may_raise) {
		/* Without the right to raise it, the rule still runs (only
		 * its lowering system calls take effect); test it so. */
		printf("# this process may not raise a thread's priority: the "
		       "rule's state is checked, not the nice values\n");
		g_cpu.may_renice = 1;
	}
	CHECK(weight_is(0), "the thread starts urgent");

	conn_work(AFTER - 1);
	CHECK(weight_is(0), "%d wake-ups for connections leave it urgent",
	      AFTER - 1);
	conn_work(1);
	CHECK(weight_is(1), "the %dth makes it polite: the consumers making "
	      "and accepting connections do most of that work", AFTER);

	iwe_prog_cpu_input(&g_cpu, 1);
	CHECK(weight_is(0), "input nobody read makes it urgent again");

	taken(AFTER / 2);
	conn_work(AFTER / 2 - 1);
	CHECK(weight_is(0), "%d wake-ups, input taken or connections, leave "
	      "it urgent", AFTER - 1);
	conn_work(1);
	CHECK(weight_is(1), "the %dth, either kind, makes it polite", AFTER);

	iwe_prog_cpu_input(&g_cpu, 1);
	for (int k = 0; k < 3; k++) {
		conn_work(AFTER - 1);
		iwe_prog_cpu_input(&g_cpu, 1);
	}
	taken(AFTER - 1);
	CHECK(weight_is(0), "input nobody read now and then keeps it urgent "
	      "(the count starts again)");
	taken(1);
	CHECK(weight_is(1), "... until %d in a row found nothing for it alone",
	      AFTER);

	iwe_prog_cpu_note_consumer(&g_cpu);	/* a post from this CPU */
	int noted = atomic_load(&g_cpu.consumer_cpu);

	iwe_prog_cpu_urgent(&g_cpu);
	CHECK(weight_is(0), "a consumer going to sleep makes it urgent");
	CHECK(noted >= 0 && atomic_load(&g_cpu.consumer_cpu) == -1,
	      "... and gives back the CPU it noted for the consumer (%d): "
	      "the sleeper's is free", noted);
	return NULL;
}

/* ------------------------------------------------ where it runs */

static struct iwe_prog_cpu a_cpu;
static pthread_t a_thread;
static int a_first, a_second;		/* two CPUs the process may use */
static int a_pipe[2];			/* the thread sleeps on it */
static int a_woke_on = -1;
static int a_stayed;			/* the thread's finding, */
static atomic_int a_ready;		/* ... once this is set */

static int pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) ||
	       sched_getcpu() != cpu;
}

/* The thread's mask is the CPUs it started with less `off`. */
static int mask_is(pthread_t t, int off)
{
	cpu_set_t set, want = a_cpu.allowed;

	CPU_CLR(off, &want);
	return pthread_getaffinity_np(t, sizeof(set), &set) == 0 &&
	       CPU_EQUAL(&set, &want);
}

/* As the progress thread: claim, run on a_first, find input nobody read
 * while the consumer was last seen there, then sleep until woken. */
static void *affinity_thread(void *arg)
{
	char c;

	(void)arg;
	iwe_prog_cpu_claim(&a_cpu);	/* a_cpu.allowed: every CPU */
	if (pin_self(a_first))
		BAIL("cannot run on CPU %d", a_first);
	iwe_prog_cpu_note_consumer(&a_cpu);	/* the consumer's CPU: ours */
	iwe_prog_cpu_input(&a_cpu, 1);
	iwe_prog_cpu_follow(&a_cpu);
	a_stayed = atomic_load(&a_cpu.avoided) == -1 &&
		   atomic_load(&a_cpu.move_off) == a_first &&
		   sched_getcpu() == a_first;
	atomic_store(&a_ready, 1);
	if (read(a_pipe[0], &c, 1) != 1)
		BAIL("read");
	a_woke_on = sched_getcpu();
	return NULL;
}

static void affinity_rule(void)
{
	struct timespec nap = { 0, 20000000 };
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		BAIL("sched_getaffinity");
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			*(n++ ? &a_second : &a_first) = c;
	if (n < 2 || (getenv("IWDAPL_PROGRESS_AFFINITY") &&
		      atoi(getenv("IWDAPL_PROGRESS_AFFINITY")) == 0)) {
		CHECK(1, "# SKIP one CPU, or the affinity left alone");
		return;
	}
	iwe_prog_cpu_init(&a_cpu);
	if (pipe(a_pipe) || pthread_create(&a_thread, NULL, affinity_thread,
					   NULL))
		BAIL("pipe, pthread_create");
	/* Let it run its part and go to sleep in read(). */
	while (!atomic_load(&a_ready))
		nanosleep(&nap, NULL);
	nanosleep(&nap, NULL);
	CHECK(a_stayed, "on the consumer's CPU the thread does not move "
	      "itself off it: it leaves the move to the consumer");
	if (pin_self(a_first))		/* the consumer, on its CPU */
		BAIL("cannot run on CPU %d", a_first);
	iwe_prog_cpu_note_consumer(&a_cpu);	/* its next post */
	CHECK(atomic_load(&a_cpu.avoided) == a_first &&
	      atomic_load(&a_cpu.move_off) == -1 &&
	      mask_is(a_thread, a_first),
	      "the consumer's next call moves the sleeping thread off CPU %d",
	      a_first);
	if (write(a_pipe[1], "x", 1) != 1)
		BAIL("write");
	pthread_join(a_thread, NULL);
	CHECK(a_woke_on >= 0 && a_woke_on != a_first,
	      "... where it wakes up (on CPU %d)", a_woke_on);
	close(a_pipe[0]);
	close(a_pipe[1]);
	iwe_prog_cpu_destroy(&a_cpu);
}

int main(void)
{
	pthread_t t;

	iwe_prog_cpu_init(&g_cpu);
	if (pthread_create(&t, NULL, thread_main, NULL))
		BAIL("pthread_create");
	pthread_join(t, NULL);
	iwe_prog_cpu_destroy(&g_cpu);
	affinity_rule();
	return tap_done();
}
