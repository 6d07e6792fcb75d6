/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager against peers that push it where the RFCs leave
 * room to go wrong:
 *  - a Send right behind the MPA reply (active side), or behind the RTR
 *    or (with the RTR, before our reply) behind the request (passive
 *    side), while a consumer thread polls the receive CQ: the consumer
 *    must see ESTABLISHED before that receive completes;
 *  - an MPA reply whose IRD/ORD or RTR choice cannot be used: the
 *    initiator answers with the RFC 6581 Terminate (layer LLP) and closes;
 *  - a listener out of file descriptors: no spinning, and service resumes
 *    by itself once descriptors are free;
 *  - a backlog longer than the listener's accept burst, queued while the
 *    loop was busy, and nothing arriving after it: every request in it is
 *    served.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "cm_harness.h"
#include "iw_progress.h"

#define ROUNDS 30

/* ------------------------------------------ ESTABLISHED before receives */

/* A consumer thread that polls the receive CQ without pause. */
struct poller {
	struct iwe_cq *cq;
	atomic_int stop;
	atomic_int taken;		/* receive completions polled */
	pthread_t t;
};

static void *poll_loop(void *arg)
{
	struct poller *p = arg;
	struct ibv_wc wc;

	while (!atomic_load(&p->stop))
		if (iwe_poll_cq(p->cq, 1, &wc) == 1)
			atomic_fetch_add(&p->taken, 1);
	return NULL;
}

static void poller_start(struct poller *p, struct iwe_cq *cq)
{
	p->cq = cq;
	atomic_store(&p->stop, 0);
	atomic_store(&p->taken, 0);
	pthread_create(&p->t, NULL, poll_loop, p);
}

static void poller_stop(struct poller *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->t, NULL);
}

/* The handler's view when ESTABLISHED is delivered. */
struct est_watch {
	struct evlog log;
	struct poller *poller;
	struct iwe_cq *rcq;
	atomic_int established;
	atomic_int seen_before;		/* completions already there */
};

static void on_est_event(const struct iwe_cm_event *ev, void *ctx)
{
	struct est_watch *w = ctx;

	if (ev->type == IWE_CM_ESTABLISHED) {
		atomic_store(&w->seen_before,
			     atomic_load(&w->poller->taken) +
			     iwe_cq_count(w->rcq));
		atomic_store(&w->established, 1);
	}
	on_event(ev, &w->log);
}

static size_t send_hdr(uint8_t *u, uint32_t msn, uint32_t len)
{
	struct iw_untagged_hdr h = {
		.ctrl_be = iw_be16(iw_ctrl_make(0, 1, IW_OP_SEND)),
		.qn_be = iw_be32(IW_QN_SEND),
		.msn_be = iw_be32(msn),
	};

	memcpy(u, &h, sizeof(h));
	memset(u + sizeof(h), 0x5c, len);
	return sizeof(h) + len;
}

/* The reply and the peer's first Send leave in one write. */
static int reply_and_send(int fd, const struct iw_mpa_params *rep)
{
	uint8_t b[IW_MPA_MAX_RR_LEN + 128], u[64];
	ssize_t n = iw_mpa_build(b, sizeof(b), 1, rep);
	size_t ul = send_hdr(u, 1, 16), pad = iw_fpdu_pad((unsigned)ul);
	uint16_t len_be = iw_be16((uint16_t)ul);
	size_t off;

	if (n < 0)
		return -1;
	off = (size_t)n;
	memcpy(b + off, &len_be, 2);
	memcpy(b + off + 2, u, ul);
	memset(b + off + 2 + ul, 0, pad + 4);
	off += 2 + ul + pad + 4;
	return send(fd, b, off, MSG_NOSIGNAL) == (ssize_t)off ? 0 : -1;
}

static int active_round(int lfd, uint16_t port)
{
	struct iwe_cm_params ap = cm_params(1, 0, 0);
	struct iw_mpa_params rep = { .rev = 1 };
	struct sockaddr_in dst = lo_addr(port);
	struct est_watch w;
	struct poller pl;
	struct iw_mpa_frame f;
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct iwe_conn *c = NULL;
	struct side a;
	int fd, ok = 0;

	memset(&w, 0, sizeof(w));
	evlog_init(&w.log);
	side_fresh(&a);
	post_recv1(&a, 1, 0, 64);
	w.poller = &pl;
	w.rcq = a.rcq;
	poller_start(&pl, a.rcq);
	if (iwe_cm_connect(a.qp, &dst, port, NULL, 0, 2000, &ap, on_est_event,
			   &w, &c) == 0 &&
	    (fd = raw_accept(lfd)) >= 0) {
		if (raw_read_frame(fd, buf, &f) == 0 && !f.is_reply &&
		    reply_and_send(fd, &rep) == 0 &&
		    wait_type(&w.log, 0, IWE_CM_ESTABLISHED)) {
			long end = now_ms() + WAIT_MS;

			while (atomic_load(&pl.taken) < 1 && now_ms() < end)
				sleep_ms(1);
			ok = atomic_load(&w.seen_before) == 0 &&
			     atomic_load(&pl.taken) == 1;
			if (!ok)
				printf("# active round: %d completions before "
				     "ESTABLISHED, %d polled\n",
				     atomic_load(&w.seen_before),
				     atomic_load(&pl.taken));
		}
		close(fd);
	}
	poller_stop(&pl);
	if (c)
		iwe_cm_conn_destroy(c);
	side_close(&a);
	evlog_fini(&w.log);
	return ok;
}

static void test_active_send_behind_reply(void)
{
	uint16_t port;
	int lfd = raw_listen(&port), i, good = 0;

	for (i = 0; i < ROUNDS; i++)
		good += active_round(lfd, port);
	close(lfd);
	CHECK(good == ROUNDS, "active: a Send right behind the MPA reply "
	      "completes after ESTABLISHED, with a consumer polling "
	      "(%d of %d rounds)", good, ROUNDS);
}

/* Passive: accept from the handler, with a receive posted and a poller
 * on its CQ; the initiator's RTR and first Send come in one write. */
struct passive_ctx {
	struct est_watch w;
	struct side *b;
};

static int accept_in_handler(struct evlog *l, const struct iwe_cm_event *ev)
{
	struct passive_ctx *p = l->arg;

	return iwe_cm_accept(ev->conn, p->b->qp, NULL, 0, on_est_event,
			     &p->w);
}

/* The Write RTR and a Send of 16 bytes, framed into b: their length. */
static size_t put_rtr_and_send(uint8_t *b)
{
	uint8_t u[64];
	struct iw_tagged_hdr rtr = {
		.ctrl_be = iw_be16(iw_ctrl_make(1, 1, IW_OP_WRITE)),
		.stag_be = iw_be32(IW_RTR_WRITE_STAG),
	};
	size_t off = 0, ul;
	uint16_t len_be;

	/* The Write RTR: zero-length, STag 1. */
	len_be = iw_be16(sizeof(rtr));
	memcpy(b, &len_be, 2);
	memcpy(b + 2, &rtr, sizeof(rtr));
	memset(b + 2 + sizeof(rtr), 0, iw_fpdu_pad(sizeof(rtr)) + 4);
	off = iw_fpdu_len(sizeof(rtr));
	ul = send_hdr(u, 1, 16);
	len_be = iw_be16((uint16_t)ul);
	memcpy(b + off, &len_be, 2);
	memcpy(b + off + 2, u, ul);
	memset(b + off + 2 + ul, 0, iw_fpdu_pad((unsigned)ul) + 4);
	off += iw_fpdu_len((unsigned)ul);
	return off;
}

static int rtr_and_send(int fd)
{
	uint8_t b[256];
	size_t off = put_rtr_and_send(b);

	return send(fd, b, off, MSG_NOSIGNAL) == (ssize_t)off ? 0 : -1;
}

/* The request, with the RTR and the Send right behind it (early: before
 * our reply, which a conforming initiator waits for), in one write. */
static int request_then(int fd, const struct iw_mpa_params *rq, int early)
{
	uint8_t b[IW_MPA_MAX_RR_LEN + 256];
	ssize_t n = iw_mpa_build(b, IW_MPA_MAX_RR_LEN, 0, rq);
	size_t off;

	if (!early)
		return raw_send_frame(fd, 0, rq);
	if (n <= 0)
		return -1;
	off = (size_t)n + put_rtr_and_send(b + n);
	return send(fd, b, off, MSG_NOSIGNAL) == (ssize_t)off ? 0 : -1;
}

static int passive_round(uint16_t port, int early)
{
	struct iwe_cm_params bp = cm_params(2, 0, IWE_RTR_WRITE);
	struct iw_mpa_params rq = { .rev = 2, .p2p = 1, .rtr = IW_RTR_WRITE,
				    .ird = 4, .ord = 4 };
	struct iwe_listener *l = NULL;
	struct passive_ctx pc;
	struct poller pl;
	struct iw_mpa_frame f;
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct side b;
	int fd, ok = 0;

	memset(&pc, 0, sizeof(pc));
	evlog_init(&pc.w.log);
	side_fresh(&b);
	post_recv1(&b, 1, 0, 64);
	pc.b = &b;
	pc.w.poller = &pl;
	pc.w.rcq = b.rcq;
	pc.w.log.on_request = accept_in_handler;
	pc.w.log.arg = &pc;
	poller_start(&pl, b.rcq);
	if (iwe_cm_listen(g_dev, port, &bp, 0, on_event, &pc.w.log, &l) == 0 &&
	    (fd = raw_connect(port)) >= 0) {
		if (request_then(fd, &rq, early) == 0 &&
		    raw_read_frame(fd, buf, &f) == 0 && f.is_reply &&
		    !f.reject && (early || rtr_and_send(fd) == 0) &&
		    wait_type(&pc.w.log, 1, IWE_CM_ESTABLISHED)) {
			long end = now_ms() + WAIT_MS;

			while (atomic_load(&pl.taken) < 1 && now_ms() < end)
				sleep_ms(1);
			ok = atomic_load(&pc.w.seen_before) == 0 &&
			     atomic_load(&pl.taken) == 1;
			if (!ok)
				printf("# passive round: %d completions before "
				     "ESTABLISHED, %d polled\n",
				     atomic_load(&pc.w.seen_before),
				     atomic_load(&pl.taken));
		}
		close(fd);
	}
	poller_stop(&pl);
	if (pc.w.log.n > 0)
		iwe_cm_conn_destroy(pc.w.log.r[0].conn);
	iwe_cm_listen_destroy(l);
	side_close(&b);
	evlog_fini(&pc.w.log);
	return ok;
}

/* early: an initiator that does not wait for our reply, its RTR and
 * Send in the request's segment; the connection manager reads them with
 * the request, and they are the QP's first input. */
static void test_passive_send_behind(int early)
{
	int i, good = 0;

	for (i = 0; i < ROUNDS; i++)
		good += passive_round((uint16_t)((early ? 31400 : 31300) + i),
				      early);
	CHECK(good == ROUNDS, "passive: a Send right behind %s completes "
	      "after ESTABLISHED, with a consumer polling (%d of %d rounds)",
	      early ? "the request and its RTR (before our reply)" :
		      "the RTR", good, ROUNDS);
}

/* ------------------------------------------------- unusable MPA reply */

/* Read one FPDU from a blocking socket; returns its ULPDU length or -1. */
static int read_fpdu(int fd, uint8_t *u, size_t cap, int crc)
{
	uint8_t f[512];
	uint16_t len;
	size_t tot;

	if (read_full(fd, f, 2))
		return -1;
	memcpy(&len, f, 2);
	len = iw_be16(len);
	tot = iw_fpdu_len(len);
	if (tot > sizeof(f) || len > cap || read_full(fd, f + 2, tot - 2))
		return -1;
	if (crc && iw_crc32c(0, f, tot - 4) != iw_fpdu_get_crc(f + tot - 4))
		return -1;
	memcpy(u, f + 2, len);
	return len;
}

static void bad_reply_case(const char *what, const struct iw_mpa_params *rep,
			   unsigned ecode)
{
	struct iwe_cm_params ap = cm_params(2, 1, IWE_RTR_WRITE);
	uint16_t port;
	int lfd = raw_listen(&port), fd = -1, n;
	struct sockaddr_in dst = lo_addr(port);
	struct iwe_conn *c = NULL;
	struct iw_mpa_frame f;
	struct iw_terminate_hdr th;
	uint8_t buf[IW_MPA_MAX_RR_LEN], u[128];
	struct evlog la;
	struct side a;
	uint32_t t = 0;

	evlog_init(&la);
	side_fresh(&a);
	CHECK(iwe_cm_connect(a.qp, &dst, port, NULL, 0, 2000, &ap, on_event,
			     &la, &c) == 0 && (fd = raw_accept(lfd)) >= 0 &&
	      raw_read_frame(fd, buf, &f) == 0 && raw_send_frame(fd, 1, rep) == 0,
	      "%s: request read, reply sent", what);
	n = fd >= 0 ? read_fpdu(fd, u, sizeof(u), 1) : -1;
	if (n >= (int)sizeof(th)) {
		memcpy(&th, u, sizeof(th));
		if (iw_ctrl_opcode(iw_be16(th.hdr.ctrl_be)) == IW_OP_TERMINATE &&
		    iw_be32(th.hdr.qn_be) == IW_QN_TERMINATE &&
		    iw_be32(th.hdr.msn_be) == 1)
			t = iw_be32(th.term_ctrl_be);
	}
	CHECK(t && iw_term_layer(t) == IW_TERM_LAYER_LLP &&
	      iw_term_etype(t) == IW_TERM_LLP_ETYPE_MPA &&
	      iw_term_ecode(t) == ecode,
	      "%s: the initiator sends Terminate LLP/MPA/%u (got %u/%u/%u)",
	      what, ecode, iw_term_layer(t), iw_term_etype(t),
	      iw_term_ecode(t));
	CHECK(fd >= 0 && fd_readable_eof(fd, WAIT_MS) &&
	      wait_type(&la, 0, IWE_CM_NON_PEER_REJECTED),
	      "%s: then closes; the consumer sees NON_PEER_REJECTED", what);
	if (fd >= 0)
		close(fd);
	close(lfd);
	if (c)
		iwe_cm_conn_destroy(c);
	side_close(&a);
	evlog_fini(&la);
}

static void test_unusable_reply(void)
{
	struct iw_mpa_params ird = { .rev = 2, .p2p = 1, .rtr = IW_RTR_WRITE,
				     .ird = 4, .ord = 64, .crc = 1 };
	struct iw_mpa_params rtr = { .rev = 2, .p2p = 1, .rtr = IW_RTR_READ,
				     .ird = 4, .ord = 1, .crc = 1 };

	bad_reply_case("reply ORD above our IRD", &ird, IW_TERM_LLP_INSUFF_IRD);
	bad_reply_case("reply RTR not offered", &rtr, IW_TERM_LLP_NO_RTR);
}

/* --------------------------------------------------- out of descriptors */

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Three clients, each sending an MPA request once the parent writes to
 * go (the child keeps the descriptor limit it was born with); the child
 * exits when the parent kills it. */
static pid_t clients(uint16_t port, int *go)
{
	struct iw_mpa_params rq = { .rev = 1 };
	int pfd[2], i;
	pid_t pid;
	char c;

	if (pipe(pfd))
		BAIL("pipe");
	pid = fork();
	if (pid) {
		close(pfd[0]);
		*go = pfd[1];
		return pid;
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1)
		_exit(1);
	for (i = 0; i < 3; i++) {
		int fd = raw_connect(port);

		if (fd >= 0)
			raw_send_frame(fd, 0, &rq);
	}
	pause();
	_exit(0);
}

static void test_out_of_fds(void)
{
	struct iwe_cm_params bp = cm_params(1, 0, 0);
	struct iwe_listener *l = NULL;
	struct rlimit old, lim;
	int fill[64], nfill = 0, i;
	double cpu0, cpu;
	struct evlog lp;
	pid_t kid;
	int go;

	evlog_init(&lp);
	CHECK(iwe_cm_listen(g_dev, 31400, &bp, 0, on_event, &lp, &l) == 0,
	      "fds: listening");
	kid = clients(31400, &go);
	/* A low limit, then every descriptor it leaves used up. */
	getrlimit(RLIMIT_NOFILE, &old);
	lim = old;
	lim.rlim_cur = 64;
	if (setrlimit(RLIMIT_NOFILE, &lim))
		BAIL("setrlimit");
	while (nfill < 64 && (fill[nfill] = open("/dev/null", O_RDONLY)) >= 0)
		nfill++;
	if (write(go, "g", 1) != 1)
		BAIL("pipe write");
	sleep_ms(200);	/* the clients connect; accept4 says EMFILE */
	cpu0 = cpu_seconds();
	sleep_ms(1000);
	cpu = cpu_seconds() - cpu0;
	CHECK(cpu < 0.2 && evlog_count(&lp) == 0,
	      "fds: out of descriptors, the listener does not spin "
	      "(%.3f s of CPU in 1 s, %d requests)", cpu, evlog_count(&lp));
	for (i = 0; i < nfill; i++)
		close(fill[i]);
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK(wait_ev(&lp, 2, WAIT_MS) != NULL,
	      "fds: descriptors free again, every waiting client is served "
	      "(%d requests)", evlog_count(&lp));
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	close(go);
	for (i = 0; i < evlog_count(&lp); i++)
		iwe_cm_conn_destroy(lp.r[i].conn);
	iwe_cm_listen_destroy(l);
	evlog_fini(&lp);
}

/* ---------------------------------------------- a backlog past a burst */

#define BACKLOG_CONNS 150	/* past the accept burst (64), under the
				 * half-open cap (256) */

struct backlog {
	uint16_t port;
	int fds[BACKLOG_CONNS];
	int opened;
};

/* Run as a call of the loop: while it runs, the loop dispatches nothing,
 * so every connection waits in the kernel's backlog.  They send nothing:
 * once accepted, nothing of theirs comes to the loop either. */
static void connect_all(void *arg)
{
	struct backlog *b = arg;

	for (b->opened = 0; b->opened < BACKLOG_CONNS; b->opened++)
		if ((b->fds[b->opened] = raw_connect(b->port)) < 0)
			break;
}

/* The loop waits on the device's epoll edge-triggered, the listening
 * socket in it level-triggered: a port still readable after a burst made
 * no new edge, and the rest of the backlog waited for the loop's next
 * wake-up for anything else (t_limits, a flood of idle connections on a
 * busy machine: 5 s, the first ones' MPA timeout).  Here nothing else
 * comes within the second given (the MPA timeout is 30 s); then the
 * listener goes: the connections it took in see its close, those still
 * in the kernel's backlog a reset. */
static void test_backlog_past_burst(void)
{
	struct iwe_cm_params bp = cm_params(2, 0, 0);
	struct iwe_listener *l = NULL;
	struct iwe_prog *prog;
	struct evlog lp;
	struct backlog b = { .port = 31160 };
	int taken = 0, ended = 0;

	bp.mpa_timeout_ms = 30000;
	evlog_init(&lp);
	CHECK(iwe_cm_listen(g_dev, b.port, &bp, 0, on_event, &lp, &l) == 0,
	      "backlog: listening");
	prog = iwe_prog_get(g_dev);
	if (!l || !prog)
		BAIL("backlog: no listener or progress thread");
	iwe_prog_call(prog, connect_all, &b);
	CHECK(b.opened == BACKLOG_CONNS, "backlog: %d silent connections "
	      "queued while the loop was held", b.opened);
	sleep_ms(1000);
	iwe_cm_listen_destroy(l);
	for (int i = 0; i < b.opened; i++) {
		/* taken in: our close; still in the backlog: a reset */
		int r = fd_end_within(b.fds[i], 2000);

		taken += r == 1;
		ended += r >= 0;
		close(b.fds[i]);
	}
	CHECK(taken == b.opened && evlog_count(&lp) == 0,
	      "backlog: all %d taken in within 1 s, nothing arriving after "
	      "them (%d taken in, %d reset, %d events)", b.opened, taken,
	      ended - taken, evlog_count(&lp));
	evlog_fini(&lp);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_active_send_behind_reply();
	test_passive_send_behind(0);
	test_passive_send_behind(1);
	test_unusable_reply();
	test_out_of_fds();
	test_backlog_past_burst();
	iwe_device_close(g_dev);
	return tap_done();
}
