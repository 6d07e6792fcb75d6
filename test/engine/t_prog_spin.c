/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress loop's poll after bulk input (iwe_prog_expect_input,
 * IWDAPL_RX_SPIN_US): input that comes within the spin is read without
 * the thread going to sleep; without the hint the thread sleeps in epoll
 * between the two (the control, which shows that the count below can
 * tell them apart); the spin yields its CPU (the test's thread, on the
 * same CPU, sends the second input during it); and the spin ends: with
 * nothing more coming the thread sleeps again.  Sleeps are the progress
 * thread's voluntary context switches (a yield is not one).  TAP
 * output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include "iw_priv.h"
#include "prog_harness.h"

#define SPIN_US 1000		/* the longest allowed: outlasts most delays under load */
#define TRIES 10

static struct iwe_prog *g_prog;
static struct iwe_prog_watch g_w;
static int g_fd = -1, g_err;
static atomic_int g_hint;		/* the callback calls the hint */
static atomic_int g_n;			/* callbacks run */
static atomic_long g_vcs;		/* its thread's sleeps at the last */
static atomic_int g_tid;

/* Voluntary context switches of thread tid (-1 if unreadable): the
 * counter getrusage(RUSAGE_THREAD) gives that thread itself. */
static long sleeps_of(int tid)
{
	char path[64], line[128];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* The test's thread and the progress thread share one CPU (the thread
 * inherits the mask it is created with): the second input can then only
 * be sent while the spin yields that CPU.  A spin that did not yield
 * kept the poker off it for the whole spin (1 ms), and the thread went
 * to sleep before the input came. */
static void pin_one_cpu(void)
{
	cpu_set_t set;
	int c;

	if (sched_getaffinity(0, sizeof(set), &set))
		BAIL("sched_getaffinity: %s", strerror(errno));
	for (c = 0; c < CPU_SETSIZE && !CPU_ISSET(c, &set); c++)
		;
	CPU_ZERO(&set);
	CPU_SET(c, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		BAIL("sched_setaffinity: %s", strerror(errno));
}

static void input_cb(struct iwe_prog_watch *w, uint32_t ev)
{
	struct rusage ru;
	uint64_t v;

	(void)ev;
	(void)!read(w->fd, &v, sizeof(v));
	/* getrusage, not /proc: reading the status file took up to 1 ms
	 * here, longer than the spin under test. */
	getrusage(RUSAGE_THREAD, &ru);
	atomic_store(&g_tid, gettid());
	atomic_store(&g_vcs, ru.ru_nvcsw);
	if (atomic_load(&g_hint))
		iwe_prog_expect_input(g_prog);
	atomic_fetch_add(&g_n, 1);
}

static void watch(void *arg)
{
	(void)arg;
	g_w.cb = input_cb;
	g_err = iwe_prog_watch_add(g_prog, &g_w, g_fd, EPOLLIN | EPOLLET);
}

static void unwatch(void *arg)
{
	(void)arg;
	iwe_prog_watch_del(g_prog, &g_w);
}

/* Spins, giving the shared CPU to the progress thread: a sleep here
 * (1 ms at least) would outlast the spin under test. */
static int wait_count(int n)
{
	uint64_t end = iwe_now_ns() + 5000000000ull;

	while (atomic_load(&g_n) < n && iwe_now_ns() < end)
		sched_yield();
	return atomic_load(&g_n) >= n;
}

/* Two inputs 50 us apart: the thread's sleeps between their callbacks
 * (-1 if a callback never came). */
static long sleeps_between(int hint)
{
	int n = atomic_load(&g_n);
	long before;
	uint64_t end;

	atomic_store(&g_hint, hint);
	prog_poke(g_fd);
	if (!wait_count(n + 1))
		return -1;
	before = atomic_load(&g_vcs);
	end = iwe_now_ns() + 50000;
	while (iwe_now_ns() < end)
		;
	prog_poke(g_fd);
	if (!wait_count(n + 2))
		return -1;
	return atomic_load(&g_vcs) - before;
}

int main(void)
{
	struct iwe_device *dev;
	long d = -1, after, at;
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pin_one_cpu();
	setenv("IWDAPL_RX_SPIN_US", "1000", 1);	/* SPIN_US */
	g_prog = prog_on_lo(&dev);
	g_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g_fd < 0)
		BAIL("eventfd: %s", strerror(errno));
	iwe_prog_call(g_prog, watch, NULL);
	if (g_err)
		BAIL("watch: %d", g_err);
	poll(NULL, 0, 10);

	/* Control: no hint, the thread sleeps between (a try whose thread
	 * lost its CPU after the first input may find the second already
	 * there: tried again). */
	for (i = 0; i < TRIES && d <= 0; i++) {
		poll(NULL, 0, 5);
		d = sleeps_between(0);
	}
	CHECK(d > 0, "no hint: the thread sleeps between two inputs "
	      "50 us apart (%ld sleeps)", d);

	/* The hint: caught by the spin (a try may lose its CPU under
	 * load, and the thread then sleeps: tried again). */
	for (i = 0, d = -1; i < TRIES && d != 0; i++) {
		poll(NULL, 0, 5);
		d = sleeps_between(1);
	}
	CHECK(d == 0, "after the hint the next input 50 us later, sent from "
	      "the same CPU, is read without a sleep (%ld sleeps, %d tries)",
	      d, i);

	/* Bounded: the last callback hinted; nothing more comes, and the
	 * thread goes to sleep within a few spins. */
	at = atomic_load(&g_vcs);
	poll(NULL, 0, 8 * SPIN_US / 1000 + 50);
	after = sleeps_of(atomic_load(&g_tid));
	CHECK(after > at, "the spin ends: the idle thread sleeps again "
	      "(%ld -> %ld)", at, after);

	iwe_prog_call(g_prog, unwatch, NULL);
	close(g_fd);
	iwe_device_close(dev);
	return tap_done();
}
