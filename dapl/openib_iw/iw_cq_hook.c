/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* How a consumer's calls on a CQ drive the QPs completing into it.
 *
 * A poll that finds the CQ empty looks at the QPs that may have
 * something for it: their input is read and placed, their sends go,
 * inside the consumer's call (no thread hand-off on the path of a
 * ping-pong).  An arm before a sleep lets go what waited for the
 * consumer's next look.  With one or two QPs the poll simply looks at
 * each; past that, an epoll of their sockets says which have input, and
 * a want list names the others that asked for a look (a burst of posts),
 * so a poll costs what is ready, never the number of connections.  A
 * QP's socket joins that epoll at its first completion into the CQ and
 * leaves it when the QP's idle give-back finds it quiet: an idle
 * connection (most of 10,000 wired up front) costs no epoll_ctl at
 * setup and none at teardown, and its rare input is the progress
 * thread's, which a poll finds in the ring.  While at most two have
 * joined, a poll looks at those directly, as if they were alone.
 * Whether spinning is futile (a QP's sends wait for room in its
 * socket) is one counter.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "iw_priv.h"

/* Up to this many hooks a poll looks at every one, a recv each; past
 * it, one epoll_wait says which have input, the fewer calls whenever
 * some are idle.  An all-to-all of 4 ranks (3 connections on one EVD)
 * looked at each for 208-228 us a round, asked its epoll for 157-167. */
#define CQ_HOOKS_DIRECT 2
/* Ready sockets taken from the epoll per poll. */
#define CQ_READY_MAX 16
/* Polls in a row that look at the hot hook alone (poll_ready). */
#define CQ_HOT_RUN 8

void iwe_cq_hooks_init(struct iwe_cq_priv *q)
{
	pthread_mutex_init(&q->hooks_lock, NULL);
	pthread_mutex_init(&q->watch_lock, NULL);
	q->pollfd = -1;
}

void iwe_cq_hooks_fini(struct iwe_cq_priv *q)
{
	if (q->pollfd >= 0)
		close(q->pollfd);
	pthread_mutex_destroy(&q->watch_lock);
	pthread_mutex_destroy(&q->hooks_lock);
	free(q->hooks);
}

/* ---------------------------------------------------------- the lists */

/* A hook's links l: the want lists (0, 1) and the joined list. */
#define JOINED_LIST 2

/* watch_lock held: h on top of the list at *head.  Heads are read
 * without the lock (pop_want's peek). */
static void list_push(struct iwe_cq_hook **head, struct iwe_cq_hook *h, int l)
{
	struct iwe_cq_hook *first = *head;

	h->list_next[l] = first;
	h->list_pprev[l] = head;
	if (first)
		first->list_pprev[l] = &h->list_next[l];
	__atomic_store_n(head, h, __ATOMIC_RELAXED);
}

/* watch_lock held: h off its list l, in constant time (a scan of 10,000
 * hooks per unlink would cost what the lists save). */
static void list_del(struct iwe_cq_hook *h, int l)
{
	struct iwe_cq_hook *next = h->list_next[l];

	if (next)
		next->list_pprev[l] = h->list_pprev[l];
	__atomic_store_n(h->list_pprev[l], next, __ATOMIC_RELAXED);
	h->list_next[l] = NULL;
	h->list_pprev[l] = NULL;
}

/* ---------------------------------------------------------- the epoll */

static int hook_readable(const struct iwe_cq_hook *h)
{
	return h->fd >= 0 && h->readable;
}

/* In the CQ's epoll (when it has one). */
static int hook_registered(const struct iwe_cq_hook *h)
{
	return h->joined && hook_readable(h);
}

/* watch_lock held.  Without memory for the registration the QP's input
 * is its progress thread's alone: slower, never lost. */
static void hook_ctl(struct iwe_cq_priv *q, int op, struct iwe_cq_hook *h,
		     int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = h };

	if (q->pollfd >= 0)
		(void)epoll_ctl(q->pollfd, op, fd, &ev);
}

/* hooks_lock and watch_lock held: past CQ_HOOKS_DIRECT hooks, ask an
 * epoll.  Without one (no fd left), polls go on looking at each. */
static void start_epoll(struct iwe_cq_priv *q)
{
	if (q->pollfd >= 0 || q->nhooks <= CQ_HOOKS_DIRECT)
		return;
	q->pollfd = epoll_create1(EPOLL_CLOEXEC);
	for (uint32_t i = 0; i < q->nhooks; i++)
		if (hook_registered(q->hooks[i]))
			hook_ctl(q, EPOLL_CTL_ADD, q->hooks[i],
				 q->hooks[i]->fd);
}

void iwe_cq_hook_watch(struct iwe_cq *cq, struct iwe_cq_hook *h, int fd,
		       int readable)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);
	int was, now;

	pthread_mutex_lock(&q->watch_lock);
	if (!h->attached) {
		pthread_mutex_unlock(&q->watch_lock);
		return;
	}
	was = hook_registered(h);
	now = h->joined && fd >= 0 && readable;
	if (was && (!now || fd != h->fd))
		hook_ctl(q, EPOLL_CTL_DEL, h, h->fd);
	if (now && (!was || fd != h->fd))
		hook_ctl(q, EPOLL_CTL_ADD, h, fd);
	h->fd = fd;
	h->readable = readable;
	pthread_mutex_unlock(&q->watch_lock);
}

void iwe_cq_hook_join(struct iwe_cq_priv *q, struct iwe_cq_hook *h)
{
	pthread_mutex_lock(&q->watch_lock);
	if (h->attached && !h->joined) {
		__atomic_store_n(&h->joined, 1, __ATOMIC_RELAXED);
		list_push(&q->joined_head, h, JOINED_LIST);
		__atomic_store_n(&q->njoined, q->njoined + 1, __ATOMIC_RELAXED);
		if (hook_registered(h))
			hook_ctl(q, EPOLL_CTL_ADD, h, h->fd);
	}
	pthread_mutex_unlock(&q->watch_lock);
}

/* watch_lock held: out of the epoll and off the joined list. */
static void unjoin(struct iwe_cq_priv *q, struct iwe_cq_hook *h)
{
	if (!h->joined)
		return;
	if (hook_registered(h))
		hook_ctl(q, EPOLL_CTL_DEL, h, h->fd);
	list_del(h, JOINED_LIST);
	__atomic_store_n(&q->njoined, q->njoined - 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->joined, 0, __ATOMIC_RELAXED);
}

void iwe_cq_hook_leave(struct iwe_cq *cq, struct iwe_cq_hook *h)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	if (!__atomic_load_n(&h->joined, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&q->watch_lock);
	unjoin(q, h);
	pthread_mutex_unlock(&q->watch_lock);
}

void iwe_cq_hook_blocked(struct iwe_cq *cq, struct iwe_cq_hook *h,
			 int blocked)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	pthread_mutex_lock(&q->watch_lock);
	if (h->attached && h->blocked != !!blocked) {
		h->blocked = !!blocked;
		if (blocked)
			atomic_fetch_add(&q->tx_blocked, 1);
		else
			atomic_fetch_sub(&q->tx_blocked, 1);
	}
	pthread_mutex_unlock(&q->watch_lock);
}

/* -------------------------------------------------------- want lists */

/* IWE_CQ_WANT_POLL is list 0, IWE_CQ_WANT_ARM list 1. */
static int want_list(int which)
{
	return which == IWE_CQ_WANT_POLL ? 0 : 1;
}

/* watch_lock held. */
static void push_want(struct iwe_cq_priv *q, struct iwe_cq_hook *h,
		      int which)
{
	int l = want_list(which);

	list_push(&q->want[l], h, l);
}

/* watch_lock held: off the list, if on it. */
static void unlink_want(struct iwe_cq_hook *h, int which)
{
	if (!(h->wanted & which))
		return;
	list_del(h, want_list(which));
	__atomic_store_n(&h->wanted, h->wanted & ~which, __ATOMIC_RELAXED);
}

void iwe_cq_hook_want(struct iwe_cq *cq, struct iwe_cq_hook *h, int what)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);
	int add;

	if ((__atomic_load_n(&h->wanted, __ATOMIC_RELAXED) & what) == what)
		return;
	pthread_mutex_lock(&q->watch_lock);
	add = h->attached ? what & ~h->wanted : 0;
	if (add & IWE_CQ_WANT_POLL)
		push_want(q, h, IWE_CQ_WANT_POLL);
	if (add & IWE_CQ_WANT_ARM)
		push_want(q, h, IWE_CQ_WANT_ARM);
	__atomic_store_n(&h->wanted, h->wanted | add, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&q->watch_lock);
}

void iwe_cq_hook_unwant(struct iwe_cq *cq, struct iwe_cq_hook *h, int what)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	if (!(__atomic_load_n(&h->wanted, __ATOMIC_RELAXED) & what))
		return;
	pthread_mutex_lock(&q->watch_lock);
	unlink_want(h, what & IWE_CQ_WANT_POLL);
	unlink_want(h, what & IWE_CQ_WANT_ARM);
	pthread_mutex_unlock(&q->watch_lock);
}

/* hooks_lock held (no hook leaves meanwhile).  One at a time off the
 * list: a hook may ask again while it is looked at. */
static struct iwe_cq_hook *pop_want(struct iwe_cq_priv *q, int which)
{
	struct iwe_cq_hook *h;

	if (!__atomic_load_n(&q->want[want_list(which)], __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&q->watch_lock);
	h = q->want[want_list(which)];
	if (h)
		unlink_want(h, which);
	pthread_mutex_unlock(&q->watch_lock);
	return h;
}

/* ------------------------------------------------------- add and del */

void iwe_cq_add_hook(struct iwe_cq *cq, struct iwe_cq_hook *h)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	pthread_mutex_lock(&q->hooks_lock);
	if (q->nhooks == q->hooks_cap) {
		uint32_t cap = q->hooks_cap ? 2 * q->hooks_cap : 4;
		struct iwe_cq_hook **v = realloc(q->hooks, cap * sizeof(*v));

		if (v) {
			q->hooks = v;
			q->hooks_cap = cap;
		}
	}
	/* Without memory the QP is only progressed by its thread. */
	if (q->nhooks < q->hooks_cap) {
		h->idx = q->nhooks;
		q->hooks[q->nhooks++] = h;
		pthread_mutex_lock(&q->watch_lock);
		h->attached = 1;
		if (q->pollfd >= 0 && hook_registered(h))
			hook_ctl(q, EPOLL_CTL_ADD, h, h->fd);
		start_epoll(q);
		pthread_mutex_unlock(&q->watch_lock);
	}
	pthread_mutex_unlock(&q->hooks_lock);
}

void iwe_cq_del_hook(struct iwe_cq *cq, struct iwe_cq_hook *h)
{
	struct iwe_cq_priv *q = iwe_cq_priv(cq);

	pthread_mutex_lock(&q->hooks_lock);
	/* Its place is known (a search cost 10,000 connections' teardown
	 * 50 million looks); the last hook takes it.  Not there: the add
	 * found no memory. */
	if (h->idx < q->nhooks && q->hooks[h->idx] == h) {
		q->hooks[h->idx] = q->hooks[--q->nhooks];
		q->hooks[h->idx]->idx = h->idx;
	}
	if (q->hot == h)
		q->hot = NULL;
	for (uint32_t i = 0; i < q->nspun;) {
		if (q->spun[i] == h)
			q->spun[i] = q->spun[--q->nspun];
		else
			i++;
	}
	pthread_mutex_lock(&q->lock);
	iwe_cq_hooks_forget_locked(q, h);
	pthread_mutex_unlock(&q->lock);
	/* A table a quarter full gives half back: a CQ that served 10,000
	 * connections keeps no 128 KiB for them. */
	if (q->hooks_cap > 64 && q->nhooks < q->hooks_cap / 4) {
		struct iwe_cq_hook **v = realloc(q->hooks, q->hooks_cap / 2 *
						 sizeof(*v));

		if (v) {
			q->hooks = v;
			q->hooks_cap /= 2;
		}
	}
	pthread_mutex_lock(&q->watch_lock);
	if (h->attached) {
		unjoin(q, h);
		unlink_want(h, IWE_CQ_WANT_POLL);
		unlink_want(h, IWE_CQ_WANT_ARM);
		if (h->blocked)
			atomic_fetch_sub(&q->tx_blocked, 1);
	}
	h->attached = h->blocked = 0;
	__atomic_store_n(&h->wanted, 0, __ATOMIC_RELAXED);
	h->fd = -1;
	/* The last QP gone, the epoll goes too (a CQ kept for the next
	 * connections holds no descriptor meanwhile). */
	if (!q->nhooks && q->pollfd >= 0) {
		close(q->pollfd);
		q->pollfd = -1;
	}
	pthread_mutex_unlock(&q->watch_lock);
	pthread_mutex_unlock(&q->hooks_lock);
}

/* The spun hooks' sockets while their QPs read input (not while one
 * holds input back: its socket would stay readable, and a sleep in
 * poll() on it would return at once, over and over). */
int iwe_cq_hooks_sleep_fds(struct iwe_cq_priv *q, int *fds, int max)
{
	int n = 0;

	pthread_mutex_lock(&q->hooks_lock);
	pthread_mutex_lock(&q->watch_lock);
	for (uint32_t i = 0; i < q->nspun && n < max; i++)
		if (q->spun[i]->attached && hook_readable(q->spun[i]))
			fds[n++] = q->spun[i]->fd;
	pthread_mutex_unlock(&q->watch_lock);
	pthread_mutex_unlock(&q->hooks_lock);
	return n;
}

/* -------------------------------------------------------- poll, arm */

static void note_poll(struct iwe_cq_priv *q, int flags)
{
	if (flags & IWE_CQ_HOOK_READ)
		q->read_input = 1;
	if (flags & IWE_CQ_HOOK_BUSY)
		__atomic_store_n(&q->found_busy, 1, __ATOMIC_RELAXED);
}

/* Every hook, from where the last poll stopped; it stops at the first
 * QP that completed something, so the completion goes back at once (and
 * that QP is the hot one, which a wait spins and sleeps on). */
static void poll_each(struct iwe_cq_priv *q)
{
	for (uint32_t k = 0, n = q->nhooks; k < n; k++) {
		uint32_t i = (q->hook_next + k) % n;

		note_poll(q, q->hooks[i]->poll(q->hooks[i], 0));
		if (__atomic_load_n(&q->count, __ATOMIC_RELAXED)) {
			q->hook_next = (i + 1) % n;
			q->hot = q->hooks[i];
			break;
		}
	}
}

/* hooks_lock held: h looked at; 1 when it completed something, and it
 * is then the hot hook. */
static int look(struct iwe_cq_priv *q, struct iwe_cq_hook *h)
{
	note_poll(q, h->poll(h, 0));
	if (!__atomic_load_n(&q->count, __ATOMIC_RELAXED))
		return 0;
	q->hot = h;
	return 1;
}

/* hooks_lock held: a look at each hook that asked for one (a burst of
 * posts held for the consumer's next poll). */
static void look_wanted(struct iwe_cq_priv *q)
{
	struct iwe_cq_hook *h;

	for (uint32_t k = 0; k < q->nhooks &&
	     (h = pop_want(q, IWE_CQ_WANT_POLL)); k++)
		(void)look(q, h);
}

/* The hooks that asked, then those whose socket has input, as the CQ's
 * epoll says: an empty poll costs one epoll_wait, as a lone
 * connection's costs one recv (a look at the hook that completed last
 * as well, before the epoll, cost 10,000 connections' empty polls 2.7-
 * 4.7 us against 1.6 alone).  While the hook that completed last keeps
 * completing -- a stream -- the poll looks at it first and directly,
 * one recv a poll, and after CQ_HOT_RUN such polls in a row asks the
 * epoll again, so that the stream does not leave the others to the
 * progress thread alone; the first look that finds it empty sends the
 * polls back to the epoll.  Level-triggered: input a look left behind
 * (a QP busy on another thread) is reported again. */
static void poll_ready(struct iwe_cq_priv *q)
{
	struct epoll_event ev[CQ_READY_MAX];
	int n;

	if (q->hot && q->hot_run && look(q, q->hot) &&
	    ++q->hot_run < CQ_HOT_RUN)
		return;
	q->hot_run = 0;
	look_wanted(q);
	n = epoll_wait(q->pollfd, ev, CQ_READY_MAX, 0);
	for (int i = 0; i < n; i++)
		(void)look(q, ev[i].data.ptr);
	if (__atomic_load_n(&q->count, __ATOMIC_RELAXED))
		q->hot_run = 1;	/* q->hot completed: look at it first */
}

/* A wait spins on a few connections (at most CQ_HOOKS_DIRECT) among
 * more: a recv on each, not an epoll_wait over all.  The others' input
 * is the progress thread's meanwhile, and what it completes is in the
 * ring at the next poll; the hooks that asked for a look get it, as in
 * poll_ready.  A ping-pong beside 2 idle connections waited 11.5 us one
 * way with the epoll, 8.8 alone. */
static void poll_spun(struct iwe_cq_priv *q)
{
	look_wanted(q);
	for (uint32_t i = 0; i < q->nspun; i++)
		if (look(q, q->spun[i]))
			break;
}

/* At most CQ_HOOKS_DIRECT hooks joined -- a busy connection or two
 * among idle ones: a look at each, a recv each, as when they are alone
 * on the CQ (with the epoll, a busy ping-pong beside 10,000 idle
 * connections took 1.1-1.4x its lone time); the others' rare input is
 * the progress thread's.  0: more have joined. */
static int poll_joined(struct iwe_cq_priv *q)
{
	struct iwe_cq_hook *few[CQ_HOOKS_DIRECT], *h;
	uint32_t n = 0;
	int ok;

	if (__atomic_load_n(&q->njoined, __ATOMIC_RELAXED) > CQ_HOOKS_DIRECT)
		return 0;
	pthread_mutex_lock(&q->watch_lock);
	ok = q->njoined <= CQ_HOOKS_DIRECT;
	for (h = q->joined_head; ok && h && n < CQ_HOOKS_DIRECT;
	     h = h->list_next[JOINED_LIST])
		few[n++] = h;
	pthread_mutex_unlock(&q->watch_lock);
	if (!ok)
		return 0;
	/* No hook goes meanwhile (hooks_lock); one that leaves the list
	 * is only looked at once more. */
	look_wanted(q);
	for (uint32_t i = 0; i < n; i++)
		if (look(q, few[i]))
			break;
	return 1;
}

/* One poller at a time; the others just look at the ring.  What
 * iwe_cq_drive returns: IWE_CQ_DRIVE_* flags. */
int iwe_cq_hooks_poll(struct iwe_cq_priv *q)
{
	int r = 0;

	if (!pthread_mutex_trylock(&q->hooks_lock)) {
		q->read_input = 0;
		__atomic_store_n(&q->found_busy, 0, __ATOMIC_RELAXED);
		if (q->pollfd < 0)
			poll_each(q);
		else if (q->nspun && q->nspun <= CQ_HOOKS_DIRECT)
			poll_spun(q);
		else if (!poll_joined(q))
			poll_ready(q);
		if (q->read_input)
			r |= IWE_CQ_DRIVE_READ;
		if (q->found_busy)
			r |= IWE_CQ_DRIVE_BUSY;
		pthread_mutex_unlock(&q->hooks_lock);
	}
	if (atomic_load(&q->tx_blocked))
		r |= IWE_CQ_DRIVE_BLOCKED;
	return r;
}

/* The hooks a waiter spins on, each driven once its QP is free: it
 * holds hooks_lock meanwhile, so none of them goes (the hooks_lock ->
 * QP lock order of iwe_cq_hooks_spin and _arm). */
void iwe_cq_hooks_wait(struct iwe_cq_priv *q)
{
	pthread_mutex_lock(&q->hooks_lock);
	for (uint32_t i = 0; i < q->nspun; i++)
		(void)q->spun[i]->poll(q->spun[i], 1);
	pthread_mutex_unlock(&q->hooks_lock);
}

/* ------------------------------------------- the waiter's connections */

/* A waiting consumer takes the input of the connections that completed
 * something into the CQ during its last IWE_CQ_ACTIVE_WAITS waits: in an
 * exchange with a few peers (an all-to-all, whose waits each return one
 * of its messages) each of them delivers again soon, and what it
 * delivers during a wait then costs no wake-up of the progress thread
 * and of the waiter after it.  When none did, or more than
 * IWE_CQ_SPIN_MAX (each taken costs the wait's start and end a system
 * call), it takes the connection that completed last (or the CQ's only
 * one): a busy connection among idle ones costs its waits nothing for
 * the others.  Counted in waits, not time: a consumer that computes
 * between them loses nothing. */

#define HOOK_GONE (-2)		/* active_idx of a removed hook */

static int hook_expired(const struct iwe_cq_priv *q, const struct iwe_cq_hook *h)
{
	return q->wait_gen - h->done_gen >= IWE_CQ_ACTIVE_WAITS;
}

/* Under q->lock: h leaves active. */
static void active_drop(struct iwe_cq_priv *q, struct iwe_cq_hook *h)
{
	int i = h->active_idx;

	if (i >= 0 && (uint32_t)i < q->nactive && q->active[i] == h) {
		q->active[i] = q->active[--q->nactive];
		q->active[i]->active_idx = i;
	}
	h->active_idx = -1;
}

/* Under q->lock: h completed a request. */
void iwe_cq_hooks_note_done(struct iwe_cq_priv *q, struct iwe_cq_hook *h)
{
	int i = h->active_idx;

	if (i == HOOK_GONE)
		return;
	h->done_gen = q->wait_gen;
	if (i >= 0 && (uint32_t)i < q->nactive && q->active[i] == h)
		return;
	for (uint32_t k = 0; q->nactive == IWE_CQ_SPIN_MAX && k < q->nactive;)
		if (hook_expired(q, q->active[k]))
			active_drop(q, q->active[k]);
		else
			k++;
	if (q->nactive < IWE_CQ_SPIN_MAX) {
		h->active_idx = (int)q->nactive;
		q->active[q->nactive++] = h;
	} else {
		q->over = 1;
		q->over_gen = q->wait_gen;
	}
}

/* Under q->lock: h goes (iwe_cq_del_hook); active must not name it. */
void iwe_cq_hooks_forget_locked(struct iwe_cq_priv *q, struct iwe_cq_hook *h)
{
	active_drop(q, h);
	h->active_idx = HOOK_GONE;
}

/* hooks_lock held: the hooks a wait beginning now takes, into took;
 * their count. */
static uint32_t wait_takes(struct iwe_cq_priv *q,
			   struct iwe_cq_hook *took[IWE_CQ_SPIN_MAX])
{
	struct iwe_cq_hook *h;
	uint32_t n = 0;

	pthread_mutex_lock(&q->lock);
	for (uint32_t k = 0; k < q->nactive;)
		if (hook_expired(q, q->active[k]))
			active_drop(q, q->active[k]);
		else
			k++;
	if (q->over && q->wait_gen - q->over_gen >= IWE_CQ_ACTIVE_WAITS)
		q->over = 0;
	if (!q->over)
		for (; n < q->nactive; n++)
			took[n] = q->active[n];
	q->wait_gen++;
	pthread_mutex_unlock(&q->lock);
	if (n)
		return n;
	h = q->hot ? q->hot : q->nhooks == 1 ? q->hooks[0] : NULL;
	if (h)
		took[n++] = h;
	return n;
}

void iwe_cq_hooks_spin(struct iwe_cq_priv *q, int on)
{
	struct iwe_cq_hook *took[IWE_CQ_SPIN_MAX];

	pthread_mutex_lock(&q->hooks_lock);
	if (on && !q->nspun) {
		uint32_t n = wait_takes(q, took);

		for (uint32_t i = 0; i < n; i++) {
			if (!took[i]->spin)
				continue;
			q->spun[q->nspun++] = took[i];
			took[i]->spin(took[i], 1);
		}
	} else if (!on) {
		while (q->nspun) {
			struct iwe_cq_hook *h = q->spun[--q->nspun];

			h->spin(h, 0);
		}
	}
	pthread_mutex_unlock(&q->hooks_lock);
}

void iwe_cq_hooks_arm(struct iwe_cq_priv *q)
{
	struct iwe_cq_hook *h;

	pthread_mutex_lock(&q->hooks_lock);
	if (q->pollfd < 0) {
		for (uint32_t i = 0; i < q->nhooks; i++)
			q->hooks[i]->arm(q->hooks[i]);
	} else {
		for (uint32_t k = 0; k < q->nhooks &&
		     (h = pop_want(q, IWE_CQ_WANT_ARM)); k++)
			h->arm(h);
	}
	pthread_mutex_unlock(&q->hooks_lock);
}
