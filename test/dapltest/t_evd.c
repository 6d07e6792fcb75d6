/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Event Dispatchers through libdat2: argument checks, software events,
 * queue limits, waits (timeouts, thresholds, wake-ups from other threads,
 * set_unwaitable), resize, query, CNO attachment and free rules. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tcommon.h"


#define BAD_EVD (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_REQUEST)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static DAT_RETURN post(DAT_EVD_HANDLE evd, uintptr_t tag)
{
	DAT_EVENT ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_SOFTWARE_EVENT;
	ev.event_data.software_event_data.pointer = (DAT_PVOID)tag;
	return dat_evd_post_se(evd, &ev);
}

static uintptr_t tag_of(const DAT_EVENT *ev)
{
	return (uintptr_t)ev->event_data.software_event_data.pointer;
}

/* A thread blocked in dat_evd_wait, and what it got. */
struct waiter {
	pthread_t tid;
	DAT_EVD_HANDLE evd;
	DAT_EVENT ev;
	DAT_COUNT nmore;
	DAT_RETURN ret;
	double ms;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	double t0 = now_ms();

	w->ret = dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &w->ev, &w->nmore);
	w->ms = now_ms() - t0;
	return NULL;
}

static void *late_post_thread(void *arg)
{
	usleep(100 * 1000);
	post((DAT_EVD_HANDLE)arg, 77);
	return NULL;
}

static void start_waiter(struct waiter *w, DAT_EVD_HANDLE evd)
{
	memset(w, 0, sizeof(*w));
	w->evd = evd;
	w->ret = DAT_INTERNAL_ERROR;
	pthread_create(&w->tid, NULL, wait_thread, w);
	usleep(100 * 1000);	/* let it block; nothing observable says so */
}

static void test_create_args(DAT_IA_HANDLE ia, DAT_COUNT max)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL, other;

	CHECK_RET(dat_evd_create((DAT_IA_HANDLE)0x7777, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
		  DAT_INVALID_HANDLE, "evd_create on a bogus IA -> DAT_INVALID_HANDLE");
	CHECK_CODE_TYPE(dat_evd_create(ia, 0, NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "qlen 0 -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(dat_evd_create(ia, -3, NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "negative qlen -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(dat_evd_create(ia, max + 1, NULL, DAT_EVD_SOFTWARE_FLAG, &evd),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG2, "qlen above max_evd_qlen -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(dat_evd_create(ia, 4, NULL, 0, &evd),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4, "no flags -> INVALID_PARAMETER/ARG4");
	CHECK_CODE_TYPE(dat_evd_create(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG | 0x4000, &evd),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG4, "unknown flag bit -> INVALID_PARAMETER/ARG4");
	CHECK_CODE_TYPE(dat_evd_create(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, NULL),
		   DAT_INVALID_PARAMETER | DAT_INVALID_ARG5, "NULL result pointer -> INVALID_PARAMETER/ARG5");
	CHECK_RET(dat_evd_create(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &other), DAT_SUCCESS,
		  "a software EVD for the next check");
	CHECK_CODE_TYPE(dat_evd_create(ia, 4, (DAT_CNO_HANDLE)other, DAT_EVD_SOFTWARE_FLAG, &evd),
		   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO, "an EVD passed as the CNO -> INVALID_HANDLE/CNO");
	dat_evd_free(other);
}

static void test_post_dequeue(DAT_EVD_HANDLE evd, DAT_EVD_HANDLE conn_evd)
{
	DAT_EVENT ev;
	int order_ok = 1;

	CHECK_RET(dat_evd_dequeue(evd, &ev), DAT_QUEUE_EMPTY, "dequeue on an empty EVD -> DAT_QUEUE_EMPTY");
	CHECK_CODE_TYPE(dat_evd_dequeue(evd, NULL), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "dequeue into NULL -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(dat_evd_post_se(evd, NULL), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "post_se of NULL -> INVALID_PARAMETER/ARG2");
	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_CONNECTION_EVENT_ESTABLISHED;
	CHECK_CODE_TYPE(dat_evd_post_se(evd, &ev), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "post_se of a non-software event -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(post(conn_evd, 1), DAT_INVALID_PARAMETER | DAT_INVALID_ARG1,
		   "post_se on an EVD without DAT_EVD_SOFTWARE_FLAG -> INVALID_PARAMETER/ARG1");

	for (uintptr_t i = 1; i <= 4; i++)
		CHECK_RET(post(evd, i), DAT_SUCCESS, "post_se #%u", (unsigned)i);
	CHECK_RET(post(evd, 5), DAT_QUEUE_FULL, "post_se on a full EVD -> DAT_QUEUE_FULL");
	for (uintptr_t i = 1; i <= 4; i++) {
		memset(&ev, 0, sizeof(ev));
		order_ok &= dat_evd_dequeue(evd, &ev) == DAT_SUCCESS &&
			    ev.event_number == DAT_SOFTWARE_EVENT &&
			    ev.evd_handle == evd && tag_of(&ev) == i;
	}
	CHECK(order_ok, "dequeue returns the 4 events in order, with their data and evd_handle");
	CHECK_RET(dat_evd_dequeue(evd, &ev), DAT_QUEUE_EMPTY, "empty again after the last one");
}

static void test_wait_timeouts(DAT_EVD_HANDLE evd)
{
	DAT_EVENT ev;
	DAT_COUNT nmore = -1;
	double t0, dt;

	CHECK_CODE_TYPE(dat_evd_wait(evd, 0, 0, &ev, &nmore), DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "wait with threshold 0 -> INVALID_PARAMETER/ARG3");
	CHECK_CODE_TYPE(dat_evd_wait(evd, 0, 5, &ev, &nmore), DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "wait with threshold above qlen -> INVALID_PARAMETER/ARG3");
	CHECK_CODE_TYPE(dat_evd_wait(evd, 0, 1, NULL, &nmore), DAT_INVALID_PARAMETER | DAT_INVALID_ARG4,
		   "wait into a NULL event -> INVALID_PARAMETER/ARG4");
	CHECK_RET(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED,
		  "wait with timeout 0 on an empty EVD -> DAT_TIMEOUT_EXPIRED");
	CHECK(nmore == 0, "... and nmore is 0");
	t0 = now_ms();
	CHECK_RET(dat_evd_wait(evd, 50 * 1000, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED,
		  "wait of 50 ms -> DAT_TIMEOUT_EXPIRED");
	dt = now_ms() - t0;
	CHECK(dt >= 45 && dt < 1000, "... after 45 ms to 1 s (%.1f ms)", dt);

	post(evd, 10);
	nmore = -1;
	CHECK_RET(dat_evd_wait(evd, 20 * 1000, 2, &ev, &nmore), DAT_TIMEOUT_EXPIRED,
		  "threshold 2 with one event queued -> DAT_TIMEOUT_EXPIRED");
	CHECK(nmore == 1, "... nmore reports the one queued event (%d)", (int)nmore);
	post(evd, 11);
	CHECK_RET(dat_evd_wait(evd, 20 * 1000, 2, &ev, &nmore), DAT_SUCCESS,
		  "threshold 2 with two events queued -> DAT_SUCCESS");
	CHECK(nmore == 1 && tag_of(&ev) == 10, "... the oldest event, nmore == 1");
	CHECK_RET(dat_evd_wait(evd, 0, 1, &ev, NULL), DAT_SUCCESS, "wait with a NULL nmore");
	CHECK(tag_of(&ev) == 11, "... returns the second event");
}

static void test_wait_threads(DAT_EVD_HANDLE evd)
{
	struct waiter w;
	pthread_t poster;
	DAT_EVENT ev;
	DAT_COUNT nmore;

	memset(&w, 0, sizeof(w));
	w.evd = evd;
	pthread_create(&poster, NULL, late_post_thread, evd);
	wait_thread(&w);
	pthread_join(poster, NULL);
	CHECK(w.ret == DAT_SUCCESS && tag_of(&w.ev) == 77,
	      "an infinite wait is woken by another thread's post (0x%x)", w.ret);
	CHECK(w.ms >= 80 && w.ms < 2000, "... after about 100 ms (%.1f ms)", w.ms);

	start_waiter(&w, evd);
	CHECK_CODE_TYPE(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE,
		   "a second waiter -> INVALID_STATE/EVD_IN_USE");
	CHECK_CODE_TYPE(dat_evd_dequeue(evd, &ev), DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_IN_USE,
		   "dequeue while a thread waits -> INVALID_STATE/EVD_IN_USE");
	CHECK_CODE_TYPE(dat_evd_free(evd), DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER,
		   "free while a thread waits -> INVALID_STATE/EVD_WAITER");
	CHECK_RET(dat_evd_set_unwaitable(evd), DAT_SUCCESS, "set_unwaitable with a blocked waiter");
	pthread_join(w.tid, NULL);
	CHECK_CODE_TYPE(w.ret, DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE,
		   "the blocked waiter returns INVALID_STATE/EVD_UNWAITABLE (spec) ");
	CHECK_CODE_TYPE(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE,
		   "wait on an unwaitable EVD -> INVALID_STATE/EVD_UNWAITABLE");
	post(evd, 12);
	CHECK(dat_evd_dequeue(evd, &ev) == DAT_SUCCESS && tag_of(&ev) == 12,
	      "post_se and dequeue still work while unwaitable");
	CHECK_RET(dat_evd_clear_unwaitable(evd), DAT_SUCCESS, "clear_unwaitable");
	CHECK_RET(dat_evd_wait(evd, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, "waitable again");
}

static void test_query_resize(DAT_IA_HANDLE ia, DAT_EVD_HANDLE evd)
{
	DAT_EVD_PARAM p;
	DAT_EVENT ev;
	int ok = 1;

	memset(&p, 0, sizeof(p));
	CHECK_RET(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_SUCCESS, "evd_query ALL");
	CHECK(p.ia_handle == ia, "query gives the IA handle dat_ia_open returned");
	CHECK(p.evd_qlen == 4 && p.evd_flags == DAT_EVD_SOFTWARE_FLAG && p.cno_handle == NULL,
	      "query gives qlen 4, the flags and no CNO");
	CHECK(p.evd_state == (DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE),
	      "query state: enabled and waitable (0x%x)", p.evd_state);
	CHECK_CODE_TYPE(dat_evd_query(evd, 0x40, &p), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "query with an unknown mask bit -> INVALID_PARAMETER/ARG2");
	CHECK_CODE_TYPE(dat_evd_query(evd, DAT_EVD_FIELD_ALL, NULL), DAT_INVALID_PARAMETER | DAT_INVALID_ARG3,
		   "query into NULL -> INVALID_PARAMETER/ARG3");
	dat_evd_disable(evd);
	dat_evd_query(evd, DAT_EVD_FIELD_EVD_STATE, &p);
	CHECK(p.evd_state & DAT_EVD_STATE_DISABLED, "disable shows in the state");
	post(evd, 20);
	CHECK(dat_evd_wait(evd, 0, 1, &ev, NULL) == DAT_SUCCESS && tag_of(&ev) == 20,
	      "a disabled EVD still queues and can be waited on");
	dat_evd_enable(evd);

	for (uintptr_t i = 1; i <= 3; i++)
		post(evd, 30 + i);
	CHECK_CODE_TYPE(dat_evd_resize(evd, 2), DAT_INVALID_STATE, "resize below the queued count -> INVALID_STATE");
	CHECK_CODE_TYPE(dat_evd_resize(evd, 0), DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
		   "resize to 0 -> INVALID_PARAMETER/ARG2");
	CHECK_RET(dat_evd_resize(evd, 8), DAT_SUCCESS, "resize to 8");
	dat_evd_query(evd, DAT_EVD_FIELD_EVD_QLEN, &p);
	CHECK(p.evd_qlen == 8, "query reports the new qlen");
	for (uintptr_t i = 4; i <= 8; i++)
		ok &= post(evd, 30 + i) == DAT_SUCCESS;
	CHECK(ok && post(evd, 99) == DAT_QUEUE_FULL, "8 events fit after the resize, not 9");
	for (uintptr_t i = 1; i <= 8; i++)
		ok &= dat_evd_dequeue(evd, &ev) == DAT_SUCCESS && tag_of(&ev) == 30 + i;
	CHECK(ok, "events queued before and after the resize come out in order");
}

static void test_cno_and_free(DAT_IA_HANDLE ia, DAT_EVD_HANDLE async)
{
	DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL, dto = DAT_HANDLE_NULL;
	DAT_EVD_PARAM p;
	DAT_EVENT ev;
	DAT_HANDLE_TYPE t;
	DAT_CONTEXT ctx, got;

	dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno);
	CHECK_RET(dat_evd_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS,
		  "EVD created on a CNO");
	CHECK_RET(dat_get_handle_type(evd, &t), DAT_SUCCESS, "dat_get_handle_type on it");
	CHECK(t == DAT_HANDLE_TYPE_EVD, "... DAT_HANDLE_TYPE_EVD");
	ctx.as_64 = 0xfeedULL;
	dat_set_consumer_context(evd, ctx);
	got.as_64 = 0;
	CHECK(dat_get_consumer_context(evd, &got) == DAT_SUCCESS && got.as_64 == 0xfeedULL,
	      "consumer context round-trips on an EVD");
	dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p);
	CHECK(p.cno_handle == cno, "query shows the CNO");
	CHECK_RET(dat_cno_free(cno), DAT_INVALID_STATE, "the CNO cannot be freed while an EVD uses it");
	CHECK_CODE_TYPE(dat_evd_modify_cno(evd, (DAT_CNO_HANDLE)async), DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO,
		   "modify_cno to a non-CNO -> INVALID_HANDLE/CNO");
	CHECK_RET(dat_evd_modify_cno(evd, NULL), DAT_SUCCESS, "modify_cno(NULL) detaches");
	dat_evd_query(evd, DAT_EVD_FIELD_CNO, &p);
	CHECK(p.cno_handle == NULL, "... query shows no CNO");
	CHECK_RET(dat_evd_modify_cno(evd, cno), DAT_SUCCESS, "attach it again");
	CHECK_RET(dat_evd_free(evd), DAT_SUCCESS, "free an EVD that has a CNO");
	CHECK_RET(dat_cno_free(cno), DAT_SUCCESS, "the CNO's user count dropped: it can be freed");

	CHECK_RET(dat_evd_create(ia, 16, NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &dto),
		  DAT_SUCCESS, "a DTO EVD (engine CQ behind it)");
	CHECK_RET(dat_evd_wait(dto, 10 * 1000, 1, &ev, NULL), DAT_TIMEOUT_EXPIRED,
		  "a wait on its empty CQ times out");
	CHECK_RET(dat_evd_resize(dto, 32), DAT_SUCCESS, "resize of a CQ-backed EVD");
	CHECK_RET(dat_evd_free(dto), DAT_SUCCESS, "free it");

	CHECK_CODE_TYPE(dat_evd_free(async), DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_ASYNC,
		   "freeing the IA's async EVD -> INVALID_STATE/EVD_ASYNC");
	CHECK_RET(dat_evd_dequeue(async, &ev), DAT_QUEUE_EMPTY,
		  "no overflow was reported for software events (async EVD empty)");

	CHECK_CODE_TYPE(dat_evd_dequeue(evd, &ev), BAD_EVD, "dequeue after free -> INVALID_HANDLE");
	CHECK_RET(dat_evd_wait(evd, 0, 1, &ev, NULL), DAT_INVALID_HANDLE, "wait after free -> INVALID_HANDLE");
	CHECK_RET(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_INVALID_HANDLE, "query after free -> INVALID_HANDLE");
	CHECK_RET(dat_evd_free(evd), DAT_INVALID_HANDLE, "double free -> INVALID_HANDLE");
	CHECK_RET(post(evd, 1), DAT_INVALID_HANDLE, "post_se after free -> INVALID_HANDLE");
}

/* Abrupt close of a second IA under a blocked waiter: DAT_ABORT. */
static void test_abrupt_close(void)
{
	DAT_IA_HANDLE ia2 = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE async2 = DAT_HANDLE_NULL, evd = DAT_HANDLE_NULL;
	struct waiter w;

	if (dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &async2, &ia2) != DAT_SUCCESS ||
	    dat_evd_create(ia2, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd) != DAT_SUCCESS)
		BAIL("cannot open a second IA with an EVD");
	start_waiter(&w, evd);
	CHECK_RET(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "abrupt close of an IA whose EVD has a blocked waiter");
	pthread_join(w.tid, NULL);
	CHECK_RET(w.ret, DAT_ABORT, "the waiter returns DAT_ABORT");
}

int main(void)
{
	DAT_EVD_HANDLE async, evd = DAT_HANDLE_NULL, conn_evd = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = test_open_ia(&async);
	DAT_IA_ATTR attr;
	DAT_COUNT max = 1 << 20;

	if (dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL) == DAT_SUCCESS)
		max = attr.max_evd_qlen;
	test_create_args(ia, max);
	if (dat_evd_create(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd) != DAT_SUCCESS ||
	    dat_evd_create(ia, 4, NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd) != DAT_SUCCESS)
		BAIL("cannot create the test EVDs");
	test_post_dequeue(evd, conn_evd);
	test_wait_timeouts(evd);
	test_wait_threads(evd);
	test_query_resize(ia, evd);
	CHECK_RET(dat_evd_free(evd), DAT_SUCCESS, "free the software EVD");
	CHECK_RET(dat_evd_free(conn_evd), DAT_SUCCESS, "free the connection EVD");
	test_cno_and_free(ia, async);
	test_abrupt_close();	/* while our IA keeps the provider loaded */
	test_close_ia(ia);
	return tap_done();
}
