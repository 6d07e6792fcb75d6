/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connect / transfer / disconnect cycles, for the soak (bench/soak.sh)
 * and, run with no argument, as a TAP test of its own.
 *
 *   t_cycles                          TAP: a server peer, CYCLES_TAP cycles
 *   t_cycles --server QUAL            serve cycles on QUAL until a client
 *                                     asks to quit; "served N cycles"
 *   t_cycles --client QUAL N [--quit] N cycles, then (--quit) one more
 *                                     that ends the server; fails if a
 *                                     cycle did or descriptors grew
 *
 * One cycle: the client creates an EP and connects; the server accepts
 * with a fresh EP, giving its buffer's RMR in the private data; the
 * client Sends 4 KiB that the server echoes back, RDMA Writes 64 KiB into
 * the server's buffer and RDMA Reads it back, checks every byte,
 * disconnects gracefully; both wait for DISCONNECTED and free their EP.
 * Every wait is bounded.  The TAP run also checks that the client's
 * descriptors and (without sanitizers) resident set do not grow between
 * the first tenth of the cycles and the end.
 */
#include "tpeer.h"

#define SEND_LEN   4096
#define RDMA_LEN   65536
#define SEND_OFF   0			/* the client's Send; the server's echo */
#define RECV_OFF   SEND_LEN		/* receives land here */
#define RDMA_SRC   (2 * SEND_LEN)	/* client: Write source */
#define RDMA_SINK  (RDMA_SRC + RDMA_LEN)	/* client: Read sink */
#define SRV_RDMA_OFF RDMA_LEN		/* server: Written and Read here */
#define WAIT_US    5000000
#define CYCLES_TAP 300
#define RSS_TOL_KIB 1024
#define QUIT_MARK  0x51554954u		/* "QUIT" in the first word */

/* What the server tells in its accept: where the client may Write. */
struct srv_pd {
	uint64_t addr;
	uint32_t rmr;
	uint32_t len;
};

/* ------------------------------------------------------------- server */

static int wait_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *ev)
{
	*ev = side_wait(evd, WAIT_US);
	return ev->event_number == want;
}

/* Serve one cycle for request cr: 1 if the client asked to quit, 0 if
 * done, -1 on an error. */
static int serve_one(struct side *s, DAT_CR_HANDLE cr)
{
	struct srv_pd pd = { (uintptr_t)(s->buf + SRV_RDMA_OFF), s->rctx,
			     RDMA_LEN };
	DAT_EVENT ev;
	uint32_t first;
	int ok, quit = 0;

	s->ep = side_ep(s);
	ok = side_recv(s, RECV_OFF, SEND_LEN, 1) == DAT_SUCCESS &&
	     dat_cr_accept(cr, s->ep, sizeof(pd), &pd) == DAT_SUCCESS &&
	     wait_event(s->conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev) &&
	     side_dto_ok(s->rcv, 1, SEND_LEN);
	if (ok) {
		memcpy(&first, s->buf + RECV_OFF, sizeof(first));
		quit = first == QUIT_MARK;
		memcpy(s->buf + SEND_OFF, s->buf + RECV_OFF, SEND_LEN);
		ok = side_send(s, SEND_OFF, SEND_LEN, 2) == DAT_SUCCESS &&
		     side_dto_ok(s->req, 2, SEND_LEN) &&
		     wait_event(s->conn, DAT_CONNECTION_EVENT_DISCONNECTED,
				&ev);
	}
	if (!ok)
		dat_ep_disconnect(s->ep, DAT_CLOSE_ABRUPT_FLAG);
	dat_ep_free(s->ep);
	s->ep = DAT_HANDLE_NULL;
	return ok ? quit : -1;
}

/* Serve until a quit cycle; tell ctl (if >= 0) the qualifier first. */
static int serve(DAT_CONN_QUAL q, int ctl)
{
	struct side s;
	DAT_PSP_HANDLE psp;
	DAT_RETURN r;
	long served = 0, errors = 0;
	int res = 0;

	side_open(&s);
	r = q ? dat_psp_create(s.ia, q, s.cr, DAT_PSP_CONSUMER_FLAG, &psp)
	      : dat_psp_create_any(s.ia, &q, s.cr, DAT_PSP_CONSUMER_FLAG,
				   &psp);
	if (r != DAT_SUCCESS) {
		fprintf(stderr, "t_cycles: cannot listen on %llu (0x%x)\n",
			(unsigned long long)q, r);
		return 1;
	}
	if (ctl >= 0)
		peer_send(ctl, PM_READY, 0, q, 0, 0);
	while (res != 1) {
		DAT_EVENT ev = side_wait(s.cr, 1000000);

		if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
			continue;
		res = serve_one(&s, ev.event_data.cr_arrival_event_data.cr_handle);
		served++;
		errors += res < 0;
	}
	dat_psp_free(psp);
	side_close(&s);
	printf("served %ld cycles, %ld failed\n", served, errors);
	return errors != 0;
}

static int role_server(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	alarm(0);	/* the test ends it with a quit cycle */
	return serve(0, PEER_CTL_FD);
}

static const struct peer_role roles[] = {
	{ "server", role_server },
	{ NULL, NULL },
};

/* ------------------------------------------------------------- client */

static int connect_to(struct side *c, DAT_CONN_QUAL q, struct srv_pd *pd)
{
	const DAT_CONNECTION_EVENT_DATA *d;
	DAT_EVENT ev;

	if (connect_lo(c->ep, q) != DAT_SUCCESS ||
	    !wait_event(c->conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev))
		return 0;
	d = &ev.event_data.connect_event_data;
	if (d->private_data_size < (DAT_COUNT)sizeof(*pd))
		return 0;
	memcpy(pd, d->private_data, sizeof(*pd));
	return pd->len >= RDMA_LEN;
}

/* Send, get the echo; RDMA Write, RDMA Read back; every byte checked. */
static int transfer(struct side *c, const struct srv_pd *pd, unsigned seed,
		    int quit)
{
	DAT_LMR_TRIPLET src = side_lseg(c, RDMA_SRC, RDMA_LEN);
	DAT_LMR_TRIPLET sink = side_lseg(c, RDMA_SINK, RDMA_LEN);
	DAT_RMR_TRIPLET r;
	uint32_t mark = QUIT_MARK;

	r.rmr_context = pd->rmr;
	r.virtual_address = pd->addr;
	r.segment_length = RDMA_LEN;
	side_fill(c->buf + SEND_OFF, SEND_LEN, seed);
	if (quit)
		memcpy(c->buf + SEND_OFF, &mark, sizeof(mark));
	side_fill(c->buf + RDMA_SRC, RDMA_LEN, seed + 1);
	memset(c->buf + RDMA_SINK, 0, RDMA_LEN);
	if (side_send(c, SEND_OFF, SEND_LEN, 11) != DAT_SUCCESS ||
	    !side_dto_ok(c->req, 11, SEND_LEN) ||
	    !side_dto_ok(c->rcv, 10, SEND_LEN) ||
	    memcmp(c->buf + RECV_OFF, c->buf + SEND_OFF, SEND_LEN))
		return 0;
	if (dat_ep_post_rdma_write(c->ep, 1, &src, side_ck(12), &r,
				   DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
	    !side_dto_ok(c->req, 12, RDMA_LEN) ||
	    dat_ep_post_rdma_read(c->ep, 1, &sink, side_ck(13), &r,
				  DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
	    !side_dto_ok(c->req, 13, RDMA_LEN))
		return 0;
	return side_same(c->buf + RDMA_SINK, RDMA_LEN, seed + 1);
}

/* The step of the last failed cycle, for the diagnostic. */
static const char *failed_step = "none";

/* One whole cycle: 1 when every step and byte was right. */
static int client_cycle(struct side *c, DAT_CONN_QUAL q, unsigned seed,
			int quit)
{
	struct srv_pd pd;
	DAT_EVENT ev;
	int ok;

	c->ep = side_ep(c);
	ok = side_recv(c, RECV_OFF, SEND_LEN, 10) == DAT_SUCCESS;
	failed_step = "connect";
	ok = ok && connect_to(c, q, &pd);
	failed_step = ok ? "transfer" : failed_step;
	ok = ok && transfer(c, &pd, seed, quit);
	failed_step = ok ? "disconnect" : failed_step;
	ok = ok &&
	     dat_ep_disconnect(c->ep, DAT_CLOSE_GRACEFUL_FLAG) == DAT_SUCCESS &&
	     wait_event(c->conn, DAT_CONNECTION_EVENT_DISCONNECTED, &ev);
	if (!ok) {
		dat_ep_disconnect(c->ep, DAT_CLOSE_ABRUPT_FLAG);
		while (side_wait(c->conn, 0).event_number ||
		       side_wait(c->req, 0).event_number ||
		       side_wait(c->rcv, 0).event_number)
			;
	}
	dat_ep_free(c->ep);
	c->ep = DAT_HANDLE_NULL;
	return ok;
}

/* What the client saw: cycles right, and its footprint after the first
 * tenth of them and at the end. */
struct run {
	long ok, failed, first_failed;
	const char *step;		/* where the first failure was */
	int fds_early, fds_end;
	long rss_early, rss_end;
	double seconds;
};

static void run_cycles(DAT_CONN_QUAL q, long n, int quit, struct run *r)
{
	struct side c;
	uint64_t t0 = now_us();

	memset(r, 0, sizeof(*r));
	r->first_failed = -1;
	r->step = "none";
	side_open(&c);
	for (long i = 0; i < n; i++) {
		if (client_cycle(&c, q, (unsigned)i, 0)) {
			r->ok++;
		} else {
			if (r->first_failed < 0) {
				r->first_failed = i;
				r->step = failed_step;
			}
			r->failed++;
		}
		if (i == n / 10) {
			r->fds_early = fd_count();
			r->rss_early = rss_kib();
		}
	}
	r->seconds = (now_us() - t0) / 1e6;
	r->fds_end = fd_count();
	r->rss_end = rss_kib();
	if (quit && !client_cycle(&c, q, 0, 1))
		r->failed++;
	side_close(&c);
}

static int client_main(DAT_CONN_QUAL q, long n, int quit)
{
	struct run r;

	run_cycles(q, n, quit, &r);
	printf("%ld cycles ok, %ld failed (first: %ld, at %s), %.2f s, %.0f us "
	       "per cycle; fds %d -> %d, rss %ld -> %ld KiB\n", r.ok, r.failed,
	       r.first_failed, r.step, r.seconds, r.seconds * 1e6 / (n ? n : 1),
	       r.fds_early, r.fds_end, r.rss_early, r.rss_end);
	/* Measured between cycles: any descriptor more is a leak. */
	return r.failed != 0 || r.fds_end > r.fds_early;
}

/* --------------------------------------------------------------- TAP */

static void tap_run(void)
{
	struct peer p;
	struct peer_msg m;
	struct run r;
	int st;

	CHECK(peer_spawn(&p, "server", NULL) &&
	      peer_expect(&p, PM_READY, &m, WAIT_US / 1000),
	      "the server peer listens");
	run_cycles((DAT_CONN_QUAL)m.v[0], CYCLES_TAP, 1, &r);
	CHECK(r.ok == CYCLES_TAP && !r.failed, "%d cycles of connect, Send "
	      "echo, RDMA Write and Read back, disconnect: all right (%ld "
	      "failed, the first: %ld at %s; %.0f us per cycle)", CYCLES_TAP,
	      r.failed, r.first_failed, r.step,
	      r.seconds * 1e6 / CYCLES_TAP);
	CHECK(r.fds_end == r.fds_early, "descriptors after cycle %d and at the "
	      "end: %d, %d", CYCLES_TAP / 10, r.fds_early, r.fds_end);
	if (rss_meaningful())
		CHECK(r.rss_end - r.rss_early <= RSS_TOL_KIB, "resident set "
		      "after cycle %d and at the end within %d KiB: %ld, %ld",
		      CYCLES_TAP / 10, RSS_TOL_KIB, r.rss_early, r.rss_end);
	else
		printf("ok %d - resident set flat # SKIP RSS under a sanitizer "
		       "or valgrind says nothing\n", ++tap_count);
	st = peer_finish(&p, 10000);
	CHECK(st == 0, "the quit cycle ends the server, which served every "
	      "cycle right (status %d)", st);
}

int main(int argc, char **argv)
{
	peer_init();
	peer_dispatch(argc, argv, roles);
	if (argc >= 3 && !strcmp(argv[1], "--server"))
		return serve(strtoull(argv[2], NULL, 0), -1);
	if (argc >= 4 && !strcmp(argv[1], "--client"))
		return client_main(strtoull(argv[2], NULL, 0),
				   strtol(argv[3], NULL, 0),
				   argc > 4 && !strcmp(argv[4], "--quit"));
	if (argc > 1) {
		fprintf(stderr, "usage: t_cycles [--server QUAL | --client QUAL "
			"N [--quit]]\n");
		return 2;
	}
	test_watchdog(300);
	tap_run();
	return tap_done();
}
