/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress thread's weight (iw_prog_cpu.h) follows what it finds to
 * do: it starts urgent; 16 wake-ups in a row that found the input taken
 * by a consumer's call, or did a connection's work (the consumers'
 * too), make it polite; input nobody read, or a consumer going to
 * sleep, makes it urgent again.  The rule is driven here by hand, on a
 * thread of the test's own, as the progress loop drives it; the
 * thread's nice is checked too where the process may raise it (root),
 * the rule's state everywhere.  TAP output. */
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
