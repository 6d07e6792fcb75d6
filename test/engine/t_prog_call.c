/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The progress loop's promises (iw_progress.h): input on a watched fd
 * is dispatched on the progress thread as soon as it comes, with nobody
 * calling in; a synchronous call from another thread runs on that
 * thread when the loop is idle in epoll (it borrows the loop), and on
 * the progress thread when the loop is busy; a timer such a borrowed
 * call arms before the loop's own deadline still fires on time, and one
 * moved later takes the loop's wake-up along; a task posted from
 * another thread runs on the progress thread; while input comes that no
 * consumer reads, the thread keeps off the CPU its consumer last called
 * from and follows the consumer when it moves, and has every CPU again
 * once polls take the input or the consumer sleeps.  TAP output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "iw_priv.h"
#include "prog_harness.h"

#define WAIT_MS 5000

static struct iwe_prog *g_prog;
static int g_src = -1;
static pthread_t g_ran_on, g_thread;	/* the progress thread */
static atomic_int g_runs;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void ran(void)
{
	g_ran_on = pthread_self();
	atomic_fetch_add(&g_runs, 1);
}

/* Until n callbacks ran in all, or WAIT_MS. */
static int wait_runs(int n)
{
	long end = now_ms() + WAIT_MS;

	while (atomic_load(&g_runs) < n) {
		if (now_ms() > end)
			return 0;
		usleep(100);
	}
	return 1;
}

static void src_cb(struct iwe_prog_watch *w, uint32_t revents)
{
	uint64_t v;

	(void)revents;
	(void)!read(w->fd, &v, sizeof(v));
	ran();
}

static struct iwe_prog_watch g_watch = { .fd = -1, .cb = src_cb };

static void watch_add(void *arg)
{
	(void)arg;
	if (iwe_prog_watch_add(g_prog, &g_watch, g_src, EPOLLIN | EPOLLET))
		BAIL("watch_add");
}

static void watch_del(void *arg)
{
	(void)arg;
	iwe_prog_watch_del(g_prog, &g_watch);
}

static void call_fn(void *arg)
{
	(void)arg;
	ran();
}

/* Input comes while nobody calls in: the progress thread dispatches it. */
static void test_input_dispatched(void)
{
	int runs = atomic_load(&g_runs);

	iwe_prog_call(g_prog, watch_add, NULL);
	usleep(20000);		/* the loop sleeps in epoll */
	prog_poke(g_src);
	CHECK(wait_runs(runs + 1) &&
	      pthread_equal(g_ran_on, g_thread),
	      "input with nobody calling in is dispatched on the progress "
	      "thread");
	iwe_prog_call(g_prog, watch_del, NULL);
}

struct later_call {
	pthread_t t;
	int done;
};

static void *later_call_main(void *arg)
{
	struct later_call *l = arg;

	iwe_prog_call(g_prog, call_fn, NULL);
	l->done = 1;
	return NULL;
}

/* An idle loop is borrowed; a busy one runs the call itself. */
static void test_calls(void)
{
	struct prog_stall st = PROG_STALL_INIT;
	struct later_call l = { 0 };
	int runs;

	usleep(20000);
	runs = atomic_load(&g_runs);
	iwe_prog_call(g_prog, call_fn, NULL);
	CHECK(atomic_load(&g_runs) == runs + 1 &&
	      pthread_equal(g_ran_on, pthread_self()),
	      "a call while the loop is idle runs on the caller's thread");
	iwe_prog_post(g_prog, &st.task);
	prog_stall_set(&st, 1);
	pthread_create(&l.t, NULL, later_call_main, &l);
	usleep(20000);
	CHECK(!l.done, "a call while the loop is busy waits for it");
	prog_stall_set(&st, 0);
	pthread_join(l.t, NULL);
	CHECK(l.done && pthread_equal(g_ran_on, g_thread),
	      "... and then runs on the progress thread");
}

static atomic_long g_fired_ms;

static void timer_cb(struct iwe_prog_timer *t)
{
	(void)t;
	atomic_store(&g_fired_ms, now_ms());
	ran();
}

static struct iwe_prog_timer g_timer = { .cb = timer_cb };
static struct iwe_prog_timer g_far = { .cb = timer_cb };

static void arm_far(void *arg)
{
	(void)arg;
	iwe_prog_timer_arm(g_prog, &g_far, 60000);
}

static void arm_10ms(void *arg)
{
	(void)arg;
	iwe_prog_timer_arm(g_prog, &g_timer, 10);
}

static void cancel_far(void *arg)
{
	(void)arg;
	iwe_prog_timer_cancel(g_prog, &g_far);
}

/* The loop sleeps until a timer a minute away; a borrowed call arms one
 * due in 10 ms: it fires then, not in a minute. */
static void test_borrowed_timer(void)
{
	long t0;
	int runs;

	iwe_prog_call(g_prog, arm_far, NULL);
	usleep(20000);
	runs = atomic_load(&g_runs);
	t0 = now_ms();
	iwe_prog_call(g_prog, arm_10ms, NULL);
	CHECK(wait_runs(runs + 1) && atomic_load(&g_fired_ms) - t0 >= 9 &&
	      atomic_load(&g_fired_ms) - t0 < WAIT_MS,
	      "a timer armed by a borrowed call fires on time (%ld ms)",
	      atomic_load(&g_fired_ms) - t0);
	iwe_prog_call(g_prog, cancel_far, NULL);
}

static uint64_t g_wake_ns;

/* A step of test_timer_moved_later: arm `t` `ms` from now, then read
 * when the loop's timer wakes it, which must be when `wakes_for` is due. */
struct timer_step {
	struct iwe_prog_timer *t;
	int ms;
	const struct iwe_prog_timer *wakes_for;
	const char *what;
};

static void arm_step(void *arg)
{
	const struct timer_step *st = arg;

	iwe_prog_timer_arm(g_prog, st->t, st->ms);
	g_wake_ns = iwe_prog_timer_wake_ns(g_prog);
}

static void cancel_both(void *arg)
{
	(void)arg;
	iwe_prog_timer_cancel(g_prog, &g_timer);
	iwe_prog_timer_cancel(g_prog, &g_far);
}

/* The loop wakes for its earliest timer; moved later, that timer takes
 * the wake-up with it (a deadline that keeps receding never wakes the
 * loop for nothing); moved past another, it leaves the wake-up at that
 * one's. */
static void test_timer_moved_later(void)
{
	static const struct timer_step steps[] = {
		{ &g_far, 30000, &g_far, "the loop wakes for its one timer, 30 s away" },
		{ &g_timer, 10000, &g_timer, "an earlier timer brings the wake-up forward" },
		{ &g_timer, 20000, &g_timer, "moved later, the earliest timer takes the wake-up along" },
		{ &g_timer, 40000, &g_far, "moved past another, it leaves the wake-up at that one's" },
	};
	uint64_t t0 = iwe_now_ns();
	size_t i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		uint64_t due;

		iwe_prog_call(g_prog, arm_step, (void *)&steps[i]);
		/* Against the timer's own deadline, not the test's clock: a
		 * slow call between the arms shifts both alike. */
		due = steps[i].wakes_for->when;
		CHECK(g_wake_ns + 500000000u > due && g_wake_ns < due + 500000000u,
		      "%s (%.1f s, due at %.1f s)", steps[i].what,
		      (double)(g_wake_ns - t0) / 1e9, (double)(due - t0) / 1e9);
	}
	iwe_prog_call(g_prog, cancel_both, NULL);
}

static void task_fn(struct iwe_prog_task *t)
{
	(void)t;
	ran();
}

/* A task posted from another thread runs on a thread of its own, the
 * progress thread (which the other tests then know by its id). */
static void test_task(void)
{
	static struct iwe_prog_task task = { .fn = task_fn };
	int runs = atomic_load(&g_runs);

	usleep(20000);
	iwe_prog_post(g_prog, &task);
	CHECK(wait_runs(runs + 1) && !pthread_equal(g_ran_on, pthread_self()),
	      "a task posted from another thread runs on the progress thread");
	g_thread = g_ran_on;
}

/* Runs a task on the progress thread twice: the loop has been round
 * its wait once since the caller's last step. */
static int loop_went_round(void)
{
	static struct iwe_prog_task task = { .fn = task_fn };
	int runs = atomic_load(&g_runs);

	iwe_prog_post(g_prog, &task);
	if (!wait_runs(runs + 1))
		return 0;
	iwe_prog_post(g_prog, &task);
	return wait_runs(runs + 2);
}

/* What the progress thread's wake-ups found, as a QP's tells it: input
 * nobody read (1), or input a consumer's poll took (0), n times. */
static int g_input_unread, g_input_times;

static void input_fn(struct iwe_prog_task *t)
{
	(void)t;
	for (int i = 0; i < g_input_times; i++)
		iwe_prog_note_input(g_prog, g_input_unread);
	ran();
}

static int thread_found_input(int unread, int times)
{
	static struct iwe_prog_task task = { .fn = input_fn };
	int runs = atomic_load(&g_runs);

	g_input_unread = unread;
	g_input_times = times;
	iwe_prog_post(g_prog, &task);
	return wait_runs(runs + 1);
}

/* The progress thread's CPUs once its loop went round. */
static int thread_cpus(cpu_set_t *got)
{
	return loop_went_round() &&
	       !pthread_getaffinity_np(g_thread, sizeof(*got), got);
}

/* ... once a consumer called from cpu: the consumer pinned there, a
 * note as its post or poll makes, the loop round, and the consumer's
 * next call, which makes a move the thread left to it (a move off the
 * CPU the thread ran on: iw_prog_cpu.c). */
static int thread_cpus_after_call_from(int cpu, cpu_set_t *got)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one))
		return 0;
	iwe_prog_note_consumer(g_prog);
	if (!loop_went_round())
		return 0;
	iwe_prog_note_consumer(g_prog);
	return !pthread_getaffinity_np(g_thread, sizeof(*got), got);
}

/* A progress thread queued on the CPU of a consumer that spins on
 * memory waits until the kernel preempts the consumer (on some virtual
 * machines: its next tick, milliseconds); so while input comes that no
 * consumer reads, it keeps off that CPU, where the process may run
 * elsewhere.  Consumers that poll read their input: then it may run
 * anywhere. */
static void test_keeps_off_consumer_cpu(void)
{
	cpu_set_t all, got;
	int a = -1, b = -1, i, ok;

	if (sched_getaffinity(0, sizeof(all), &all) || CPU_COUNT(&all) < 2) {
		printf("ok %d - # SKIP the process may run on one CPU only\n",
		       ++tap_count);
		return;
	}
	for (i = 0; i < CPU_SETSIZE && b < 0; i++)
		if (CPU_ISSET(i, &all))
			*(a < 0 ? &a : &b) = i;
	CHECK(thread_cpus_after_call_from(a, &got) && CPU_EQUAL(&got, &all),
	      "the progress thread may run anywhere while no input went unread");
	CHECK(thread_found_input(1, 1) && thread_cpus_after_call_from(a, &got) &&
	      !CPU_ISSET(a, &got) && CPU_ISSET(b, &got) &&
	      CPU_COUNT(&got) == CPU_COUNT(&all) - 1,
	      "input nobody read: it keeps off the CPU its consumer called from (%d)",
	      a);
	usleep(5000);	/* it follows a moving consumer once a ms at most */
	CHECK(thread_cpus_after_call_from(b, &got) && !CPU_ISSET(b, &got) &&
	      CPU_ISSET(a, &got) && CPU_COUNT(&got) == CPU_COUNT(&all) - 1,
	      "... and follows the consumer to CPU %d, giving %d back", b, a);
	usleep(5000);
	CHECK(thread_found_input(0, 16) && thread_cpus(&got) &&
	      CPU_EQUAL(&got, &all),
	      "... and has every CPU again once polls took the input 16 times");
	ok = thread_found_input(1, 1);
	usleep(5000);
	CHECK(ok && thread_cpus_after_call_from(a, &got) && !CPU_ISSET(a, &got),
	      "input nobody read again: off CPU %d", a);
	usleep(5000);
	iwe_prog_note_sleeper(g_prog);
	CHECK(thread_cpus(&got) && CPU_EQUAL(&got, &all),
	      "... and every CPU again once the consumer goes to sleep");
	(void)pthread_setaffinity_np(pthread_self(), sizeof(all), &all);
}

int main(void)
{
	struct iwe_device *dev;

	setvbuf(stdout, NULL, _IOLBF, 0);
	g_prog = prog_on_lo(&dev);
	g_src = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g_src < 0)
		BAIL("eventfd: %s", strerror(errno));
	test_task();
	test_input_dispatched();
	test_calls();
	test_borrowed_timer();
	test_timer_moved_later();
	test_keeps_off_consumer_cpu();
	iwe_device_close(dev);
	close(g_src);
	return tap_done();
}
