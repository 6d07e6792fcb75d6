/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Consumer Notification Objects (DAT 2.0 section 6.3.1).
 *
 * A CNO gathers notifications from the EVDs attached to it.  An EVD
 * triggers it when, enabled and not waited on directly, it receives an
 * event (dapl_evd_post, dat_evd_post_se) or, for a CQ-backed EVD, when
 * the engine fires the EVD's completion channel.  The first is pushed by
 * the EVD (dapl_cno_notify writes ev_fd); the second is noticed through
 * the epoll set ep_fd, which holds ev_fd and every attached channel, so no
 * provider thread has to watch CQs.
 *
 * Choices made where the specification is open, or departs from the
 * easier reading:
 *
 * - A bad, freed or wrong-type CNO handle returns
 *   DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO (as libdat2 does for NULL).
 * - dat_cno_wait that times out returns DAT_QUEUE_EMPTY with *evd NULL:
 *   the spec lists DAT_QUEUE_EMPTY for it ("the operation timed out
 *   without a notification", also dat_error.h's words), not
 *   DAT_TIMEOUT_EXPIRED.
 * - One trigger is remembered until reported; its EVD is the hint that
 *   dat_cno_wait returns.  The spec makes the handle only a hint: after a
 *   wake-up the consumer polls every EVD feeding the CNO, so triggers that
 *   arrive while one is pending are merged.  A hint whose EVD has since
 *   been detached is reported as NULL.
 * - dat_cno_trigger(cno, &evd) is the non-blocking dat_cno_wait: it
 *   reports and resets a pending trigger, or returns DAT_QUEUE_EMPTY with
 *   NULL.  It is how a consumer of dat_cno_fd_create resets the fd after
 *   poll() says it is readable.
 * - The fd of dat_cno_fd_create is the epoll fd: readable while the CNO
 *   is triggered or an attached CQ has fired.  read() on it is not
 *   meaningful; dat_cno_trigger or dat_cno_wait resets it.  It belongs to
 *   the CNO: dat_cno_free closes it.
 * - The OS wait proxy agent is called when an event triggers the CNO,
 *   from the thread that queued the event (a consumer thread for
 *   dat_evd_post_se, the engine's progress thread for provider events),
 *   with no provider lock held.  As the spec says, it is then no longer
 *   associated with the CNO; dat_cno_modify_agent sets it again.  CQ
 *   completions only reach a dat_cno_wait/dat_cno_trigger caller (no
 *   provider thread watches CQs to call the agent).
 * - When the last EVD leaves a CNO with blocked waiters, they return
 *   DAT_SUCCESS with a NULL EVD (spec, dat_cno_wait).  Abrupt dat_ia_close
 *   wakes them with DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_DEAD.
 * - DAT_CNO_FIELD_ALL (0x4) is not the union of the other masks (and
 *   DAT_CNO_FIELD_PROXY, 0x3, overlaps both): any subset of 0x7 is valid.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "dapl.h"
#include "dapl_evd.h"

#define CNO_BAD_HANDLE (DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CNO)
#define CNO_MASK_VALID (DAT_CNO_FIELD_IA_HANDLE | DAT_CNO_FIELD_PROXY_TYPE | \
			DAT_CNO_FIELD_PROXY | DAT_CNO_FIELD_ALL)

static struct dapl_cno *cno_get(DAT_CNO_HANDLE h)
{
	return dapl_obj_get(h, DAT_HANDLE_TYPE_CNO);
}

/* --------------------------------------------------- EVD side (locked) */

DAT_RETURN dapl_cno_attach_locked(struct dapl_cno *cno, struct dapl_evd *evd)
{
	struct epoll_event ee = { .events = EPOLLIN, .data.ptr = evd };
	DAT_RETURN ret = DAT_SUCCESS;

	DAPL_ASSERT_IA_LOCKED(cno->obj.ia);
	DAPL_ASSERT_LOCKED(&evd->lock);
	dapl_lock(&cno->lock);
	if (evd->channel &&
	    epoll_ctl(cno->ep_fd, EPOLL_CTL_ADD, evd->channel->fd, &ee) < 0) {
		ret = DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	} else {
		evd->cno = cno;
		evd->cno_next = cno->evds;
		cno->evds = evd;
		cno->obj.users++;
		cno->orphaned = 0;
		/* The CQ fires the channel only once armed. */
		if (evd->cq && atomic_load(&evd->enabled))
			iwe_req_notify_cq(evd->cq, 0);
	}
	dapl_unlock(&cno->lock);
	return ret;
}

static void evd_list_remove(struct dapl_cno *cno, struct dapl_evd *evd)
{
	struct dapl_evd **pp = &cno->evds;

	while (*pp && *pp != evd)
		pp = &(*pp)->cno_next;
	if (*pp)
		*pp = evd->cno_next;
	evd->cno_next = NULL;
}

void dapl_cno_detach_locked(struct dapl_cno *cno, struct dapl_evd *evd)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	dapl_lock(&cno->lock);
	evd_list_remove(cno, evd);
	if (evd->channel)
		(void)epoll_ctl(cno->ep_fd, EPOLL_CTL_DEL, evd->channel->fd,
				NULL);
	if (cno->triggered == evd)
		cno->triggered = NULL;	/* stay pending: poll every EVD */
	cno->obj.users--;
	if (cno->obj.users == 0 && cno->waiters) {
		cno->orphaned = 1;
		dapl_efd_poke(cno->ev_fd);
	}
	evd->cno = NULL;
	dapl_unlock(&cno->lock);
}

void dapl_cno_notify_locked(struct dapl_cno *cno, struct dapl_evd *evd,
			    struct dapl_agent_call *call)
{
	DAPL_ASSERT_LOCKED(&evd->lock);
	dapl_lock(&cno->lock);
	if (!cno->pending) {
		cno->pending = 1;
		cno->triggered = evd;
		dapl_efd_poke(cno->ev_fd);
	}
	if (cno->agent.proxy_agent_func) {
		call->fn = cno->agent.proxy_agent_func;
		call->data = cno->agent.instance_data;
		call->evd = evd->obj.handle;
		cno->agent = DAT_OS_WAIT_PROXY_AGENT_NULL;	/* one-shot */
	}
	dapl_unlock(&cno->lock);
}

void dapl_cno_call_agent(const struct dapl_agent_call *call)
{
	if (call->fn)
		call->fn(call->data, call->evd);
}

/* ------------------------------------------------------ reporting */

/* cno->lock held.  Collect fired completion channels (always, so that a
 * fired channel does not keep the epoll fd readable) and re-arm the CQs
 * of EVDs that may trigger us.  Completions that land between a fire and
 * this re-arm are not lost: they are already queued when we report, and
 * the consumer polls every EVD after a wake-up. */
static struct dapl_evd *scan_cqs_locked(struct dapl_cno *cno)
{
	struct dapl_evd *found = NULL;

	DAPL_ASSERT_LOCKED(&cno->lock);
	for (struct dapl_evd *e = cno->evds; e; e = e->cno_next) {
		int fired;

		if (!e->cq)
			continue;
		fired = dapl_evd_cq_fired(e);
		/* A direct waiter preempts the CNO; it was poked above. */
		if (!atomic_load(&e->enabled) || atomic_load(&e->waiting))
			continue;
		iwe_req_notify_cq(e->cq, 0);
		if (fired && !found)
			found = e;
	}
	return found;
}

/* cno->lock held.  Report and reset one trigger, if there is one. */
static int report_locked(struct dapl_cno *cno, DAT_EVD_HANDLE *evd)
{
	struct dapl_evd *e;

	DAPL_ASSERT_LOCKED(&cno->lock);
	if (cno->pending) {
		e = cno->triggered;
		cno->pending = 0;
		cno->triggered = NULL;
		*evd = e ? e->obj.handle : DAT_HANDLE_NULL;
		return 1;
	}
	e = scan_cqs_locked(cno);
	if (!e)
		return 0;
	*evd = e->obj.handle;
	return 1;
}

/* cno->lock held.  ev_fd stays readable exactly while something is
 * there to report or a teardown/orphaning must wake waiters. */
static void sync_fd_locked(struct dapl_cno *cno)
{
	DAPL_ASSERT_LOCKED(&cno->lock);
	if (!cno->pending && !cno->orphaned && !cno->dead)
		dapl_efd_drain(cno->ev_fd);
}

static DAT_RETURN wait_loop_locked(struct dapl_cno *cno, DAT_TIMEOUT timeout,
				   DAT_EVD_HANDLE *evd)
{
	struct pollfd pfd = { .fd = cno->ep_fd, .events = POLLIN };
	struct timespec deadline, left;
	int bounded = dapl_deadline(timeout, &deadline);
	int more;

	DAPL_ASSERT_LOCKED(&cno->lock);
	*evd = DAT_HANDLE_NULL;
	for (;;) {
		if (cno->dead)
			return DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_DEAD;
		if (cno->orphaned)
			return DAT_SUCCESS;
		if (report_locked(cno, evd))
			return DAT_SUCCESS;
		sync_fd_locked(cno);
		/* The device's sleep returns at its deadline as any wake-up
		 * does: the deadline is ours to check. */
		if (bounded && !dapl_time_left(&deadline, &left))
			return DAT_QUEUE_EMPTY;
		dapl_unlock(&cno->lock);
		/* This thread runs the device's loop while it sleeps, when
		 * it may. */
		more = 1;
		if (!(cno->obj.ia && cno->obj.ia->dev &&
		      iwe_device_sleep(cno->obj.ia->dev, &cno->ep_fd, 1,
				       bounded ? &deadline : NULL, NULL, NULL)))
			more = dapl_fd_sleep(&pfd, 1, bounded, &deadline);
		dapl_lock(&cno->lock);
		if (!more)
			return DAT_QUEUE_EMPTY;
	}
}

DAT_RETURN dapl_cno_wait(DAT_CNO_HANDLE h, DAT_TIMEOUT timeout,
			 DAT_EVD_HANDLE *evd)
{
	struct dapl_cno *cno = cno_get(h);
	DAT_EVD_HANDLE got;
	DAT_RETURN ret;

	if (!cno)
		return CNO_BAD_HANDLE;
	if (!evd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	dapl_lock(&cno->lock);
	cno->waiters++;
	ret = wait_loop_locked(cno, timeout, &got);
	if (--cno->waiters == 0)
		cno->orphaned = 0;
	sync_fd_locked(cno);
	if (cno->dead)
		pthread_cond_broadcast(&cno->idle);
	/* A teardown waiting on 'idle' may free the CNO once we unlock. */
	dapl_unlock(&cno->lock);
	*evd = got;
	return ret;
}

DAT_RETURN dapl_cno_trigger(DAT_CNO_HANDLE h, DAT_EVD_HANDLE *evd)
{
	struct dapl_cno *cno = cno_get(h);
	DAT_EVD_HANDLE got = DAT_HANDLE_NULL;
	DAT_RETURN ret;

	if (!cno)
		return CNO_BAD_HANDLE;
	if (!evd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	dapl_lock(&cno->lock);
	ret = report_locked(cno, &got) ? DAT_SUCCESS : DAT_QUEUE_EMPTY;
	sync_fd_locked(cno);
	dapl_unlock(&cno->lock);
	*evd = got;
	return ret;
}

/* ---------------------------------------------------- create / free */

static void cno_release(struct dapl_cno *cno)
{
	if (cno->ep_fd >= 0)
		close(cno->ep_fd);
	if (cno->ev_fd >= 0)
		close(cno->ev_fd);
	pthread_cond_destroy(&cno->idle);
	dapl_lock_destroy(&cno->lock);
	free(cno);
}

/* Abrupt IA close.  EVDs go first (dapl_kind order), so none is left
 * attached; blocked waiters are woken and waited for. */
static void cno_destroy(struct dapl_obj *obj)
{
	struct dapl_cno *cno = (struct dapl_cno *)obj;
	struct dapl_ia *ia = obj->ia;

	dapl_lock(&cno->lock);
	cno->dead = 1;
	dapl_efd_poke(cno->ev_fd);
	while (cno->waiters)
		dapl_cond_wait(&cno->idle, &cno->lock);
	dapl_unlock(&cno->lock);
	dapl_ia_lock(ia);
	dapl_obj_fini_locked(obj);
	dapl_ia_unlock(ia);
	cno_release(cno);
}

static struct dapl_cno *cno_alloc(DAT_OS_WAIT_PROXY_AGENT agent, int fd_mode)
{
	struct dapl_cno *cno = calloc(1, sizeof(*cno));
	struct epoll_event ee = { .events = EPOLLIN, .data.ptr = NULL };

	if (!cno)
		return NULL;
	dapl_lock_init(&cno->lock);
	pthread_cond_init(&cno->idle, NULL);
	cno->agent = agent;
	cno->fd_mode = fd_mode;
	cno->ev_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	cno->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	if (cno->ev_fd < 0 || cno->ep_fd < 0 ||
	    epoll_ctl(cno->ep_fd, EPOLL_CTL_ADD, cno->ev_fd, &ee) < 0) {
		cno_release(cno);
		return NULL;
	}
	return cno;
}

static DAT_RETURN cno_create(struct dapl_ia *ia, DAT_OS_WAIT_PROXY_AGENT agent,
			     int fd_mode, struct dapl_cno **out)
{
	struct dapl_cno *cno = cno_alloc(agent, fd_mode);
	DAT_RETURN ret;

	if (!cno)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	ret = dapl_obj_init(&cno->obj, ia, DAPL_K_CNO, DAT_HANDLE_TYPE_CNO,
			    cno_destroy);
	if (ret != DAT_SUCCESS) {
		cno_release(cno);
		return ret;
	}
	*out = cno;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_cno_create(DAT_IA_HANDLE ia_handle,
			   DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *out)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_cno *cno;
	DAT_RETURN ret;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!out)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	ret = cno_create(ia, agent, 0, &cno);
	if (ret == DAT_SUCCESS)
		*out = cno->obj.handle;
	return ret;
}

DAT_RETURN dapl_cno_fd_create(DAT_IA_HANDLE ia_handle, DAT_FD *fd,
			      DAT_CNO_HANDLE *out)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);
	struct dapl_cno *cno;
	DAT_RETURN ret;

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!fd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!out)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	ret = cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, 1, &cno);
	if (ret != DAT_SUCCESS)
		return ret;
	*fd = cno->ep_fd;
	*out = cno->obj.handle;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_cno_free(DAT_CNO_HANDLE h)
{
	struct dapl_cno *cno = dapl_obj_lock(h, DAT_HANDLE_TYPE_CNO);
	struct dapl_ia *ia;
	DAT_RETURN ret = DAT_SUCCESS;

	if (!cno)
		return CNO_BAD_HANDLE;
	ia = cno->obj.ia;
	dapl_lock(&cno->lock);
	/* Attached EVDs count in obj.users (changed under ia->lock). */
	if (cno->obj.users > 0 || cno->waiters > 0)
		ret = DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_IN_USE;
	else
		cno->dead = 1;
	dapl_unlock(&cno->lock);
	if (ret == DAT_SUCCESS)
		dapl_obj_fini_locked(&cno->obj);
	dapl_ia_unlock(ia);
	if (ret == DAT_SUCCESS)
		cno_release(cno);
	return ret;
}

/* ------------------------------------------------- agent and query */

DAT_RETURN dapl_cno_modify_agent(DAT_CNO_HANDLE h, DAT_OS_WAIT_PROXY_AGENT agent)
{
	struct dapl_cno *cno = cno_get(h);

	if (!cno)
		return CNO_BAD_HANDLE;
	dapl_lock(&cno->lock);
	cno->agent = agent;
	dapl_unlock(&cno->lock);
	return DAT_SUCCESS;
}

static void query_proxy_locked(struct dapl_cno *cno, DAT_CNO_PARAM *p)
{
	DAPL_ASSERT_LOCKED(&cno->lock);
	if (cno->fd_mode) {
		p->proxy_type = DAT_PROXY_TYPE_FD;
		p->proxy.fd = cno->ep_fd;
	} else if (cno->agent.proxy_agent_func) {
		p->proxy_type = DAT_PROXY_TYPE_AGENT;
		p->proxy.agent = cno->agent;
	} else {
		p->proxy_type = DAT_PROXY_TYPE_NONE;
		p->proxy.none = NULL;
	}
}

DAT_RETURN dapl_cno_query(DAT_CNO_HANDLE h, DAT_CNO_PARAM_MASK mask,
			  DAT_CNO_PARAM *param)
{
	DAT_RETURN r;
	struct dapl_cno *cno = dapl_obj_query_get(h, DAT_HANDLE_TYPE_CNO,
						  DAT_INVALID_HANDLE_CNO, mask,
						  CNO_MASK_VALID,
						  mask && !param, &r);

	if (!cno)
		return r;
	if (mask & (DAT_CNO_FIELD_IA_HANDLE | DAT_CNO_FIELD_ALL))
		param->ia_handle = dapl_ia_consumer_handle(cno->obj.ia);
	if (mask & (DAT_CNO_FIELD_PROXY_TYPE | DAT_CNO_FIELD_ALL)) {
		dapl_lock(&cno->lock);
		query_proxy_locked(cno, param);
		dapl_unlock(&cno->lock);
	}
	return DAT_SUCCESS;
}
