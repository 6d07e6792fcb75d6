/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* alltoall: an MPI_Alltoall-like exchange among N local processes (4 by
 * default: more ranks than this machine's 2 CPUs, as an oversubscribed
 * job runs), over the provider or over plain TCP, for the bench.
 *
 *   alltoall [--tcp] [-P IA] [-N RANKS] [-S SIZES] [-n ROUNDS | -t SECONDS]
 *            [-p] [-q BASE] [--pair] [--csv]
 *
 * One process forks the ranks; each connects to every other (one DAT
 * connection, or one TCP socket, a pair: rank r dials the lower ranks and
 * accepts the higher ones; rank r listens on BASE + r).  A round: every
 * rank sends one message of the size to every other rank, then waits
 * until it holds the round's message from each and its sends completed;
 * the round's time is what a rank measures from its first post to that
 * point.  With --pair only ranks 0 and 1 exchange, a ping-pong, while the
 * others stay connected and idle (a busy peer among idle ones on the same
 * DTO EVD); its figures are one way, half a round.  Over DAT the messages
 * are Sends into receives posted ahead (two a peer: a peer may be a round
 * ahead), all EPs on one DTO EVD, waited on with dat_evd_wait (blocking,
 * the default) or spun on with dat_evd_dequeue (-p).  Plain TCP sends
 * with send() and receives with recv() on whichever socket poll()
 * reports (blocking), or with MSG_DONTWAIT round and round (-p).  Every
 * message is checked (its round, its sender, its bytes).  Rank 0 decides
 * the number of rounds (-n, or its clock against -t) and flags its
 * message of the last one.
 *
 * Output, one line per size (the ranks' means, medians and 99th
 * percentiles of their round times, averaged over the ranks that ran
 * them; the largest maximum):
 *   mode,ranks,size,rounds,seconds,lat_us,lat_median_us,lat_p99_us,lat_max_us,valid
 * mode: alltoall or pair (DAT), alltoall_tcp or pair_tcp; lat_* in us.
 * Exit status 0 when every rank validated every message. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../test/dtest/dat_util.h"
#include "../test/dtest/size_arg.h"

#define MAX_RANKS 16
#define MAX_SIZES 16
#define WARMUP 50
#define MAX_ROUNDS 1000000
#define SLOTS 2			/* receives posted a peer: one round ahead at most */
#define HDR 16			/* round (8 bytes), sender (8 bytes) */
#define MIN_SIZE 8		/* the round, at least */
#define STOP (1ull << 63)	/* in rank 0's round: the last round */

struct opts {
	const char *ia;
	int nranks, poll, tcp, csv;
	int pair;		/* ranks 0 and 1 ping-pong, the others idle */
	unsigned base;
	size_t sizes[MAX_SIZES];
	int nsizes;
	long rounds;		/* 0: a time budget */
	double secs;
};

/* What each rank reports to the parent for one size. */
struct rank_stats {
	int active;		/* ran the rounds (not an idle rank of --pair) */
	long rounds;
	double secs, mean_us, median_us, p99_us, max_us;
	int ok;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ messages */

static void fill_msg(uint8_t *m, size_t size, uint64_t round, uint64_t from, int stop)
{
	uint64_t head = round | (stop ? STOP : 0);
	size_t i;

	memcpy(m, &head, 8);
	if (size >= HDR)
		memcpy(m + 8, &from, 8);
	for (i = HDR; i < size; i++)
		m[i] = (uint8_t)(round * 31 + from * 7 + i);
}

/* The message of this round from this sender, whole?  *stop: it says
 * the round is the last. */
static int check_msg(const uint8_t *m, size_t size, uint64_t round, uint64_t from, int *stop)
{
	uint64_t r, f = from;
	size_t i;

	memcpy(&r, m, 8);
	*stop = (r & STOP) != 0;
	r &= ~STOP;
	if (size >= HDR)
		memcpy(&f, m + 8, 8);
	if (r != round || f != from)
		return 0;
	for (i = HDR; i < size; i++)
		if (m[i] != (uint8_t)(round * 31 + from * 7 + i))
			return 0;
	return 1;
}

/* ------------------------------------------------------------ statistics */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void stats_of(double *lat, long n, struct rank_stats *s)
{
	double sum = 0;
	long i;

	qsort(lat, (size_t)n, sizeof *lat, cmp_double);
	for (i = 0; i < n; i++)
		sum += lat[i];
	s->mean_us = n ? sum / (double)n : 0;
	s->median_us = n ? (n % 2 ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2) : 0;
	s->p99_us = n ? lat[(long)((double)(n - 1) * 0.99)] : 0;
	s->max_us = n ? lat[n - 1] : 0;
}

/* ------------------------------------------------------------ one rank's transport */

/* The two transports behind the rounds. */
struct xport {
	/* One message of the round to peer; stop: the round is the last
	 * (rank 0 says so). */
	int (*send_to)(void *x, int peer, size_t size, uint64_t round, int stop);
	/* Waits until the round's message of every peer in the mask came
	 * and sends more of our sends completed: 0, 1 when rank 0's message
	 * said the round is the last, or -1. */
	int (*collect)(void *x, size_t size, uint64_t round, unsigned peers, int sends);
};

/* A round of the all-to-all: a message to every other rank, one from each. */
static int round_alltoall(const struct xport *xp, void *x, int rank, int nranks, size_t size,
			  uint64_t round, int stop)
{
	unsigned all = ((1u << nranks) - 1) & ~(1u << rank);
	int p;

	for (p = 0; p < nranks; p++)
		if (p != rank && xp->send_to(x, p, size, round, stop))
			return -1;
	return xp->collect(x, size, round, all, nranks - 1);
}

/* A round of --pair: rank 0 sends to rank 1, which answers. */
static int round_pair(const struct xport *xp, void *x, int rank, size_t size, uint64_t round,
		      int stop)
{
	int rc;

	if (rank == 0)
		return xp->send_to(x, 1, size, round, stop) ? -1 :
		       xp->collect(x, size, round, 1u << 1, 1);
	rc = xp->collect(x, size, round, 1u << 0, 0);
	if (rc < 0 || xp->send_to(x, 0, size, round, 0) || xp->collect(x, size, round, 0, 1) < 0)
		return -1;
	return rc;
}

/* Runs one size: warm-up rounds, then measured ones, as many as -n says or
 * until rank 0's budget is spent: every rank must run the same count, so
 * rank 0 decides and flags its message of the last round, which every
 * rank receives in that round. */
static int run_size(const struct opts *o, int rank, const struct xport *xp, void *x,
		    size_t size, uint64_t *first, struct rank_stats *s, double *lat)
{
	long i, last = o->rounds ? WARMUP + o->rounds - 1 : WARMUP + MAX_ROUNDS - 1;
	double t0 = 0;

	for (i = 0;; i++) {
		/* Rounds are numbered on across sizes: a rank done with
		 * one size may send its first of the next before we are
		 * done. */
		uint64_t round = *first + (uint64_t)i;
		double a = now_s();
		int stop = i == last || (rank == 0 && i > WARMUP && a - t0 >= o->secs && !o->rounds);
		int rc;

		if (i == WARMUP)
			t0 = a;
		rc = o->pair ? round_pair(xp, x, rank, size, round, stop) :
		     round_alltoall(xp, x, rank, o->nranks, size, round, stop);
		if (rc < 0)
			return -1;
		if (i >= WARMUP)
			lat[i - WARMUP] = (now_s() - a) * 1e6;
		if (stop || rc == 1)
			break;
	}
	s->secs = now_s() - t0;
	*first += (uint64_t)i + 1;
	s->rounds = i + 1 - WARMUP;
	stats_of(lat, s->rounds, s);
	s->ok = s->active = 1;
	return 0;
}

/* ------------------------------------------------------------ DAT */

struct dat_rank {
	struct du d;
	int rank, nranks;
	DAT_EP_HANDLE ep[MAX_RANKS];
	int ended[MAX_RANKS];	/* its DISCONNECTED was taken */
	struct du_region reg;	/* per peer: SLOTS receive slots, then one send slot */
	size_t slot;		/* bytes per slot: the largest size */
	long got[2];		/* messages of rounds of parity 0 and 1 taken */
	long sends_done;
	uint64_t last;		/* rank 0's message of this round said: the last */
	int last_known;
};

static uint8_t *dat_slot(struct dat_rank *r, int peer, int k)
{
	return (uint8_t *)r->reg.buf + ((size_t)peer * (SLOTS + 1) + (size_t)k) * r->slot;
}

static DAT_LMR_TRIPLET dat_iov(struct dat_rank *r, int peer, int k, size_t len)
{
	DAT_LMR_TRIPLET iov = { 0 };

	iov.lmr_context = r->reg.lctx;
	iov.virtual_address = (DAT_VADDR)(uintptr_t)dat_slot(r, peer, k);
	iov.segment_length = len;
	return iov;
}

/* The cookie says whose slot: peer * 4 + slot (SLOTS is a send). */
static int dat_post_recv(struct dat_rank *r, int peer, int k)
{
	DAT_LMR_TRIPLET iov = dat_iov(r, peer, k, r->slot);
	DAT_DTO_COOKIE c = { .as_64 = (DAT_UINT64)(peer * 4 + k) };

	return du_check(dat_ep_post_recv(r->ep[peer], 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG),
			"dat_ep_post_recv");
}

static int dat_send_to(void *x, int p, size_t size, uint64_t round, int stop)
{
	struct dat_rank *r = x;
	DAT_DTO_COOKIE c = { .as_64 = (DAT_UINT64)(p * 4 + SLOTS) };
	DAT_LMR_TRIPLET iov = dat_iov(r, p, SLOTS, size);

	fill_msg(dat_slot(r, p, SLOTS), size, round, (uint64_t)r->rank, stop);
	return du_check(dat_ep_post_send(r->ep[p], 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG),
			"dat_ep_post_send");
}

/* A receive completed: its message is of this round or the next. */
static int dat_took(struct dat_rank *r, const DAT_DTO_COMPLETION_EVENT_DATA *e, size_t size,
		    uint64_t round)
{
	int peer = (int)(e->user_cookie.as_64 / 4), k = (int)(e->user_cookie.as_64 % 4);
	const uint8_t *m = dat_slot(r, peer, k);
	int stop;

	/* The next round's may be of the next size. */
	if (e->transfered_length != size || !check_msg(m, size, round, (uint64_t)peer, &stop)) {
		size = e->transfered_length;
		if (size < MIN_SIZE || size > r->slot ||
		    !check_msg(m, size, ++round, (uint64_t)peer, &stop)) {
			uint64_t h[2] = { 0, 0 };

			memcpy(h, m, size < HDR ? 8 : HDR);
			fprintf(stderr, "alltoall: rank %d: from rank %d (slot %d) in round %llu: "
				"a message saying round %llu%s, rank %llu, %u bytes\n", r->rank, peer, k,
				(unsigned long long)round - 1, (unsigned long long)(h[0] & ~STOP),
				h[0] & STOP ? " (the last)" : "", (unsigned long long)h[1],
				(unsigned)e->transfered_length);
			return -1;	/* neither this round's nor the next's */
		}
	}
	r->got[round & 1]++;
	if (stop && peer == 0) {
		r->last = round;
		r->last_known = 1;
	}
	return dat_post_recv(r, peer, k);
}

/* Only the count of the round's messages matters: the peers that send
 * to us in a round are those we expect. */
static int dat_collect(void *x, size_t size, uint64_t round, unsigned peers, int sends)
{
	struct dat_rank *r = x;
	long msgs = __builtin_popcount(peers);

	while (r->got[round & 1] < msgs || r->sends_done < sends) {
		DAT_EVENT ev;
		const DAT_DTO_COMPLETION_EVENT_DATA *e = &ev.event_data.dto_completion_event_data;

		if (du_wait(&r->d, r->d.dto_evd, &ev, "a round's completions"))
			return -1;
		/* A rank that finished its last round disconnects: the
		 * receives we posted for its next round come back flushed. */
		if (ev.event_number == DAT_DTO_COMPLETION_EVENT &&
		    e->status == DAT_DTO_ERR_FLUSHED && e->user_cookie.as_64 % 4 != SLOTS)
			continue;
		if (ev.event_number != DAT_DTO_COMPLETION_EVENT || e->status != DAT_DTO_SUCCESS) {
			fprintf(stderr, "alltoall: rank %d: %s, status %d\n", r->rank,
				du_event_name(ev.event_number), (int)e->status);
			return -1;
		}
		if (e->user_cookie.as_64 % 4 == SLOTS) {
			r->sends_done++;
		} else if (dat_took(r, e, size, round)) {
			fprintf(stderr, "alltoall: rank %d: a wrong message in round %llu\n",
				r->rank, (unsigned long long)round);
			return -1;
		}
	}
	r->got[round & 1] -= msgs;
	r->sends_done -= sends;
	if (!msgs || !r->last_known || r->last != round)
		return 0;
	r->last_known = 0;
	return 1;
}

/* Peer p's EP is ep: our receives go on it before it connects. */
static int dat_ep_receives(struct dat_rank *r, int p, DAT_EP_HANDLE ep)
{
	int k;

	r->ep[p] = ep;
	for (k = 0; k < SLOTS; k++)
		if (dat_post_recv(r, p, k))
			return -1;
	return 0;
}

static int dat_ep_for(struct dat_rank *r, int p, const struct du_ep_sizes *s)
{
	if (du_ep_create(&r->d, s))
		return -1;
	return dat_ep_receives(r, p, r->d.ep);
}

/* Our private data to the rank we dial: our rank. */
static int dat_connect_all(struct dat_rank *r, const struct opts *o)
{
	const struct du_ep_sizes s = { .max_recv = SLOTS, .max_req = 2, .rdma_read = 0 };
	int p, left;

	if (du_listen(&r->d, (DAT_CONN_QUAL)(o->base + (unsigned)r->rank)))
		return -1;
	for (p = 0; p < r->rank; p++) {
		uint32_t me = (uint32_t)r->rank;

		if (dat_ep_for(r, p, &s))
			return -1;
		if (du_connect(&r->d, "127.0.0.1", (DAT_CONN_QUAL)(o->base + (unsigned)p), &me,
			       (int)sizeof me, 20000))
			return -1;
		/* Refused (the rank did not listen yet): du_connect made a
		 * fresh EP, without our receives. */
		if (r->d.ep != r->ep[p] && dat_ep_receives(r, p, r->d.ep))
			return -1;
		r->d.ep = DAT_HANDLE_NULL;
	}
	for (left = r->nranks - 1 - r->rank; left > 0; left--) {
		DAT_CR_HANDLE cr;
		uint32_t who = 0;
		int pdlen = 0;

		if (du_wait_cr(&r->d, 30 * 1000 * 1000, &cr, &who, (int)sizeof who, &pdlen))
			return -1;
		p = (int)who;
		if (pdlen != (int)sizeof who || p <= r->rank || p >= r->nranks || r->ep[p]) {
			fprintf(stderr, "alltoall: rank %d: a request from no rank we expect\n", r->rank);
			dat_cr_reject(cr, 0, NULL);
			return -1;
		}
		if (dat_ep_for(r, p, &s))
			return -1;
		if (du_accept(&r->d, cr))
			return -1;
		r->d.ep = DAT_HANDLE_NULL;
	}
	return 0;
}

static int dat_rank_setup(struct dat_rank *r, const struct opts *o, size_t max)
{
	r->d.tmo_us = 30 * 1000 * 1000;
	r->d.poll = o->poll ? DU_POLL_DEQUEUE : 0;
	r->slot = max < HDR ? HDR : max;
	if (du_open(&r->d, o->ia, 4 * r->nranks * (SLOTS + 1)))
		return -1;
	if (du_reg(&r->d, &r->reg, (size_t)r->nranks * (SLOTS + 1) * r->slot))
		return -1;
	return dat_connect_all(r, o);
}

static int dat_peer_of(const struct dat_rank *r, DAT_EP_HANDLE ep)
{
	int p;

	for (p = 0; p < r->nranks; p++)
		if (r->ep[p] == ep && ep)
			return p;
	return -1;
}

/* Takes connection events until the connections with the peers in the
 * mask ended (each ends with one DISCONNECTED, whichever side closes),
 * or until the deadline: how many are left. */
static int dat_await_ends(struct dat_rank *r, unsigned peers, double deadline)
{
	int p, left = 0;

	for (p = 0; p < r->nranks; p++)
		left += (peers & (1u << p)) && r->ep[p] && !r->ended[p];
	while (left > 0 && now_s() < deadline) {
		DAT_EVENT ev;
		DAT_COUNT more;

		if (dat_evd_wait(r->d.conn_evd, 100 * 1000, 1, &ev, &more) != DAT_SUCCESS ||
		    ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
			continue;
		p = dat_peer_of(r, ev.event_data.connect_event_data.ep_handle);
		if (p >= 0 && !r->ended[p]) {
			r->ended[p] = 1;
			left -= (peers & (1u << p)) != 0;
		}
	}
	return left;
}

/* An idle rank of --pair: connected, posting nothing, until ranks 0
 * and 1 close. */
static int dat_idle(struct dat_rank *r)
{
	return dat_await_ends(r, 3u, now_s() + 3600) ? -1 : 0;
}

static void dat_rank_close(struct dat_rank *r)
{
	int p, left;

	for (p = 0; p < r->nranks; p++)
		if (r->ep[p] && !r->ended[p])
			dat_ep_disconnect(r->ep[p], DAT_CLOSE_GRACEFUL_FLAG);
	left = dat_await_ends(r, ~0u, now_s() + 5);
	if (left)
		fprintf(stderr, "alltoall: rank %d: %d connections not closed within 5 s\n",
			r->rank, left);
	for (p = 0; p < r->nranks; p++)
		if (r->ep[p])
			dat_ep_free(r->ep[p]);
	du_close(&r->d, &r->reg, 1);
}

/* ------------------------------------------------------------ plain TCP */

struct tcp_rank {
	int rank, nranks, poll;
	int fd[MAX_RANKS];
	uint8_t *sbuf, *rbuf[MAX_RANKS];
	size_t have[MAX_RANKS];
	int stop;
};

static int tcp_send_to(void *x, int p, size_t size, uint64_t round, int stop)
{
	struct tcp_rank *t = x;
	size_t off = 0;

	fill_msg(t->sbuf, size, round, (uint64_t)t->rank, stop);
	while (off < size) {
		ssize_t n = send(t->fd[p], t->sbuf + off, size - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* Reads what peer p has of its message; 1 when whole, 0 not yet, -1. */
static int tcp_take(struct tcp_rank *t, int p, size_t size, uint64_t round)
{
	ssize_t n = recv(t->fd[p], t->rbuf[p] + t->have[p], size - t->have[p], MSG_DONTWAIT);
	int stop;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (n > 0)
		t->have[p] += (size_t)n;
	if (t->have[p] < size)
		return 0;
	if (!check_msg(t->rbuf[p], size, round, (uint64_t)p, &stop))
		return -1;
	t->stop |= stop && p == 0;
	return 1;
}

/* send() completes on return: sends is nothing to wait for here. */
static int tcp_collect(void *x, size_t size, uint64_t round, unsigned peers, int sends)
{
	struct tcp_rank *t = x;
	int left = __builtin_popcount(peers), p;

	(void)sends;
	for (p = 0; p < t->nranks; p++)
		t->have[p] = peers & (1u << p) ? 0 : size;
	while (left) {
		struct pollfd pf[MAX_RANKS];
		int np = 0, i;

		for (p = 0; p < t->nranks; p++)
			if (t->have[p] < size)
				pf[np++] = (struct pollfd){ .fd = t->fd[p], .events = POLLIN };
		if (!t->poll && poll(pf, (nfds_t)np, 30000) <= 0)
			return -1;
		for (i = 0; i < np; i++) {
			int rc;

			if (!t->poll && !pf[i].revents)
				continue;
			for (p = 0; t->fd[p] != pf[i].fd; p++)
				;
			rc = tcp_take(t, p, size, round);
			if (rc < 0)
				return -1;
			left -= rc;
		}
	}
	if (!t->stop)
		return 0;
	t->stop = 0;
	return 1;
}

/* An idle rank of --pair: until ranks 0 and 1 close their sockets. */
static int tcp_idle(struct tcp_rank *t)
{
	struct pollfd pf[2] = { { .fd = t->fd[0], .events = POLLIN },
				{ .fd = t->fd[1], .events = POLLIN } };
	int open = 2, i;

	while (open) {
		if (poll(pf, 2, 3600 * 1000) <= 0)
			return -1;
		for (i = 0; i < 2; i++) {
			char c;

			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			if (recv(pf[i].fd, &c, 1, 0) > 0)
				return -1;	/* an idle rank gets nothing */
			pf[i].fd = -1;
			open--;
		}
	}
	return 0;
}

static int tcp_listen_on(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, MAX_RANKS)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int tcp_rank_setup(struct tcp_rank *t, const struct opts *o, size_t max)
{
	int lfd = tcp_listen_on(o->base + (unsigned)t->rank), p, one = 1;

	if (lfd < 0)
		return -1;
	for (p = 0; p < t->rank; p++) {
		uint32_t me = (uint32_t)t->rank;

		t->fd[p] = du_tcp_dial("127.0.0.1", o->base + (unsigned)p, 20000);
		if (t->fd[p] < 0 || send(t->fd[p], &me, sizeof me, 0) != sizeof me)
			goto fail;
	}
	for (p = t->rank + 1; p < t->nranks; p++) {
		uint32_t who = 0;
		int fd = du_tcp_accept(lfd, 30000);

		if (fd < 0 || recv(fd, &who, sizeof who, MSG_WAITALL) != sizeof who ||
		    who <= (uint32_t)t->rank || who >= (uint32_t)t->nranks || t->fd[who] >= 0)
			goto fail;
		t->fd[who] = fd;
	}
	close(lfd);
	t->sbuf = malloc(max);
	for (p = 0; p < t->nranks; p++) {
		t->rbuf[p] = malloc(max);
		if (p != t->rank)
			setsockopt(t->fd[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	return t->sbuf ? 0 : -1;
fail:
	close(lfd);
	return -1;
}

static void tcp_rank_close(struct tcp_rank *t)
{
	int p;

	for (p = 0; p < t->nranks; p++) {
		if (t->fd[p] >= 0)
			close(t->fd[p]);
		free(t->rbuf[p]);
	}
	free(t->sbuf);
}

/* ------------------------------------------------------------ ranks and parent */

static int rank_main(const struct opts *o, int rank, int out)
{
	static const struct xport dat_x = { dat_send_to, dat_collect };
	static const struct xport tcp_x = { tcp_send_to, tcp_collect };
	struct dat_rank dr = { .rank = rank, .nranks = o->nranks };
	struct tcp_rank tr = { .rank = rank, .nranks = o->nranks, .poll = o->poll };
	size_t max = 0;
	uint64_t round = 0;
	double *lat = malloc(sizeof *lat * MAX_ROUNDS);
	int i, rc = 0;

	for (i = 0; i < o->nsizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	for (i = 0; i < MAX_RANKS; i++)
		tr.fd[i] = -1;
	if (!lat || (o->tcp ? tcp_rank_setup(&tr, o, max) : dat_rank_setup(&dr, o, max)))
		rc = -1;
	if (!rc && o->pair && rank >= 2) {
		struct rank_stats s = { .ok = 1 };

		for (i = 0; i < o->nsizes; i++)
			if (write(out, &s, sizeof s) != (ssize_t)sizeof s)
				rc = -1;
		if (!rc && (o->tcp ? tcp_idle(&tr) : dat_idle(&dr)))
			rc = -1;
	}
	for (i = 0; !rc && !(o->pair && rank >= 2) && i < o->nsizes; i++) {
		struct rank_stats s = { 0 };

		if (run_size(o, rank, o->tcp ? &tcp_x : &dat_x, o->tcp ? (void *)&tr : (void *)&dr,
			     o->sizes[i], &round, &s, lat))
			rc = -1;
		if (write(out, &s, sizeof s) != (ssize_t)sizeof s)
			rc = -1;
	}
	if (o->tcp)
		tcp_rank_close(&tr);
	else
		dat_rank_close(&dr);
	free(lat);
	return rc ? 1 : 0;
}

static void report(const struct opts *o, size_t size, const struct rank_stats *s)
{
	double mean = 0, med = 0, p99 = 0, mx = 0, secs = 0;
	/* --pair: one way, half a round. */
	double k = o->pair ? 0.5 : 1.0;
	int i, ok = 1, n = o->pair ? 2 : o->nranks;
	const char *mode = o->pair ? (o->tcp ? "pair_tcp" : "pair") :
				     (o->tcp ? "alltoall_tcp" : "alltoall");

	for (i = 0; i < o->nranks; i++) {
		ok &= s[i].ok;
		if (!s[i].active)
			continue;
		mean += k * s[i].mean_us / n;
		med += k * s[i].median_us / n;
		p99 += k * s[i].p99_us / n;
		mx = k * s[i].max_us > mx ? k * s[i].max_us : mx;
		secs = s[i].secs > secs ? s[i].secs : secs;
	}
	ok &= o->pair ? s[0].active && s[1].active : 1;
	if (o->csv)
		printf("%s,%d,%zu,%ld,%f,%.3f,%.3f,%.3f,%.3f,%s\n", mode, o->nranks, size, s[0].rounds, secs,
		       mean, med, p99, mx, ok ? "OK" : "FAIL");
	else
		printf("%-12s %2d ranks %8zu B  %7ld rounds  mean %9.2f us  median %9.2f us  "
		       "p99 %9.2f us  max %9.2f us  %s\n",
		       mode, o->nranks, size, s[0].rounds, mean,
		       med, p99, mx, ok ? "OK" : "FAIL");
	fflush(stdout);
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "tcp", no_argument, NULL, 'T' }, { "csv", no_argument, NULL, 'C' },
		{ "pair", no_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 }
	};
	char list[256] = "8";
	int c;

	while ((c = getopt_long(argc, argv, "P:N:S:n:t:pq:", lo, NULL)) != -1) {
		switch (c) {
		case 'P': o->ia = optarg; break;
		case 'N': o->nranks = atoi(optarg); break;
		case 'S': snprintf(list, sizeof list, "%s", optarg); break;
		case 'n': o->rounds = atol(optarg); break;
		case 't': o->secs = atof(optarg); break;
		case 'p': o->poll = 1; break;
		case 'q': o->base = (unsigned)atoi(optarg); break;
		case 'T': o->tcp = 1; break;
		case 'C': o->csv = 1; break;
		case 'R': o->pair = 1; break;
		default: return -1;
		}
	}
	o->nsizes = size_arg_list(list, o->sizes, MAX_SIZES);
	for (c = 0; c < o->nsizes; c++)
		if (o->sizes[c] < MIN_SIZE)
			return -1;
	return optind == argc && o->nsizes > 0 && o->nranks >= 2 && o->nranks <= MAX_RANKS &&
	       o->rounds >= 0 && o->rounds <= MAX_ROUNDS && o->secs > 0 && o->base > 0 &&
	       o->base + MAX_RANKS < 65536 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o = { .ia = "iw-lo", .nranks = 4, .base = 61300, .secs = 1.0 };
	struct rank_stats s[MAX_SIZES][MAX_RANKS];
	int pfd[MAX_RANKS][2], i, r, fails = 0;
	pid_t pid[MAX_RANKS];

	du_prog = "alltoall";
	if (parse_args(argc, argv, &o)) {
		fprintf(stderr, "usage: alltoall [--tcp] [-P IA] [-N RANKS (2-%d)] [-S SIZES (>= %d)] "
				"[-n ROUNDS | -t SECONDS] [-p] [-q BASE] [--pair] [--csv]\n", MAX_RANKS, MIN_SIZE);
		return 64;
	}
	if (o.csv)
		printf("mode,ranks,size,rounds,seconds,lat_us,lat_median_us,lat_p99_us,lat_max_us,valid\n");
	fflush(stdout);
	memset(s, 0, sizeof s);
	for (r = 0; r < o.nranks; r++) {
		if (pipe(pfd[r]))
			return 1;
		pid[r] = fork();
		if (pid[r] < 0)
			return 1;
		if (pid[r] == 0) {
			close(pfd[r][0]);
			_exit(rank_main(&o, r, pfd[r][1]));
		}
		close(pfd[r][1]);
	}
	for (i = 0; i < o.nsizes; i++) {
		for (r = 0; r < o.nranks; r++)
			if (read(pfd[r][0], &s[i][r], sizeof s[i][r]) != (ssize_t)sizeof s[i][r])
				s[i][r].ok = 0;
		report(&o, o.sizes[i], s[i]);
		for (r = 0; r < o.nranks; r++)
			fails += !s[i][r].ok;
	}
	for (r = 0; r < o.nranks; r++) {
		int st = 0;

		waitpid(pid[r], &st, 0);
		fails += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
		close(pfd[r][0]);
	}
	return fails ? 1 : 0;
}
