/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Consumer Notification Objects through libdat2: create/query/free rules,
 * triggering by attached EVDs (enabled or not, waited on or not), the OS
 * wait proxy agent, and the fd flavour of DAT 2.0.
 *
 * Debian's libdat2 does not export dat_cno_fd_create nor dat_cno_trigger,
 * so those go through the provider table (udat_redirection.h), with the
 * provider's IA handle from the registry's dats_get_ia_handle. */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tcommon.h"
#include <dat2/dat_registry.h>	/* the provider table macros */

extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static DAT_RETURN post(DAT_EVD_HANDLE evd)
{
	DAT_EVENT ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_SOFTWARE_EVENT;
	return dat_evd_post_se(evd, &ev);
}

static void drain(DAT_EVD_HANDLE evd)
{
	DAT_EVENT ev;

	while (dat_evd_dequeue(evd, &ev) == DAT_SUCCESS)
		;
}

#define CHECK_CODE_STATE(expr, ...)                                       \
	do {                                                              \
		DAT_RETURN s_r_ = (expr);                                 \
		CHECK(DAT_GET_TYPE(s_r_) == DAT_INVALID_STATE &&          \
		      DAT_GET_SUBTYPE(s_r_) == DAT_INVALID_STATE_CNO_IN_USE, \
		      __VA_ARGS__);                                       \
	} while (0)

struct cno_waiter {
	pthread_t tid;
	DAT_CNO_HANDLE cno;
	DAT_EVD_HANDLE got;
	DAT_RETURN ret;
};

static void *cno_wait_thread(void *arg)
{
	struct cno_waiter *w = arg;

	w->ret = dat_cno_wait(w->cno, DAT_TIMEOUT_INFINITE, &w->got);
	return NULL;
}

static void start_cno_waiter(struct cno_waiter *w, DAT_CNO_HANDLE cno)
{
	memset(w, 0, sizeof(*w));
	w->cno = cno;
	w->got = (DAT_EVD_HANDLE)0x1;
	w->ret = DAT_INTERNAL_ERROR;
	pthread_create(&w->tid, NULL, cno_wait_thread, w);
	usleep(100 * 1000);	/* let it block */
}

struct evd_waiter {
	pthread_t tid;
	DAT_EVD_HANDLE evd;
	DAT_RETURN ret;
};

static void *evd_wait_thread(void *arg)
{
	struct evd_waiter *w = arg;
	DAT_EVENT ev;

	w->ret = dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &ev, NULL);
	return NULL;
}

static int agent_calls;
static DAT_EVD_HANDLE agent_evd;
static DAT_PVOID agent_data;

static void DAT_API agent(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
	agent_calls++;
	agent_evd = evd;
	agent_data = data;
}

static void test_basics(DAT_IA_HANDLE ia, DAT_CNO_HANDLE cno)
{
	DAT_CNO_PARAM p;
	DAT_HANDLE_TYPE t;
	DAT_CNO_HANDLE other;
	DAT_EVD_HANDLE evd = (DAT_EVD_HANDLE)0x1;
	double t0, dt;

	CHECK(dat_get_handle_type(cno, &t) == DAT_SUCCESS && t == DAT_HANDLE_TYPE_CNO,
	      "the CNO handle has type DAT_HANDLE_TYPE_CNO");
	memset(&p, 0, sizeof(p));
	CHECK_RET(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &p), DAT_SUCCESS, "cno_query ALL");
	CHECK(p.ia_handle == ia && p.proxy_type == DAT_PROXY_TYPE_NONE,
	      "query: the consumer's IA handle, no proxy");
	CHECK_RET(dat_cno_query(cno, 0x100, &p), DAT_INVALID_PARAMETER, "query with a bad mask -> INVALID_PARAMETER");
	CHECK_RET(dat_cno_query(cno, DAT_CNO_FIELD_ALL, NULL), DAT_INVALID_PARAMETER,
		  "query into NULL -> INVALID_PARAMETER");
	CHECK_RET(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, NULL), DAT_INVALID_PARAMETER,
		  "cno_create with a NULL result -> INVALID_PARAMETER");
	CHECK_RET(dat_cno_create((DAT_IA_HANDLE)0x7777, DAT_OS_WAIT_PROXY_AGENT_NULL, &other),
		  DAT_INVALID_HANDLE, "cno_create on a bogus IA -> INVALID_HANDLE");
	CHECK_RET(dat_cno_wait(cno, 0, NULL), DAT_INVALID_PARAMETER, "cno_wait into NULL -> INVALID_PARAMETER");
	t0 = now_ms();
	CHECK_RET(dat_cno_wait(cno, 50 * 1000, &evd), DAT_QUEUE_EMPTY,
		  "cno_wait with nothing attached times out with DAT_QUEUE_EMPTY (spec)");
	dt = now_ms() - t0;
	CHECK(evd == NULL && dt >= 45 && dt < 1000, "... evd NULL, after 45 ms to 1 s (%.1f ms)", dt);
}

static void test_triggers(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE evd)
{
	struct cno_waiter cw;
	struct evd_waiter ew;
	DAT_EVD_HANDLE got = NULL;

	CHECK_CODE_STATE(dat_cno_free(cno), "cno_free with an EVD attached -> INVALID_STATE/CNO_IN_USE");
	post(evd);
	CHECK(dat_cno_wait(cno, 1000 * 1000, &got) == DAT_SUCCESS && got == evd,
	      "post_se on the attached EVD triggers the CNO; cno_wait returns that EVD");
	CHECK_RET(dat_cno_wait(cno, 0, &got), DAT_QUEUE_EMPTY, "the trigger was reset by the wait");
	drain(evd);

	dat_evd_disable(evd);
	post(evd);
	CHECK_RET(dat_cno_wait(cno, 30 * 1000, &got), DAT_QUEUE_EMPTY, "a disabled EVD does not trigger the CNO");
	dat_evd_enable(evd);
	drain(evd);

	start_cno_waiter(&cw, cno);
	post(evd);
	pthread_join(cw.tid, NULL);
	CHECK(cw.ret == DAT_SUCCESS && cw.got == evd, "a blocked cno_wait is woken by a post from another thread");
	drain(evd);

	ew.evd = evd;
	pthread_create(&ew.tid, NULL, evd_wait_thread, &ew);
	usleep(100 * 1000);	/* let it block */
	post(evd);
	pthread_join(ew.tid, NULL);
	CHECK(ew.ret == DAT_SUCCESS && dat_cno_wait(cno, 0, &got) == DAT_QUEUE_EMPTY,
	      "a thread waiting on the EVD itself preempts the CNO");
}

static void test_agent(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE evd)
{
	DAT_OS_WAIT_PROXY_AGENT a = { (DAT_PVOID)0x1234, agent };
	DAT_CNO_PARAM p;
	DAT_EVD_HANDLE got;

	CHECK_RET(dat_cno_modify_agent(cno, a), DAT_SUCCESS, "cno_modify_agent sets a proxy agent");
	dat_cno_query(cno, DAT_CNO_FIELD_ALL, &p);
	CHECK(p.proxy_type == DAT_PROXY_TYPE_AGENT && p.proxy.agent.proxy_agent_func == agent,
	      "query shows the agent");
	post(evd);
	CHECK(agent_calls == 1 && agent_evd == evd && agent_data == (DAT_PVOID)0x1234,
	      "the agent is called with its data and the EVD when the CNO triggers");
	post(evd);
	CHECK(agent_calls == 1, "... once: the spec dissociates it after the call");
	dat_cno_wait(cno, 0, &got);
	drain(evd);
}

static int readable(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

static void test_fd(DAT_IA_HANDLE ia)
{
	DAT_IA_HANDLE pia = NULL;
	DAT_CNO_HANDLE cno = NULL;
	DAT_EVD_HANDLE evd = NULL, got = NULL;
	DAT_CNO_PARAM p;
	DAT_FD fd = -1;

	if (dats_get_ia_handle(ia, &pia) != DAT_SUCCESS)
		BAIL("dats_get_ia_handle failed");
	CHECK_RET(DAT_CNO_FD_CREATE(pia, &fd, &cno), DAT_SUCCESS, "cno_fd_create (provider table)");
	CHECK(fd >= 0 && dat_cno_query(cno, DAT_CNO_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.proxy_type == DAT_PROXY_TYPE_FD && p.proxy.fd == fd, "query reports the fd");
	dat_evd_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd);
	CHECK(!readable(fd, 0), "the fd is not readable before any event");
	CHECK_RET(DAT_CNO_TRIGGER(cno, &got), DAT_QUEUE_EMPTY, "cno_trigger with nothing pending -> DAT_QUEUE_EMPTY");
	post(evd);
	CHECK(readable(fd, 1000), "a post on the attached EVD makes the fd readable");
	CHECK(DAT_CNO_TRIGGER(cno, &got) == DAT_SUCCESS && got == evd, "cno_trigger reports the EVD");
	CHECK(!readable(fd, 0), "... and resets the fd");
	dat_evd_free(evd);
	CHECK_RET(dat_cno_free(cno), DAT_SUCCESS, "fd CNO freed");
}

/* A CNO with no EVD but a blocked waiter cannot be freed; the spec's
 * recipe (attach a software EVD and post on it) releases the waiter. */
static void test_lone_waiter(DAT_IA_HANDLE ia)
{
	DAT_CNO_HANDLE lone = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE sw = DAT_HANDLE_NULL;
	struct cno_waiter cw;

	dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &lone);
	start_cno_waiter(&cw, lone);
	CHECK_CODE_STATE(dat_cno_free(lone), "cno_free with a blocked waiter -> INVALID_STATE/CNO_IN_USE");
	dat_evd_create(ia, 2, lone, DAT_EVD_SOFTWARE_FLAG, &sw);
	post(sw);
	pthread_join(cw.tid, NULL);
	CHECK(cw.ret == DAT_SUCCESS && cw.got == sw, "attaching a software EVD and posting releases it");
	dat_evd_free(sw);
	CHECK_RET(dat_cno_free(lone), DAT_SUCCESS, "then the CNO can be freed");
}

static void test_orphan_and_free(DAT_IA_HANDLE ia, DAT_CNO_HANDLE cno, DAT_EVD_HANDLE evd)
{
	struct cno_waiter cw;
	DAT_EVD_HANDLE got;

	start_cno_waiter(&cw, cno);
	CHECK_RET(dat_evd_free(evd), DAT_SUCCESS, "free the CNO's only EVD while a thread waits on the CNO");
	pthread_join(cw.tid, NULL);
	CHECK(cw.ret == DAT_SUCCESS && cw.got == NULL, "the waiter returns DAT_SUCCESS with a NULL EVD (spec)");
	CHECK_RET(dat_cno_free(cno), DAT_SUCCESS, "cno_free");
	CHECK_RET(dat_cno_wait(cno, 0, &got), DAT_INVALID_HANDLE, "cno_wait after free -> INVALID_HANDLE");
	CHECK_RET(dat_cno_free(cno), DAT_INVALID_HANDLE, "double free -> INVALID_HANDLE");
	(void)ia;
}

/* Abrupt close of a second IA under a blocked cno_wait. */
static void test_abrupt_close(void)
{
	DAT_IA_HANDLE ia2 = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE async2 = DAT_HANDLE_NULL;
	DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
	struct cno_waiter cw;

	if (dat_ia_open((DAT_NAME_PTR)test_ia_name(), 8, &async2, &ia2) != DAT_SUCCESS ||
	    dat_cno_create(ia2, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno) != DAT_SUCCESS)
		BAIL("cannot open a second IA with a CNO");
	start_cno_waiter(&cw, cno);
	CHECK_RET(dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
		  "abrupt close of an IA whose CNO has a blocked waiter");
	pthread_join(cw.tid, NULL);
	CHECK(DAT_GET_SUBTYPE(cw.ret) == DAT_INVALID_STATE_CNO_DEAD && cw.got == NULL,
	      "the waiter returns INVALID_STATE/CNO_DEAD with a NULL EVD (0x%x)", cw.ret);
}

/* Regression: once a listener starts the device's progress thread, a
 * CNO wait sleeps in the device's loop, whose return at the deadline
 * looked like any wake-up: the wait never timed out (dtest -c hung). */
static void test_timeout_with_thread(DAT_IA_HANDLE ia)
{
	DAT_EVD_HANDLE dto = NULL, cr = NULL, got = (DAT_EVD_HANDLE)0x1;
	DAT_CNO_HANDLE cno = NULL;
	DAT_PSP_HANDLE psp = NULL;
	DAT_CONN_QUAL port = 0;
	double t0, dt;

	if (dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno) != DAT_SUCCESS ||
	    dat_evd_create(ia, 8, cno, DAT_EVD_DTO_FLAG, &dto) != DAT_SUCCESS ||
	    dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr) != DAT_SUCCESS ||
	    dat_psp_create_any(ia, &port, cr, DAT_PSP_CONSUMER_FLAG, &psp) != DAT_SUCCESS) {
		CHECK(0, "a CNO, a DTO EVD on it and a listening PSP");
		return;
	}
	test_watchdog(10);
	t0 = now_ms();
	CHECK_RET(dat_cno_wait(cno, 40 * 1000, &got), DAT_QUEUE_EMPTY,
		  "with a PSP listening, cno_wait still times out with DAT_QUEUE_EMPTY");
	dt = now_ms() - t0;
	alarm(0);
	CHECK(got == NULL && dt >= 35 && dt < 2000, "... evd NULL, after 35 ms to 2 s (%.1f ms)", dt);
	dat_psp_free(psp);
	dat_evd_free(cr);
	dat_evd_free(dto);
	dat_cno_free(cno);
}

int main(void)
{
	DAT_IA_HANDLE ia = test_open_ia(NULL);
	DAT_CNO_HANDLE cno = NULL;
	DAT_EVD_HANDLE evd = NULL;

	CHECK_RET(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS, "cno_create");
	test_basics(ia, cno);
	CHECK_RET(dat_evd_create(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS,
		  "a software EVD attached to the CNO");
	test_triggers(cno, evd);
	test_agent(cno, evd);
	test_fd(ia);
	test_lone_waiter(ia);
	test_orphan_and_free(ia, cno, evd);
	test_timeout_with_thread(ia);
	test_abrupt_close();	/* while our IA keeps the provider loaded */
	test_close_ia(ia);
	return tap_done();
}
