/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The per-device progress thread; see iw_progress.h.
 *
 * One loop iteration: run synchronous calls and posted tasks, sleep
 * until the device's epoll has events (0 when tasks are queued; timers
 * wake it through a timerfd), take and dispatch the events, fire the
 * expired timers.  Other threads reach the
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
 * wait ends -- wakes it afterwards.  Consumers may also take events
 * from the epoll (a poll, a sleep): every taker queues its batch in the
 * same step as it takes it, and batches are dispatched in that order
 * (batch_take); so nobody sleeps in the device's epoll itself, but in an
 * outer one that holds it.  A consumer that spins on the loop's events
 * (iwe_prog_spin) turns the device's epoll off in the outer one while no
 * QP's input is the thread's to place, so that an arrival it takes
 * itself does not wake the thread as well.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include "iw_prog_cpu.h"
#include "iw_progress.h"

#define PROG_MAX_EVENTS 64
/* What a wait in the outer epoll may return: the device's epoll and a
 * sleeping consumer's fds (two at most: its EVD's and its CQ's). */
#define PROG_MAX_WAKES 8
/* The epoll data of a sleeping consumer's own fds (iwe_prog_sleep), of
 * the timerfd that wakes whoever waits for the earliest timer, and of
 * the device's epoll in the outer one. */
#define PROG_KEY_SLEEPER (~0ull)
#define PROG_KEY_TIMER (~0ull - 1)
#define PROG_KEY_EVENTS (~0ull - 2)

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

/* A batch of events taken from epoll and not yet dispatched (lives on
 * its taker's stack until then). */
struct prog_batch {
	struct prog_batch *next;
	const struct epoll_event *ev;
	int n;
};

struct iwe_prog {
	pthread_t thread;
	/* epfd: the watches, evfd and tfd; read without waiting, under
	 * take_lock (batch_take).  wfd: what threads sleep in, epfd
	 * (edge-triggered) and a sleeping consumer's fds. */
	int epfd, wfd, evfd;
	/* The earliest timer's deadline, as a timerfd in epfd: a thread that
	 * borrows the loop and arms an earlier timer re-arms the fd instead
	 * of waking the progress thread to wait less. */
	int tfd;
	uint64_t tfd_at;			/* under run: set for (ns), 0: no */
	/* A kick written to evfd and not yet read: later kicks are
	 * redundant (the loop runs what they announce after its read) and
	 * cost a system call each, several per connection's setup. */
	atomic_int evfd_armed;
	int stop;				/* under lock */
	/* Under lock: consumers that spin on the loop (iwe_prog_spin);
	 * QPs whose input the thread places (iwe_prog_note_placing); the
	 * device's epoll off in wfd (the thread quiet). */
	int spinners, placing, quiet;
	pthread_mutex_t run;			/* running the loop's work */
	pthread_mutex_t lock;			/* calls, tasks, stop */
	pthread_cond_t done_cv;
	atomic_int sleeper;			/* a consumer sleeps in epoll */
	atomic_int thread_waits;		/* ... and the thread waits for
						 * it to leave (sleeper_cv) */
	pthread_cond_t sleeper_cv;
	struct prog_call *calls, *calls_tail;
	struct iwe_prog_task *tasks, *tasks_tail;
	/* Batches taken, oldest first (see batch_take); take_lock makes
	 * taking a batch and queueing it one step. */
	pthread_mutex_t take_lock, batch_lock;
	struct prog_batch *batches, *batches_tail;
	atomic_int nbatches;
	/* The loop's (under run: its thread, or a call it lent the loop): */
	struct iwe_prog_timer **heap;
	size_t nheap, heap_cap;
	struct watch_slot *slots;		/* the registered watches */
	uint32_t nslots, slots_cap, free_slot;	/* free_slot: index + 1 */
	struct iwe_prog_cpu cpu;		/* its claim on a CPU */
};

/* Out of epoll.  EAGAIN means the counter is already non-zero: awake
 * enough. */
static void prog_wake(struct iwe_prog *p)
{
	uint64_t one = 1;

	if (atomic_exchange(&p->evfd_armed, 1))
		return;
	if (write(p->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		abort();
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

static void timer_fd_set(struct iwe_prog *p, uint64_t when);

/* A heap a quarter full gives half back (one timer per busy connection:
 * 10,000 connections left 128 KiB behind them). */
static void heap_shrink(struct iwe_prog *p)
{
	struct iwe_prog_timer **h;

	if (p->heap_cap <= 64 || p->nheap >= p->heap_cap / 4)
		return;
	h = realloc(p->heap, p->heap_cap / 2 * sizeof(*h));
	if (h) {
		p->heap = h;
		p->heap_cap /= 2;
	}
}

void iwe_prog_timer_cancel(struct iwe_prog *p, struct iwe_prog_timer *t)
{
	struct iwe_prog_timer *m;
	size_t i;

	if (!t->slot)
		return;
	i = t->slot - 1;
	t->slot = 0;
	if (i != --p->nheap) {
		/* The last timer fills the hole, then finds its place. */
		m = p->heap[p->nheap];
		heap_set(p, i, m);
		heap_up(p, i);
		heap_down(p, m->slot - 1);
	}
	heap_shrink(p);
}

void iwe_prog_timer_arm(struct iwe_prog *p, struct iwe_prog_timer *t, int ms)
{
	iwe_prog_timer_arm_ns(p, t, (uint64_t)(ms > 0 ? ms : 0) * 1000000u);
}

void iwe_prog_timer_arm_ns(struct iwe_prog *p, struct iwe_prog_timer *t,
			   uint64_t ns)
{
	/* The fd set for this timer's old time, now later: it would fire
	 * for nothing (timer_fd_set). */
	int fd_stale = t->slot && t->when == p->tfd_at;

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
	if (!p->tfd_at || t->when < p->tfd_at ||
	    (fd_stale && p->heap[0]->when > p->tfd_at))
		timer_fd_set(p, p->heap[0]->when);
}

/* The fd fires at the earliest deadline.  A cancelled earliest timer
 * leaves it set: it fires early, and the round that finds nothing due
 * sets it again (cheaper than a system call at every cancel).  Moving
 * the earliest timer later sets it anew: whoever moves a deadline that
 * keeps receding (TRP's held ack, trp_timer_sync) does so just before it
 * would fire, and one system call then spares the thread a wake-up. */
static void timer_fd_set(struct iwe_prog *p, uint64_t when)
{
	struct itimerspec its = { .it_value = iwe_ns_ts(when ? when : 1) };

	if (timerfd_settime(p->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		abort();	/* a lost timer would hang a peer */
	p->tfd_at = when;
}

uint64_t iwe_prog_timer_wake_ns(const struct iwe_prog *p)
{
	struct itimerspec its;

	if (timerfd_gettime(p->tfd, &its) < 0 ||
	    (!its.it_value.tv_sec && !its.it_value.tv_nsec))
		return 0;
	return iwe_now_ns() + (uint64_t)its.it_value.tv_sec * 1000000000u +
	       (uint64_t)its.it_value.tv_nsec;
}

static void run_timers(struct iwe_prog *p)
{
	uint64_t now = iwe_now_ns();

	while (p->nheap && p->heap[0]->when <= now) {
		struct iwe_prog_timer *t = p->heap[0];

		iwe_prog_timer_cancel(p, t);
		t->cb(t);
	}
	/* Past the fd's time (it fired, or is about to): set it anew. */
	if (p->tfd_at && p->tfd_at <= now)
		p->tfd_at = 0;
	if (p->nheap && (!p->tfd_at || p->heap[0]->when < p->tfd_at))
		timer_fd_set(p, p->heap[0]->when);
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
	for (pp = &p->tasks; t->queued && *pp; prev = *pp, pp = &(*pp)->next) {
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

/* run held by a thread that borrowed the loop: let it go, and wake the
 * loop when the borrower left it work (timers wake it by the timerfd). */
static void call_done(struct iwe_prog *p)
{
	int wake = prog_work_queued(p);

	pthread_mutex_unlock(&p->run);
	if (wake)
		prog_wake(p);
}

/* Runs fn(arg) holding p->run, which the caller took, and the tasks it
 * left (the thread would be woken for them). */
static void call_borrowed(struct iwe_prog *p, void (*fn)(void *arg), void *arg)
{
	prog_borrowed = p;
	fn(arg);
	run_tasks(p);
	prog_borrowed = NULL;
	call_done(p);
}

void iwe_prog_run_or_post(struct iwe_prog *p, struct iwe_prog_task *t)
{
	if (!iwe_prog_on_thread(p) && pthread_mutex_trylock(&p->run) == 0) {
		prog_borrowed = p;
		t->fn(t);
		prog_borrowed = NULL;
		call_done(p);
		return;
	}
	iwe_prog_post(p, t);
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

/* The epoll timeout: 0 when work is queued (run it first), else none --
 * the timerfd wakes the loop for its timers. */
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
	return NULL;
}

static void dispatch(struct iwe_prog *p, const struct epoll_event *ev, int n)
{
	uint64_t v;
	int i;

	for (i = 0; i < n; i++) {
		struct iwe_prog_watch *w;

		if (ev[i].data.u64 == PROG_KEY_TIMER) {
			/* Its expiry read; run_timers follows the batch. */
			if (read(p->tfd, &v, sizeof(v)) < 0 &&
			    errno != EAGAIN)
				abort();
			continue;
		}
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

/* Several threads take events from the device's epoll: the progress
 * thread and a consumer polling or sleeping.  Each takes a batch and
 * queues it in one step, under take_lock, and whichever of them holds
 * run to dispatch dispatches every queued batch, oldest first: events
 * reach their handlers in the order epoll gave them out, whoever took
 * them.  (Calls lent the loop dispatch nothing: their callers may hold
 * engine locks.)  So nobody blocks in the device's epoll: a thread that
 * sleeps does so in the outer one (wfd), which says the device's has
 * events, and then takes them here.  A thread back from a blocking
 * epoll_wait with a batch could be preempted before it queued it -- the
 * progress thread, at its low priority, for 8 ms -- while a consumer
 * took and dispatched newer events: Debian's dtestcm in its waiting mode
 * got another connection's DISCONNECTED before an ESTABLISHED whose RTR
 * had come first, about one run in 100 between two namespaces.
 * Returns how many it took: PROG_MAX_EVENTS says there may be more,
 * which the taker takes once this batch is dispatched (nothing else
 * would: the outer epoll says only when new events come).  A poll
 * (!must) takes nothing while another taker takes: what it would take
 * is being queued, in order, and it dispatches it anyway; a futex wait
 * there cost the SSP upgrade three context switches. */
static int batch_take(struct iwe_prog *p, struct prog_batch *b,
		      struct epoll_event *ev, int must)
{
	int n;

	if (must)
		pthread_mutex_lock(&p->take_lock);
	else if (pthread_mutex_trylock(&p->take_lock))
		return 0;
	n = epoll_wait(p->epfd, ev, PROG_MAX_EVENTS, 0);
	if (n > 0) {
		b->next = NULL;
		b->ev = ev;
		b->n = n;
		pthread_mutex_lock(&p->batch_lock);
		if (p->batches_tail)
			p->batches_tail->next = b;
		else
			p->batches = b;
		p->batches_tail = b;
		atomic_fetch_add_explicit(&p->nbatches, 1,
					  memory_order_release);
		pthread_mutex_unlock(&p->batch_lock);
	}
	pthread_mutex_unlock(&p->take_lock);
	return n;
}

/* run held (by the thread, or by a borrower with prog_borrowed set):
 * the queued batches, the caller's own among them; a taker finds its
 * batch dispatched by the time it holds run. */
static void run_taken(struct iwe_prog *p)
{
	while (atomic_load_explicit(&p->nbatches, memory_order_acquire)) {
		struct prog_batch *b;

		pthread_mutex_lock(&p->batch_lock);
		b = p->batches;
		p->batches = b->next;
		if (!p->batches)
			p->batches_tail = NULL;
		atomic_fetch_sub_explicit(&p->nbatches, 1,
					  memory_order_relaxed);
		pthread_mutex_unlock(&p->batch_lock);
		dispatch(p, b->ev, b->n);
	}
}

/* run held: take and dispatch until a take comes back short of a full
 * batch (must: see batch_take). */
static void take_rest(struct iwe_prog *p, int must)
{
	struct epoll_event ev[PROG_MAX_EVENTS];
	struct prog_batch b;
	int n;

	do {
		n = batch_take(p, &b, ev, must);
		run_taken(p);
	} while (n == PROG_MAX_EVENTS);
}

/* The thread's epoll_wait returned a sleeping consumer's fd: the
 * consumer's wake-up, which the kernel gave us (its fds are level-
 * triggered in our epoll; it woke the consumer too, once).  Until the
 * consumer left, its fd stays ready, and each of our waits would return
 * it at once: the thread, at its high priority, spun and kept the CPU
 * from the consumer it had to wait for (80-90 % of a CPU in a passive
 * side's setup of thousands of connections).  So the thread waits for
 * the consumer to leave, which it does at once (10 ms: a bound only);
 * what comes meanwhile wakes the consumer, which dispatches it. */
static void yield_to_sleeper(struct iwe_prog *p)
{
	struct timespec ts;

	pthread_mutex_unlock(&p->run);
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->thread_waits, 1);
	if (atomic_load(&p->sleeper)) {
		prog_wake(p);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		while (atomic_load(&p->sleeper) &&
		       !pthread_cond_timedwait(&p->sleeper_cv, &p->lock, &ts))
			;
	}
	atomic_store(&p->thread_waits, 0);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_lock(&p->run);
	run_taken(p);
}

/* What woke a wait in the outer epoll. */
struct prog_wake {
	int events;		/* the device's epoll has events */
	int sleepers;		/* a sleeping consumer's fds are ready */
};

static int wake_read(const struct epoll_event *ev, int n, struct prog_wake *w)
{
	w->events = w->sleepers = 0;
	for (int i = 0; i < n; i++) {
		if (ev[i].data.u64 == PROG_KEY_EVENTS)
			w->events = 1;
		else
			w->sleepers++;
	}
	return n;
}

/* The thread's sleep: nanosecond deadlines (TRP's timers are
 * microseconds); kernels before 5.11 lack epoll_pwait2 and get
 * millisecond ones.  The count of ready fds, or -1. */
static int prog_wait(struct iwe_prog *p, const struct timespec *ts,
		     struct prog_wake *w)
{
	struct epoll_event ev[PROG_MAX_WAKES];
	int n = epoll_pwait2(p->wfd, ev, PROG_MAX_WAKES, ts, NULL);

	if (n < 0 && errno == ENOSYS)
		n = epoll_wait(p->wfd, ev, PROG_MAX_WAKES,
			       !ts ? -1 : (int)(ts->tv_sec * 1000 +
						(ts->tv_nsec + 999999) / 1000000));
	return wake_read(ev, n, w);
}

/* -------------------------------------------------------------- loop */

void iwe_prog_note_input(struct iwe_prog *p, int unread)
{
	iwe_prog_cpu_input(&p->cpu, unread);
}

void iwe_prog_note_conn(struct iwe_prog *p)
{
	iwe_prog_cpu_conn(&p->cpu);
}

void iwe_prog_note_sleeper(struct iwe_prog *p)
{
	iwe_prog_cpu_urgent(&p->cpu);
}

void iwe_prog_note_awaited(struct iwe_prog *p)
{
	iwe_prog_cpu_awaited(&p->cpu);
}

void iwe_prog_note_consumer(struct iwe_prog *p)
{
	if (!iwe_prog_on_thread(p))
		iwe_prog_cpu_note_consumer(&p->cpu);
}

/* ------------------------------------------ a consumer polls, sleeps */

int iwe_prog_poll(struct iwe_prog *p)
{
	if (prog_borrowed == p || iwe_prog_on_thread(p) ||
	    pthread_mutex_trylock(&p->run))
		return 0;
	prog_borrowed = p;
	take_rest(p, 0);
	run_calls(p);	/* the thread may be asleep (iwe_prog_spin) */
	run_tasks(p);
	run_timers(p);
	prog_borrowed = NULL;
	call_done(p);
	return 1;
}

/* lock held: the device's epoll off (quiet) or on in the outer epoll
 * the thread sleeps in.  EPOLL_CTL_MOD, which cannot fail for want of
 * memory as an ADD could; turned on, it reports at once -- and so wakes
 * the thread for -- whatever came since the spinner's last look.  Quiet
 * only while no QP's input is the thread's to place: a spinner that lost
 * its CPU to another thread for a time slice must not hold back an
 * established connection's data (the model's promise); what waits
 * meanwhile is connection setup, the spinner's own business.  Never
 * once the thread is to stop. */
static void update_quiet(struct iwe_prog *p)
{
	int quiet = p->spinners > 0 && !p->placing && !p->stop;
	struct epoll_event e = { .events = quiet ? 0 : EPOLLIN | EPOLLET,
				 .data.u64 = PROG_KEY_EVENTS };

	if (p->quiet == quiet)
		return;
	if (epoll_ctl(p->wfd, EPOLL_CTL_MOD, p->epfd, &e) < 0)
		abort();	/* on a live registration: cannot */
	p->quiet = quiet;
}

void iwe_prog_spin(struct iwe_prog *p, int on)
{
	pthread_mutex_lock(&p->lock);
	p->spinners += on ? 1 : -1;
	update_quiet(p);
	pthread_mutex_unlock(&p->lock);
}

void iwe_prog_note_placing(struct iwe_prog *p, int on)
{
	pthread_mutex_lock(&p->lock);
	p->placing += on ? 1 : -1;
	update_quiet(p);
	pthread_mutex_unlock(&p->lock);
}

/* run held: the loop's work due now (calls, tasks, timers), on a
 * borrowing thread; full: the caller's take filled a batch, there may be
 * more. */
static void run_due(struct iwe_prog *p, int full)
{
	prog_borrowed = p;
	run_taken(p);
	if (full)
		take_rest(p, 1);
	run_calls(p);
	run_tasks(p);
	run_timers(p);
	prog_borrowed = NULL;
}

/* How long a sleeper may wait (epoll's ms, rounded up), until deadline
 * (ns); 0 when work is queued.  The timerfd wakes it for timers. */
static int sleep_ms(struct iwe_prog *p, uint64_t deadline)
{
	uint64_t now = iwe_now_ns();

	if (prog_work_queued(p))
		return 0;
	if (deadline == ~0ull)
		return -1;
	if (deadline <= now)
		return 0;
	return (deadline - now + 999999) / 1000000 > 60000 ? 60000 :
	       (int)((deadline - now + 999999) / 1000000);
}

/* A consumer sleeps beside the progress thread in the outer epoll, its
 * own fds added for the sleep: the kernel wakes the latest of the
 * threads waiting in one epoll and no other, so the input that comes
 * meanwhile wakes the sleeper, which takes and dispatches it on its own
 * thread (what it waits for costs no hand-over), and the progress
 * thread, waiting longer, sleeps on.  The moment the sleeper leaves,
 * the thread is the only waiter and gets everything again: nothing to
 * hand back, no lease.  The sleeper's fds are level-triggered: when
 * the thread came back to epoll after the sleeper and so got the
 * sleeper's wake-up first, epoll puts the fd back on its ready list and
 * wakes the sleeper for it at once.  (Edge-triggered, the sleeper waited
 * for the thread to pass it on: the SSP upgrade's median went from 134
 * to 190-210 us with waits that sleep.) */
int iwe_prog_sleep(struct iwe_prog *p, const int *fds, int nfds,
		   uint64_t deadline, void (*awake)(void *arg), void *arg)
{
	struct epoll_event ev[PROG_MAX_EVENTS], wev[PROG_MAX_WAKES];
	struct prog_batch b;
	int added = 0, slept, full, ms;

	if (prog_borrowed == p || iwe_prog_on_thread(p) ||
	    atomic_exchange(&p->sleeper, 1))
		return 0;
	for (; added < nfds; added++) {
		struct epoll_event e = { .events = EPOLLIN,
					 .data.u64 = PROG_KEY_SLEEPER };

		if (epoll_ctl(p->wfd, EPOLL_CTL_ADD, fds[added], &e) < 0)
			break;
	}
	slept = added == nfds;
	if (slept) {
		pthread_mutex_lock(&p->run);
		run_due(p, 0);
		ms = sleep_ms(p, deadline);
		pthread_mutex_unlock(&p->run);
		/* Whatever woke it (or an error: the caller looks again),
		 * it takes what the device's epoll has. */
		(void)epoll_wait(p->wfd, wev, PROG_MAX_WAKES, ms);
		full = batch_take(p, &b, ev, 1) == PROG_MAX_EVENTS;
		if (awake)
			awake(arg);
		/* Out of the epoll before dispatching: the events posted
		 * meanwhile -- most often to the EVD this consumer waits on
		 * -- would wake the progress thread there, only to wait for
		 * this sleeper to leave (a wake-up, a lock hand-over and a
		 * kick of each thread per event: 3-4 system calls and
		 * context switches in each step of a connection's setup). */
		while (added-- > 0)
			epoll_ctl(p->wfd, EPOLL_CTL_DEL, fds[added], NULL);
		pthread_mutex_lock(&p->run);
		run_due(p, full);
		call_done(p);
	}
	while (added-- > 0)
		epoll_ctl(p->wfd, EPOLL_CTL_DEL, fds[added], NULL);
	atomic_store(&p->sleeper, 0);
	if (atomic_load(&p->thread_waits)) {
		pthread_mutex_lock(&p->lock);
		pthread_cond_broadcast(&p->sleeper_cv);
		pthread_mutex_unlock(&p->lock);
	}
	return slept;
}

static void *prog_main(void *arg)
{
	struct iwe_prog *p = arg;
	struct epoll_event ev[PROG_MAX_EVENTS];
	struct prog_batch b;
	struct prog_wake w;
	struct timespec ts, *timeout;
	int full = 0, stop = 0;

	iwe_prog_cpu_claim(&p->cpu);
	pthread_mutex_lock(&p->run);
	for (;;) {
		run_calls(p);
		run_tasks(p);
		timeout = prog_idle_timeout(p, &stop, &ts);
		if (stop)
			break;
		iwe_prog_cpu_follow(&p->cpu);
		pthread_mutex_unlock(&p->run);
		/* A full batch may have left more: no new event would say so
		 * (the outer epoll is edge-triggered on the device's). */
		if (full)
			w = (struct prog_wake){ .events = 1 };
		else if (prog_wait(p, timeout, &w) < 0 && errno != EINTR)
			abort();
		full = w.events &&
		       batch_take(p, &b, ev, 1) == PROG_MAX_EVENTS;
		pthread_mutex_lock(&p->run);
		run_taken(p);
		if (w.sleepers)
			yield_to_sleeper(p);
		run_timers(p);
	}
	run_calls(p);
	run_tasks(p);
	pthread_mutex_unlock(&p->run);
	return NULL;
}

/* ------------------------------------------------------ start / stop */

static struct iwe_prog *prog_create(void)
{
	struct iwe_prog *p = calloc(1, sizeof(*p));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };
	struct epoll_event tev = { .events = EPOLLIN,
				   .data.u64 = PROG_KEY_TIMER };
	/* Edge-triggered: each new event in epfd wakes one sleeper, which
	 * takes what is there; level-triggered, every sleeper would wake
	 * until someone took it. */
	struct epoll_event wev = { .events = EPOLLIN | EPOLLET,
				   .data.u64 = PROG_KEY_EVENTS };

	if (!p)
		return NULL;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->wfd = epoll_create1(EPOLL_CLOEXEC);
	p->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->epfd < 0 || p->wfd < 0 || p->evfd < 0 || p->tfd < 0 ||
	    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->evfd, &ev) < 0 ||
	    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->tfd, &tev) < 0 ||
	    epoll_ctl(p->wfd, EPOLL_CTL_ADD, p->epfd, &wev) < 0)
		goto fail;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->run, NULL);
	pthread_mutex_init(&p->take_lock, NULL);
	pthread_mutex_init(&p->batch_lock, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	pthread_cond_init(&p->sleeper_cv, NULL);
	iwe_prog_cpu_init(&p->cpu);
	if (pthread_create(&p->thread, NULL, prog_main, p) == 0)
		return p;
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->run);
	pthread_mutex_destroy(&p->take_lock);
	pthread_mutex_destroy(&p->batch_lock);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->sleeper_cv);
	iwe_prog_cpu_destroy(&p->cpu);
fail:
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->wfd >= 0)
		close(p->wfd);
	if (p->evfd >= 0)
		close(p->evfd);
	if (p->tfd >= 0)
		close(p->tfd);
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
	update_quiet(p);	/* a spinner left behind must not keep the
				 * thread from its stop */
	pthread_mutex_unlock(&p->lock);
	prog_wake(p);
	pthread_join(p->thread, NULL);
	close(p->epfd);
	close(p->wfd);
	close(p->evfd);
	close(p->tfd);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->run);
	pthread_mutex_destroy(&p->take_lock);
	pthread_mutex_destroy(&p->batch_lock);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->sleeper_cv);
	iwe_prog_cpu_destroy(&p->cpu);
	free(p->heap);
	free(p->slots);
	free(p);
}
