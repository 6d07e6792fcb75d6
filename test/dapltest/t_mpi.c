/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What MPI libraries' uDAPL transports (MVAPICH2's among them) rely on,
 * through libdat2 as a consumer:
 *   1  a connection completes while the active side makes no DAT call
 *      (the provider's progress thread drives it; server in a child
 *      process, so nothing the server does can drive the client);
 *   2  dat_ia_open creating the async EVD;
 *   3  EP attributes with zero RDMA IOV counts;
 *   4  unsignalled / suppressed requests of 4 EPs on one shared request
 *      EVD and one shared recv EVD, 10000 posts, no overflow;
 *   5  one RDMA Write becomes visible in address order (last-word polling);
 *   6  a Send fenced behind an RDMA Read carries the Read's result;
 *   7  graceful disconnect called by both sides, in every order;
 *   8  dat_ep_reset after PEER_REJECTED, then the same EP connects;
 *   9  a pid-derived connection qualifier above 65535;
 *   10 threads sharing the two IAs: data on their own EPs and EVDs while
 *      another thread connects and disconnects (run later under TSan: the
 *      test side shares no unsynchronised variable).
 * PSP qualifiers: 64100..64199 and the big one of case 9.  Every wait is
 * bounded; a watchdog bails out rather than hang.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>

#define MIB       (1u << 20)
#define TSIDE_BUF_SIZE (4 * MIB)
#include "tside.h"

#define WAIT_US   TSIDE_WAIT_US
#define QUIET_US  200000	/* "no further event" window */
#define STEP_MS   10000		/* the child's next report */
#define Q_MAIN    64100		/* most connections */
#define Q_FORK    64101		/* the child's PSP (case 1) */
#define Q_CYCLE   64102		/* the connect/disconnect thread (case 10) */

/* Buildable under -fsanitize=thread: the racy reads of case 5 are the
 * point of the test, not a bug. */
#if defined(__SANITIZE_THREAD__)
#define NO_TSAN __attribute__((no_sanitize("thread")))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NO_TSAN __attribute__((no_sanitize("thread")))
#endif
#endif
#ifndef NO_TSAN
#define NO_TSAN
#endif

static struct side S, C;	/* server, client: two IAs of iw-lo */
static DAT_SOCK_ADDR6 srv_addr;

/* One EP pair, server EP on S and client EP on C, and the EVDs each EP
 * reports to. */
struct link {
	DAT_EP_HANDLE cep, sep;
	DAT_EVD_HANDLE creq, crcv, cconn;
	DAT_EVD_HANDLE sreq, srcv, sconn;
};

/* ------------------------------------------------------------ helpers */

static long elapsed_us(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000L +
	       (t.tv_nsec - t0->tv_nsec) / 1000;
}

static int quiet(DAT_EVD_HANDLE evd)
{
	return side_wait(evd, QUIET_US).event_number == 0;
}

/* An event polled MPI-style: dequeue, else a short wait; 5 s at most. */
static DAT_EVENT poll_event(DAT_EVD_HANDLE evd)
{
	struct timespec t0;
	DAT_EVENT ev;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (dat_evd_dequeue(evd, &ev) == DAT_SUCCESS)
			return ev;
		ev = side_wait(evd, 1000);
		if (ev.event_number)
			return ev;
	} while (elapsed_us(&t0) < WAIT_US);
	return ev;
}

/* A successful DTO completion of ep with cookie and length. */
static int dto_good(const DAT_EVENT *ev, DAT_EP_HANDLE ep, uint64_t cookie,
		    size_t len)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *d =
		&ev->event_data.dto_completion_event_data;

	if (ev->event_number == DAT_DTO_COMPLETION_EVENT &&
	    d->status == DAT_DTO_SUCCESS && d->ep_handle == ep &&
	    d->user_cookie.as_64 == cookie && d->transfered_length == len)
		return 1;
	printf("#   event 0x%x ep %p cookie 0x%llx status %d len %llu, "
	       "want ep %p cookie 0x%llx len %zu\n", ev->event_number,
	       (void *)d->ep_handle, (unsigned long long)d->user_cookie.as_64,
	       d->status, (unsigned long long)d->transfered_length,
	       (void *)ep, (unsigned long long)cookie, len);
	return 0;
}

static int dto_is(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, uint64_t cookie,
		  size_t len)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);

	return dto_good(&ev, ep, cookie, len);
}

static int dto_polled(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, uint64_t cookie,
		      size_t len)
{
	DAT_EVENT ev = poll_event(evd);

	return dto_good(&ev, ep, cookie, len);
}

/* A connection event of the given number for ep. */
static int conn_ev(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER num, DAT_EP_HANDLE ep)
{
	DAT_EVENT ev = side_wait(evd, WAIT_US);

	if (ev.event_number == num &&
	    ev.event_data.connect_event_data.ep_handle == ep)
		return 1;
	printf("#   connection event 0x%x, want 0x%x\n", ev.event_number, num);
	return 0;
}

/* The CR of the next request for qualifier q, or NULL. */
static DAT_CR_HANDLE next_cr(DAT_EVD_HANDLE cr_evd, DAT_CONN_QUAL q)
{
	DAT_EVENT ev = side_wait(cr_evd, WAIT_US);
	const DAT_CR_ARRIVAL_EVENT_DATA *d =
		&ev.event_data.cr_arrival_event_data;

	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    d->conn_qual != q)
		return DAT_HANDLE_NULL;
	return d->cr_handle;
}

static int ep_connect(DAT_EP_HANDLE ep, DAT_CONN_QUAL q)
{
	return dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&srv_addr, q, WAIT_US,
			      0, NULL, DAT_QOS_BEST_EFFORT,
			      DAT_CONNECT_DEFAULT_FLAG) == DAT_SUCCESS;
}

/* Posts from one side's buffer. */
static DAT_RETURN post_recv(DAT_EP_HANDLE ep, struct side *s, size_t off,
			    size_t len, uint64_t cookie)
{
	DAT_LMR_TRIPLET t = side_lseg(s, off, len);

	return dat_ep_post_recv(ep, 1, &t, side_ck(cookie),
				DAT_COMPLETION_DEFAULT_FLAG);
}

static DAT_RETURN post_send(DAT_EP_HANDLE ep, struct side *s, size_t off,
			    size_t len, uint64_t cookie,
			    DAT_COMPLETION_FLAGS f)
{
	DAT_LMR_TRIPLET t = side_lseg(s, off, len);

	return dat_ep_post_send(ep, 1, &t, side_ck(cookie), f);
}

/* RDMA Write C[off] -> S[off]. */
static DAT_RETURN post_write(DAT_EP_HANDLE ep, size_t off, size_t len,
			     uint64_t cookie, DAT_COMPLETION_FLAGS f)
{
	DAT_LMR_TRIPLET t = side_lseg(&C, off, len);
	DAT_RMR_TRIPLET r = side_rseg(&S, off, len);

	return dat_ep_post_rdma_write(ep, 1, &t, side_ck(cookie), &r, f);
}

/* MPI-style EP attributes: sizes and RDMA IOV counts left at 0. */
static DAT_EP_ATTR mpi_attr(DAT_COMPLETION_FLAGS req_flags)
{
	DAT_EP_ATTR a;

	memset(&a, 0, sizeof(a));
	a.service_type = DAT_SERVICE_TYPE_RC;
	a.qos = DAT_QOS_BEST_EFFORT;
	a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.request_completion_flags = req_flags;
	a.max_recv_dtos = 16;
	a.max_request_dtos = 64;
	a.max_recv_iov = 1;
	a.max_request_iov = 1;
	a.max_rdma_read_in = 4;
	a.max_rdma_read_out = 4;
	a.srq_soft_hw = DAT_HW_DEFAULT;
	return a;
}

/* ------------------------------------------------------------- links */

/* A link reporting to the sides' own EVDs. */
static struct link side_link(void)
{
	struct link l = { DAT_HANDLE_NULL, DAT_HANDLE_NULL,
			  C.req, C.rcv, C.conn, S.req, S.rcv, S.conn };

	return l;
}

/* A link with six EVDs of its own on the two IAs. */
static struct link own_link(void)
{
	struct link l;

	memset(&l, 0, sizeof(l));
	l.creq = side_evd(C.ia, DAT_EVD_DTO_FLAG, 64);
	l.crcv = side_evd(C.ia, DAT_EVD_DTO_FLAG, 64);
	l.cconn = side_evd(C.ia, DAT_EVD_CONNECTION_FLAG, 8);
	l.sreq = side_evd(S.ia, DAT_EVD_DTO_FLAG, 64);
	l.srcv = side_evd(S.ia, DAT_EVD_DTO_FLAG, 64);
	l.sconn = side_evd(S.ia, DAT_EVD_CONNECTION_FLAG, 8);
	return l;
}

static int own_link_free(const struct link *l)
{
	const DAT_EVD_HANDLE e[] = { l->creq, l->crcv, l->cconn,
				     l->sreq, l->srcv, l->sconn };
	int ok = 1;

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ok &= dat_evd_free(e[i]) == DAT_SUCCESS;
	return ok;
}

static int link_eps(struct link *l, const DAT_EP_ATTR *a)
{
	return dat_ep_create(C.ia, C.pz, l->crcv, l->creq, l->cconn, a,
			     &l->cep) == DAT_SUCCESS &&
	       dat_ep_create(S.ia, S.pz, l->srcv, l->sreq, l->sconn, a,
			     &l->sep) == DAT_SUCCESS;
}

/* Client connects to q; the next request on cr_evd is accepted with the
 * server EP; both see ESTABLISHED. */
static int link_establish(const struct link *l, DAT_EVD_HANDLE cr_evd,
			  DAT_CONN_QUAL q)
{
	DAT_CR_HANDLE cr;

	if (!ep_connect(l->cep, q))
		return 0;
	cr = next_cr(cr_evd, q);
	return cr && dat_cr_accept(cr, l->sep, 0, NULL) == DAT_SUCCESS &&
	       conn_ev(l->cconn, DAT_CONNECTION_EVENT_ESTABLISHED, l->cep) &&
	       conn_ev(l->sconn, DAT_CONNECTION_EVENT_ESTABLISHED, l->sep);
}

/* New EPs with attributes a (NULL: defaults), connected through the main
 * PSP; bails out on failure. */
static struct link link_up(const DAT_EP_ATTR *a)
{
	struct link l = side_link();

	if (!link_eps(&l, a) || !link_establish(&l, S.cr, Q_MAIN))
		BAIL("could not connect a link");
	return l;
}

/* The client disconnects gracefully, both see DISCONNECTED, both EPs are
 * freed. */
static int link_end(const struct link *l)
{
	int ok = dat_ep_disconnect(l->cep, DAT_CLOSE_GRACEFUL_FLAG) ==
		 DAT_SUCCESS;

	ok = ok && conn_ev(l->cconn, DAT_CONNECTION_EVENT_DISCONNECTED, l->cep);
	ok = ok && conn_ev(l->sconn, DAT_CONNECTION_EVENT_DISCONNECTED, l->sep);
	ok &= dat_ep_free(l->cep) == DAT_SUCCESS;
	ok &= dat_ep_free(l->sep) == DAT_SUCCESS;
	return ok;
}

/* A message of len bytes C[off] -> S[off + MIB] (a pattern of seed),
 * both completions polled, the bytes checked. */
static int ping(const struct link *l, size_t off, size_t len, unsigned seed)
{
	side_fill(C.buf + off, len, seed);
	memset(S.buf + off + MIB, 0, len);
	return post_recv(l->sep, &S, off + MIB, len, seed) == DAT_SUCCESS &&
	       post_send(l->cep, &C, off, len, seed + 1,
			 DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
	       dto_polled(l->creq, l->cep, seed + 1, len) &&
	       dto_polled(l->srcv, l->sep, seed, len) &&
	       side_same(S.buf + off + MIB, len, seed);
}

static int async_empty(void)
{
	DAT_EVENT ev;

	return dat_evd_dequeue(C.async, &ev) == DAT_QUEUE_EMPTY &&
	       dat_evd_dequeue(S.async, &ev) == DAT_QUEUE_EMPTY;
}

/* ------------------------------------ 1. progress with no DAT call */

#define PING_LEN 512
enum { STEP_LISTENING = 'L', STEP_ESTABLISHED = 'E', STEP_DATA = 'D' };

static void report(int fd, char step)
{
	if (write(fd, &step, 1) != 1)
		_exit(3);
}

/* The server of case 1, in a child process; reports each step on fd.
 * It checks the client's message (seed 1) and answers with seed 2. */
static int progress_server(int fd)
{
	struct side s;
	DAT_PSP_HANDLE psp;
	DAT_CR_HANDLE cr;

	side_open(&s);
	s.ep = side_ep(&s);
	if (dat_psp_create(s.ia, Q_FORK, s.cr, DAT_PSP_CONSUMER_FLAG,
			   &psp) != DAT_SUCCESS ||
	    side_recv(&s, 0, PING_LEN, 1) != DAT_SUCCESS)
		return 10;
	report(fd, STEP_LISTENING);
	cr = next_cr(s.cr, Q_FORK);
	if (!cr || dat_cr_accept(cr, s.ep, 0, NULL) != DAT_SUCCESS ||
	    !conn_ev(s.conn, DAT_CONNECTION_EVENT_ESTABLISHED, s.ep))
		return 11;
	report(fd, STEP_ESTABLISHED);
	if (!side_dto_ok(s.rcv, 1, PING_LEN) || !side_same(s.buf, PING_LEN, 1))
		return 12;
	side_fill(s.buf + PING_LEN, PING_LEN, 2);
	if (side_send(&s, PING_LEN, PING_LEN, 2) != DAT_SUCCESS ||
	    !side_dto_ok(s.req, 2, PING_LEN))
		return 13;
	report(fd, STEP_DATA);
	if (!conn_ev(s.conn, DAT_CONNECTION_EVENT_DISCONNECTED, s.ep))
		return 14;
	side_close(&s);
	return 0;
}

/* Fork the server of case 1 before this process makes any DAT call. */
static pid_t start_progress_server(int *fd)
{
	int p[2];
	pid_t pid;

	fflush(stdout);
	if (pipe(p) < 0 || (pid = fork()) < 0)
		BAIL("pipe/fork");
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);	/* a hung child just dies */
		alarm(60);
		close(p[0]);
		_exit(progress_server(p[1]));
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

/* The next step the child reports (a plain read: no DAT call); 0 if none
 * came in time. */
static char child_step(int fd)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	char c = 0;

	if (poll(&pfd, 1, STEP_MS) == 1 && read(fd, &c, 1) == 1)
		return c;
	return 0;
}

/* The child's exit status, or -1 (killed) if it does not exit in time. */
static int child_exit(pid_t pid)
{
	int st = 0;

	for (int i = 0; i < STEP_MS / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static void test_progress(pid_t child, int fd)
{
	DAT_EVENT ev;
	int ok;

	C.ep = side_ep(&C);
	CHECK(child_step(fd) == STEP_LISTENING, "1: server process listening");
	CHECK(side_recv(&C, MIB, PING_LEN, 3) == DAT_SUCCESS &&
	      ep_connect(C.ep, Q_FORK), "1: recv posted, dat_ep_connect returns");
	/* From here to the dequeue this process makes no DAT call.  The
	 * grace period covers a provider without RTR, where the passive side
	 * may be established a moment before the active one. */
	CHECK(child_step(fd) == STEP_ESTABLISHED,
	      "1: server ESTABLISHED while the client makes no DAT call");
	usleep(200000);
	ok = dat_evd_dequeue(C.conn, &ev) == DAT_SUCCESS;
	CHECK(ok && ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED &&
	      ev.event_data.connect_event_data.ep_handle == C.ep,
	      "1: the client's first look finds ESTABLISHED already queued "
	      "(event 0x%x)", ok ? ev.event_number : 0);
	side_fill(C.buf, PING_LEN, 1);
	CHECK(side_send(&C, 0, PING_LEN, 4) == DAT_SUCCESS &&
	      side_dto_ok(C.req, 4, PING_LEN) &&
	      side_dto_ok(C.rcv, 3, PING_LEN) &&
	      side_same(C.buf + MIB, PING_LEN, 2),
	      "1: data flows both ways right after");
	CHECK(child_step(fd) == STEP_DATA, "1: the server got the client's bytes");
	CHECK(dat_ep_disconnect(C.ep, DAT_CLOSE_GRACEFUL_FLAG) == DAT_SUCCESS &&
	      conn_ev(C.conn, DAT_CONNECTION_EVENT_DISCONNECTED, C.ep),
	      "1: disconnect");
	ok = child_exit(child);
	CHECK(ok == 0, "1: server process exits cleanly (%d)", ok);
	close(fd);
	CHECK_RET(dat_ep_free(C.ep), DAT_SUCCESS, "1: free the EP");
	C.ep = DAT_HANDLE_NULL;
}

/* ------------------------------------- 2. the provider's async EVD */

static void one_async_evd(DAT_COUNT qlen, DAT_COUNT want)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL, q = DAT_HANDLE_NULL;
	DAT_EVD_PARAM p;
	DAT_EVENT ev;

	CHECK_RET(dat_ia_open((DAT_NAME_PTR)test_ia_name(), qlen, &evd, &ia),
		  DAT_SUCCESS, "2: dat_ia_open(qlen %d, *async = NULL handle)",
		  qlen);
	CHECK(evd != DAT_HANDLE_NULL, "2: it returns the async EVD it made");
	memset(&p, 0, sizeof(p));
	CHECK(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p) == DAT_SUCCESS &&
	      (p.evd_flags & DAT_EVD_ASYNC_FLAG) && p.evd_qlen == want &&
	      p.ia_handle == ia,
	      "2: dat_evd_query: ASYNC flag, qlen %d, the IA (flags 0x%x, "
	      "qlen %d)", want, p.evd_flags, p.evd_qlen);
	CHECK(dat_ia_query(ia, &q, 0, NULL, 0, NULL) == DAT_SUCCESS && q == evd,
	      "2: dat_ia_query names the same async EVD");
	CHECK_RET(dat_evd_dequeue(evd, &ev), DAT_QUEUE_EMPTY,
		  "2: dequeue from it: empty");
	CHECK_RET(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS,
		  "2: graceful dat_ia_close with that EVD alive");
	CHECK_RET(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &p), DAT_INVALID_HANDLE,
		  "2: the async EVD went with its IA");
}

static void test_async_evd(void)
{
	one_async_evd(8, 8);
	one_async_evd(0, 64);	/* doc/semantics.md: 0 asks for 64 */
}

/* ------------------------------------------ 3. zero RDMA IOV counts */

#define IOV_CHUNK (32u << 10)

/* RDMA Write of nseg non-abutting chunks C[k * 2 chunks] -> S[MIB..], then
 * an RDMA Read of it back into C[2 MiB..]; every chunk checked. */
static int write_read(const struct link *l, int nseg, unsigned seed)
{
	DAT_LMR_TRIPLET t[2], back = side_lseg(&C, 2 * MIB, nseg * IOV_CHUNK);
	DAT_RMR_TRIPLET r = side_rseg(&S, MIB, nseg * IOV_CHUNK);
	int ok = 1;

	for (int k = 0; k < nseg; k++) {
		t[k] = side_lseg(&C, 2 * k * IOV_CHUNK, IOV_CHUNK);
		side_fill(C.buf + 2 * k * IOV_CHUNK, IOV_CHUNK, seed + k);
	}
	ok = dat_ep_post_rdma_write(l->cep, nseg, t, side_ck(seed), &r,
				    DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
	     dto_is(l->creq, l->cep, seed, nseg * IOV_CHUNK) &&
	     dat_ep_post_rdma_read(l->cep, 1, &back, side_ck(seed + 1), &r,
				   DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
	     dto_is(l->creq, l->cep, seed + 1, nseg * IOV_CHUNK);
	for (int k = 0; k < nseg; k++)
		ok = ok && side_same(S.buf + MIB + k * IOV_CHUNK, IOV_CHUNK,
				     seed + k) &&
		     side_same(C.buf + 2 * MIB + k * IOV_CHUNK, IOV_CHUNK,
			       seed + k);
	return ok;
}

static void test_zero_rdma_iov(void)
{
	DAT_EP_ATTR a = mpi_attr(DAT_COMPLETION_DEFAULT_FLAG);
	DAT_LMR_TRIPLET two[2] = { side_lseg(&C, 0, 8), side_lseg(&C, 64, 8) };
	struct link l = side_link();
	DAT_IA_ATTR ia;
	DAT_EP_PARAM p;

	if (dat_ia_query(C.ia, NULL, DAT_IA_FIELD_ALL, &ia, 0, NULL) !=
	    DAT_SUCCESS)
		BAIL("dat_ia_query");
	CHECK(link_eps(&l, &a),
	      "3: dat_ep_create with max_rdma_read_iov = max_rdma_write_iov = 0");
	memset(&p, 0, sizeof(p));
	dat_ep_query(l.cep, DAT_EP_FIELD_ALL, &p);
	/* doc/semantics.md: zero means the default, the IA's maximum. */
	CHECK(p.ep_attr.max_rdma_read_iov == ia.max_iov_segments_per_rdma_read &&
	      p.ep_attr.max_rdma_write_iov ==
	      ia.max_iov_segments_per_rdma_write &&
	      p.ep_attr.max_rdma_write_iov > 1,
	      "3: dat_ep_query reports the IA's maximum for 0 (read %d, write %d)",
	      p.ep_attr.max_rdma_read_iov, p.ep_attr.max_rdma_write_iov);
	CHECK(p.ep_attr.max_request_iov == 1 && p.ep_attr.max_recv_iov == 1,
	      "3: ...and the IOV counts asked for elsewhere");
	CHECK(link_establish(&l, S.cr, Q_MAIN), "3: such EPs connect");
	CHECK(write_read(&l, 1, 30), "3: 1-segment RDMA Write and Read");
	CHECK(write_read(&l, 2, 40), "3: 2-segment RDMA Write (0 is not 1)");
	CHECK_RET(dat_ep_post_send(l.cep, 2, two, side_ck(1),
				   DAT_COMPLETION_DEFAULT_FLAG),
		  DAT_INVALID_PARAMETER,
		  "3: a 2-segment send on max_request_iov 1 is refused");
	CHECK(link_end(&l), "3: disconnect and free");
}

/* ------------------------- 4. unsignalled requests, shared EVDs */

#define NLINK   4
#define BATCH   16		/* posts per EP per round */
#define ROUNDS  157		/* NLINK * BATCH * ROUNDS = 10048 posts */
#define WSIZE   64		/* bytes per RDMA Write */
#define SENDOFF (3 * MIB)	/* C: each round's send; S: its receive */

/* Post j of a batch: the last is a signalled Send carrying its cookie,
 * j == 7 a default RDMA Write, j % 4 == 1 an UNSIGNALLED one, the rest
 * SUPPRESSed.  doc/semantics.md: UNSIGNALLED still queues the event,
 * SUPPRESS queues none on success. */
static DAT_COMPLETION_FLAGS batch_flags(int j)
{
	if (j == BATCH - 1 || j == 7)
		return DAT_COMPLETION_DEFAULT_FLAG;
	return j % 4 == 1 ? DAT_COMPLETION_UNSIGNALLED_FLAG
			  : DAT_COMPLETION_SUPPRESS_FLAG;
}

static int batch_events(void)
{
	int n = 0;

	for (int j = 0; j < BATCH; j++)
		n += !(batch_flags(j) & DAT_COMPLETION_SUPPRESS_FLAG);
	return n;
}

static uint64_t cookie(int i, unsigned r, int j)
{
	return ((uint64_t)i << 40) | ((uint64_t)r << 8) | (uint64_t)j;
}

static unsigned round_seed(int i, unsigned r)
{
	return r * NLINK + (unsigned)i;
}

struct shared {
	struct link l[NLINK];
	DAT_EVD_HANDLE req, rcv;	/* all client requests, server recvs */
	int next[NLINK];		/* next expected post of each EP */
};

static int post_batch(const struct shared *u, int i, unsigned r)
{
	size_t base = (size_t)i * BATCH * WSIZE;
	uint64_t last = cookie(i, r, BATCH - 1);
	DAT_RETURN ret = DAT_SUCCESS;

	side_fill(C.buf + base, BATCH * WSIZE, round_seed(i, r));
	memcpy(C.buf + SENDOFF + 8 * i, &last, 8);
	for (int j = 0; j < BATCH - 1 && ret == DAT_SUCCESS; j++)
		ret = post_write(u->l[i].cep, base + (size_t)j * WSIZE, WSIZE,
				 cookie(i, r, j), batch_flags(j));
	if (ret == DAT_SUCCESS)
		ret = post_send(u->l[i].cep, &C, SENDOFF + 8 * i, 8, last,
				batch_flags(BATCH - 1));
	return ret == DAT_SUCCESS;
}

/* One request event of round r: the next signalled post of its EP. */
static int take_request(struct shared *u, unsigned r)
{
	DAT_EVENT ev = poll_event(u->req);
	DAT_EP_HANDLE ep = ev.event_data.dto_completion_event_data.ep_handle;
	int i, j;

	for (i = 0; i < NLINK && u->l[i].cep != ep; i++)
		;
	if (i == NLINK) {
		printf("#   event 0x%x for no EP of ours\n", ev.event_number);
		return 0;
	}
	for (j = u->next[i]; j < BATCH && (batch_flags(j) &
					   DAT_COMPLETION_SUPPRESS_FLAG); j++)
		;
	u->next[i] = j + 1;
	return dto_good(&ev, ep, cookie(i, r, j), j == BATCH - 1 ? 8 : WSIZE);
}

/* One receive of round r, from any link (the links' messages race): its
 * cookie and the send's bytes, and the batch's RDMA Writes placed before
 * it.  *seen collects the links heard from. */
static int take_receive(const struct shared *u, unsigned r, unsigned *seen)
{
	DAT_EVENT ev = poll_event(u->rcv);
	DAT_EP_HANDLE ep = ev.event_data.dto_completion_event_data.ep_handle;
	uint64_t got;
	int i;

	for (i = 0; i < NLINK && u->l[i].sep != ep; i++)
		;
	if (i == NLINK || (*seen & (1u << i)) ||
	    !dto_good(&ev, ep, cookie(i, r, BATCH), 8))
		return 0;
	*seen |= 1u << i;
	memcpy(&got, S.buf + SENDOFF + 8 * i, 8);
	return got == cookie(i, r, BATCH - 1) &&
	       side_same(S.buf + (size_t)i * BATCH * WSIZE, (BATCH - 1) * WSIZE,
			 round_seed(i, r));
}

static int one_round(struct shared *u, unsigned r)
{
	unsigned seen = 0;
	int ok = 1, i, n;

	for (i = 0; i < NLINK && ok; i++)
		ok = post_recv(u->l[i].sep, &S, SENDOFF + 8 * i, 8,
			       cookie(i, r, BATCH)) == DAT_SUCCESS;
	for (i = 0; i < NLINK && ok; i++) {
		u->next[i] = 0;
		ok = post_batch(u, i, r);
	}
	for (n = NLINK * batch_events(); n > 0 && ok; n--)
		ok = take_request(u, r);
	for (i = 0; i < NLINK && ok; i++)
		ok = take_receive(u, r, &seen);
	return ok;
}

/* A lone post on link 0 with flags f: its event is on the shared EVD
 * without any wait (dequeue only), or, suppressed, never. */
static int lone_post(const struct shared *u, DAT_COMPLETION_FLAGS f,
		     uint64_t c)
{
	struct timespec t0;
	DAT_EVENT ev;

	if (post_write(u->l[0].cep, 0, WSIZE, c, f) != DAT_SUCCESS)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (dat_evd_dequeue(u->req, &ev) != DAT_SUCCESS) {
		if (elapsed_us(&t0) > ((f & DAT_COMPLETION_SUPPRESS_FLAG)
				       ? QUIET_US : WAIT_US))
			return (f & DAT_COMPLETION_SUPPRESS_FLAG) != 0;
		usleep(100);
	}
	return !(f & DAT_COMPLETION_SUPPRESS_FLAG) &&
	       dto_good(&ev, u->l[0].cep, c, WSIZE);
}

/* NLINK EPs per side, all client requests on u->req, all server
 * receives on u->rcv, connected. */
static int shared_up(struct shared *u)
{
	DAT_EP_ATTR a = mpi_attr(DAT_COMPLETION_UNSIGNALLED_FLAG);
	int ok = 1;

	memset(u, 0, sizeof(*u));
	/* Room for one round's events: leaked suppressed ones overflow. */
	u->req = side_evd(C.ia, DAT_EVD_DTO_FLAG, NLINK * batch_events() + 8);
	u->rcv = side_evd(S.ia, DAT_EVD_DTO_FLAG, 2 * NLINK);
	for (int i = 0; i < NLINK; i++) {
		u->l[i] = side_link();
		u->l[i].creq = u->req;
		u->l[i].srcv = u->rcv;
		ok = ok && link_eps(&u->l[i], &a) &&
		     link_establish(&u->l[i], S.cr, Q_MAIN);
	}
	return ok;
}

static int shared_down(const struct shared *u)
{
	int ok = 1;

	for (int i = 0; i < NLINK; i++)
		ok &= link_end(&u->l[i]);
	return ok && dat_evd_free(u->req) == DAT_SUCCESS &&
	       dat_evd_free(u->rcv) == DAT_SUCCESS;
}

static void test_unsignalled(void)
{
	struct shared u;
	unsigned r;
	int ok = shared_up(&u);

	CHECK(ok, "4: %d EPs (request_completion_flags UNSIGNALLED) on one "
	      "request EVD and one recv EVD connected", NLINK);
	for (r = 0; r < ROUNDS && ok; r++)
		ok = one_round(&u, r);
	CHECK(ok, "4: %u rounds, %d posts: %d events a round, each naming its "
	      "EP and cookie; suppressed successes give none", r,
	      NLINK * BATCH * (int)r, NLINK * batch_events());
	CHECK(quiet(u.req) && quiet(u.rcv), "4: no stray event afterwards");
	CHECK(async_empty(), "4: no overflow reported on the async EVDs");
	CHECK(lone_post(&u, DAT_COMPLETION_UNSIGNALLED_FLAG, 1),
	      "4: a lone UNSIGNALLED post's event is queued (found by dequeue)");
	CHECK(lone_post(&u, DAT_COMPLETION_SUPPRESS_FLAG, 2),
	      "4: a lone SUPPRESSed post queues nothing");
	CHECK(lone_post(&u, DAT_COMPLETION_DEFAULT_FLAG, 3),
	      "4: a default post after it reports");
	CHECK(shared_down(&u), "4: disconnect, free the EPs and the shared EVDs");
}

/* ---------------------------- 5. RDMA Write visible in address order */

/* Spin (volatile reads, no DAT call; a yield now and then) until the last
 * word of p[0..len) holds marker; then count the bytes before it that do not hold the
 * pattern of seed.  -1 if the marker does not come in time. */
static NO_TSAN long poll_last_word(const unsigned char *p, size_t len,
				   uint64_t marker, unsigned seed)
{
	const volatile unsigned char *v = p;
	const volatile uint64_t *last =
		(const volatile uint64_t *)(const void *)(p + len - 8);
	struct timespec t0;
	unsigned long spins = 0;
	long bad = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (*last != marker) {
		if (++spins % 4096)
			continue;
		if (elapsed_us(&t0) > WAIT_US)
			return -1;
		sched_yield();	/* let valgrind's serialised threads run */
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (size_t i = 0; i < len - 8; i++)
		bad += v[i] != side_pat(i, seed);
	return bad;
}

static void one_ordered_write(const struct link *l, int pass)
{
	unsigned seed = 60 + (unsigned)pass;
	uint64_t stale, marker;
	long bad;

	side_fill(S.buf, MIB, seed ^ 0x80);	/* differs at every byte */
	memcpy(&stale, S.buf + MIB - 8, 8);
	marker = ~stale;
	side_fill(C.buf, MIB, seed);
	memcpy(C.buf + MIB - 8, &marker, 8);
	CHECK_RET(post_write(l->cep, 0, MIB, 50 + pass,
			     DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS,
		  "5: pass %d: RDMA Write of 1 MiB posted", pass);
	bad = poll_last_word(S.buf, MIB, marker, seed);
	CHECK(bad == 0, "5: pass %d: when the last word shows the marker, the "
	      "other bytes hold the pattern (%ld stale%s)", pass, bad,
	      bad < 0 ? ": no marker" : "");
	/* A Send behind the write: its receive orders the placement before
	 * the next pass's refill (for ThreadSanitizer too, which cannot see
	 * the marker). */
	CHECK(dto_is(l->creq, l->cep, 50 + (uint64_t)pass, MIB) &&
	      ping(l, 3 * MIB - 8, 8, 200 + (unsigned)pass),
	      "5: pass %d: the write completes, a send behind it arrives", pass);
}

static void test_write_order(void)
{
	struct link l = link_up(NULL);

	for (int pass = 0; pass < 6; pass++)
		one_ordered_write(&l, pass);
	CHECK(link_end(&l), "5: disconnect and free");
}

/* ------------------------------ 6. a Send fenced behind an RDMA Read */

#define FSIZE (2 * MIB)	/* read */
#define FTAIL 4096		/* sent: the last bytes the read places */

/* RDMA Read S[MIB] -> C[MIB], then a fenced Send of the sink's tail into
 * S[3 MiB]: the peer must get the bytes the Read fetched, which arrive
 * last (an unfenced Send goes out with the stale ones). */
static void one_fenced_send(const struct link *l, int pass)
{
	unsigned seed = 70 + (unsigned)pass;
	DAT_COMPLETION_FLAGS rf = pass % 2 ? DAT_COMPLETION_SUPPRESS_FLAG
					   : DAT_COMPLETION_DEFAULT_FLAG;
	DAT_LMR_TRIPLET sink = side_lseg(&C, MIB, FSIZE);
	DAT_RMR_TRIPLET src = side_rseg(&S, MIB, FSIZE);
	const unsigned char *fetched = S.buf + MIB + FSIZE - FTAIL;
	uint64_t c = 600 + 4 * (uint64_t)pass;
	int ok;

	side_fill(S.buf + MIB, FSIZE, seed);
	side_fill(C.buf + MIB, FSIZE, seed ^ 0x80);	/* stale */
	memset(S.buf + 3 * MIB, 0, FTAIL);
	ok = post_recv(l->sep, &S, 3 * MIB, FTAIL, c) == DAT_SUCCESS &&
	     dat_ep_post_rdma_read(l->cep, 1, &sink, side_ck(c + 1), &src,
				   rf) == DAT_SUCCESS &&
	     post_send(l->cep, &C, MIB + FSIZE - FTAIL, FTAIL, c + 2,
		       DAT_COMPLETION_BARRIER_FENCE_FLAG) == DAT_SUCCESS;
	if (ok && !(rf & DAT_COMPLETION_SUPPRESS_FLAG))
		ok = dto_is(l->creq, l->cep, c + 1, FSIZE);
	ok = ok && dto_is(l->creq, l->cep, c + 2, FTAIL) &&
	     dto_is(l->srcv, l->sep, c, FTAIL);
	CHECK(ok, "6: pass %d (read %s): read, fenced send and receive complete",
	      pass, rf ? "suppressed" : "signalled");
	CHECK(!memcmp(S.buf + 3 * MIB, fetched, FTAIL),
	      "6: pass %d: the peer receives what the read fetched", pass);
}

static void test_fence(void)
{
	struct link l = link_up(NULL);

	for (int pass = 0; pass < 10; pass++)
		one_fenced_send(&l, pass);
	CHECK(link_end(&l), "6: disconnect and free");
}

/* ------------------------------- 7. both sides disconnect gracefully */

enum order { CLIENT_FIRST, SERVER_FIRST, AT_ONCE, ORDERS };

struct disc {
	DAT_EP_HANDLE ep;
	pthread_barrier_t *start;
	DAT_RETURN ret;
};

static void *disc_thread(void *arg)
{
	struct disc *d = arg;

	pthread_barrier_wait(d->start);
	d->ret = dat_ep_disconnect(d->ep, DAT_CLOSE_GRACEFUL_FLAG);
	return NULL;
}

/* Both graceful calls from two threads released together. */
static int disconnect_at_once(const struct link *l)
{
	pthread_barrier_t b;
	struct disc d[2] = { { l->cep, &b, DAT_INTERNAL_ERROR },
			     { l->sep, &b, DAT_INTERNAL_ERROR } };
	pthread_t th[2];

	pthread_barrier_init(&b, NULL, 2);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, disc_thread, &d[i]))
			BAIL("pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&b);
	return d[0].ret == DAT_SUCCESS && d[1].ret == DAT_SUCCESS;
}

static int disconnect_both(const struct link *l, enum order o)
{
	DAT_EP_HANDLE first = o == CLIENT_FIRST ? l->cep : l->sep;
	DAT_EP_HANDLE second = o == CLIENT_FIRST ? l->sep : l->cep;

	if (o == AT_ONCE)
		return disconnect_at_once(l);
	return dat_ep_disconnect(first, DAT_CLOSE_GRACEFUL_FLAG) ==
	       DAT_SUCCESS &&
	       dat_ep_disconnect(second, DAT_CLOSE_GRACEFUL_FLAG) == DAT_SUCCESS;
}

static void test_disconnect_orders(void)
{
	static const char *const name[ORDERS] = {
		"client then server", "server then client",
		"both at once, two threads" };
	DAT_EP_ATTR a = mpi_attr(DAT_COMPLETION_DEFAULT_FLAG);
	struct link l = side_link();

	if (!link_eps(&l, &a))
		BAIL("dat_ep_create");
	for (int o = 0; o < ORDERS; o++) {
		CHECK(link_establish(&l, S.cr, Q_MAIN), "7 (%s): connected",
		      name[o]);
		CHECK(disconnect_both(&l, (enum order)o),
		      "7 (%s): both graceful disconnects succeed", name[o]);
		CHECK(conn_ev(l.cconn, DAT_CONNECTION_EVENT_DISCONNECTED, l.cep) &&
		      conn_ev(l.sconn, DAT_CONNECTION_EVENT_DISCONNECTED, l.sep),
		      "7 (%s): one DISCONNECTED on each EP", name[o]);
		CHECK(quiet(l.cconn) && quiet(l.sconn),
		      "7 (%s): no other connection event", name[o]);
		CHECK(side_ep_state(l.cep) == DAT_EP_STATE_DISCONNECTED &&
		      side_ep_state(l.sep) == DAT_EP_STATE_DISCONNECTED &&
		      dat_ep_reset(l.cep) == DAT_SUCCESS &&
		      dat_ep_reset(l.sep) == DAT_SUCCESS,
		      "7 (%s): both DISCONNECTED, reset", name[o]);
	}
	CHECK(dat_ep_free(l.cep) == DAT_SUCCESS &&
	      dat_ep_free(l.sep) == DAT_SUCCESS, "7: free the EPs");
}

/* ------------------------------- 8. reset after a reject, reconnect */

static void test_reset_after_reject(void)
{
	struct link l = side_link();
	DAT_CR_HANDLE cr = DAT_HANDLE_NULL;

	if (!link_eps(&l, NULL))
		BAIL("dat_ep_create");
	CHECK(ep_connect(l.cep, Q_MAIN) &&
	      (cr = next_cr(S.cr, Q_MAIN)) != DAT_HANDLE_NULL &&
	      dat_cr_reject(cr, 0, NULL) == DAT_SUCCESS, "8: request rejected");
	CHECK(conn_ev(l.cconn, DAT_CONNECTION_EVENT_PEER_REJECTED, l.cep) &&
	      quiet(l.cconn), "8: exactly one PEER_REJECTED");
	CHECK(side_ep_state(l.cep) == DAT_EP_STATE_DISCONNECTED,
	      "8: the rejected EP is DISCONNECTED");
	CHECK_RET(dat_ep_reset(l.cep), DAT_SUCCESS, "8: dat_ep_reset");
	CHECK(side_ep_state(l.cep) == DAT_EP_STATE_UNCONNECTED,
	      "8: ...UNCONNECTED");
	CHECK(link_establish(&l, S.cr, Q_MAIN), "8: the same EP connects again");
	CHECK(ping(&l, 0, 4096, 80), "8: data flows on it");
	CHECK(link_end(&l), "8: disconnect and free");
}

/* ---------------------------------- 9. a qualifier above 65535 */

static void test_big_qual(void)
{
	/* Like an MPI library's: process id and a rank. */
	DAT_CONN_QUAL q = ((DAT_CONN_QUAL)getpid() << 16) | 0x5678;
	struct link l = side_link();
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	DAT_PSP_PARAM p;

	memset(&p, 0, sizeof(p));
	CHECK_RET(dat_psp_create(S.ia, q, S.cr, DAT_PSP_CONSUMER_FLAG, &psp),
		  DAT_SUCCESS, "9: PSP on qualifier 0x%llx",
		  (unsigned long long)q);
	CHECK(q > 65535 &&
	      dat_psp_query(psp, DAT_PSP_FIELD_ALL, &p) == DAT_SUCCESS &&
	      p.conn_qual == q, "9: dat_psp_query reports it");
	CHECK(link_eps(&l, NULL) && link_establish(&l, S.cr, q),
	      "9: connect; the CR names the qualifier; accept");
	CHECK(ping(&l, 0, 65536, 90), "9: data");
	CHECK(link_end(&l), "9: disconnect and free");
	CHECK_RET(dat_psp_free(psp), DAT_SUCCESS, "9: free the PSP");
}

/* ------------------------------------- 10. threads sharing the IAs */

#define NWORK     4
#define WORK_ITER 200
#define CYCLES    20
#define WREGION   (128u << 10)	/* per worker, at 2 MiB + i * WREGION */
#define EAGER     256		/* the send after each write */

struct worker {			/* touched by its thread only while it runs */
	struct link l;
	size_t base;
	int done;
};

struct cycler {
	struct link l;		/* its EVDs; EPs made and freed per cycle */
	DAT_EVD_HANDLE cr;
	int done;
};

/* RDMA Write then an eager Send behind it; completions polled. */
static int exchange(const struct link *l, size_t base, unsigned seed)
{
	const size_t half = WREGION / 2;

	side_fill(C.buf + base, half + EAGER, seed);
	return post_recv(l->sep, &S, base + half, EAGER, 1) == DAT_SUCCESS &&
	       post_write(l->cep, base, half, 2, DAT_COMPLETION_DEFAULT_FLAG) ==
	       DAT_SUCCESS &&
	       post_send(l->cep, &C, base + half, EAGER, 3,
			 DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
	       dto_polled(l->creq, l->cep, 2, half) &&
	       dto_polled(l->creq, l->cep, 3, EAGER) &&
	       dto_polled(l->srcv, l->sep, 1, EAGER) &&
	       !memcmp(S.buf + base, C.buf + base, half + EAGER);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (w->done < WORK_ITER &&
	       exchange(&w->l, w->base, (unsigned)w->done))
		w->done++;
	return NULL;
}

static void *cycler_main(void *arg)
{
	struct cycler *c = arg;

	while (c->done < CYCLES && link_eps(&c->l, NULL) &&
	       link_establish(&c->l, c->cr, Q_CYCLE) && link_end(&c->l))
		c->done++;
	return NULL;
}

/* The workers' links, each with EVDs of its own, connected. */
static int workers_up(struct worker *w)
{
	int ok = 1;

	for (int i = 0; i < NWORK; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].l = own_link();
		w[i].base = 2 * MIB + (size_t)i * WREGION;
		ok = ok && link_eps(&w[i].l, NULL) &&
		     link_establish(&w[i].l, S.cr, Q_MAIN);
	}
	return ok;
}

/* The worker threads and the cycler thread, all at once; joined. */
static void run_threads(struct worker *w, struct cycler *cy)
{
	pthread_t th[NWORK + 1];
	int i;

	for (i = 0; i < NWORK; i++)
		if (pthread_create(&th[i], NULL, worker_main, &w[i]))
			BAIL("pthread_create");
	if (pthread_create(&th[NWORK], NULL, cycler_main, cy))
		BAIL("pthread_create");
	for (i = 0; i <= NWORK; i++)
		pthread_join(th[i], NULL);
}

static void test_concurrency(void)
{
	struct worker w[NWORK];
	struct cycler cy;
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	int ok, i;

	CHECK(workers_up(w), "10: %d EP pairs with EVDs of their own on the "
	      "two IAs", NWORK);
	memset(&cy, 0, sizeof(cy));
	cy.l = own_link();
	cy.cr = side_evd(S.ia, DAT_EVD_CR_FLAG, 8);
	CHECK_RET(dat_psp_create(S.ia, Q_CYCLE, cy.cr, DAT_PSP_CONSUMER_FLAG,
				 &psp), DAT_SUCCESS, "10: the cycler's PSP");
	run_threads(w, &cy);
	for (i = 0, ok = 1; i < NWORK; i++)
		ok &= w[i].done == WORK_ITER;
	CHECK(ok, "10: %d threads x %d RDMA Write + Send exchanges, data "
	      "checked", NWORK, WORK_ITER);
	CHECK(cy.done == CYCLES, "10: meanwhile %d of %d connect/disconnect "
	      "cycles on another EP pair", cy.done, CYCLES);
	for (i = 0, ok = 1; i < NWORK; i++)
		ok &= link_end(&w[i].l) && own_link_free(&w[i].l);
	CHECK(ok, "10: disconnect and free the workers' EPs and EVDs");
	CHECK(dat_psp_free(psp) == DAT_SUCCESS && own_link_free(&cy.l) &&
	      dat_evd_free(cy.cr) == DAT_SUCCESS,
	      "10: free the cycler's PSP and EVDs");
	CHECK(async_empty(), "10: no async error on either IA");
}

int main(void)
{
	DAT_IA_ATTR attr;
	DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
	int child_fd;
	pid_t child;

	test_watchdog(120);
	child = start_progress_server(&child_fd);
	side_open(&S);
	side_open(&C);
	if (dat_ia_query(S.ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0,
			 NULL) != DAT_SUCCESS)
		BAIL("dat_ia_query");
	memcpy(&srv_addr, attr.ia_address_ptr, sizeof(struct sockaddr_in));
	CHECK_RET(dat_psp_create(S.ia, Q_MAIN, S.cr, DAT_PSP_CONSUMER_FLAG,
				 &psp), DAT_SUCCESS, "PSP on %d", Q_MAIN);
	test_progress(child, child_fd);
	test_async_evd();
	test_zero_rdma_iov();
	test_unsignalled();
	test_write_order();
	test_fence();
	test_disconnect_orders();
	test_reset_after_reject();
	test_big_qual();
	test_concurrency();
	CHECK_RET(dat_psp_free(psp), DAT_SUCCESS, "free the main PSP");
	test_close_ia(C.ia);
	test_close_ia(S.ia);
	free(C.buf);
	free(S.buf);
	return tap_done();
}
