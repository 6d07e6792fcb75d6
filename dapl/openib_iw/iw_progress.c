/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The per-device progress thread; see iw_progress.h.
 *
 * One loop iteration: run synchronous calls and posted tasks, wait in
 * epoll_wait until the next timer deadline (0 when tasks are queued),
 * dispatch the events, fire the expired timers (epoll_pwait2: timers
 * have nanosecond resolution).  Other threads reach the
 * loop through an eventfd.  Timers live in a binary min-heap ordered by
 * CLOCK_MONOTONIC deadline, so arming and cancelling are O(log n) even
 * with thousands of pending connections.
 *
 * What the loop runs, it runs holding p->run, which it lets go only
 * while it waits in epoll.  A synchronous call that finds the loop
 * waiting takes p->run and runs on its caller's thread: the loop's
 * objects are as much its own then as the thread's, and the call costs
 * no wake-up of the thread and of its caller (two per call: on 2 CPUs a
 * connect-accept-disconnect cycle made seven such calls).  Anything the
 * call leaves for the loop -- a task, a timer due before the loop's
 * wait ends -- wakes it afterwards.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "iw_env.h"
#include "iw_progress.h"

#define PROG_MAX_EVENTS 64

/* A registered watch, named in its epoll data by slot and generation
 * rather than by address: an epoll batch may name a watch that a call
 * run meanwhile removed, and whose owner is gone (a call lent the loop
 * runs between the wait and the dispatch); the stale name finds the
 * slot empty or its generation moved on. */
struct watch_slot {
	struct iwe_prog_watch *w;	/* NULL: free */
	uint32_t gen;
	uint32_t next_free;		/* index + 1 */
};

/* A synchronous call waiting for the thread (lives on the caller's
 * stack). */
struct prog_call {
	struct prog_call *next;
	void (*fn)(void *arg);
	void *arg;
	int done;
};

struct iwe_prog {
	pthread_t thread;
	int epfd, evfd;
	/* A kick written to evfd and not yet read: later kicks are
	 * redundant (the loop runs what they announce after its read) and
	 * cost a system call each, several per connection's setup. */
	atomic_int evfd_armed;
	int stop;				/* under lock */
	pthread_mutex_t run;			/* running the loop's work */
	atomic_uint_least64_t wait_until;	/* the loop's wait or park
						 * ends then (ns; ~0: never) */
	pthread_mutex_t lock;			/* calls, tasks, stop, kicked */
	pthread_cond_t done_cv;
	pthread_cond_t park_cv;			/* the thread, parked */
	int kicked;				/* under lock: wake from park */
	int in_epoll;				/* under run: the thread waits
						 * in epoll (run let go) */
	/* A consumer thread runs the loop while it waits for connection
	 * events (iwe_prog_drive_sleep), letting run go while it polls;
	 * the thread parks meanwhile, out of epoll, and until the lease
	 * that each such wait renews runs out (ns). */
	atomic_int driving;			/* set and cleared under run */
	atomic_uint drive_gen;			/* drives begun */
	atomic_uint_least64_t lease_until;
	/* Consumers asleep for connection events without driving (another
	 * one drove, or the loop was not to be had): the thread must not
	 * park while nobody drives, or their events would wait for the
	 * lease's end. */
	atomic_int sleepers;
	uint64_t park_until;			/* under lock: the parked
						 * thread looks again then */
	struct prog_call *calls, *calls_tail;
	struct iwe_prog_task *tasks, *tasks_tail;
	/* The loop's (under run: its thread, or a call it lent the loop): */
	struct iwe_prog_timer **heap;
	size_t nheap, heap_cap;
	struct watch_slot *slots;		/* the registered watches */
	uint32_t nslots, slots_cap, free_slot;	/* free_slot: index + 1 */
	int expect_input;			/* poll before the next sleep */
};

static void prog_unpark(struct iwe_prog *p)
{
	pthread_mutex_lock(&p->lock);
	p->kicked = 1;
	pthread_cond_signal(&p->park_cv);
	pthread_mutex_unlock(&p->lock);
}

/* Out of epoll, not out of a park.  EAGAIN means the counter is
 * already non-zero: awake enough. */
static void prog_kick_epoll(struct iwe_prog *p)
{
	uint64_t one = 1;

	if (atomic_exchange(&p->evfd_armed, 1))
		return;
	if (write(p->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		abort();
}

static void prog_wake(struct iwe_prog *p)
{
	prog_kick_epoll(p);
	/* A parked thread does not see the eventfd; a driving consumer
	 * does (it polls the epoll fd), and leaves the thread asleep. */
	if (!atomic_load(&p->driving))
		prog_unpark(p);
}

/* The prog whose loop this thread runs a call of, holding its run. */
static __thread const struct iwe_prog *prog_borrowed;

int iwe_prog_on_thread(const struct iwe_prog *p)
{
	return prog_borrowed == p || pthread_equal(pthread_self(), p->thread);
}

/* ------------------------------------------------------------ timers */

static void heap_set(struct iwe_prog *p, size_t i, struct iwe_prog_timer *t)
{
	p->heap[i] = t;
	t->slot = i + 1;
}

static void heap_up(struct iwe_prog *p, size_t i)
{
	struct iwe_prog_timer *t = p->heap[i];

	while (i > 0 && p->heap[(i - 1) / 2]->when > t->when) {
		heap_set(p, i, p->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(p, i, t);
}

static void heap_down(struct iwe_prog *p, size_t i)
{
	struct iwe_prog_timer *t = p->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= p->nheap)
			break;
		if (c + 1 < p->nheap && p->heap[c + 1]->when < p->heap[c]->when)
			c++;
		if (p->heap[c]->when >= t->when)
			break;
		heap_set(p, i, p->heap[c]);
		i = c;
	}
	heap_set(p, i, t);
}

void iwe_prog_timer_cancel(struct iwe_prog *p, struct iwe_prog_timer *t)
{
	struct iwe_prog_timer *m;
	size_t i;

	if (!t->slot)
		return;
	i = t->slot - 1;
	t->slot = 0;
	if (i == --p->nheap)
		return;
	/* The last timer fills the hole, then finds its place. */
	m = p->heap[p->nheap];
	heap_set(p, i, m);
	heap_up(p, i);
	heap_down(p, m->slot - 1);
}

void iwe_prog_timer_arm(struct iwe_prog *p, struct iwe_prog_timer *t, int ms)
{
	iwe_prog_timer_arm_ns(p, t, (uint64_t)(ms > 0 ? ms : 0) * 1000000u);
}

void iwe_prog_timer_arm_ns(struct iwe_prog *p, struct iwe_prog_timer *t,
			   uint64_t ns)
{
	iwe_prog_timer_cancel(p, t);
	if (p->nheap == p->heap_cap) {
		size_t cap = p->heap_cap ? p->heap_cap * 2 : 64;
		struct iwe_prog_timer **h = realloc(p->heap, cap * sizeof(*h));

		if (!h)
			abort();	/* a lost timer would hang a peer */
		p->heap = h;
		p->heap_cap = cap;
	}
	t->when = iwe_now_ns() + ns;
	heap_set(p, p->nheap++, t);
	heap_up(p, p->nheap - 1);
}

static void run_timers(struct iwe_prog *p)
{
	uint64_t now = iwe_now_ns();

	while (p->nheap && p->heap[0]->when <= now) {
		struct iwe_prog_timer *t = p->heap[0];

		iwe_prog_timer_cancel(p, t);
		t->cb(t);
	}
}

/* How long epoll may sleep: until the next deadline (NULL: no timer). */
static struct timespec *next_timeout(const struct iwe_prog *p,
				     struct timespec *ts)
{
	uint64_t now, d;

	if (!p->nheap)
		return NULL;
	now = iwe_now_ns();
	d = p->heap[0]->when > now ? p->heap[0]->when - now : 0;
	if (d > 60000000000ull)
		d = 60000000000ull;
	*ts = iwe_ns_ts(d);
	return ts;
}

/* ----------------------------------------------------------- watches */

/* Key 0 is the eventfd's. */
static uint64_t slot_key(const struct iwe_prog *p, uint32_t i)
{
	return (uint64_t)p->slots[i].gen << 32 | (i + 1);
}

/* A slot for w; its index, or -1 without memory. */
static int64_t slot_take(struct iwe_prog *p, struct iwe_prog_watch *w)
{
	uint32_t i;

	if (p->free_slot) {
		i = p->free_slot - 1;
		p->free_slot = p->slots[i].next_free;
	} else {
		if (p->nslots == p->slots_cap) {
			uint32_t cap = p->slots_cap ? p->slots_cap * 2 : 64;
			struct watch_slot *n = realloc(p->slots,
						       cap * sizeof(*n));

			if (!n)
				return -1;
			p->slots = n;
			p->slots_cap = cap;
		}
		i = p->nslots++;
		p->slots[i].gen = 0;
	}
	p->slots[i].w = w;
	p->slots[i].gen++;
	return i;
}

static void slot_give(struct iwe_prog *p, uint64_t key)
{
	uint32_t i = (uint32_t)key - 1;

	p->slots[i].w = NULL;
	p->slots[i].gen++;
	p->slots[i].next_free = p->free_slot;
	p->free_slot = i + 1;
}

/* The watch a key names, or NULL when it names one removed since. */
static struct iwe_prog_watch *slot_watch(const struct iwe_prog *p,
					 uint64_t key)
{
	uint32_t i = (uint32_t)key - 1;

	if (i >= p->nslots || p->slots[i].gen != (uint32_t)(key >> 32))
		return NULL;
	return p->slots[i].w;
}

int iwe_prog_watch_add(struct iwe_prog *p, struct iwe_prog_watch *w, int fd,
		       uint32_t events)
{
	int64_t i = slot_take(p, w);
	struct epoll_event ev = { .events = events };

	if (i < 0)
		return ENOMEM;
	ev.data.u64 = slot_key(p, (uint32_t)i);
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = errno;

		slot_give(p, ev.data.u64);
		return err;
	}
	w->key = ev.data.u64;
	w->fd = fd;
	w->events = events;
	return 0;
}

int iwe_prog_watch_mod(struct iwe_prog *p, struct iwe_prog_watch *w,
		       uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = w->key };

	if (w->fd < 0)
		return EBADF;
	if (events == w->events)
		return 0;
	if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		return errno;
	w->events = events;
	return 0;
}

int iwe_prog_watch_move(struct iwe_prog *p, struct iwe_prog_watch *from,
			struct iwe_prog_watch *to, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = from->key };

	if (from->fd < 0)
		return EBADF;
	/* The key stays: the registration keeps its place in epoll's ready
	 * list, and an event the thread read meanwhile for `from` (a call
	 * lent the loop runs while the thread may be in epoll_wait) is
	 * dispatched to `to` once the thread has the loop back.  With a new
	 * key that event was dropped as stale and the MOD queued the input
	 * again behind what came later on other sockets: a passive
	 * connection's RTR behind another connection's FIN. */
	if (events != from->events &&
	    epoll_ctl(p->epfd, EPOLL_CTL_MOD, from->fd, &ev) < 0)
		return errno;
	p->slots[(uint32_t)from->key - 1].w = to;
	to->key = from->key;
	to->fd = from->fd;
	to->events = events;
	from->key = 0;
	from->fd = -1;
	return 0;
}

void iwe_prog_watch_del(struct iwe_prog *p, struct iwe_prog_watch *w)
{
	if (w->fd < 0)
		return;
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	slot_give(p, w->key);
	w->key = 0;
	w->fd = -1;
}

/* ------------------------------------------------------- calls, tasks */

void iwe_prog_post(struct iwe_prog *p, struct iwe_prog_task *t)
{
	int wake;

	pthread_mutex_lock(&p->lock);
	wake = !t->queued;
	if (!t->queued) {
		t->queued = 1;
		t->next = NULL;
		if (p->tasks_tail)
			p->tasks_tail->next = t;
		else
			p->tasks = t;
		p->tasks_tail = t;
	}
	pthread_mutex_unlock(&p->lock);
	/* The thread re-checks the queue before sleeping. */
	if (wake && !iwe_prog_on_thread(p))
		prog_wake(p);
}

void iwe_prog_unpost(struct iwe_prog *p, struct iwe_prog_task *t)
{
	struct iwe_prog_task **pp, *prev = NULL;

	pthread_mutex_lock(&p->lock);
	for (pp = &p->tasks; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != t)
			continue;
		*pp = t->next;
		if (p->tasks_tail == t)
			p->tasks_tail = prev;
		t->queued = 0;
		break;
	}
	pthread_mutex_unlock(&p->lock);
}

/* Run the tasks queued before this point; new ones wait a round, so a
 * task that re-posts itself cannot starve the loop. */
static void run_tasks(struct iwe_prog *p)
{
	struct iwe_prog_task *t, *last;

	pthread_mutex_lock(&p->lock);
	last = p->tasks_tail;
	while (last && (t = p->tasks) != NULL) {
		p->tasks = t->next;
		if (!p->tasks)
			p->tasks_tail = NULL;
		t->queued = 0;
		pthread_mutex_unlock(&p->lock);
		t->fn(t);
		pthread_mutex_lock(&p->lock);
		if (t == last)
			break;
	}
	pthread_mutex_unlock(&p->lock);
}

static void run_calls(struct iwe_prog *p)
{
	struct prog_call *c;

	pthread_mutex_lock(&p->lock);
	while ((c = p->calls) != NULL) {
		p->calls = c->next;
		if (!p->calls)
			p->calls_tail = NULL;
		pthread_mutex_unlock(&p->lock);
		c->fn(c->arg);
		pthread_mutex_lock(&p->lock);
		c->done = 1;
		pthread_cond_broadcast(&p->done_cv);
	}
	pthread_mutex_unlock(&p->lock);
}

static int prog_work_queued(struct iwe_prog *p)
{
	int busy;

	pthread_mutex_lock(&p->lock);
	busy = p->tasks != NULL || p->calls != NULL;
	pthread_mutex_unlock(&p->lock);
	return busy;
}

/* Runs fn(arg) holding p->run, which the caller took; wakes the loop
 * when the call left it work before its wait would end. */
static void call_borrowed(struct iwe_prog *p, void (*fn)(void *arg), void *arg)
{
	int wake;

	prog_borrowed = p;
	fn(arg);
	prog_borrowed = NULL;
	/* Tasks left while the thread is parked for a lease are for the
	 * consumer's next wait (or the thread, at the lease's end). */
	wake = !p->in_epoll && !atomic_load(&p->driving) &&
	       atomic_load(&p->lease_until) > iwe_now_ns() ?
	       0 : prog_work_queued(p);
	wake |= p->nheap && p->heap[0]->when < atomic_load(&p->wait_until);
	pthread_mutex_unlock(&p->run);
	if (wake)
		prog_wake(p);
}

void iwe_prog_call(struct iwe_prog *p, void (*fn)(void *arg), void *arg)
{
	struct prog_call c = { .fn = fn, .arg = arg };

	if (iwe_prog_on_thread(p)) {
		fn(arg);
		return;
	}
	if (pthread_mutex_trylock(&p->run) == 0) {
		call_borrowed(p, fn, arg);
		return;
	}
	pthread_mutex_lock(&p->lock);
	if (p->calls_tail)
		p->calls_tail->next = &c;
	else
		p->calls = &c;
	p->calls_tail = &c;
	pthread_mutex_unlock(&p->lock);
	prog_wake(p);
	pthread_mutex_lock(&p->lock);
	while (!c.done)
		pthread_cond_wait(&p->done_cv, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------------ epoll waits */

/* The epoll timeout: none when work is queued, else the next timer. */
static struct timespec *prog_idle_timeout(struct iwe_prog *p, int *stop,
					  struct timespec *ts)
{
	static const struct timespec zero;
	int busy;

	pthread_mutex_lock(&p->lock);
	busy = p->tasks != NULL || p->calls != NULL;
	*stop = p->stop;
	pthread_mutex_unlock(&p->lock);
	if (busy) {
		*ts = zero;
		return ts;
	}
	return next_timeout(p, ts);
}

static void dispatch(struct iwe_prog *p, struct epoll_event *ev, int n)
{
	uint64_t v;
	int i;

	for (i = 0; i < n; i++) {
		struct iwe_prog_watch *w;

		if (ev[i].data.u64 == 0) {
			if (read(p->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				abort();
			/* After the read: a kick skipped in between (armed
			 * still set) announced work that this loop round
			 * runs next, under run and p->lock.  Before it, that
			 * kick's write could be read here and leave the flag
			 * set on an empty counter: every later kick lost. */
			atomic_store(&p->evfd_armed, 0);
			continue;
		}
		/* A watch removed since the wait (earlier in this batch, or
		 * by a call lent the loop) stays quiet. */
		w = slot_watch(p, ev[i].data.u64);
		if (w && w->fd >= 0)
			w->cb(w, ev[i].events);
	}
}

/* Nanosecond deadlines (a poller's lease is microseconds); kernels
 * before 5.11 lack epoll_pwait2 and get millisecond ones. */
static int prog_wait(struct iwe_prog *p, struct epoll_event *ev,
		     const struct timespec *ts)
{
	int n = epoll_pwait2(p->epfd, ev, PROG_MAX_EVENTS, ts, NULL);

	if (n < 0 && errno == ENOSYS)
		n = epoll_wait(p->epfd, ev, PROG_MAX_EVENTS,
			       !ts ? -1 : (int)(ts->tv_sec * 1000 +
						(ts->tv_nsec + 999999) / 1000000));
	return n;
}

/* How long the loop polls before it sleeps after a watch read bulk
 * input (IWDAPL_RX_SPIN_US, default 50, 0: never).  The next segment of
 * a stream comes within tens of microseconds; a loop asleep for it has
 * the sender's CPU wake it for every one (on loopback the kernel does
 * that in the sending thread: 64 KiB Writes 3290-3390 MB/s with the
 * receiver asleep between segments, 3530-3710 with it polling). */
static uint64_t input_spin_ns(void)
{
	static long v = -1;

	return (uint64_t)iw_env_long_once(&v, "IWDAPL_RX_SPIN_US", 50, 0,
					  1000) * 1000u;
}

void iwe_prog_expect_input(struct iwe_prog *p)
{
	p->expect_input = 1;
}

/* run let go: epoll without sleeping until events come or `end` (ns).
 * Each empty look yields the CPU: a thread woken onto it (a consumer the
 * input completed work for) otherwise waited out the whole spin
 * (t_prog_spin). */
static int prog_spin(struct iwe_prog *p, struct epoll_event *ev,
		     uint64_t end)
{
	int n;

	do {
		n = epoll_wait(p->epfd, ev, PROG_MAX_EVENTS, 0);
		if (n == 0)
			sched_yield();
	} while (n == 0 && iwe_now_ns() < end);
	return n;
}

/* ------------------------------------------------- parking, driving */

/* How long a consumer that drove the loop keeps it after its wait: the
 * thread stays parked that long, and what comes meanwhile for nobody's
 * wait waits as long at most (IWDAPL_CM_LEASE_US). */
static uint64_t prog_lease_ns(void)
{
	static long v = -1;

	return (uint64_t)iw_env_long_once(&v, "IWDAPL_CM_LEASE_US", 500, 0,
					  100000) * 1000u;
}

/* While a consumer drives, the parked thread looks again after a lease,
 * then (the same drive going on) twice as long each time, up to this:
 * a consumer asleep for connection requests all day does not wake it
 * 2000 times a second, and one that waits again and again does not
 * have to tell it (a wake-up) that each wait ended. */
#define PARK_STEP_MAX_NS (1000ull * 1000u * 1000u)
/* A consumer that waits again and again (a new drive each time the
 * thread looks) also makes it look less and less often, up to this many
 * leases: looking every lease, each process's thread woke every 500 us
 * and took the CPU of a consumer in the middle of a connection's setup
 * (0.4 preemptions per PSP cycle of the two processes, each one 10-30
 * us on the cycle's path).  The price: input nobody waits for, once such
 * a consumer stops waiting, waits up to this many leases. */
#define PARK_RENEWED_STEPS_MAX 8u

/* p->lock held, the thread parked: until when it sleeps.  *step and
 * *seen (the drive generation of the last look) carry the back-off. */
static uint64_t park_end_locked(struct iwe_prog *p, uint64_t timer,
				uint64_t *step, unsigned *seen)
{
	uint64_t now = iwe_now_ns(), lease = atomic_load(&p->lease_until);
	uint64_t cap, end;
	unsigned gen = atomic_load(&p->drive_gen);
	int driving = atomic_load(&p->driving);
	/* Waited again and again since the last look (one new drive may
	 * just be the one that began as the thread parked). */
	int renewed = *seen && gen - *seen >= 2;

	*seen = gen;
	if (!driving && (lease <= now || !renewed)) {
		/* Not waited again since the last look: the lease ends
		 * (ended: the park ends). */
		return lease < timer ? lease : timer;
	}
	cap = renewed ? PARK_RENEWED_STEPS_MAX * prog_lease_ns()
		      : PARK_STEP_MAX_NS;
	*step = !*step ? prog_lease_ns() : *step * 2 < cap ? *step * 2 : cap;
	end = now + *step;
	if (driving)
		return end;	/* the driver runs the timers */
	if (lease > end)
		end = lease;
	return end < timer ? end : timer;
}

/* run held, nothing queued, a consumer keeps the loop: sleep out of
 * epoll until it is given back (the lease's end, a kick) or a timer is
 * due; back with run held.  While a consumer drives, the loop is its:
 * the thread does not touch it. */
static void prog_park(struct iwe_prog *p, const struct timespec *timeout)
{
	uint64_t timer = timeout ? iwe_now_ns() + iwe_ts_ns(timeout) : ~0ull;
	uint64_t step = 0;
	unsigned seen = 0;
	struct timespec until;
	int stop;

	pthread_mutex_unlock(&p->run);
	for (;;) {
		pthread_mutex_lock(&p->lock);
		while (!p->kicked && !p->stop) {
			uint64_t end;

			if (!atomic_load(&p->driving) &&
			    atomic_load(&p->sleepers))
				break;	/* the loop is nobody's: serve it */
			end = park_end_locked(p, timer, &step, &seen);
			if (iwe_now_ns() >= end)
				break;
			p->park_until = end;
			if (!atomic_load(&p->driving))
				atomic_store(&p->wait_until, end);
			until = iwe_ns_ts(end);
			pthread_cond_timedwait(&p->park_cv, &p->lock, &until);
		}
		p->park_until = 0;
		p->kicked = 0;
		stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			break;
		if (!atomic_load(&p->driving) &&
		    pthread_mutex_trylock(&p->run) == 0) {
			if (!atomic_load(&p->driving))
				return;
			pthread_mutex_unlock(&p->run);
		}
		/* Lease over, a call holds run: it is short. */
		if (!atomic_load(&p->driving) &&
		    atomic_load(&p->lease_until) <= iwe_now_ns())
			break;
	}
	pthread_mutex_lock(&p->run);
}

/* A driving consumer's work between its polls: what is queued and the
 * timers due.  The poll timeout (ms) to the next timer or `deadline`
 * (ns), 0 when work is queued, -1 when there is neither. */
static int drive_work(struct iwe_prog *p, uint64_t deadline)
{
	uint64_t now, end = deadline;

	run_calls(p);
	run_tasks(p);
	run_timers(p);
	if (prog_work_queued(p))
		return 0;
	if (p->nheap && p->heap[0]->when < end)
		end = p->heap[0]->when;
	if (end == ~0ull)
		return -1;
	now = iwe_now_ns();
	if (end <= now)
		return 0;
	/* Round up: a poll that ends before the deadline only loops. */
	return (int)((end - now + 999999) / 1000000 > 60000 ? 60000 :
		     (end - now + 999999) / 1000000);
}

/* How long a consumer driving the loop for connection events polls
 * before it sleeps (IWDAPL_CM_SPIN_US, default 50, 0: never).  A
 * connection's setup is a chain of messages each side answers at once
 * (request, reply, RTR; and the close), so the next one mostly comes
 * within tens of microseconds: caught by the spin it costs no sleep and
 * wake-up (some 10-20 us each on a VM), on both sides of every step. */
static uint64_t drive_spin_ns(void)
{
	static long v = -1;

	return (uint64_t)iw_env_long_once(&v, "IWDAPL_CM_SPIN_US", 50, 0,
					  1000) * 1000u;
}

/* Unlocked: polls fds without sleeping until one is ready or `spin` ns
 * have passed (not beyond ms).  1 when one is. */
static int drive_spin(struct pollfd *fds, int ms)
{
	uint64_t spin = drive_spin_ns(), end;

	if (!spin || ms == 0)
		return 0;
	if (ms > 0 && (uint64_t)ms * 1000000u < spin)
		spin = (uint64_t)ms * 1000000u;
	end = iwe_now_ns() + spin;
	do {
		if (poll(fds, 2, 0) != 0)
			return 1;	/* ready, or an error for the caller */
	} while (iwe_now_ns() < end);
	return 0;
}

/* run held, driving: the consumer's poll.  run is let go meanwhile, so
 * other threads' calls borrow the loop as they would from the idle
 * thread.  1 when the epoll fd has events. */
static int drive_poll(struct iwe_prog *p, struct pollfd *fds, int ms)
{
	atomic_store(&p->wait_until, ms < 0 ? ~0ull :
		     iwe_now_ns() + (uint64_t)ms * 1000000u);
	prog_borrowed = NULL;
	pthread_mutex_unlock(&p->run);
	fds[0].revents = fds[1].revents = 0;
	if (!drive_spin(fds, ms) && poll(fds, 2, ms) < 0 && errno != EINTR)
		fds[0].revents = POLLERR;	/* give up the drive */
	pthread_mutex_lock(&p->run);
	prog_borrowed = p;
	return fds[1].revents != 0;
}

enum take { TAKE_OK, TAKE_WOKEN, TAKE_REFUSED };

/* A consumer about to drive, the lease renewed: get the loop, run held
 * and the thread out of it.  The thread waits in epoll (it would take
 * the events) or runs the loop: ask it out of epoll and give it up to
 * the spin's length to park, which the lease makes it do at its next
 * round.  Without this a wait that came while the thread was in epoll
 * slept undriven -- and one woken by anything but its own event (the
 * eventfd of a timer armed just before the wait) then parked for the
 * lease, the event left unread: 1 to 2 % of connection cycles took an
 * extra 300-500 us.  Another consumer driving: refused, it serves our
 * events too. */
static enum take take_loop(struct iwe_prog *p, int (*woken)(void *arg),
			   void *arg)
{
	uint64_t end = iwe_now_ns() + drive_spin_ns();
	int kicked = 0;

	for (;;) {
		if (atomic_load(&p->driving))
			return TAKE_REFUSED;
		if (pthread_mutex_trylock(&p->run) == 0) {
			int in_epoll = p->in_epoll;

			if (!in_epoll && !atomic_load(&p->driving))
				return TAKE_OK;
			pthread_mutex_unlock(&p->run);
			if (in_epoll && !kicked) {
				prog_kick_epoll(p);
				kicked = 1;
			}
		}
		if (woken(arg))
			return TAKE_WOKEN;
		if (iwe_now_ns() >= end)
			return TAKE_REFUSED;
		sched_yield();	/* on 2 CPUs the thread may need ours */
	}
}

/* The loop is not ours: sleep until wake_fd is readable or the
 * deadline (ns, ~0: none), counted among the sleepers so that the
 * thread serves the loop meanwhile instead of parking.  0. */
static int sleep_undriven(struct iwe_prog *p, int wake_fd, uint64_t deadline)
{
	struct pollfd fd = { .fd = wake_fd, .events = POLLIN };
	struct timespec left, *tmo = NULL;
	uint64_t now;

	atomic_fetch_add(&p->sleepers, 1);
	prog_unpark(p);		/* a thread parked without a driver */
	if (deadline != ~0ull) {
		now = iwe_now_ns();
		left = iwe_ns_ts(deadline > now ? deadline - now : 0);
		tmo = &left;
	}
	(void)ppoll(&fd, 1, tmo, NULL);
	atomic_fetch_sub(&p->sleepers, 1);
	return 0;
}

int iwe_prog_drive_sleep(struct iwe_prog *p, int wake_fd, uint64_t deadline,
			 int (*woken)(void *arg), void *arg)
{
	struct pollfd fds[2] = {
		{ .fd = wake_fd, .events = POLLIN },
		{ .fd = p->epfd, .events = POLLIN },
	};
	struct epoll_event ev[PROG_MAX_EVENTS];
	uint64_t lease, timer;
	int kick;

	if (!prog_lease_ns() || prog_borrowed)
		return -1;
	/* The thread parks at its next round if it cannot now. */
	atomic_store(&p->lease_until, iwe_now_ns() + prog_lease_ns());
	switch (take_loop(p, woken, arg)) {
	case TAKE_WOKEN:
		return 0;
	case TAKE_REFUSED:
		return sleep_undriven(p, wake_fd, deadline);
	case TAKE_OK:
		break;
	}
	atomic_store(&p->driving, 1);
	atomic_fetch_add(&p->drive_gen, 1);
	prog_borrowed = p;
	for (;;) {
		int ms = drive_work(p, deadline);

		if (woken(arg))
			break;
		if (drive_poll(p, fds, ms)) {
			int n = epoll_wait(p->epfd, ev, PROG_MAX_EVENTS, 0);

			if (n > 0)
				dispatch(p, ev, n);
		}
		if (fds[0].revents || woken(arg) || iwe_now_ns() >= deadline)
			break;
	}
	/* What the last round left (the event's aftermath) is ours too;
	 * what that leaves waits for the next wait or the lease's end. */
	run_calls(p);
	run_tasks(p);
	prog_borrowed = NULL;
	lease = iwe_now_ns() + prog_lease_ns();
	atomic_store(&p->lease_until, lease);
	atomic_store(&p->driving, 0);
	/* A thread parked during the drive looks again at its own pace:
	 * wake it when that is past what a consumer waiting again and again
	 * makes it wait (PARK_RENEWED_STEPS_MAX), or past a timer. */
	timer = p->nheap ? p->heap[0]->when : ~0ull;
	pthread_mutex_unlock(&p->run);
	pthread_mutex_lock(&p->lock);
	/* Work queued by others while we drove woke only the eventfd
	 * (prog_wake): it is the thread's now. */
	kick = p->park_until > lease + (PARK_RENEWED_STEPS_MAX - 1) *
				       prog_lease_ns() ||
	       p->park_until > timer || p->calls || p->tasks ||
	       atomic_load(&p->sleepers);
	/* Until then the timers are the thread's (call_borrowed wakes it
	 * for an earlier one); 0: it recomputes before it sleeps. */
	atomic_store(&p->wait_until, kick || !p->park_until ? 0 :
		     p->park_until);
	pthread_mutex_unlock(&p->lock);
	if (kick)
		prog_unpark(p);
	return 0;
}

void iwe_prog_drive_stop(struct iwe_prog *p)
{
	uint64_t z = 0;

	if (atomic_load(&p->lease_until) == 0)
		return;
	atomic_store(&p->lease_until, z);
	prog_unpark(p);
}

/* -------------------------------------------------------------- loop */

static void *prog_main(void *arg)
{
	struct iwe_prog *p = arg;
	struct epoll_event ev[PROG_MAX_EVENTS];
	struct timespec ts, *timeout;
	uint64_t spin, now;
	int n, stop = 0;

	pthread_mutex_lock(&p->run);
	for (;;) {
		run_calls(p);
		run_tasks(p);
		timeout = prog_idle_timeout(p, &stop, &ts);
		if (stop)
			break;
		if ((atomic_load(&p->driving) ||
		     (atomic_load(&p->lease_until) > iwe_now_ns() &&
		      !atomic_load(&p->sleepers))) &&
		    (!timeout || timeout->tv_sec || timeout->tv_nsec)) {
			prog_park(p, timeout);
			run_timers(p);
			continue;
		}
		/* After bulk input: poll a while (never past the timeout),
		 * then round the loop (its timeout is then shorter by the
		 * spin) to sleep. */
		spin = p->expect_input ? input_spin_ns() : 0;
		if (timeout && iwe_ts_ns(timeout) < spin)
			spin = iwe_ts_ns(timeout);
		p->expect_input = 0;
		now = iwe_now_ns();
		atomic_store(&p->wait_until, spin ? now + spin :
			     !timeout ? ~0ull : now + iwe_ts_ns(timeout));
		p->in_epoll = 1;
		pthread_mutex_unlock(&p->run);
		n = spin ? prog_spin(p, ev, now + spin) :
			   prog_wait(p, ev, timeout);
		pthread_mutex_lock(&p->run);
		p->in_epoll = 0;
		if (n < 0 && errno != EINTR)
			abort();
		if (n > 0)
			dispatch(p, ev, n);
		run_timers(p);
	}
	run_calls(p);
	run_tasks(p);
	pthread_mutex_unlock(&p->run);
	return NULL;
}

/* ------------------------------------------------------ start / stop */

static void prog_cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

static struct iwe_prog *prog_create(void)
{
	struct iwe_prog *p = calloc(1, sizeof(*p));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };

	if (!p)
		return NULL;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->epfd < 0 || p->evfd < 0 ||
	    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->evfd, &ev) < 0)
		goto fail;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->run, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	prog_cond_init_monotonic(&p->park_cv);
	if (pthread_create(&p->thread, NULL, prog_main, p) == 0)
		return p;
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->run);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->park_cv);
fail:
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->evfd >= 0)
		close(p->evfd);
	free(p);
	return NULL;
}

struct iwe_prog *iwe_prog_get(struct iwe_device *dev)
{
	struct iwe_prog *p = atomic_load_explicit(&dev->prog,
						  memory_order_acquire);

	if (p)
		return p;
	iwe_lock(&dev->lock);
	p = atomic_load_explicit(&dev->prog, memory_order_relaxed);
	if (!p) {
		p = prog_create();
		atomic_store_explicit(&dev->prog, p, memory_order_release);
	}
	iwe_unlock(&dev->lock);
	if (!p)
		errno = ENOMEM;
	return p;
}

void iwe_prog_stop(struct iwe_prog *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_signal(&p->park_cv);
	pthread_mutex_unlock(&p->lock);
	prog_wake(p);
	pthread_join(p->thread, NULL);
	close(p->epfd);
	close(p->evfd);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->run);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->park_cv);
	free(p->heap);
	free(p->slots);
	free(p);
}
