/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DAT 2.0 helpers for iwdtest (see dat_util.h). */
#include "dat_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Other programs built on these helpers (iwa2a) put their own name here. */
const char *du_prog = "iwdtest";

const char *du_err(DAT_RETURN r)
{
	static char buf[160];
	const char *maj = "?", *min = "?";

	dat_strerror(r, &maj, &min);
	snprintf(buf, sizeof buf, "%s %s (0x%x)", maj, min, (unsigned)r);
	return buf;
}

int du_check(DAT_RETURN r, const char *what)
{
	if (r == DAT_SUCCESS)
		return 0;
	fprintf(stderr, "%s: %s: %s\n", du_prog, what, du_err(r));
	if (DAT_GET_TYPE(r) == DAT_NOT_IMPLEMENTED)
		fprintf(stderr, "%s: the provider does not implement %s yet\n", du_prog, what);
	return -1;
}

const char *du_event_name(DAT_EVENT_NUMBER n)
{
	switch (n) {
	case DAT_DTO_COMPLETION_EVENT: return "DTO_COMPLETION";
	case DAT_CONNECTION_REQUEST_EVENT: return "CONNECTION_REQUEST";
	case DAT_CONNECTION_EVENT_ESTABLISHED: return "ESTABLISHED";
	case DAT_CONNECTION_EVENT_PEER_REJECTED: return "PEER_REJECTED";
	case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "NON_PEER_REJECTED";
	case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "ACCEPT_COMPLETION_ERROR";
	case DAT_CONNECTION_EVENT_DISCONNECTED: return "DISCONNECTED";
	case DAT_CONNECTION_EVENT_BROKEN: return "BROKEN";
	case DAT_CONNECTION_EVENT_TIMED_OUT: return "TIMED_OUT";
	case DAT_CONNECTION_EVENT_UNREACHABLE: return "UNREACHABLE";
	case DAT_ASYNC_ERROR_EP_BROKEN: return "ASYNC_EP_BROKEN";
	default: return "other";
	}
}

int du_open(struct du *d, const char *ia_name, int dto_qlen)
{
	DAT_RETURN r;

	r = dat_ia_open((const DAT_NAME_PTR)ia_name, 8, &d->async_evd, &d->ia);
	if (du_check(r, "dat_ia_open")) {
		fprintf(stderr, "%s: is %s in the dat.conf that DAT_OVERRIDE names?\n", du_prog, ia_name);
		d->ia = DAT_HANDLE_NULL;
		return -1;
	}
	if (du_check(dat_pz_create(d->ia, &d->pz), "dat_pz_create"))
		return -1;
	r = dat_evd_create(d->ia, dto_qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &d->dto_evd);
	if (du_check(r, "dat_evd_create(dto)"))
		return -1;
	r = dat_evd_create(d->ia, d->conn_qlen ? d->conn_qlen : 8, DAT_HANDLE_NULL,
			   DAT_EVD_CONNECTION_FLAG, &d->conn_evd);
	if (du_check(r, "dat_evd_create(conn)"))
		return -1;
	r = dat_evd_create(d->ia, d->conn_qlen ? d->conn_qlen : 8, DAT_HANDLE_NULL,
			   DAT_EVD_CR_FLAG, &d->cr_evd);
	return du_check(r, "dat_evd_create(cr)");
}

int du_ia_is_udp(struct du *d)
{
	DAT_PROVIDER_ATTR p;

	if (dat_ia_query(d->ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &p) != DAT_SUCCESS)
		return 0;
	for (int i = 0; i < p.num_provider_specific_attr; i++)
		if (strcmp(p.provider_specific_attr[i].name, "DAT_IW_TRANSPORT") == 0)
			return strcmp(p.provider_specific_attr[i].value, "UDP") == 0;
	return 0;
}

int du_reg(struct du *d, struct du_region *g, size_t len)
{
	DAT_REGION_DESCRIPTION desc;
	DAT_VLEN rlen;
	DAT_VADDR raddr;
	DAT_RETURN r;

	/* Page-aligned, so the provider's registration covers whole pages. */
	if (posix_memalign(&g->buf, 4096, len)) {
		fprintf(stderr, "%s: out of memory (%zu bytes)\n", du_prog, len);
		return -1;
	}
	memset(g->buf, 0, len);
	g->len = len;
	desc.for_va = g->buf;
	r = dat_lmr_create(d->ia, DAT_MEM_TYPE_VIRTUAL, desc, len, d->pz,
			   DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &g->lmr,
			   &g->lctx, &g->rctx, &rlen, &raddr);
	if (du_check(r, "dat_lmr_create")) {
		g->lmr = DAT_HANDLE_NULL;
		return -1;
	}
	return 0;
}

void du_ep_attr(const struct du_ep_sizes *s, DAT_EP_ATTR *a)
{
	/* Every field explicitly: the DAT spec gives no "zero means default". */
	memset(a, 0, sizeof *a);
	a->service_type = DAT_SERVICE_TYPE_RC;
	a->max_message_size = 1u << 30;
	a->max_rdma_size = 1u << 30;
	a->qos = DAT_QOS_BEST_EFFORT;
	a->recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a->request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a->max_recv_dtos = s->max_recv;
	a->max_request_dtos = s->max_req;
	a->max_recv_iov = 1;
	a->max_request_iov = 1;
	a->max_rdma_read_in = s->rdma_read;
	a->max_rdma_read_out = s->rdma_read;
	a->srq_soft_hw = DAT_HW_DEFAULT;
	a->max_rdma_read_iov = 1;
	a->max_rdma_write_iov = 1;
}

int du_ep_create(struct du *d, const struct du_ep_sizes *s)
{
	DAT_EP_ATTR a;

	du_ep_attr(s, &a);
	d->sizes = *s;
	return du_check(dat_ep_create(d->ia, d->pz, d->dto_evd, d->dto_evd,
				      d->conn_evd, &a, &d->ep), "dat_ep_create");
}

int du_listen(struct du *d, DAT_CONN_QUAL qual)
{
	return du_check(dat_psp_create(d->ia, qual, d->cr_evd,
				       DAT_PSP_CONSUMER_FLAG, &d->psp),
			"dat_psp_create");
}

int du_take_cr(const DAT_EVENT *ev, DAT_CR_HANDLE *cr, void *pd, int pdmax,
	       int *pdlen)
{
	DAT_CR_PARAM p;

	if (ev->event_number != DAT_CONNECTION_REQUEST_EVENT) {
		fprintf(stderr, "%s: expected CONNECTION_REQUEST, got %s\n", du_prog,
			du_event_name(ev->event_number));
		return -1;
	}
	*cr = ev->event_data.cr_arrival_event_data.cr_handle;
	if (du_check(dat_cr_query(*cr, DAT_CR_FIELD_ALL, &p), "dat_cr_query"))
		return -1;
	*pdlen = p.private_data_size;
	if (p.private_data && p.private_data_size > 0)
		memcpy(pd, p.private_data,
		       (size_t)(p.private_data_size < pdmax ? p.private_data_size : pdmax));
	return 0;
}

int du_wait_cr_event(struct du *d, DAT_TIMEOUT wait_us, DAT_EVENT *ev)
{
	DAT_TIMEOUT keep = d->tmo_us;
	int rc;

	d->tmo_us = wait_us;
	rc = du_wait(d, d->cr_evd, ev, "a connection request");
	d->tmo_us = keep;
	return rc;
}

int du_wait_cr(struct du *d, DAT_TIMEOUT wait_us, DAT_CR_HANDLE *cr,
	       void *pd, int pdmax, int *pdlen)
{
	DAT_EVENT ev;

	return du_wait_cr_event(d, wait_us, &ev) ||
	       du_take_cr(&ev, cr, pd, pdmax, pdlen) ? -1 : 0;
}

/* Waits for ESTABLISHED on the connection EVD; *refused set when the
 * failure is one a retry can cure (nobody listening yet). */
static int wait_established(struct du *d, int *refused)
{
	DAT_EVENT ev;

	*refused = 0;
	if (du_wait(d, d->conn_evd, &ev, "the connection"))
		return -1;
	if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
		d->connected = 1;
		return 0;
	}
	*refused = ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
		   ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE;
	if (!*refused)
		fprintf(stderr, "%s: connection failed: %s\n", du_prog, du_event_name(ev.event_number));
	return -1;
}

int du_wait_established(struct du *d)
{
	int refused;

	if (!wait_established(d, &refused))
		return 0;
	if (refused)
		fprintf(stderr, "%s: the connection was refused\n", du_prog);
	return -1;
}

int du_accept(struct du *d, DAT_CR_HANDLE cr)
{
	int refused;

	if (du_check(dat_cr_accept(cr, d->ep, 0, NULL), "dat_cr_accept"))
		return -1;
	return wait_established(d, &refused);
}

int du_resolve(const char *host, struct sockaddr_in *sin)
{
	struct addrinfo hints, *res;
	int e;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	e = getaddrinfo(host, NULL, &hints, &res);
	if (e) {
		fprintf(stderr, "%s: cannot resolve %s: %s\n", du_prog, host, gai_strerror(e));
		return -1;
	}
	memcpy(sin, res->ai_addr, sizeof *sin);
	freeaddrinfo(res);
	return 0;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int du_connect(struct du *d, const char *host, DAT_CONN_QUAL qual,
	       const void *pd, int pdlen, int retry_ms)
{
	struct sockaddr_in sin;
	double end = now_ms() + retry_ms;
	int refused;

	if (du_resolve(host, &sin))
		return -1;
	for (;;) {
		DAT_RETURN r = dat_ep_connect(d->ep, (DAT_IA_ADDRESS_PTR)&sin, qual,
					      d->tmo_us, pdlen, (const DAT_PVOID)pd,
					      DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
		if (du_check(r, "dat_ep_connect"))
			return -1;
		if (!wait_established(d, &refused))
			return 0;
		if (!refused || now_ms() > end) {
			if (refused)
				fprintf(stderr, "%s: nobody accepted at %s qualifier %llu\n", du_prog,
					host, (unsigned long long)qual);
			return -1;
		}
		/* A refused EP is disconnected; start over with a fresh one. */
		dat_ep_free(d->ep);
		d->ep = DAT_HANDLE_NULL;
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
		if (du_ep_create(d, &d->sizes))
			return -1;
	}
}

/* Spins on dat_evd_dequeue, or on dat_evd_wait with a zero timeout (the
 * two polling styles consumers use); 1 when the wait bound passes. */
static int dequeue_spin(struct du *d, DAT_EVENT *ev)
{
	double end = now_ms() + (double)d->tmo_us / 1e3;
	int wait0 = d->poll == DU_POLL_WAIT0;
	unsigned spins = 0;
	DAT_COUNT more;

	for (;;) {
		DAT_RETURN r = wait0 ? dat_evd_wait(d->dto_evd, 0, 1, ev, &more)
				     : dat_evd_dequeue(d->dto_evd, ev);
		if (r == DAT_SUCCESS)
			return 0;
		if (DAT_GET_TYPE(r) != (wait0 ? DAT_TIMEOUT_EXPIRED : DAT_QUEUE_EMPTY))
			return du_check(r, wait0 ? "dat_evd_wait" : "dat_evd_dequeue");
		/* Reading the clock on every spin would dominate latency. */
		if (++spins % 4096 == 0 && now_ms() > end)
			return 1;
	}
}

int du_wait(struct du *d, DAT_EVD_HANDLE evd, DAT_EVENT *ev, const char *what)
{
	DAT_COUNT more;
	DAT_RETURN r;
	int rc;

	if (d->poll && evd == d->dto_evd) {
		rc = dequeue_spin(d, ev);
		if (rc < 0)
			return -1;
		r = rc ? DAT_TIMEOUT_EXPIRED : DAT_SUCCESS;
	} else {
		r = dat_evd_wait(evd, d->tmo_us, 1, ev, &more);
	}
	if (DAT_GET_TYPE(r) == DAT_TIMEOUT_EXPIRED) {
		fprintf(stderr, "%s: timed out after %.1f s waiting for %s\n", du_prog,
			(double)d->tmo_us / 1e6, what);
		return -1;
	}
	return du_check(r, "dat_evd_wait");
}

/* After a flushed completion the EP must end with BROKEN or DISCONNECTED;
 * printed (and awaited, within the wait bound) so that a test killing the
 * peer can tell which, and when. */
void du_report_end(struct du *d)
{
	DAT_EVENT ev;

	if (!d->connected || du_wait(d, d->conn_evd, &ev, "the connection's end"))
		return;
	d->connected = 0;
	fprintf(stderr, "%s: connection event: %s\n", du_prog, du_event_name(ev.event_number));
}

void du_disconnect(struct du *d)
{
	DAT_TIMEOUT keep = d->tmo_us;
	DAT_EVENT ev;

	if (d->ep == DAT_HANDLE_NULL || !d->connected)
		return;
	d->connected = 0;
	if (dat_ep_disconnect(d->ep, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS)
		return;
	/* Both sides may disconnect; either way one DISCONNECTED arrives. */
	d->tmo_us = 5 * 1000 * 1000;
	if (!du_wait(d, d->conn_evd, &ev, "DISCONNECTED") &&
	    ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
		fprintf(stderr, "%s: at disconnect got %s\n", du_prog, du_event_name(ev.event_number));
	d->tmo_us = keep;
}

/* Frees in reverse order of creation; tolerates a partial setup. */
void du_close(struct du *d, struct du_region *regs, int nregs)
{
	int i;

	if (d->ep != DAT_HANDLE_NULL)
		dat_ep_free(d->ep);
	if (d->psp != DAT_HANDLE_NULL)
		dat_psp_free(d->psp);
	for (i = 0; i < nregs; i++) {
		if (regs[i].lmr != DAT_HANDLE_NULL)
			dat_lmr_free(regs[i].lmr);
		free(regs[i].buf);
		regs[i].buf = NULL;
	}
	if (d->cr_evd != DAT_HANDLE_NULL)
		dat_evd_free(d->cr_evd);
	if (d->conn_evd != DAT_HANDLE_NULL)
		dat_evd_free(d->conn_evd);
	if (d->dto_evd != DAT_HANDLE_NULL)
		dat_evd_free(d->dto_evd);
	if (d->pz != DAT_HANDLE_NULL)
		dat_pz_free(d->pz);
	if (d->ia != DAT_HANDLE_NULL &&
	    dat_ia_close(d->ia, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS)
		dat_ia_close(d->ia, DAT_CLOSE_ABRUPT_FLAG);
	memset(d, 0, sizeof *d);
}
