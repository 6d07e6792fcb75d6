/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwa2a's connections (see iwa2a.h): one PSP on qualifier base + our rank;
 * we dial every lower rank and accept every higher one.  Every dial and
 * accept is asynchronous, their events come on the one connection EVD, and
 * a rank that is not listening yet is dialled again until connect_s. */
#include "iwa2a.h"

#include <endian.h>
#include <netinet/in.h>
#include <stdio.h>

#define PD_MAGIC 0x69613270u		/* "ia2p" */
#define CONNECT_TMO_US (5 * 1000 * 1000)
#define RETRY_MS 100

/* The dialer's private data: who it is, in which job. */
struct a2a_pd {
	uint32_t magic, rank, nranks, pad;
};

static struct a2a_pair *pair_of_rank(struct a2a_job *j, int rank)
{
	return &j->pairs[rank < j->o->rank ? rank : rank - 1];
}

static struct a2a_pair *pair_of_ep(struct a2a_job *j, DAT_EP_HANDLE ep)
{
	int i;

	for (i = 0; i < j->npeers; i++)
		if (j->pairs[i].ep == ep && ep != DAT_HANDLE_NULL)
			return &j->pairs[i];
	return NULL;
}

int a2a_listen(struct a2a_job *j)
{
	return du_listen(&j->d, (DAT_CONN_QUAL)(j->o->base + (unsigned)j->o->rank));
}

/* A fresh EP for p; the completions of the one before are stale. */
static int new_ep(struct a2a_job *j, struct a2a_pair *p)
{
	const struct du_ep_sizes s = { .max_recv = A2A_RECV_SLOTS, .max_req = 2 * A2A_MAX_REQ,
				       .rdma_read = 1 };

	if (du_ep_create(&j->d, &s)) {
		j->failed = 1;
		return -1;
	}
	p->ep = j->d.ep;
	j->d.ep = DAT_HANDLE_NULL;	/* ours, not du_close's */
	p->gen++;
	p->posted = p->completed = 0;
	p->pending = p->recvs_out = 0;
	p->stuck = 0;
	p->last_ms = a2a_now_ms();
	return 0;
}

void a2a_free_ep(struct a2a_pair *p)
{
	if (p->ep != DAT_HANDLE_NULL)
		dat_ep_free(p->ep);
	p->ep = DAT_HANDLE_NULL;
}

static void dial(struct a2a_job *j, struct a2a_pair *p, double now)
{
	struct a2a_pd pd = { htobe32(PD_MAGIC), htobe32((uint32_t)j->o->rank),
			     htobe32((uint32_t)j->o->nranks), 0 };
	struct sockaddr_in sin;
	DAT_RETURN r;

	if (du_resolve(j->o->addr[p->rank], &sin)) {
		j->failed = 1;
		return;
	}
	if (new_ep(j, p))
		return;
	p->attempts++;
	r = dat_ep_connect(p->ep, (DAT_IA_ADDRESS_PTR)&sin,
			   (DAT_CONN_QUAL)(j->o->base + (unsigned)p->rank), CONNECT_TMO_US,
			   (DAT_COUNT)sizeof pd, &pd, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
	if (du_check(r, "dat_ep_connect")) {
		a2a_free_ep(p);
		p->st = PS_RETRY;
		p->retry_ms = now + RETRY_MS;
		return;
	}
	p->st = PS_CONNECTING;
}

void a2a_dial_due(struct a2a_job *j, double now, double deadline)
{
	int i;

	for (i = 0; i < j->npeers; i++) {
		struct a2a_pair *p = &j->pairs[i];

		if (p->st == PS_UP || p->st == PS_ENDED || p->unreached)
			continue;
		if (now > deadline) {
			p->unreached = 1;
			printf("iwa2a: rank %d: no connection with rank %d (%s) within %.0f s, %d dials\n",
			       j->o->rank, p->rank, j->o->addr[p->rank], j->o->connect_s,
			       p->attempts);
			continue;
		}
		if (p->active && (p->st == PS_IDLE || (p->st == PS_RETRY && now >= p->retry_ms)))
			dial(j, p, now);
	}
}

/* The end of an established connection: noted now (when we learn it);
 * judged lost or not once the pair has settled (a DONE may still wait
 * in the DTO EVD behind the connection event). */
static void ended(struct a2a_job *j, struct a2a_pair *p, DAT_EVENT_NUMBER e)
{
	p->st = PS_ENDED;
	p->end_event = du_event_name(e);
	p->end_stage = p->stage;
	p->end_real_ns = a2a_real_ns();
}

void a2a_conn_event(struct a2a_job *j, const DAT_EVENT *ev)
{
	struct a2a_pair *p = pair_of_ep(j, ev->event_data.connect_event_data.ep_handle);
	DAT_EVENT_NUMBER e = ev->event_number;

	if (!p) {
		printf("iwa2a: rank %d: %s for an EP that is no longer ours\n", j->o->rank,
		       du_event_name(e));
		return;
	}
	p->last_ms = a2a_now_ms();
	if (e == DAT_CONNECTION_EVENT_ESTABLISHED && p->st == PS_CONNECTING) {
		p->st = PS_UP;
		/* The listener posted its receives before it accepted. */
		if (p->active)
			a2a_post_recvs(j, p);
		return;
	}
	if ((e == DAT_CONNECTION_EVENT_DISCONNECTED || e == DAT_CONNECTION_EVENT_BROKEN) &&
	    p->st == PS_UP) {
		ended(j, p, e);
		return;
	}
	if (p->st == PS_CONNECTING) {
		/* Refused, unreachable, timed out, or an accept the dialer
		 * gave up on: dial again, or wait for its next request. */
		if (e == DAT_CONNECTION_EVENT_PEER_REJECTED)
			printf("iwa2a: rank %d: rank %d rejected our request\n", j->o->rank,
			       p->rank);
		a2a_free_ep(p);
		p->st = p->active ? PS_RETRY : PS_IDLE;
		p->retry_ms = a2a_now_ms() + RETRY_MS;
		return;
	}
	printf("iwa2a: rank %d: unexpected %s on the connection with rank %d\n", j->o->rank,
	       du_event_name(e), p->rank);
	j->failed = 1;
}

static int valid_request(struct a2a_job *j, const struct a2a_pd *pd, int pdlen)
{
	uint32_t rank = be32toh(pd->rank);

	return pdlen >= (int)sizeof *pd && be32toh(pd->magic) == PD_MAGIC &&
	       be32toh(pd->nranks) == (uint32_t)j->o->nranks &&
	       rank > (uint32_t)j->o->rank && rank < (uint32_t)j->o->nranks;
}

void a2a_cr_event(struct a2a_job *j, const DAT_EVENT *ev)
{
	struct a2a_pd pd = { 0 };
	struct a2a_pair *p;
	DAT_CR_HANDLE cr;
	int pdlen = 0;

	if (du_take_cr(ev, &cr, &pd, (int)sizeof pd, &pdlen)) {
		j->failed = 1;
		return;
	}
	if (!valid_request(j, &pd, pdlen)) {
		printf("iwa2a: rank %d: a connection request not from a higher rank of this job; "
		       "rejected\n", j->o->rank);
		dat_cr_reject(cr, 0, NULL);
		return;
	}
	p = pair_of_rank(j, (int)be32toh(pd.rank));
	if (p->st == PS_UP || p->st == PS_ENDED || p->unreached) {
		printf("iwa2a: rank %d: rank %d asked again; rejected\n", j->o->rank, p->rank);
		dat_cr_reject(cr, 0, NULL);
		return;
	}
	a2a_free_ep(p);	/* an accept in flight: the dialer gave it up and asks again */
	/* Receives first: the dialer's HELLO may come right after ESTABLISHED. */
	if (new_ep(j, p) || a2a_post_recvs(j, p)) {
		dat_cr_reject(cr, 0, NULL);
		return;
	}
	if (du_check(dat_cr_accept(cr, p->ep, 0, NULL), "dat_cr_accept")) {
		a2a_free_ep(p);
		p->st = PS_IDLE;
		return;
	}
	p->st = PS_CONNECTING;
}

void a2a_disconnect_all(struct a2a_job *j)
{
	int i;

	/* Either side may disconnect first; each EP then sees DISCONNECTED. */
	for (i = 0; i < j->npeers; i++)
		if (j->pairs[i].st == PS_UP)
			dat_ep_disconnect(j->pairs[i].ep, DAT_CLOSE_GRACEFUL_FLAG);
}

void a2a_free_eps(struct a2a_job *j)
{
	int i;

	for (i = 0; i < j->npeers; i++)
		a2a_free_ep(&j->pairs[i]);
}
