/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The per-device progress thread: an epoll loop with fd watches, one-shot
 * timers, tasks posted from any thread, and synchronous calls.
 *
 * Everything the connection manager owns (conns, listeners, their
 * sockets and timers) is touched by this loop only, so the CM needs no
 * locks of its own: API calls from other threads run their body in it
 * through iwe_prog_call (on this thread, or on their own while they
 * hold the idle loop).  Watches, timers and tasks are embedded in their
 * owner; the owner must unregister them (in the loop) before freeing.
 * An epoll batch may still name a watch removed since the wait: it names
 * it by slot and generation (the watch's key), and a stale name finds
 * the slot empty, so the owner may be freed once its watches, timers and
 * tasks are gone -- by a task, or by the caller of the call that removed
 * them (a QP's destroy does so).
 *
 * Engine-internal header.
 */
#ifndef IW_PROGRESS_H
#define IW_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "iw_priv.h"

struct iwe_prog;

struct iwe_prog_watch {
	int fd;				/* -1 while not registered */
	uint32_t events;		/* EPOLL* interest */
	uint64_t key;			/* its epoll data (the loop's) */
	void (*cb)(struct iwe_prog_watch *w, uint32_t revents);
};

struct iwe_prog_timer {
	uint64_t when;			/* CLOCK_MONOTONIC, ns */
	size_t slot;			/* heap index + 1; 0: not armed */
	void (*cb)(struct iwe_prog_timer *t);
};

struct iwe_prog_task {
	struct iwe_prog_task *next;
	int queued;			/* under the prog's lock */
	void (*fn)(struct iwe_prog_task *t);
};

/* The device's progress thread, started on first use.  NULL and errno
 * when it cannot be started. */
struct iwe_prog *iwe_prog_get(struct iwe_device *dev);
/* Stop and join the thread, run the tasks still queued, free it.  Never
 * call it on the progress thread itself. */
void iwe_prog_stop(struct iwe_prog *p);

/* 1 on the progress thread, and in a call it lent its loop to. */
int iwe_prog_on_thread(const struct iwe_prog *p);

/* Run fn(arg) on the progress thread and wait for it to finish; run it
 * at once when already there (so handlers may call the CM), and on the
 * caller's thread when the loop is idle in epoll -- holding the loop
 * meanwhile, so fn sees what it would see on the thread, and
 * iwe_prog_on_thread is true inside it. */
void iwe_prog_call(struct iwe_prog *p, void (*fn)(void *arg), void *arg);

/* A consumer thread inside a call: dispatch what epoll has ready now, on
 * this thread, when the loop is free (the thread sleeps in epoll) --
 * behind any batch another taker queued before it, and taking nothing
 * new while another thread takes (iw_progress.c); 0 when the loop is not
 * free (the thread, or another, runs it: they dispatch it). */
int iwe_prog_poll(struct iwe_prog *p);
/* A consumer thread begins (on 1) or ends (on 0) a spin of
 * iwe_prog_poll looks: meanwhile, unless the thread places some QP's
 * input (iwe_prog_note_placing), the device's events do not wake the
 * thread -- the spinner takes them, and a wake-up of the thread as
 * well, for nothing, took a CPU from the spinner or its peer.  Spins
 * nest and overlap; when the last ends, the thread is woken for what
 * came since the last look.  Bounded by the spinner: it must keep
 * looking until it ends the spin. */
void iwe_prog_spin(struct iwe_prog *p, int on);
/* A QP watched on p begins (on 1) or ends (on 0) to have its input
 * placed by the thread: its hold released, until it is unwatched. */
void iwe_prog_note_placing(struct iwe_prog *p, int on);
/* A consumer thread about to sleep in a wait: sleep until one of fds
 * (its EVD's or CNO's) is readable, the loop has input, or the
 * CLOCK_MONOTONIC deadline (ns; ~0: none), dispatching on this thread
 * what comes meanwhile (iw_progress.c says how the progress thread keeps
 * out of it).  One round: the caller checks what it waits for and calls
 * again.  1 after such a round; 0 when another consumer sleeps so (or
 * this thread runs the loop): the caller sleeps as usual.  awake (may be
 * NULL) is called on this thread once its wait returned, before it
 * dispatches (the batch it took is queued by then, and whoever holds the
 * loop first dispatches it, in order): what it then posts to the
 * caller's own queue needs no write of the caller's fds, as the caller
 * looks again after the round. */
int iwe_prog_sleep(struct iwe_prog *p, const int *fds, int nfds,
		   uint64_t deadline, void (*awake)(void *arg), void *arg);

/* The thread's claim on a CPU (iw_prog_cpu.c).
 * Loop thread: input it was woken for was still unread (1: it read it),
 * or a consumer's call had taken it (0).  Any thread: a consumer is
 * about to sleep in a wait, and only the thread will read its input
 * (and the consumer's CPU is free). */
void iwe_prog_note_input(struct iwe_prog *p, int unread);
void iwe_prog_note_sleeper(struct iwe_prog *p);
/* A consumer polls for what only the loop makes (iw_prog_cpu.c). */
void iwe_prog_note_awaited(struct iwe_prog *p);
/* On the loop: a connection being made was the work (the CM's
 * watches): it counts as input a consumer's call took (the consumers
 * making and accepting connections do most of it). */
void iwe_prog_note_conn(struct iwe_prog *p);
/* A consumer's call (a post, a poll) runs on this thread's CPU: the
 * progress thread keeps off it while the consumer leaves its input to
 * the thread (iw_prog_cpu.c). */
void iwe_prog_note_consumer(struct iwe_prog *p);

/* Queue a task for the next loop iteration (after the current epoll
 * batch); any thread.  A task already queued stays queued once. */
void iwe_prog_post(struct iwe_prog *p, struct iwe_prog_task *t);
/* Run the task now, on this thread, when the loop is free (its thread
 * waits in epoll: no wake-up, as iwe_prog_call); else queue it as
 * iwe_prog_post does.  Only for a task that may run twice (it may be
 * queued already) and takes no lock a poster may hold.  Unlike a
 * borrowed iwe_prog_call it runs no other queued task: those may take
 * the locks its caller holds (a QP's). */
void iwe_prog_run_or_post(struct iwe_prog *p, struct iwe_prog_task *t);
/* Take a task off the queue if it is there; any thread. */
void iwe_prog_unpost(struct iwe_prog *p, struct iwe_prog_task *t);

/* Watches and timers: progress thread only (a QP changes the interest
 * of its own watch under its lock from any thread: epoll_ctl is
 * thread-safe).  Level-triggered unless EPOLLET is in events.  0 or an
 * errno. */
int iwe_prog_watch_add(struct iwe_prog *p, struct iwe_prog_watch *w, int fd,
		       uint32_t events);
int iwe_prog_watch_mod(struct iwe_prog *p, struct iwe_prog_watch *w,
		       uint32_t events);
void iwe_prog_watch_del(struct iwe_prog *p, struct iwe_prog_watch *w);
/* The socket `from` watches is watched by `to` from now on, for events
 * (its registration and key kept: at most one EPOLL_CTL_MOD, not a DEL
 * and an ADD); events already read for `from` and not yet dispatched go
 * to `to`.  0, or errno with `from` unchanged. */
int iwe_prog_watch_move(struct iwe_prog *p, struct iwe_prog_watch *from,
			struct iwe_prog_watch *to, uint32_t events);

/* Fire cb once, ms milliseconds from now (re-arming moves it). */
void iwe_prog_timer_arm(struct iwe_prog *p, struct iwe_prog_timer *t, int ms);
void iwe_prog_timer_arm_ns(struct iwe_prog *p, struct iwe_prog_timer *t,
			   uint64_t ns);
void iwe_prog_timer_cancel(struct iwe_prog *p, struct iwe_prog_timer *t);
/* When the loop's timer next wakes it (CLOCK_MONOTONIC ns, as the kernel
 * holds it; 0: not set).  Under run, like the calls above. */
uint64_t iwe_prog_timer_wake_ns(const struct iwe_prog *p);

#endif
