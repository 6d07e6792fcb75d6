/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Event Dispatchers (DAT 2.0 section 6.3.2): the consumer's calls.  The
 * ring is in evd_queue.c, the engine CQ in evd_cq.c (see dapl_evd.h).
 *
 * Choices made where the specification is open, or where it decides
 * against an easier reading:
 *
 * - A bad, freed or wrong-type EVD handle given to an EVD call returns
 *   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST: libdat2 answers a
 *   NULL EVD handle with exactly that code before the call reaches us, so
 *   NULL, stale and foreign handles all read the same to the consumer.
 *   Bad CNO arguments return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO.
 * - dat_evd_set_unwaitable wakes a blocked dat_evd_wait with
 *   DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE, as the spec's
 *   dat_evd_wait and dat_evd_set_unwaitable pages say.  DAT_ABORT is kept
 *   for what dat_error.h gives it: the EVD was destroyed under the waiter
 *   (abrupt dat_ia_close).
 * - A disabled EVD only stops triggering its CNO (the spec's whole
 *   definition of dat_evd_disable); dat_evd_wait on it works normally.
 * - While a thread blocks in dat_evd_wait it owns the EVD: a second
 *   dat_evd_wait or a dat_evd_dequeue returns
 *   DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE (spec: "any other
 *   dequeue operation ... is rejected with DAT_INVALID_STATE").
 * - dat_evd_post_se on an EVD without DAT_EVD_SOFTWARE_FLAG returns
 *   DAT_INVALID_PARAMETER | DAT_INVALID_ARG1 (the EVD argument does not
 *   fit the call); a full EVD returns DAT_QUEUE_FULL and, as the spec
 *   says for software events, is not an overflow: nothing goes to the
 *   async EVD.
 * - nmore may be NULL.  EINTR inside a wait restarts the sleep with the
 *   remaining time instead of returning DAT_INTERRUPTED_CALL, so signal
 *   handlers in the consumer do not turn into spurious failures.
 * - dat_evd_query reports evd_state as ENABLED/DISABLED | WAITABLE/
 *   UNWAITABLE.  The configuration band is left out: its THRESHOLD value
 *   (0x30) is NOTIFY | SOLICITED, so it cannot be reported unambiguously.
 * - A full EVD (provider side) reports DAT_ASYNC_ERROR_EVD_OVERFLOW once;
 *   the report re-arms after a dequeue.  An overflowing engine CQ is
 *   reported once per EVD when a dequeue or wait notices it.
 * - Waits on a CQ-backed EVD arm the CQ for any completion; DAT's
 *   solicited-wait suppression is not applied (the count decides).
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dapl.h"
#include "dapl_evd.h"
#include "iw_env.h"

#define EVD_BAD_HANDLE (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST)
#define EVD_KNOWN_FLAGS (DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG |	\
			 DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG |	\
			 DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG)
#define EVD_CQ_FLAGS (DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG)
#define EVD_CM_FLAGS (DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG)

/* What a dequeue took: an event already in the consumer's buffer, or an
 * engine completion still to be converted (outside the EVD lock). */
enum evd_take { TAKE_NONE, TAKE_EVENT, TAKE_WC };

static struct dapl_evd *evd_get(DAT_EVD_HANDLE h)
{
	return dapl_obj_get(h, DAT_HANDLE_TYPE_EVD);
}

static int qlen_valid(const struct dapl_ia *ia, DAT_COUNT qlen)
{
	return qlen > 0 && (uint32_t)qlen <= ia->dev_attr.max_cqe;
}

/* ------------------------------------------------------------ taking */

/* Software queue first, then the engine's completions, oldest first. */
static enum evd_take take_locked(struct dapl_evd *evd, DAT_EVENT *event,
				 struct ibv_wc *wc)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (evd->count) {
		dapl_evd_ring_get_locked(evd, event);
		return TAKE_EVENT;
	}
	if (evd->cq && iwe_poll_cq(evd->cq, 1, wc) == 1)
		return TAKE_WC;
	return TAKE_NONE;
}

/* Outside evd->lock: the conversion may take ia->lock. */
static void finish_take(enum evd_take t, struct dapl_evd *evd,
			DAT_EVD_HANDLE h, const struct ibv_wc *wc,
			DAT_EVENT *event)
{
	if (t == TAKE_WC)
		dapl_dto_event(evd->obj.ia, wc, h, event);
}

DAT_RETURN dapl_evd_post_se(DAT_EVD_HANDLE h, const DAT_EVENT *event)
{
	struct dapl_evd *evd = evd_get(h);

	if (!evd)
		return EVD_BAD_HANDLE;
	if (!dapl_evd_has(evd, DAT_EVD_SOFTWARE_FLAG))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG1;
	if (!event || event->event_number != DAT_SOFTWARE_EVENT)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	return dapl_evd_enqueue(evd, event, 0);
}

/* ---------------------------------------------------- create / free */

static void evd_release(struct dapl_evd *evd)
{
	dapl_evd_cq_release(evd);
	dapl_evd_ring_free(evd);
}

static DAT_RETURN evd_alloc(struct dapl_ia *ia, DAT_COUNT qlen,
			    DAT_EVD_FLAGS flags, struct dapl_evd **out)
{
	struct dapl_evd *evd = dapl_evd_ring_alloc(ia, qlen, flags);
	DAT_RETURN ret = DAT_SUCCESS;

	if (!evd)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	if (flags & EVD_CQ_FLAGS)
		ret = dapl_evd_cq_create(evd, ia);
	if (ret != DAT_SUCCESS) {
		evd_release(evd);
		return ret;
	}
	*out = evd;
	return DAT_SUCCESS;
}

/* Abrupt IA close: free whatever the state, waking a waiter with
 * DAT_ABORT and waiting until it has left the EVD.  An EVD that objects
 * of another IA still count on keeps its ring for them (an orphan). */
static void evd_destroy(struct dapl_obj *obj)
{
	struct dapl_evd *evd = (struct dapl_evd *)obj;
	struct dapl_ia *ia = obj->ia;
	int orphan;

	dapl_lock(&evd->lock);
	evd->dead = 1;
	dapl_evd_wake_locked(evd);
	while (atomic_load(&evd->waiting))
		dapl_cond_wait(&evd->idle, &evd->lock);
	dapl_unlock(&evd->lock);

	dapl_ia_lock(ia);
	if (ia->async_evd == evd)
		ia->async_evd = NULL;	/* late async posts become no-ops */
	orphan = dapl_evd_orphan_locked(evd);
	dapl_ia_unlock(ia);
	/* The objects of this IA went first: no QP completes into the CQ. */
	dapl_evd_cq_release(evd);
	if (!orphan)
		dapl_evd_ring_free(evd);
}

DAT_RETURN dapl_evd_create_internal(struct dapl_ia *ia, DAT_COUNT qlen,
				    DAT_EVD_FLAGS flags, struct dapl_evd **out)
{
	struct dapl_evd *evd;
	DAT_RETURN ret;

	if (!qlen_valid(ia, qlen))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	ret = evd_alloc(ia, qlen, flags, &evd);
	if (ret != DAT_SUCCESS)
		return ret;
	ret = dapl_obj_init(&evd->obj, ia, DAPL_K_EVD, DAT_HANDLE_TYPE_EVD,
			    evd_destroy);
	if (ret != DAT_SUCCESS) {
		evd_release(evd);
		return ret;
	}
	*out = evd;
	return DAT_SUCCESS;
}

/* The checks of dat_evd_free beyond the dependents' count (evd->lock
 * held, and ia->lock): not the IA's async EVD, no waiter, and the CQ can
 * go (EBUSY: a QP still completes into it). */
static DAT_RETURN evd_may_go_locked(struct dapl_evd *evd)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (evd == evd->obj.ia->async_evd)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_ASYNC;
	if (atomic_load(&evd->waiting))
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER;
	if (evd->cq && dapl_evd_cq_destroy_locked(evd) != 0)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE;
	return DAT_SUCCESS;
}

/* ia->lock held, and released here: unlink and free, or say why not. */
static DAT_RETURN evd_free_unlock(struct dapl_ia *ia, struct dapl_evd *evd)
{
	DAT_RETURN ret = dapl_evd_unlink_locked(evd, evd_may_go_locked);

	dapl_ia_unlock(ia);
	if (ret == DAT_SUCCESS)
		evd_release(evd);
	return ret;
}

DAT_RETURN dapl_evd_free(DAT_EVD_HANDLE h)
{
	struct dapl_evd *evd = dapl_obj_lock(h, DAT_HANDLE_TYPE_EVD);

	if (!evd)
		return EVD_BAD_HANDLE;
	return evd_free_unlock(evd->obj.ia, evd);
}

static DAT_RETURN evd_attach_new(struct dapl_evd *evd, DAT_CNO_HANDLE h)
{
	struct dapl_ia *ia = evd->obj.ia;
	struct dapl_cno *cno;
	DAT_RETURN ret;

	dapl_ia_lock(ia);
	cno = dapl_obj_get_locked(ia, h, DAT_HANDLE_TYPE_CNO);
	ret = cno ? DAT_SUCCESS : DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO;
	if (cno) {
		dapl_lock(&evd->lock);
		ret = dapl_cno_attach_locked(cno, evd);
		dapl_unlock(&evd->lock);
	}
	dapl_ia_unlock(ia);
	return ret;
}

DAT_RETURN dapl_evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT qlen,
			   DAT_CNO_HANDLE cno_handle, DAT_EVD_FLAGS flags,
			   DAT_EVD_HANDLE *out)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_cno *cno;
	struct dapl_evd *evd;
	DAT_RETURN ret;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!qlen_valid(ia, qlen))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	cno = cno_handle ? dapl_obj_get(cno_handle, DAT_HANDLE_TYPE_CNO) : NULL;
	if (cno_handle && (!cno || cno->obj.ia != ia))
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO;
	if (flags == 0 || (flags & ~(DAT_EVD_FLAGS)EVD_KNOWN_FLAGS))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (!out)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG5;
	ret = dapl_evd_create_internal(ia, qlen, flags, &evd);
	if (ret != DAT_SUCCESS)
		return ret;
	if (cno_handle) {
		ret = evd_attach_new(evd, cno_handle);
		if (ret != DAT_SUCCESS) {
			dapl_ia_lock(ia);
			(void)evd_free_unlock(ia, evd);
			return ret;
		}
	}
	*out = evd->obj.handle;
	return DAT_SUCCESS;
}

/* ------------------------------------------------------- dequeue */

static uint64_t mono_us(void);

/* A consumer that polls an empty EVD (dat_evd_dequeue, or dat_evd_wait
 * with a timeout of 0) for IWDAPL_POLL_YIELD_US on end gives up its CPU
 * once (sched_yield), and again after as long.  Two pollers of a
 * ping-pong that share a CPU (more processes than CPUs) otherwise each
 * spin out a time slice while the other holds the answer: 8-byte
 * one-way mean 791 us with both pinned to one CPU; 257 us with yields
 * after 200 us, 132 after 100, 92 after 50.  A yield with nothing else
 * to run returns at once, but on 2 busy CPUs it also lets waiting
 * threads in: an unpinned ping-pong's p99 grew from 41-42 to 47 us with
 * 50 or 100, and was unchanged with 200 (44 and 46 us, mean 10.4 both).
 * An empty poll whose next completion is another's to make
 * (iwe_cq_waits_elsewhere: a connection busy on the progress thread, or
 * one whose socket is full until the peer reads) yields at once: on
 * fewer CPUs than threads the poller's spin takes the CPU that thread
 * or the peer needs (Debian's dtest -w -p, both sides streaming 4 MiB
 * Writes, moved 0.2-0.4 GB/s on a busy machine).  0 turns both off. */
#define POLL_YIELD_DEFAULT_US 200

static uint32_t poll_yield_us(void)
{
	static long v = -1;

	return (uint32_t)iw_env_long_once(&v, "IWDAPL_POLL_YIELD_US",
					  POLL_YIELD_DEFAULT_US, 0, 1000000);
}

/* A poll of evd found it empty (or not; any event taken ends the
 * stretch): 1 when the caller is to yield after unlocking -- at the end
 * of a stretch, or at once when what it waits for is another's to do. */
static int poll_yield_due_locked(struct dapl_evd *evd, int empty)
{
	uint32_t every = poll_yield_us();
	uint64_t now;

	DAPL_ASSERT_LOCKED(&evd->lock);
	if (!empty || !every) {
		evd->empty_since_us = 0;
		return 0;
	}
	now = mono_us();
	if (!evd->empty_since_us)
		evd->empty_since_us = now;
	if (now - evd->empty_since_us < every)
		return iwe_cq_waits_elsewhere(evd->cq);
	evd->empty_since_us = now;
	return 1;
}

static int conn_events_only(const struct dapl_evd *evd)
{
	return !evd->cq &&
	       dapl_evd_has(evd, DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG);
}

/* Connection events are made by the device's loop, which this poll
 * does not run: a second dispatcher beside the progress thread reads a
 * later batch of sockets before the thread's earlier one (dtestcm, below,
 * lost the order 5 runs in 20 over tcp that way).  It tells the engine
 * that a consumer waits for the loop instead, so the progress thread --
 * polite while connections are made (iw_prog_cpu.c) -- is not kept off
 * its CPU by this poller: dtestcm's server, polling for 1000 ESTABLISHED
 * while the client connected and then closed them, got its last RTRs
 * 20-40 ms late, after the client's first closes, and took a DISCONNECTED
 * for an ESTABLISHED (5 runs in 30 on loopback, over udp and over tcp).
 * Outside evd->lock: a poll found evd empty. */
static void polled_empty(const struct dapl_evd *evd, const struct dapl_ia *ia)
{
	/* Every empty poll of a DTO EVD comes here: its CQ ends it. */
	if (conn_events_only(evd) && ia && ia->dev)
		iwe_device_awaited(ia->dev);
}

DAT_RETURN dapl_evd_dequeue(DAT_EVD_HANDLE h, DAT_EVENT *event)
{
	struct dapl_evd *evd = evd_get(h);
	enum evd_take t = TAKE_NONE;
	struct dapl_ia *ia;
	struct ibv_wc wc;
	DAT_RETURN ret;
	int news, yield = 0;

	if (!evd)
		return EVD_BAD_HANDLE;
	if (!event)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	ia = evd->obj.ia;
	dapl_lock(&evd->lock);
	if (atomic_load(&evd->waiting))
		ret = DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE;
	else {
		t = take_locked(evd, event, &wc);
		ret = t == TAKE_NONE ? DAT_QUEUE_EMPTY : DAT_SUCCESS;
		yield = poll_yield_due_locked(evd, t == TAKE_NONE);
	}
	news = dapl_evd_cq_overflow_news_locked(evd);
	dapl_unlock(&evd->lock);
	finish_take(t, evd, h, &wc, event);
	if (ret == DAT_QUEUE_EMPTY)
		polled_empty(evd, ia);
	if (yield)
		iwe_poll_yield();
	if (news)
		dapl_evd_post_async(ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, h, 0);
	return ret;
}

/* ---------------------------------------------------------- wait */

/* A blocking wait first spins, driving the EVD's connections from this
 * thread (iwe_cq_drive: what a poll does), for up to
 * IWDAPL_WAIT_SPIN_US microseconds (default 100; 0: never), yielding its
 * CPU between looks: an answer that comes within the spin costs no
 * sleep and no wake-up, of this thread nor of the progress thread (the
 * connection spun on leaves its input to the spin: iwe_cq_spin).  It
 * stops early when a connection of the EVD waits for room in its
 * socket: what completes next waits for the peer to read, and the spin
 * would only take the CPU the peer needs.  While input flows -- a large
 * message arriving, which this thread copies as it comes -- the spin
 * goes on to IWDAPL_WAIT_SPIN_US past the last input read, and to
 * SPIN_FLOWING_TIMES that in all: a 1 MiB Send's receiver that slept
 * after 100 us was woken again for the rest (blocking 1 MiB ping-pong
 * 595-611 us one way, polling 480-492; spinning on 464-474). */
#define WAIT_SPIN_DEFAULT_US 100
#define SPIN_FLOWING_TIMES 64

static uint32_t spin_max_us(void)
{
	static long v = -1;

	return (uint32_t)iw_env_long_once(&v, "IWDAPL_WAIT_SPIN_US",
					  WAIT_SPIN_DEFAULT_US, 0, 1000000);
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The spin yields so that a thread this one waits for, on its CPU, can
 * run -- but a yield gives the CPU to whatever else is runnable there,
 * for as long as the scheduler lets it run: a busy loop of another
 * process on each CPU (a build machine) took it for a time slice, 1-3
 * ms, at each yield, while the answer the spin waited for came and
 * nobody read it (the progress thread keeps out of a spinner's way; a
 * sleeper would have been woken at once).  A blocking 8-byte Send
 * ping-pong then took 2 ms one way, against 20 us not spinning, and a
 * PSP connect-accept-disconnect cycle 8 ms, against 0.2-0.4.  So a
 * yield that kept this thread off its CPU for SPIN_STALL_US -- a time
 * slice of another task, not a peer's answer or a connection's step --
 * ends the spin, and this thread's waits sleep without spinning for
 * SPIN_OFF_US after: the CPU is not the spinner's to keep. */
#define SPIN_STALL_US 1000
#define SPIN_OFF_US 100000
static _Thread_local uint64_t spin_off_until_us;

static int spin_off(void)
{
	return spin_off_until_us && mono_us() < spin_off_until_us;
}

/* A spin's yield; 0 when another task kept the CPU for SPIN_STALL_US
 * meanwhile (the spin then ends).  *now: the time after it. */
static int spin_yield(uint64_t *now)
{
	uint64_t t0 = mono_us(), t1;

	sched_yield();
	t1 = mono_us();
	*now = t1;
	if (t1 - t0 < SPIN_STALL_US)
		return 1;
	spin_off_until_us = t1 + SPIN_OFF_US;
	return 0;
}

/* evd->lock held (dropped meanwhile): a wait of a CQ's EVD begins (on
 * 1) or ends (on 0) to take its connection's input from the progress
 * thread (iwe_cq_spin), once for all its spins and sleeps: each change
 * is a system call. */
static void own_input_locked(struct dapl_evd *evd, int *owned, int on)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (!evd->cq || *owned == on)
		return;
	dapl_unlock(&evd->lock);
	iwe_cq_spin(evd->cq, on);
	dapl_lock(&evd->lock);
	*owned = on;
}

/* The device's loop makes connection events: a spin for them looks at
 * the loop itself (iwe_device_poll, when no other thread runs it).  Once
 * a look found nothing, the spin also keeps the progress thread asleep
 * (iwe_device_spin) while no established connection's input is the
 * thread's to place: every arrival had woken it as well, to find the
 * spinner's work done or to race it; on 2 CPUs that wake-up took a CPU
 * from the spinner or its peer, three or four times a side in each
 * connection's setup (the SSP upgrade's median 97-124 us, 63-68 since;
 * PSP connect-accept-disconnect cycles 5,700-6,400 a second, 7,400-7,800
 * since).  Not at the first look: a wait that finds its event at once (a
 * setup of thousands in flight) turns nothing off and on.  evd->lock
 * held, dropped meanwhile; 1 when enough events came. */
static int spin_conn_locked(struct dapl_evd *evd, DAT_COUNT threshold,
			    uint64_t end)
{
	struct iwe_device *dev = evd->obj.ia ? evd->obj.ia->dev : NULL;
	int got = 0, quiet = 0, stalled;
	uint64_t now = mono_us();

	for (;;) {
		dapl_unlock(&evd->lock);
		if (dev)
			iwe_device_poll(dev);
		dapl_lock(&evd->lock);
		if (dapl_evd_count_locked(evd) >= threshold) {
			got = 1;
			break;
		}
		if (now >= end)
			break;
		dapl_unlock(&evd->lock);
		if (dev && !quiet)
			quiet = iwe_device_spin(dev, 1);
		stalled = !spin_yield(&now);
		dapl_lock(&evd->lock);
		if (stalled)
			break;
	}
	if (quiet) {
		dapl_unlock(&evd->lock);
		iwe_device_spin(dev, 0);
		dapl_lock(&evd->lock);
	}
	return got;
}

/* evd->lock held; dropped while spinning, until until_us at the latest
 * (the wait's deadline; 0: none).  1 when enough events came. */
static int spin_locked(struct dapl_evd *evd, DAT_COUNT threshold,
		       uint64_t until_us, int *owned, int *busy)
{
	uint32_t max = spin_max_us();
	uint64_t end, now, last;
	int got = 0;

	DAPL_ASSERT_LOCKED(&evd->lock);
	if (!max || spin_off())
		return 0;
	if (!evd->cq) {
		end = mono_us() + max;
		return spin_conn_locked(evd, threshold,
					until_us && until_us < end ? until_us
								   : end);
	}
	own_input_locked(evd, owned, 1);
	dapl_unlock(&evd->lock);
	now = mono_us();
	last = now + (uint64_t)max * SPIN_FLOWING_TIMES;
	if (until_us && until_us < last)
		last = until_us;
	end = now + max < last ? now + max : last;
	do {
		int r = iwe_cq_drive(evd->cq);

		*busy = !!(r & IWE_CQ_DRIVE_BUSY);
		if (iwe_cq_count(evd->cq) >= threshold) {
			got = 1;
			break;
		}
		if (r & IWE_CQ_DRIVE_BLOCKED)
			break;
		/* the peer, or our progress thread, may need this CPU */
		if (!spin_yield(&now))
			break;
		if ((r & IWE_CQ_DRIVE_READ) && now + max > end)
			end = now + max < last ? now + max : last;
	} while (now < end);
	dapl_lock(&evd->lock);
	return got && dapl_evd_count_locked(evd) >= threshold;
}

/* evd->lock held.  Enough events?  The engine is driven once from this
 * thread first (a wait with timeout 0 is a poll), a blocking wait spins
 * -- at its start, and again after a sleep when that drive finds input
 * flowing (the rest of a large message: each piece would be a wake-up)
 * -- and for a CQ the count is checked again after arming, so a
 * completion that slipped in before the arm is seen now rather than
 * missed by the channel.  A wait with timeout 0 does not arm: it will
 * not sleep. */
static int ready_locked(struct dapl_evd *evd, DAT_COUNT threshold,
			int may_spin, int may_sleep, uint64_t until_us,
			int *owned, int *busy)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (dapl_evd_count_locked(evd) >= threshold)
		return 1;
	if (evd->cq) {
		int r = iwe_cq_drive(evd->cq);

		*busy = !!(r & IWE_CQ_DRIVE_BUSY);
		if (r & IWE_CQ_DRIVE_READ)
			may_spin = may_sleep;
		if (dapl_evd_count_locked(evd) >= threshold)
			return 1;
	}
	if (may_spin && spin_locked(evd, threshold, until_us, owned, busy))
		return 1;
	if (!may_sleep || !evd->cq)
		return 0;
	iwe_req_notify_cq(evd->cq, 0);
	return dapl_evd_count_locked(evd) >= threshold;
}

/* The waiter's sleep in the device's epoll is over; it dispatches what
 * woke it next, on its own thread, and looks at the ring after that: the
 * events it posts meanwhile (a connection's ESTABLISHED, a request) need
 * no write of its wake fd, which it would only read back (two system
 * calls on the way to every such event). */
static void evd_awake(void *arg)
{
	struct dapl_evd *evd = arg;

	dapl_lock(&evd->lock);
	evd->asleep = 0;
	dapl_unlock(&evd->lock);
}

/* evd->lock held; dropped while asleep.  Returns 0 once past deadline.
 * busy: the last drive left a QP to another thread running it; its
 * socket's input, there for that thread to read, would end a sleep on
 * it at once (dtest -w, both sides streaming 4 MiB Writes, made 300,000
 * such sleeps a run while the progress thread sent), so the wait first
 * waits for that thread to let go, and drives the QPs itself. */
static int sleep_locked(struct dapl_evd *evd, int bounded,
			const struct timespec *deadline, int *owned, int busy)
{
	struct pollfd fds[2 + IWE_CQ_SPIN_MAX] = {
		{ .fd = evd->wake_fd, .events = POLLIN },
		{ .fd = evd->channel ? evd->channel->fd : -1, .events = POLLIN },
	};
	int own[2] = { evd->wake_fd, evd->channel ? evd->channel->fd : -1 };
	int socks[IWE_CQ_SPIN_MAX], nsocks = 0, more = 1, ready;
	struct iwe_device *dev;
	struct iwe_cq *cq;
	struct timespec left;

	DAPL_ASSERT_LOCKED(&evd->lock);
	if (bounded && !dapl_time_left(deadline, &left))
		return 0;	/* timeout 0 polls without a system call */
	dev = evd->obj.ia ? evd->obj.ia->dev : NULL;
	own_input_locked(evd, owned, 1);
	cq = evd->cq;
	if (cq)
		nsocks = iwe_cq_sleep_fds(cq, socks, IWE_CQ_SPIN_MAX);
	for (int i = 0; i < nsocks; i++)
		fds[2 + i] = (struct pollfd){ .fd = socks[i], .events = POLLIN };
	/* Posts from now on write the wake fd; one made while the lock was
	 * let go above did not, and is seen here instead of slept on. */
	ready = dapl_evd_count_locked(evd) >= evd->threshold;
	evd->asleep = !ready;
	dapl_unlock(&evd->lock);
	if (ready)
		more = 1;
	else if (nsocks) {
		if (busy)
			iwe_cq_drive_wait(cq);
		more = dapl_fd_sleep(fds, 2 + nsocks, bounded, deadline);
	}
	/* This thread runs the device's loop while it sleeps, when it may. */
	else if (!(dev && iwe_device_sleep(dev, own, evd->channel ? 2 : 1,
					   bounded ? deadline : NULL,
					   evd_awake, evd)))
		more = dapl_fd_sleep(fds, evd->channel ? 2 : 1, bounded,
				     deadline);
	/* The wait reads what woke it itself now (ready_locked). */
	if (nsocks)
		iwe_cq_disarm(cq);
	dapl_lock(&evd->lock);
	evd->asleep = 0;
	/* Reset before re-checking: a post after this point leaves the fd
	 * readable, so the next sleep returns at once.  Every write of the
	 * fd is flagged after it. */
	if (atomic_exchange(&evd->fd_woken, 0))
		dapl_efd_drain(evd->wake_fd);
	if (evd->channel)
		dapl_evd_channel_drain(evd);
	return more;
}

static DAT_RETURN wait_loop_locked(struct dapl_evd *evd, DAT_TIMEOUT timeout,
				   DAT_COUNT threshold)
{
	struct timespec deadline;
	int bounded = dapl_deadline(timeout, &deadline), first = 1;
	/* The spin ends by the deadline too (mono_us's clock). */
	uint64_t until_us = bounded ? (uint64_t)deadline.tv_sec * 1000000u +
				      (uint64_t)deadline.tv_nsec / 1000u : 0;

	DAT_RETURN ret;
	int owned = 0, busy = 0;

	DAPL_ASSERT_LOCKED(&evd->lock);
	for (;;) {
		if (evd->dead) {
			ret = DAT_ABORT;
			break;
		}
		if (!evd->waitable) {
			ret = DAT_INVALID_STATE |
			      DAT_INVALID_STATE_EVD_UNWAITABLE;
			break;
		}
		/* Spin at the start of a wait that may block (again while
		 * input flows: ready_locked). */
		if (ready_locked(evd, threshold, first && timeout != 0,
				 timeout != 0, until_us, &owned, &busy)) {
			ret = DAT_SUCCESS;
			break;
		}
		first = 0;
		if (!sleep_locked(evd, bounded, &deadline, &owned, busy)) {
			ret = DAT_TIMEOUT_EXPIRED;
			break;
		}
	}
	own_input_locked(evd, &owned, 0);
	return ret;
}

static DAT_RETURN wait_enter_locked(struct dapl_evd *evd, DAT_COUNT threshold)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	if (threshold < 1 || threshold > evd->qlen)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	if (!evd->waitable)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE;
	if (atomic_load(&evd->waiting))
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE;
	atomic_store(&evd->waiting, 1);
	evd->threshold = threshold;
	return DAT_SUCCESS;
}

/* evd->lock held.  After this the EVD may be freed by a teardown that
 * waited for us, so callers touch nothing of it once they unlock. */
static void wait_leave_locked(struct dapl_evd *evd)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	atomic_store(&evd->waiting, 0);
	evd->threshold = 1;
	if (evd->dead)
		pthread_cond_broadcast(&evd->idle);
	else if (evd->cq && evd->cno && atomic_load(&evd->enabled))
		/* Our sleeps consumed the channel: re-arm for the CNO. */
		iwe_req_notify_cq(evd->cq, 0);
}

DAT_RETURN dapl_evd_wait(DAT_EVD_HANDLE h, DAT_TIMEOUT timeout,
			 DAT_COUNT threshold, DAT_EVENT *event, DAT_COUNT *nmore)
{
	struct dapl_evd *evd = evd_get(h);
	enum evd_take t = TAKE_NONE;
	struct dapl_ia *ia;
	struct ibv_wc wc;
	DAT_COUNT left = 0;
	DAT_RETURN ret;
	int news = 0, yield = 0;

	if (!evd)
		return EVD_BAD_HANDLE;
	if (!event)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	ia = evd->obj.ia;
	dapl_lock(&evd->lock);
	ret = wait_enter_locked(evd, threshold);
	if (ret == DAT_SUCCESS) {
		ret = wait_loop_locked(evd, timeout, threshold);
		if (ret == DAT_SUCCESS)
			t = take_locked(evd, event, &wc);
		/* Only a wait of 0 polls; any other's event ends a
		 * stretch of empty polls too. */
		yield = poll_yield_due_locked(evd, timeout == 0 &&
					      t == TAKE_NONE);
		left = dapl_evd_count_locked(evd);
		news = ret != DAT_ABORT && dapl_evd_cq_overflow_news_locked(evd);
		wait_leave_locked(evd);
	}
	dapl_unlock(&evd->lock);
	finish_take(t, evd, h, &wc, event);
	if (timeout == 0 && ret == DAT_TIMEOUT_EXPIRED)
		polled_empty(evd, ia);
	if (nmore && (ret == DAT_SUCCESS || ret == DAT_TIMEOUT_EXPIRED))
		*nmore = left;
	if (yield)
		iwe_poll_yield();
	if (news)
		dapl_evd_post_async(ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, h, 0);
	return ret;
}

/* ------------------------------------------------- state changes */

DAT_RETURN dapl_evd_enable(DAT_EVD_HANDLE h)
{
	struct dapl_evd *evd = evd_get(h);

	if (!evd)
		return EVD_BAD_HANDLE;
	dapl_lock(&evd->lock);
	atomic_store(&evd->enabled, 1);
	/* Completions from now on should reach the CNO again.  Events
	 * queued while disabled do not trigger it retroactively. */
	if (evd->cq && evd->cno)
		iwe_req_notify_cq(evd->cq, 0);
	dapl_unlock(&evd->lock);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_evd_disable(DAT_EVD_HANDLE h)
{
	struct dapl_evd *evd = evd_get(h);

	if (!evd)
		return EVD_BAD_HANDLE;
	atomic_store(&evd->enabled, 0);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_evd_set_unwaitable(DAT_EVD_HANDLE h)
{
	struct dapl_evd *evd = evd_get(h);

	if (!evd)
		return EVD_BAD_HANDLE;
	dapl_lock(&evd->lock);
	evd->waitable = 0;
	if (atomic_load(&evd->waiting))
		dapl_evd_wake_locked(evd);
	dapl_unlock(&evd->lock);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_evd_clear_unwaitable(DAT_EVD_HANDLE h)
{
	struct dapl_evd *evd = evd_get(h);

	if (!evd)
		return EVD_BAD_HANDLE;
	dapl_lock(&evd->lock);
	evd->waitable = 1;
	dapl_unlock(&evd->lock);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_evd_modify_cno(DAT_EVD_HANDLE h, DAT_CNO_HANDLE cno_handle)
{
	struct dapl_evd *evd = evd_get(h);
	struct dapl_cno *cno = NULL;
	struct dapl_ia *ia;
	DAT_RETURN ret = DAT_SUCCESS;

	if (!evd)
		return EVD_BAD_HANDLE;
	ia = evd->obj.ia;
	dapl_ia_lock(ia);
	if (cno_handle && !(cno = dapl_obj_get_locked(ia, cno_handle, DAT_HANDLE_TYPE_CNO))) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO;
	}
	dapl_lock(&evd->lock);
	if (evd->cno != cno) {
		if (evd->cno)
			dapl_cno_detach_locked(evd->cno, evd);
		if (cno)
			ret = dapl_cno_attach_locked(cno, evd);
	}
	dapl_unlock(&evd->lock);
	dapl_ia_unlock(ia);
	return ret;
}

/* evd->lock held; 'ring' is consumed on success. */
static DAT_RETURN resize_locked(struct dapl_evd *evd, DAT_EVENT *ring,
				DAT_COUNT qlen)
{
	int err;

	DAPL_ASSERT_LOCKED(&evd->lock);
	if (dapl_evd_count_locked(evd) > qlen)
		return DAT_INVALID_STATE;
	if (atomic_load(&evd->waiting) && evd->threshold > qlen)
		return DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER;
	if (evd->cq && (err = iwe_resize_cq(evd->cq, qlen)) != 0)
		return err == ENOMEM ?
			DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEVD :
			DAT_INVALID_STATE;
	dapl_evd_ring_move_locked(evd, ring, qlen);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_evd_resize(DAT_EVD_HANDLE h, DAT_COUNT qlen)
{
	struct dapl_evd *evd = evd_get(h);
	DAT_EVENT *ring;
	DAT_RETURN ret;

	if (!evd)
		return EVD_BAD_HANDLE;
	if (!qlen_valid(evd->obj.ia, qlen))
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	ring = calloc((size_t)qlen, sizeof(*ring));
	if (!ring)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	dapl_lock(&evd->lock);
	ret = resize_locked(evd, ring, qlen);
	dapl_unlock(&evd->lock);
	if (ret != DAT_SUCCESS)
		free(ring);
	return ret;
}

/* ---------------------------------------------------------- query */

static DAT_EVD_STATE evd_state_locked(struct dapl_evd *evd)
{
	int s = atomic_load(&evd->enabled) ? DAT_EVD_STATE_ENABLED
					   : DAT_EVD_STATE_DISABLED;

	DAPL_ASSERT_LOCKED(&evd->lock);
	s |= evd->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE;
	return (DAT_EVD_STATE)s;
}

DAT_RETURN dapl_evd_query(DAT_EVD_HANDLE h, DAT_EVD_PARAM_MASK mask,
			  DAT_EVD_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_evd *evd = dapl_obj_query_get(h, DAT_HANDLE_TYPE_EVD,
						  DAT_INVALID_HANDLE_EVD_REQUEST,
						  mask, DAT_EVD_FIELD_ALL,
						  mask && !param, &r);

	if (!evd)
		return r;
	if (mask & DAT_EVD_FIELD_IA_HANDLE)
		param->ia_handle = dapl_ia_consumer_handle(evd->obj.ia);
	dapl_lock(&evd->lock);
	if (mask & DAT_EVD_FIELD_EVD_QLEN)
		param->evd_qlen = evd->qlen;
	if (mask & DAT_EVD_FIELD_EVD_STATE)
		param->evd_state = evd_state_locked(evd);
	if (mask & DAT_EVD_FIELD_CNO)
		param->cno_handle = evd->cno ? evd->cno->obj.handle
					     : DAT_HANDLE_NULL;
	if (mask & DAT_EVD_FIELD_EVD_FLAGS)
		param->evd_flags = evd->flags;
	dapl_unlock(&evd->lock);
	return DAT_SUCCESS;
}
