/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A peer process that dies: the surviving side must not crash or stall.
 *
 * The test keeps one IA with a PSP; each scenario runs a fresh peer
 * process (tpeer.h: this program exec'd in a role) that connects, and
 * SIGKILLs it at a chosen moment: while it sends, while it receives
 * (Sends and RDMA Writes), while it answers RDMA Reads (then stopped,
 * with more Reads posted that it cannot answer), after its
 * connection request and before the accept (either side listening), and
 * after the accept before ESTABLISHED (the peer is stopped so it cannot
 * send its RTR).  On the surviving side:
 *   - the EP reports DISCONNECTED or BROKEN (ACCEPT_COMPLETION_ERROR, or
 *     a rejection on the active side, before ESTABLISHED) within
 *     END_BOUND_US of the kill, and is DISCONNECTED;
 *   - every work request posted completes exactly once (posted ==
 *     completed), those cut off with FLUSHED or another error;
 *   - the EP's descriptors are closed once it is freed;
 * and over ROUNDS rounds the resident set does not grow.
 * Then the consumer's own error: a peer frees (munmap) memory it
 * registered while RDMA Reads and Writes target it (here an inaccessible
 * mapping replaces it, so that no allocator reuses the range).  Its process must
 * survive (no SIGSEGV in the progress thread); the requests fail or the
 * connection breaks (doc/semantics.md says which).
 */
#include <malloc.h>
#include <sys/mman.h>

#define TSIDE_BUF_SIZE (4u << 20)
#include "tpeer.h"

#define MSG          (1u << 20)	/* one Send, Write or Read */
/* Requests posted per scenario: far more than can complete while the
 * test wakes up to kill the peer, so the kill always cuts a transfer. */
#define NWR          192
#define EP_DEPTH     256
#define SEND_WINDOW  8		/* the sending peer's outstanding Sends */
#define RECV_OFF     0		/* parent buffer: receives land here */
#define SRC_OFF      MSG	/* ...Sends and Writes come from here */
#define SINK_OFF     (2 * MSG)	/* ...Reads land here */
#define END_BOUND_US 1000000u	/* kill -> the EP's end event */
/* Over udp a survivor waiting to receive learns of the death from its
 * idle probe, a pure ack after 1 s of silence that draws the ICMP port
 * unreachable (doc/trp.md): the bound doc/testing.md gives it. */
#define END_BOUND_UDP_US 3000000u
#define END_WAIT_US  10000000	/* give up waiting (the bound is judged) */
#define QUIET_US     1000000
#define STEP_MS      5000
#define RSS_TOL_KIB  1024
#define ROUNDS_DEFAULT 3

static struct side S;		/* the surviving side */
static DAT_PSP_HANDLE psp;
static DAT_CONN_QUAL qual;
static char qual_arg[32];
static unsigned end_bound_us = END_BOUND_US;

/* The worst kill-to-end time of each scenario over the rounds. */
struct bound {
	const char *name;
	uint64_t worst_us;
	DAT_EVENT_NUMBER last_ev;
};

/* =========================================================== the peer */

/* Sends MSG-byte messages SEND_WINDOW at a time and, once a quarter of
 * NWR have completed, stops itself with a window still in flight: the
 * kill then cuts the transfer however late the parent wakes (a running
 * sender may push all NWR MiB through first, seen under ASan in CI). */
static int role_sender(int argc, char **argv)
{
	struct side s;
	int posted = 0, done = 0;

	if (argc < 1)
		return 2;
	side_open(&s);
	if (!peer_connect(&s, arg_qual(argv[0])))
		return 3;
	peer_tell(PM_ESTABLISHED, 0, 0, 0, 0);
	while (posted < NWR) {
		while (posted < NWR && posted - done < SEND_WINDOW)
			if (side_send(&s, 0, MSG, (uint64_t)posted++) !=
			    DAT_SUCCESS)
				return 4;
		if (side_wait(s.req, TSIDE_WAIT_US).event_number !=
		    DAT_DTO_COMPLETION_EVENT)
			return 5;
		if (++done == NWR / 4)
			raise(SIGSTOP);
	}
	return peer_park();
}

/* Posts NWR receives before connecting and tells where RDMA Writes may
 * go (its whole buffer).  It cannot stop itself once a Send arrived:
 * over udp the parent's Writes complete when acknowledged, and a
 * receiver that stopped between its receive's completion and the ack
 * (the progress thread sends it after the round's delivery) left the
 * parent's first Write without one.  The parent stops it (STOPPED_MORE). */
static int role_receiver(int argc, char **argv)
{
	struct side s;

	if (argc < 1)
		return 2;
	side_open(&s);
	s.ep = side_ep_deep(&s, EP_DEPTH);
	for (int i = 0; i < NWR; i++)
		if (side_recv(&s, 0, MSG, (uint64_t)i) != DAT_SUCCESS)
			return 3;
	if (!peer_connect(&s, arg_qual(argv[0])))
		return 4;
	peer_tell(PM_RMR, 0, s.rctx, (uintptr_t)s.buf, TSIDE_BUF_SIZE);
	return peer_park();
}

/* Tells the parent its buffer (filled with pattern 9) for RDMA Reads. */
static int role_responder(int argc, char **argv)
{
	struct side s;

	if (argc < 1)
		return 2;
	side_open(&s);
	side_fill(s.buf, TSIDE_BUF_SIZE, 9);
	if (!peer_connect(&s, arg_qual(argv[0])))
		return 3;
	peer_tell(PM_RMR, 0, s.rctx, (uintptr_t)s.buf, TSIDE_BUF_SIZE);
	return peer_park();
}

/* Listens; tells its qualifier, then that a request came, and parks
 * without accepting it. */
static int role_listener(int argc, char **argv)
{
	struct side s;
	DAT_PSP_HANDLE p;

	(void)argc;
	(void)argv;
	if (!peer_listen(&s, &p))
		return 3;
	if (side_wait(s.cr, TSIDE_WAIT_US).event_number !=
	    DAT_CONNECTION_REQUEST_EVENT)
		return 4;
	peer_tell(PM_REQUEST, 0, 0, 0, 0);
	return peer_park();
}

/* Sends its connection request and parks (the parent stops or kills). */
static int role_connector(int argc, char **argv)
{
	struct side s;

	if (argc < 1)
		return 2;
	side_open(&s);
	s.ep = side_ep(&s);
	if (connect_lo(s.ep, arg_qual(argv[0])) != DAT_SUCCESS)
		return 3;
	return peer_park();
}

/* Registers an mmap'ed MSG bytes (pattern 7), connects, tells the
 * parent; at PM_GO unmaps it while the registration stays, reports the
 * connection event it sees next (0: none in 3 s), and at the second
 * PM_GO frees everything and exits 0, if it is still alive. */
static int role_unmapper(int argc, char **argv)
{
	struct side s;
	DAT_REGION_DESCRIPTION rd;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lc;
	DAT_RMR_CONTEXT rc;
	DAT_VLEN rsize;
	DAT_VADDR raddr;
	DAT_EVENT ev;
	unsigned char *m;

	if (argc < 2)
		return 2;
	setenv("IWDAPL_CRC", argv[1], 1);
	m = mmap(NULL, MSG, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 3;
	side_fill(m, MSG, 7);
	side_open(&s);
	rd.for_va = m;
	if (dat_lmr_create(s.ia, DAT_MEM_TYPE_VIRTUAL, rd, MSG, s.pz,
			   DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lc,
			   &rc, &rsize, &raddr) != DAT_SUCCESS)
		return 4;
	if (!peer_connect(&s, arg_qual(argv[0])))
		return 5;
	peer_tell(PM_RMR, 0, rc, (uintptr_t)m, MSG);
	if (!peer_wait_go(20000))
		return 6;
	/* Gone as munmap leaves it, but the range stays reserved: once
	 * unmapped, an allocator may map it again (ASan's heap did), and
	 * the peer's Writes would then land in live memory -- what no
	 * provider can tell from a consumer's reuse of its address. */
	if (mmap(m, MSG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) == MAP_FAILED)
		return 8;
	peer_tell(PM_DONE, 0, 0, 0, 0);
	ev = side_wait(s.conn, 3000000);
	peer_tell(PM_EVENT, (int)ev.event_number, 0, 0, 0);
	if (!peer_wait_go(20000))
		return 7;
	dat_ep_free(s.ep);
	dat_lmr_free(lmr);
	side_close(&s);
	return 0;
}

static const struct peer_role roles[] = {
	{ "sender", role_sender },
	{ "receiver", role_receiver },
	{ "responder", role_responder },
	{ "listener", role_listener },
	{ "connector", role_connector },
	{ "unmapper", role_unmapper },
	{ NULL, NULL },
};

/* ================================================= the surviving side */

/* Spawn a peer in a role that connects to our PSP; accept it on S.ep
 * and wait for ESTABLISHED. */
static int accept_peer(struct peer *p, const char *role, const char *a1,
		       const char *a2)
{
	const char *args[] = { qual_arg, a1, a2, NULL };
	DAT_EVENT ev;

	if (!peer_spawn(p, role, args))
		return 0;
	ev = side_wait(S.cr, STEP_MS * 1000);
	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
		return 0;
	if (dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, S.ep,
			  0, NULL) != DAT_SUCCESS)
		return 0;
	return side_wait(S.conn, STEP_MS * 1000).event_number ==
	       DAT_CONNECTION_EVENT_ESTABLISHED;
}

static const char *event_name(int e)
{
	switch (e) {
	case DAT_CONNECTION_EVENT_DISCONNECTED: return "DISCONNECTED";
	case DAT_CONNECTION_EVENT_BROKEN: return "BROKEN";
	case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
		return "ACCEPT_COMPLETION_ERROR";
	case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "NON_PEER_REJECTED";
	case DAT_CONNECTION_EVENT_PEER_REJECTED: return "PEER_REJECTED";
	case DAT_CONNECTION_EVENT_UNREACHABLE: return "UNREACHABLE";
	case DAT_CONNECTION_EVENT_TIMED_OUT: return "TIMED_OUT";
	case DAT_CONNECTION_EVENT_ESTABLISHED: return "ESTABLISHED";
	case 0: return "none";
	default: return "another event";
	}
}

/* Which events end a connection the way a dead peer should. */
enum end_kind {
	END_CONNECTED,		/* DISCONNECTED or BROKEN */
	END_ACCEPTING,		/* ...or ACCEPT_COMPLETION_ERROR */
	END_CONNECTING,		/* a failure of the active side */
};

static int end_allowed(enum end_kind k, DAT_EVENT_NUMBER e)
{
	switch (k) {
	case END_CONNECTED:
		return e == DAT_CONNECTION_EVENT_DISCONNECTED ||
		       e == DAT_CONNECTION_EVENT_BROKEN;
	case END_ACCEPTING:
		return e == DAT_CONNECTION_EVENT_DISCONNECTED ||
		       e == DAT_CONNECTION_EVENT_BROKEN ||
		       e == DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR;
	default:
		return e == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
		       e == DAT_CONNECTION_EVENT_UNREACHABLE ||
		       e == DAT_CONNECTION_EVENT_DISCONNECTED ||
		       e == DAT_CONNECTION_EVENT_BROKEN;
	}
}

/* Wait for S.ep's end event from t0 on; judge it and its delay. */
static void check_end(struct bound *b, enum end_kind k, uint64_t t0)
{
	DAT_EVENT ev = side_wait(S.conn, END_WAIT_US);
	uint64_t us = now_us() - t0;

	b->last_ev = ev.event_number;
	if (us > b->worst_us)
		b->worst_us = us;
	CHECK(end_allowed(k, ev.event_number),
	      "%s: the EP's connection ends (%s)", b->name,
	      event_name(ev.event_number));
	CHECK(us <= end_bound_us, "%s: ... %.1f ms after the kill (bound %u ms)",
	      b->name, us / 1000.0, end_bound_us / 1000);
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_DISCONNECTED,
	      "%s: the EP is DISCONNECTED (state %d)", b->name,
	      (int)side_ep_state(S.ep));
}

/* Kill the peer (it must have been alive), then judge the end. */
static void kill_and_check(struct bound *b, struct peer *p, enum end_kind k)
{
	uint64_t t0 = now_us();

	CHECK(peer_kill(p), "%s: the peer was alive and died of SIGKILL",
	      b->name);
	check_end(b, k, t0);
}

static void check_wrs(const struct bound *b, const char *what,
		      struct wr_count *w, DAT_EVD_HANDLE evd)
{
	wrc_drain(w, evd, QUIET_US, 5 * QUIET_US);
	CHECK(wrc_balanced(w) && w->completed - w->ok > 0,
	      "%s: all %u %s complete once, %u cut off by the kill", b->name,
	      w->posted, what, w->completed - w->ok);
	wrc_diag(what, w);
}

/* Free the scenario's EP; its descriptors must go with it. */
static void end_scenario(const struct bound *b, int fds0)
{
	int n;

	CHECK_RET(dat_ep_free(S.ep), DAT_SUCCESS, "%s: dat_ep_free", b->name);
	S.ep = DAT_HANDLE_NULL;
	n = fd_count_settled(fds0, 2000);
	CHECK(n == fds0, "%s: no descriptor left open (%d before, %d after)",
	      b->name, fds0, n);
}

static int post_n(struct wr_count *w, int n, DAT_RETURN (*post)(int i,
							     uint64_t ck))
{
	for (int i = 0; i < n; i++) {
		if (post(i, wrc_next(w)) != DAT_SUCCESS)
			return 0;
		w->posted++;
	}
	return 1;
}

static DAT_RETURN post_recv_msg(int i, uint64_t ck)
{
	(void)i;
	return side_recv(&S, RECV_OFF, MSG, ck);
}

/* The peer's buffer for RDMA (from its PM_RMR). */
static DAT_RMR_TRIPLET remote;

/* MSG bytes of the peer's buffer, the i-th of the MSG pieces it has. */
static DAT_RMR_TRIPLET remote_piece(int i)
{
	DAT_RMR_TRIPLET r = remote;
	size_t pieces = remote.segment_length / MSG;

	r.virtual_address += (DAT_VADDR)((size_t)i % (pieces ? pieces : 1) *
					 MSG);
	r.segment_length = MSG;
	return r;
}

static DAT_RETURN post_write(int i, uint64_t ck)
{
	DAT_LMR_TRIPLET l = side_lseg(&S, SRC_OFF, MSG);
	DAT_RMR_TRIPLET r = remote_piece(i);

	return dat_ep_post_rdma_write(S.ep, 1, &l, side_ck(ck), &r,
				      DAT_COMPLETION_DEFAULT_FLAG);
}

static DAT_RETURN post_send_or_write(int i, uint64_t ck)
{
	DAT_LMR_TRIPLET l = side_lseg(&S, SRC_OFF, MSG);

	if (i % 2)
		return dat_ep_post_send(S.ep, 1, &l, side_ck(ck),
					DAT_COMPLETION_DEFAULT_FLAG);
	return post_write(i, ck);
}

static DAT_RETURN post_read(int i, uint64_t ck)
{
	DAT_LMR_TRIPLET l = side_lseg(&S, SINK_OFF, MSG);
	DAT_RMR_TRIPLET r = remote_piece(i);

	return dat_ep_post_rdma_read(S.ep, 1, &l, side_ck(ck), &r,
				     DAT_COMPLETION_DEFAULT_FLAG);
}

static int take_rmr(struct peer *p)
{
	struct peer_msg m;

	if (!peer_expect(p, PM_RMR, &m, STEP_MS))
		return 0;
	remote.rmr_context = (DAT_RMR_CONTEXT)m.v[0];
	remote.virtual_address = (DAT_VADDR)m.v[1];
	remote.segment_length = (DAT_SEG_LENGTH)m.v[2];
	return 1;
}

/* One completion of w on evd, successful: the transfer is under way. */
static int first_ok(struct wr_count *w, DAT_EVD_HANDLE evd)
{
	DAT_EVENT ev = side_wait(evd, STEP_MS * 1000);

	return wrc_take(w, &ev) && w->ok == 1;
}

/* ---------------------------------------------------------- scenarios */

/* A transfer cut by the kill: the peer's role, what we post (NWR of
 * them; before the accept when the peer starts sending at once, else
 * once it told us its buffer) and where those complete. */
struct transfer {
	const char *role, *what;
	DAT_RETURN (*post)(int i, uint64_t ck);
	int post_first;
	int recv_side;		/* completions on S.rcv, else S.req */
	int seed;		/* the peer's buffer pattern to check, or -1 */
	int stop_peer;		/* after the first: stop the peer, post
				 * STOPPED_MORE that it cannot answer */
};

/* Requests posted to a stopped peer, a Read responder (its progress
 * thread answers by itself: it has no point to stop itself at) or a
 * receiver (see role_receiver).  Running, either could let every request
 * complete before the kill of a parent that woke late (ASan under a
 * loaded CI); these guarantee the cut.  Half of a receiver's are Sends:
 * 16 more than NWR / 2, far from the NWR receives it posted. */
#define STOPPED_MORE ((EP_DEPTH - NWR) / 2)

/* Stop p, then post n more of post. */
static int stop_and_post(struct peer *p, struct wr_count *w, int n,
			 DAT_RETURN (*post)(int i, uint64_t ck))
{
	return peer_stop(p) && post_n(w, n, post);
}

static void sc_transfer(struct bound *b, const struct transfer *t,
			uint64_t cookie_base)
{
	int fds0 = fd_count();
	DAT_EVD_HANDLE evd = t->recv_side ? S.rcv : S.req;
	struct wr_count w;
	struct peer p;
	int ok;

	S.ep = side_ep_deep(&S, EP_DEPTH);
	wrc_init(&w, cookie_base);
	ok = (!t->post_first || post_n(&w, NWR, t->post)) &&
	     accept_peer(&p, t->role, NULL, NULL) &&
	     (t->post_first ||
	      (take_rmr(&p) && post_n(&w, NWR, t->post))) &&
	     first_ok(&w, evd) &&
	     (t->seed < 0 || side_same(S.buf + SINK_OFF, MSG, (unsigned)t->seed)) &&
	     (!t->stop_peer || stop_and_post(&p, &w, STOPPED_MORE, t->post));
	CHECK(ok, "%s: connected, the first of %d %s of 1 MiB done", b->name,
	      NWR, t->what);
	kill_and_check(b, &p, END_CONNECTED);
	check_wrs(b, t->what, &w, evd);
	end_scenario(b, fds0);
}

static void sc_peer_sending(struct bound *b)
{
	static const struct transfer t = { "sender", "receives",
					   post_recv_msg, 1, 1, -1, 0 };

	sc_transfer(b, &t, 1000);
}

static void sc_peer_receiving(struct bound *b)
{
	static const struct transfer t = { "receiver", "Sends and RDMA Writes",
					   post_send_or_write, 0, 0, -1, 1 };

	sc_transfer(b, &t, 2000);
}

static void sc_read_responder(struct bound *b)
{
	static const struct transfer t = { "responder", "RDMA Reads",
					   post_read, 0, 0, 9, 1 };

	sc_transfer(b, &t, 3000);
}

/* The peer's request arrived, the peer dies, then we accept. */
static void sc_request_then_accept(struct bound *b)
{
	int fds0 = fd_count();
	const char *args[] = { qual_arg, NULL };
	struct peer p;
	DAT_EVENT ev;
	DAT_RETURN r;
	uint64_t t0;

	S.ep = side_ep(&S);
	CHECK(peer_spawn(&p, "connector", args), "%s: peer started", b->name);
	ev = side_wait(S.cr, STEP_MS * 1000);
	CHECK(ev.event_number == DAT_CONNECTION_REQUEST_EVENT,
	      "%s: its connection request arrived", b->name);
	CHECK(peer_kill(&p), "%s: the peer was alive and died of SIGKILL",
	      b->name);
	t0 = now_us();
	r = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, S.ep,
			  0, NULL);
	if (r == DAT_SUCCESS) {
		check_end(b, END_ACCEPTING, t0);
	} else {
		/* Refusing the accept at once is as good: the EP is unused. */
		b->last_ev = 0;
		CHECK(side_ep_state(S.ep) == DAT_EP_STATE_UNCONNECTED,
		      "%s: accept refused (0x%x), the EP is UNCONNECTED",
		      b->name, r);
	}
	end_scenario(b, fds0);
}

/* We connect; the peer got the request and dies before accepting. */
static void sc_request_active(struct bound *b)
{
	int fds0 = fd_count();
	struct peer_msg m;
	struct peer p;
	int ok;

	S.ep = side_ep(&S);
	ok = peer_spawn(&p, "listener", NULL) &&
	     peer_expect(&p, PM_READY, &m, STEP_MS) &&
	     connect_lo(S.ep, m.v[0]) == DAT_SUCCESS &&
	     peer_expect(&p, PM_REQUEST, NULL, STEP_MS);
	CHECK(ok, "%s: our request reached the listening peer", b->name);
	kill_and_check(b, &p, END_CONNECTING);
	end_scenario(b, fds0);
}

/* We accepted; the peer is stopped before it could send its RTR, so
 * the EP waits in COMPLETION_PENDING; then the peer dies. */
static void sc_accepted_not_established(struct bound *b)
{
	int fds0 = fd_count();
	const char *args[] = { qual_arg, NULL };
	struct peer p;
	DAT_EVENT ev;
	int ok;

	S.ep = side_ep(&S);
	ok = peer_spawn(&p, "connector", args);
	ev = side_wait(S.cr, STEP_MS * 1000);
	ok = ok && ev.event_number == DAT_CONNECTION_REQUEST_EVENT &&
	     peer_stop(&p) &&
	     dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
			   S.ep, 0, NULL) == DAT_SUCCESS;
	usleep(50000);
	CHECK(ok && side_ep_state(S.ep) == DAT_EP_STATE_COMPLETION_PENDING,
	      "%s: accepted, the EP waits for the stopped peer's RTR "
	      "(state %d)", b->name, (int)side_ep_state(S.ep));
	kill_and_check(b, &p, END_ACCEPTING);
	end_scenario(b, fds0);
}

static void (*const scenarios[])(struct bound *) = {
	sc_peer_sending, sc_peer_receiving, sc_read_responder,
	sc_request_then_accept, sc_request_active, sc_accepted_not_established,
};
#define NSCEN (sizeof(scenarios) / sizeof(scenarios[0]))

static struct bound bounds[NSCEN] = {
	{ "peer killed while sending", 0, 0 },
	{ "peer killed while receiving", 0, 0 },
	{ "peer killed while answering RDMA Reads", 0, 0 },
	{ "peer killed after its request, accepted after", 0, 0 },
	{ "peer killed after our request, before its accept", 0, 0 },
	{ "peer killed after our accept, before ESTABLISHED", 0, 0 },
};

/* ------------------------------------------------ freed registered memory */

/* The peer unmaps memory it registered while we Read from it (or Write
 * to it); crc is the peer's IWDAPL_CRC. */
static void sc_unmapped(int write, const char *crc)
{
	char name[96];
	int fds0 = fd_count();
	struct wr_count w;
	struct peer_msg m;
	struct peer p;
	DAT_EVENT ev;
	int ok, st;

	snprintf(name, sizeof(name), "peer unmaps registered memory under "
		 "RDMA %s (CRC %s)", write ? "Writes" : "Reads", crc);
	if (under_valgrind()) {
		/* The peer runs under valgrind too, which reports the engine's
		 * guarded access to the unmapped page: the very fault under
		 * test (the plain and ASan builds judge it). */
		tap_skip(name, "valgrind flags the deliberate access to "
			 "unmapped memory");
		return;
	}
	S.ep = side_ep(&S);
	wrc_init(&w, 5000);
	/* CRC is on when either side asks: both say the same. */
	setenv("IWDAPL_CRC", crc, 1);
	ok = accept_peer(&p, "unmapper", crc, NULL) && take_rmr(&p) &&
	     post_n(&w, 1, post_read) && first_ok(&w, S.req);
	CHECK(ok && side_same(S.buf + SINK_OFF, MSG, 7),
	      "%s: a Read of the mapped memory returns its data", name);
	ok = peer_send(p.ctl, PM_GO, 0, 0, 0, 0) &&
	     peer_expect(&p, PM_DONE, NULL, STEP_MS);
	CHECK(ok, "%s: the peer unmapped it", name);
	wrc_init(&w, 6000);
	/* Posting stops once the connection is down: at least one goes. */
	post_n(&w, 4, write ? post_write : post_read);
	ok = w.posted > 0;
	ev = side_wait(S.conn, 3000000);
	wrc_drain(&w, S.req, QUIET_US, 5 * QUIET_US);
	if (peer_expect(&p, PM_EVENT, &m, STEP_MS))
		printf("#   %s: the peer's EP saw %s; ours %s; requests: "
		       "posted %u, ok %u, flushed %u, errors %u\n", name,
		       event_name(m.arg), event_name(ev.event_number),
		       w.posted, w.ok, w.flushed, w.errors);
	peer_send(p.ctl, PM_GO, 0, 0, 0, 0);
	st = peer_finish(&p, STEP_MS);
	unsetenv("IWDAPL_CRC");
	CHECK(st == 0, "%s: the peer survives and exits cleanly (status %d)",
	      name, st);
	CHECK(ok && wrc_balanced(&w), "%s: every request completes once",
	      name);
	if (!wrc_balanced(&w))
		wrc_diag("requests after the unmap", &w);
	if (!write)
		CHECK(w.ok == 0, "%s: no Read of the freed memory succeeds "
		      "(%u did)", name, w.ok);
	if (side_ep_state(S.ep) != DAT_EP_STATE_DISCONNECTED)
		dat_ep_disconnect(S.ep, DAT_CLOSE_ABRUPT_FLAG);
	while (side_wait(S.conn, 0).event_number)
		;
	while (side_wait(S.req, 0).event_number)
		;
	end_scenario(&(struct bound){ name, 0, 0 }, fds0);
}

/* ------------------------------------------------------------- main */

static void round_of_kills(void)
{
	for (size_t i = 0; i < NSCEN; i++)
		scenarios[i](&bounds[i]);
}

static void check_growth(int rounds, long rss1, long rssn, int fds1,
			 int fdsn)
{
	char what[128];

	CHECK(fdsn == fds1, "after %d rounds: %d descriptors, as after the "
	      "first", rounds, fdsn);
	snprintf(what, sizeof(what), "after %d rounds: resident set within "
		 "%d KiB of the first round's", rounds, RSS_TOL_KIB);
	if (!rss_meaningful()) {
		tap_skip(what, "RSS under a sanitizer or valgrind says nothing");
		return;
	}
	CHECK(rssn - rss1 <= RSS_TOL_KIB, "%s (%ld -> %ld KiB)", what, rss1,
	      rssn);
}

int main(int argc, char **argv)
{
	const char *env = getenv("T_FAULTS_ROUNDS");
	/* Under valgrind every peer starts slowly, and RSS is not judged. */
	int rounds = env ? atoi(env) : under_valgrind() ? 2 : ROUNDS_DEFAULT;
	int fds_start, fds1 = 0;
	long rss1 = 0;

	peer_init();
	peer_dispatch(argc, argv, roles);
	test_watchdog(600);
	if (rounds < 1)
		rounds = 1;
	fds_start = fd_count();
	side_open(&S);
	end_bound_us = test_ia_is_udp(S.ia) ? END_BOUND_UDP_US : END_BOUND_US;
	printf("# %s: the end event is due within %u ms of a kill\n",
	       test_ia_name(), end_bound_us / 1000);
	psp = side_psp(&S, &qual);
	snprintf(qual_arg, sizeof(qual_arg), "%llu", (unsigned long long)qual);
	for (int r = 1; r <= rounds; r++) {
		printf("# round %d of %d\n", r, rounds);
		round_of_kills();
		if (r == 1) {
			rss1 = rss_kib();
			fds1 = fd_count();
		}
	}
	check_growth(rounds, rss1, rss_kib(), fds1, fd_count());
	sc_unmapped(0, "0");
	sc_unmapped(0, "1");
	sc_unmapped(1, "0");
	sc_unmapped(1, "1");
	for (size_t i = 0; i < NSCEN; i++)
		printf("# bound: %-50s worst %.1f ms (last: %s)\n",
		       bounds[i].name, bounds[i].worst_us / 1000.0,
		       event_name(bounds[i].last_ev));
	dat_psp_free(psp);
	side_close(&S);
	CHECK(fd_count_settled(fds_start, 2000) == fds_start,
	      "closing the IA closes every descriptor it opened (%d)",
	      fds_start);
	return tap_done();
}
