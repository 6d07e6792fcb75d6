/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A consumer thread that runs the progress loop while it waits
 * (iwe_prog_drive_sleep): what it waits for is dispatched on its own
 * thread, even when the thread waited in epoll when the wait began;
 * others' calls borrow the loop meanwhile, their tasks and the
 * timers run on the waiting thread; a second waiter sleeps and is
 * served at once when the first one's drive ends; the
 * deadline holds; the parked progress thread takes the loop back at the
 * lease's end, or at once after iwe_prog_drive_stop; closing the device
 * with the thread parked does not hang.  TAP output.
 *
 * The lease is set to 100 ms (IWDAPL_CM_LEASE_US) so that "waits for the
 * lease" and "at once" are far apart on a loaded machine; the spin before
 * a sleep (IWDAPL_CM_SPIN_US) to 1 ms, so that its CPU time shows. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>

#include "iw_priv.h"
#include "prog_harness.h"

#define LEASE_MS 100
#define MS 1000000ull

static struct iwe_prog *g_prog;
static int g_src = -1, g_wake = -1;	/* watched fd; the waiter's fd */

/* Who ran the last callback, and how many ran. */
static pthread_t g_ran_on;
static atomic_int g_runs;
static atomic_int g_self_woken;

static void drain(int fd)
{
	uint64_t v;

	(void)!read(fd, &v, sizeof(v));
}

static void ran(void)
{
	g_ran_on = pthread_self();
	atomic_fetch_add(&g_runs, 1);
}

static int never_woken(void *arg)
{
	(void)arg;
	return 0;
}

static int self_woken(void *arg)
{
	(void)arg;
	return atomic_load(&g_self_woken);
}

/* ------------------------------------------------------- the watch */

static void src_cb(struct iwe_prog_watch *w, uint32_t revents)
{
	(void)revents;
	drain(w->fd);
	ran();
	prog_poke(g_wake);	/* as the CM posting the waiter's event */
}

static struct iwe_prog_watch g_watch = { .fd = -1, .cb = src_cb };

static void watch_add(void *arg)
{
	(void)arg;
	if (iwe_prog_watch_add(g_prog, &g_watch, g_src, EPOLLIN))
		BAIL("watch_add");
}

static void watch_del(void *arg)
{
	(void)arg;
	iwe_prog_watch_del(g_prog, &g_watch);
}

/* ---------------------------------------------- helpers in threads */

struct later {
	pthread_t t;
	int delay_ms;
	void (*fn)(void);
};

static void *later_main(void *arg)
{
	struct later *l = arg;

	usleep((useconds_t)l->delay_ms * 1000u);
	l->fn();
	return NULL;
}

static void later_start(struct later *l, int delay_ms, void (*fn)(void))
{
	l->delay_ms = delay_ms;
	l->fn = fn;
	if (pthread_create(&l->t, NULL, later_main, l))
		BAIL("pthread_create");
}

static void poke_src(void)
{
	prog_poke(g_src);
}

static int wait_fd(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* A drive with the whole test's safety deadline; its elapsed ms. */
static int drive(int (*woken)(void *), uint64_t for_ns, uint64_t *ms)
{
	uint64_t t0 = iwe_now_ns();
	int rc = iwe_prog_drive_sleep(g_prog, g_wake, t0 + for_ns, woken, NULL);

	*ms = (iwe_now_ns() - t0) / MS;
	return rc;
}

/* ----------------------------------------------------------- tests */

/* Drives until one gets the loop (the thread parks at its next round
 * if it could not be had at once, e.g. on a loaded machine).  rc of
 * the last try. */
static int drive_parked(uint64_t for_ns)
{
	uint64_t ms;
	int rc = -1;

	for (int i = 0; i < 50 && rc != 0; i++) {
		rc = drive(never_woken, for_ns, &ms);
		if (rc != 0) {
			prog_poke(g_src);
			(void)wait_fd(g_wake, 3000);
			drain(g_wake);
			usleep(1000);	/* while the thread goes to park */
		}
	}
	return rc;
}

/* Whether a wait that begins with the thread in epoll gets the loop:
 * the thread is asked out of epoll and parks, and the event is
 * dispatched on the waiting thread.  Up to 5 tries (a loaded machine may
 * keep the thread from parking within the spin). */
static int first_wait_drives(void)
{
	for (int i = 0; i < 5; i++) {
		struct later l;
		uint64_t ms;
		int rc, runs;

		iwe_prog_drive_stop(g_prog);	/* back to epoll */
		usleep(5000);
		runs = atomic_load(&g_runs);
		later_start(&l, 20, poke_src);
		rc = drive(never_woken, 2000 * MS, &ms);
		if (rc != 0)
			(void)wait_fd(g_wake, 3000);
		pthread_join(l.t, NULL);
		drain(g_wake);
		if (rc == 0 && atomic_load(&g_runs) == runs + 1 &&
		    pthread_equal(g_ran_on, pthread_self()))
			return 1;
	}
	return 0;
}

static void test_waiter_drives(void)
{
	struct later l;
	uint64_t ms;
	int rc, runs = atomic_load(&g_runs);

	/* The thread sits in epoll at first: the waiter asks it out and
	 * runs the loop itself.  Before, it slept as usual (and when the
	 * thread woke for anything but the waiter's event, that event
	 * waited for the lease's end). */
	CHECK(first_wait_drives(), "a wait that finds the thread in epoll "
	      "drives the loop");
	CHECK(drive_parked(1 * MS) == 0, "the thread parked");
	runs = atomic_load(&g_runs) - 1;
	later_start(&l, 20, poke_src);
	rc = drive(never_woken, 2000 * MS, &ms);
	pthread_join(l.t, NULL);
	CHECK(rc == 0, "second wait drives the loop (rc %d)", rc);
	CHECK(atomic_load(&g_runs) == runs + 2 &&
	      pthread_equal(g_ran_on, pthread_self()),
	      "the event is dispatched on the waiting thread");
	CHECK(ms >= 15 && ms < 2000, "the wait lasted until the event (%llu ms)",
	      (unsigned long long)ms);
	drain(g_wake);
}

/* Two consumers wait for connection events: one drives, the other
 * sleeps.  When the driver's wait ends, the loop is the thread's again
 * at once: the sleeper's event must not wait for the lease to end (it
 * did: the thread parked for the lease the driver left). */
struct waiter {
	pthread_t t;
	int wake_fd;
	atomic_int stop;
	int rc;
	uint64_t woke_ns;
};

static int waiter_stopped(void *arg)
{
	return atomic_load(&((struct waiter *)arg)->stop);
}

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = iwe_prog_drive_sleep(g_prog, w->wake_fd,
				     iwe_now_ns() + 3000 * MS,
				     waiter_stopped, w);
	if (w->rc != 0)		/* the caller's own sleep */
		(void)wait_fd(w->wake_fd, 3000);
	w->woke_ns = iwe_now_ns();
	return NULL;
}

static void test_sleeper_served(void)
{
	struct waiter a = { .wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) };
	struct waiter b = { .wake_fd = g_wake };
	uint64_t t0;
	int runs;

	if (a.wake_fd < 0)
		BAIL("eventfd: %s", strerror(errno));
	CHECK(drive_parked(1 * MS) == 0, "sleeper: the thread parked");
	if (pthread_create(&a.t, NULL, waiter_main, &a))
		BAIL("pthread_create");
	usleep(10000);		/* a drives */
	if (pthread_create(&b.t, NULL, waiter_main, &b))
		BAIL("pthread_create");
	usleep(10000);		/* b sleeps */
	atomic_store(&a.stop, 1);
	prog_poke(a.wake_fd);
	pthread_join(a.t, NULL);
	usleep(5000);
	runs = atomic_load(&g_runs);
	t0 = iwe_now_ns();
	prog_poke(g_src);
	pthread_join(b.t, NULL);
	CHECK(a.rc == 0 && atomic_load(&g_runs) == runs + 1 &&
	      !pthread_equal(g_ran_on, a.t) && !pthread_equal(g_ran_on, b.t),
	      "sleeper: its event is dispatched by the progress thread");
	CHECK(b.woke_ns - t0 < LEASE_MS / 2 * MS,
	      "sleeper: at once, not at the lease's end (%llu ms)",
	      (unsigned long long)((b.woke_ns - t0) / MS));
	drain(g_wake);
	close(a.wake_fd);
}

static void test_deadline(void)
{
	uint64_t ms;
	int rc = drive_parked(1 * MS) ? -1 : drive(never_woken, 30 * MS, &ms);

	CHECK(rc == 0 && ms >= 29 && ms < 1000,
	      "a drive with nothing to do ends at its deadline (rc %d, %llu ms)",
	      rc, (unsigned long long)ms);
}

static uint64_t thread_cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* With IWDAPL_CM_SPIN_US=1000 (main): a drive with nothing to do polls
 * for about 1 ms of CPU, then sleeps until its deadline.  The lower
 * bound is retried: a descheduled spin burns less. */
static void test_spin_bounded(void)
{
	uint64_t cpu = 0, most = 0, ms;
	int rc = 0;

	for (int i = 0; i < 3 && most < 500; i++) {
		uint64_t c0;

		rc |= drive_parked(1 * MS);
		c0 = thread_cpu_us();
		rc |= drive(never_woken, 40 * MS, &ms);
		cpu = thread_cpu_us() - c0;
		most = cpu > most ? cpu : most;
		if (cpu > 20000)
			break;
	}
	CHECK(rc == 0 && most >= 500,
	      "a drive polls before it sleeps (%llu us of CPU)",
	      (unsigned long long)most);
	CHECK(cpu <= 20000, "and then sleeps: a 40 ms drive took %llu us of "
	      "CPU", (unsigned long long)cpu);
}

static void call_fn(void *arg)
{
	(void)arg;
	ran();
	prog_poke(g_wake);
}

static void call_from_other(void)
{
	iwe_prog_call(g_prog, call_fn, NULL);
}

static void task_fn(struct iwe_prog_task *t)
{
	(void)t;
	call_fn(NULL);
}

static struct iwe_prog_task g_task = { .fn = task_fn };

static void post_from_other(void)
{
	iwe_prog_post(g_prog, &g_task);
}

/* Another thread's call or task, 10 ms into a drive: the driver lets
 * the loop go while it polls, so a call runs on its caller's thread (no
 * hand-over), and a task on the driver's. */
static void test_other_thread(void (*fn)(void), int on_caller,
			      const char *what)
{
	struct later l;
	uint64_t ms;
	int rc;

	later_start(&l, 10, fn);
	rc = drive(never_woken, 2000 * MS, &ms);
	pthread_join(l.t, NULL);	/* a call has returned */
	CHECK(rc == 0 && pthread_equal(g_ran_on, on_caller ? l.t :
				       pthread_self()),
	      "another thread's %s runs on the %s thread", what,
	      on_caller ? "calling" : "driving");
	drain(g_wake);
}

static void timer_cb(struct iwe_prog_timer *t)
{
	(void)t;
	call_fn(NULL);
}

static struct iwe_prog_timer g_timer = { .cb = timer_cb };

static void arm_10ms(void *arg)
{
	(void)arg;
	iwe_prog_timer_arm(g_prog, &g_timer, 10);
}

static void test_timer_while_driving(void)
{
	uint64_t ms;
	int rc, runs;

	iwe_prog_call(g_prog, arm_10ms, NULL);
	runs = atomic_load(&g_runs);
	rc = drive(never_woken, 2000 * MS, &ms);
	CHECK(rc == 0 && atomic_load(&g_runs) == runs + 1 &&
	      pthread_equal(g_ran_on, pthread_self()) && ms >= 8 && ms < 2000,
	      "a timer fires on the driving thread, on time (%llu ms)",
	      (unsigned long long)ms);
	drain(g_wake);
}

static void self_wake_cb(struct iwe_prog_watch *w, uint32_t revents)
{
	(void)revents;
	drain(w->fd);
	ran();
	atomic_store(&g_self_woken, 1);	/* no write of the waiter's fd */
}

static void test_self_wake(void)
{
	struct later l;
	uint64_t ms;
	int rc;

	g_watch.cb = self_wake_cb;
	later_start(&l, 10, poke_src);
	rc = drive(self_woken, 2000 * MS, &ms);
	pthread_join(l.t, NULL);
	CHECK(rc == 0 && atomic_load(&g_self_woken) && ms < 1000,
	      "a wake the waiter gave itself ends the drive (%llu ms)",
	      (unsigned long long)ms);
	atomic_store(&g_self_woken, 0);
	g_watch.cb = src_cb;
}

/* After a drive the thread is parked for the lease: an event for nobody's
 * wait is dispatched by the thread once the lease is over -- or at once
 * after iwe_prog_drive_stop. */
/* Voluntary context switches of the progress thread: the one thread of
 * the process that is not this one (the helpers are joined). */
static long prog_thread_switches(void)
{
	char path[300], line[128];
	long v = -1;
	FILE *f;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == (int)gettid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24))
				v = atol(line + 24);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return v;
}

/* A consumer that waits again and again (drives of 3 ms, 2 ms apart, for
 * 1.2 s, a lease of 100 ms) makes the parked thread look less and less
 * often: 100, 200, 400 then 800 ms.  It looked every lease (12 times),
 * and each look took the CPU of a consumer in the middle of its work. */
static void test_renewed_backoff(void)
{
	uint64_t end, ms;
	long before, looks;
	int rc = 0;

	CHECK(drive_parked(1 * MS) == 0, "backoff: the thread parked");
	before = prog_thread_switches();
	end = iwe_now_ns() + 1200 * MS;
	while (iwe_now_ns() < end && rc == 0) {
		rc = drive(never_woken, 3 * MS, &ms);
		usleep(2000);
	}
	looks = prog_thread_switches() - before;
	CHECK(rc == 0 && before >= 0 && looks <= 6,
	      "backoff: the parked thread looked %ld times in 1.2 s of "
	      "repeated waits", looks);
	/* Give the loop back before the tests that time the lease. */
	iwe_prog_drive_stop(g_prog);
	usleep(5000);
}

static void test_lease_end(int stop)
{
	uint64_t t0, ms;
	int rc, runs, woke;

	/* A loaded machine can keep the thread from parking, or the test
	 * from poking, until the lease is over (0 ms, seen once beside a
	 * fuzzer on both CPUs): a lease that ended early is tried again,
	 * up to 3 times; one that never holds fails every try. */
	for (int try = 0;; try++) {
		rc = drive_parked(5 * MS);
		if (stop)
			iwe_prog_drive_stop(g_prog);
		runs = atomic_load(&g_runs);
		t0 = iwe_now_ns();
		prog_poke(g_src);
		woke = wait_fd(g_wake, 3000);
		ms = (iwe_now_ns() - t0) / MS;
		if (stop || !woke || ms >= LEASE_MS / 2 || try == 2)
			break;
		drain(g_wake);
	}
	CHECK(woke, "%s: the event is dispatched", stop ? "stop" : "lease");
	CHECK(rc == 0 && atomic_load(&g_runs) == runs + 1 &&
	      !pthread_equal(g_ran_on, pthread_self()),
	      "%s: by the progress thread", stop ? "stop" : "lease");
	if (stop)
		CHECK(ms < LEASE_MS / 2, "stop: at once (%llu ms)",
		      (unsigned long long)ms);
	else
		CHECK(ms >= LEASE_MS / 2 && ms < 3000,
		      "lease: once the lease is over (%llu ms)",
		      (unsigned long long)ms);
	drain(g_wake);
}

static void test_close_parked(struct iwe_device *dev)
{
	uint64_t ms, t0;

	CHECK(drive_parked(1 * MS) == 0, "close: the thread is parked");
	iwe_prog_call(g_prog, watch_del, NULL);
	t0 = iwe_now_ns();
	iwe_device_close(dev);
	ms = (iwe_now_ns() - t0) / MS;
	CHECK(ms < LEASE_MS / 2, "closing the device with the thread parked "
	      "does not wait for the lease (%llu ms)", (unsigned long long)ms);
}

int main(void)
{
	struct iwe_device *dev;

	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("IWDAPL_CM_LEASE_US", "100000", 1);
	setenv("IWDAPL_CM_SPIN_US", "1000", 1);
	g_prog = prog_on_lo(&dev);
	g_src = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	g_wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g_src < 0 || g_wake < 0)
		BAIL("eventfd: %s", strerror(errno));
	iwe_prog_call(g_prog, watch_add, NULL);
	test_waiter_drives();
	test_sleeper_served();
	test_deadline();
	test_spin_bounded();
	test_other_thread(call_from_other, 1, "call");
	test_other_thread(post_from_other, 0, "task");
	test_timer_while_driving();
	test_self_wake();
	test_renewed_backoff();
	test_lease_end(0);
	test_lease_end(1);
	test_close_parked(dev);
	close(g_src);
	close(g_wake);
	return tap_done();
}
