/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress thread's weight (iw_prog_cpu.h) follows what it is woken
 * for: it starts urgent; input nobody read, or a consumer going to
 * sleep, makes it urgent; 16 wake-ups in a row that found the input
 * taken by a consumer's poll make it polite; 16 in a row that did a
 * connection's work and found no consumer's input give it back the nice
 * it was born with, any input noted in between starts that count again,
 * and wake-ups for neither (timers, kicks) count neither way.  The rule is driven here by hand, on a thread of the test's
 * own, as the progress loop drives it; the thread's nice is checked too
 * where the process may raise it (root), the rule's state everywhere.
 * TAP output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "iw_prog_cpu.h"
#include "tap.h"

#define AFTER 16	/* the rule's "in a row" */

static struct iwe_prog_cpu g_cpu;
static int g_born;		/* the test thread's nice at its start */
static int g_may_raise;		/* claim could raise its priority */

static int nice_now(void)
{
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)g_cpu.tid);

	return errno ? 99 : n;
}

/* The weight is w; where the thread could raise its priority, its nice
 * says so too. */
static int weight_is(int w)
{
	int want = w == PROG_URGENT ? -10 : w == PROG_POLITE ? 19 : g_born;

	if (atomic_load(&g_cpu.weight) != w)
		return 0;
	return !g_may_raise || nice_now() == want;
}

/* n wake-ups of the loop for connections, no input noted. */
static void conn_wakeups(int n)
{
	while (n-- > 0) {
		iwe_prog_cpu_conn(&g_cpu);
		iwe_prog_cpu_woken(&g_cpu);
	}
}

/* n wake-ups for neither input nor connections (timers, kicks). */
static void other_wakeups(int n)
{
	while (n-- > 0)
		iwe_prog_cpu_woken(&g_cpu);
}

static void input_wakeup(int unread)
{
	iwe_prog_cpu_input(&g_cpu, unread);
	iwe_prog_cpu_woken(&g_cpu);
}

static void *thread_main(void *arg)
{
	(void)arg;
	g_born = getpriority(PRIO_PROCESS, 0);
	iwe_prog_cpu_claim(&g_cpu);
	g_may_raise = g_cpu.may_renice;
	if (!g_may_raise) {
		/* Without the right to raise it, the rule still runs (only
		 * its lowering system calls take effect); test it so. */
		printf("# this process may not raise a thread's priority: the "
		       "rule's state is checked, not the nice values\n");
		g_cpu.may_renice = 1;
		atomic_store(&g_cpu.weight, PROG_URGENT);
	}
	CHECK(weight_is(PROG_URGENT), "the thread starts urgent");

	other_wakeups(10 * AFTER);
	CHECK(weight_is(PROG_URGENT), "%d wake-ups for timers or kicks leave "
	      "it urgent", 10 * AFTER);
	conn_wakeups(AFTER - 1);
	other_wakeups(AFTER);
	CHECK(weight_is(PROG_URGENT), "%d wake-ups for connections (timers' "
	      "between them) leave it urgent", AFTER - 1);
	conn_wakeups(1);
	CHECK(weight_is(PROG_PLAIN), "the %dth gives it back the nice it was "
	      "born with (%d)", AFTER, g_born);

	input_wakeup(1);
	CHECK(weight_is(PROG_URGENT), "input nobody read makes it urgent");
	for (int k = 0; k < 3; k++) {
		conn_wakeups(AFTER - 2);
		input_wakeup(1);
	}
	conn_wakeups(AFTER - 1);
	CHECK(weight_is(PROG_URGENT), "input now and then between "
	      "connections' wake-ups keeps it urgent (the count starts "
	      "again)");

	for (int k = 0; k < AFTER - 1; k++)
		input_wakeup(0);
	CHECK(weight_is(PROG_URGENT), "%d wake-ups finding the input taken "
	      "leave it urgent", AFTER - 1);
	input_wakeup(0);
	CHECK(weight_is(PROG_POLITE), "the %dth makes it polite", AFTER);

	conn_wakeups(AFTER);
	CHECK(weight_is(PROG_PLAIN), "%d connections' wake-ups take a polite "
	      "thread to its own nice too", AFTER);

	iwe_prog_cpu_note_consumer(&g_cpu);	/* a post from this CPU */
	int noted = atomic_load(&g_cpu.consumer_cpu);

	iwe_prog_cpu_urgent(&g_cpu);
	CHECK(weight_is(PROG_URGENT), "a consumer going to sleep makes it "
	      "urgent");
	CHECK(noted >= 0 && atomic_load(&g_cpu.consumer_cpu) == -1,
	      "... and gives back the CPU it noted for the consumer (%d): "
	      "the sleeper's is free", noted);
	return NULL;
}

int main(void)
{
	pthread_t t;

	iwe_prog_cpu_init(&g_cpu);
	if (pthread_create(&t, NULL, thread_main, NULL))
		BAIL("pthread_create");
	pthread_join(t, NULL);
	iwe_prog_cpu_destroy(&g_cpu);
	return tap_done();
}
