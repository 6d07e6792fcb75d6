/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: connections set up many at a time, as an MPI library wires its
 * peers -- the active side keeps up to `inflight` connects outstanding
 * and starts another as each one is ESTABLISHED; the passive side creates
 * an EP for each request as it comes and accepts it -- and the teardown
 * of all of them at once.  The PSP way is here; scale_ssp.c upgrades TCP
 * connections instead and shares the event handling.
 *
 * Each connection's index travels in its private data, so both sides
 * file its EP under the same index (the EP's consumer context), and the
 * use phase knows which data pattern each connection carries. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "iwscale.h"

int listen_all(struct scale_side *s)
{
	if (s->o->ssp)
		return ssp_listen(s);
	for (int j = 0; j < s->o->listeners; j++) {
		DAT_RETURN r = dat_psp_create(s->d.ia, s->o->qual + (DAT_CONN_QUAL)j, s->cm_evd,
					      DAT_PSP_CONSUMER_FLAG, &s->psp[j]);
		if (r != DAT_SUCCESS) {
			side_fail(s, -1, "dat_psp_create", r);
			return -1;
		}
	}
	return 0;
}

int side_ready(struct scale_side *s, int64_t step)
{
	struct scale_msg m;

	if (side_open(s))
		return -1;
	if (s->active) {
		if (ctl_recv(s->ctl, step, s->o->wait_s, &m))
			return -1;
		s->peer.rmr_context = (DAT_RMR_CONTEXT)m.rmr;
		s->peer.virtual_address = (DAT_VADDR)m.addr;
		return 0;
	}
	m = (struct scale_msg){ .step = step, .rmr = s->reg.rctx,
				.addr = (uint64_t)(uintptr_t)s->reg.buf };
	return listen_all(s) || ctl_send(s->ctl, &m);
}

void unlisten_all(struct scale_side *s)
{
	for (int j = 0; j < SCALE_MAX_LISTENERS; j++) {
		if (s->psp[j] != DAT_HANDLE_NULL)
			du_check(dat_psp_free(s->psp[j]), "dat_psp_free");
		s->psp[j] = DAT_HANDLE_NULL;
		if (s->lfd[j] >= 0)
			close(s->lfd[j]);
		s->lfd[j] = -1;
	}
}

int conn_established(struct scale_side *s, const DAT_EVENT *ev)
{
	DAT_EP_HANDLE ep = ev->event_data.connect_event_data.ep_handle;
	long idx = side_ep_index(ep);
	uint64_t now = lat_now_ns();

	if (ev->event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
		side_fail(s, idx, du_event_name(ev->event_number), DAT_SUCCESS);
		return -1;
	}
	if (s->active && idx >= 0 && idx < s->o->n)
		s->lat[s->up] = now - s->t_start[idx];
	s->t_up[s->up++] = now;
	side_progress(s, "ESTABLISHED", s->up, s->o->n);
	return 0;
}

/* The index in a request's private data, or -1 (printed) when there is
 * none or it is out of [from, to) or taken. */
static long request_index(struct scale_side *s, const DAT_CR_PARAM *p, long from, long to)
{
	uint64_t idx = UINT64_MAX;

	if (p->private_data && p->private_data_size >= (DAT_COUNT)sizeof idx)
		memcpy(&idx, p->private_data, sizeof idx);
	if (idx < (uint64_t)from || idx >= (uint64_t)to || s->ep[idx] != DAT_HANDLE_NULL) {
		side_fail(s, (long)idx, "a connection request with an index not expected now "
			  "(another program on these ports?)", DAT_SUCCESS);
		return -1;
	}
	return (long)idx;
}

int conn_accept(struct scale_side *s, const DAT_EVENT *ev, long from, long to)
{
	DAT_CR_HANDLE cr = ev->event_data.cr_arrival_event_data.cr_handle;
	DAT_CR_PARAM p;
	DAT_RETURN r;
	long idx;

	r = dat_cr_query(cr, DAT_CR_FIELD_ALL, &p);
	if (r != DAT_SUCCESS) {
		side_fail(s, -1, "dat_cr_query", r);
		return -1;
	}
	idx = request_index(s, &p, from, to);
	if (idx < 0)
		return -1;
	/* An SSP's request comes with the EP given to the SSP. */
	if (p.local_ep_handle != DAT_HANDLE_NULL) {
		s->ep[idx] = p.local_ep_handle;
		side_ep_set_index(s->ep[idx], idx);
	} else if (side_ep_create(s, idx, &s->ep[idx])) {
		return -1;
	}
	r = dat_cr_accept(cr, s->ep[idx], 0, NULL);
	if (r != DAT_SUCCESS) {
		side_fail(s, idx, "dat_cr_accept", r);
		return -1;
	}
	return 0;
}

static int connect_one(struct scale_side *s, long idx)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	uint64_t pd = (uint64_t)idx;
	DAT_RETURN r;

	inet_pton(AF_INET, SCALE_HOST, &to.sin_addr);
	if (side_ep_create(s, idx, &s->ep[idx]))
		return -1;
	s->t_start[idx] = lat_now_ns();
	r = dat_ep_connect(s->ep[idx], (DAT_IA_ADDRESS_PTR)&to,
			   s->o->qual + (DAT_CONN_QUAL)side_listener_of(s, idx), s->d.tmo_us,
			   (DAT_COUNT)sizeof pd, &pd, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
	if (r != DAT_SUCCESS) {
		side_fail(s, idx, "dat_ep_connect", r);
		return -1;
	}
	return 0;
}

int connect_range(struct scale_side *s, long from, long to, struct scale_msg *m)
{
	long next = from, base = s->up;

	if (s->o->ssp)
		return ssp_connect_range(s, from, to, m);
	m->t_begin = lat_now_ns();
	while (s->up - base < to - from) {
		DAT_EVENT ev;

		while (next < to && next - from - (s->up - base) < s->o->inflight)
			if (connect_one(s, next++))
				return -1;
		if (side_wait(s, s->cm_evd, &ev, "ESTABLISHED") || conn_established(s, &ev))
			return -1;
	}
	m->count = s->up - base;
	m->t_end = s->t_up[s->up - 1];
	return 0;
}

int accept_range(struct scale_side *s, long from, long to, struct scale_msg *m)
{
	long base = s->up;

	if (s->o->ssp)
		return ssp_accept_range(s, from, to, m);
	while (s->up - base < to - from) {
		DAT_EVENT ev;

		if (side_wait(s, s->cm_evd, &ev, "a connection request or ESTABLISHED"))
			return -1;
		if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT) {
			if (!m->t_begin)
				m->t_begin = lat_now_ns();
			if (conn_accept(s, &ev, from, to))
				return -1;
		} else if (conn_established(s, &ev)) {
			return -1;
		}
	}
	m->count = s->up - base;
	m->t_end = s->t_up[s->up - 1];
	return 0;
}

/* All connections end at once: the active side disconnects every EP
 * (graceful), then each side frees an EP as its DISCONNECTED comes.
 * m: t_begin the first disconnect call, t_end the last EP freed; count
 * the EPs freed, errors the calls or events that went wrong. */
int teardown(struct scale_side *s, struct scale_msg *m)
{
	long n = s->up, freed = 0;

	m->t_begin = lat_now_ns();
	for (long k = 0; s->active && k < s->o->n; k++) {
		DAT_RETURN r;

		if (s->ep[k] == DAT_HANDLE_NULL)
			continue;
		r = dat_ep_disconnect(s->ep[k], DAT_CLOSE_GRACEFUL_FLAG);
		if (r != DAT_SUCCESS) {
			side_fail(s, k, "dat_ep_disconnect", r);
			m->errors++;
		}
	}
	while (freed < n) {
		DAT_EVENT ev;
		long idx;

		if (side_wait(s, s->cm_evd, &ev, "DISCONNECTED")) {
			m->errors++;
			break;
		}
		idx = side_ep_index(ev.event_data.connect_event_data.ep_handle);
		if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED || idx < 0 ||
		    idx >= s->o->n || s->ep[idx] == DAT_HANDLE_NULL) {
			side_fail(s, idx, ev.event_number == DAT_CONNECTION_REQUEST_EVENT ?
				  "a connection request in the teardown (another program on these ports?)" :
				  du_event_name(ev.event_number), DAT_SUCCESS);
			m->errors++;
			continue;
		}
		if (dat_ep_free(s->ep[idx]) != DAT_SUCCESS)
			m->errors++;
		s->ep[idx] = DAT_HANDLE_NULL;
		freed++;
		side_progress(s, "EPs freed", freed, n);
	}
	m->t_end = lat_now_ns();
	m->count = freed;
	s->up -= freed;
	return m->errors || freed < n ? -1 : 0;
}
