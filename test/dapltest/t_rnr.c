/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A consumer that posts its receives late: the receiver-not-ready grace
 * (doc/semantics.md, "A Send before any receive").  An InfiniBand-era
 * consumer posts its receives when it sees ESTABLISHED, and its peer
 * sends at once: the first Sends find no receive posted.  Within the
 * grace (IWDAPL_RNR_MS, read at each connection) they wait for one, and
 * what the peer sent behind them -- more Sends, an RDMA Write -- waits
 * with them, in order; past it, the RFC's Terminate.  Checked:
 *   - receives posted after ESTABLISHED (to the EP, then to an SRQ):
 *     every Send arrives, in order, whole; the Write behind the first
 *     one is not placed before the receive comes, and is after; no
 *     Terminate, both EPs stay connected; the wait is counted;
 *   - grace 0: the Terminate at once, as RFC 5041 has it;
 *   - a consumer that never posts: the Terminate once the grace ran out
 *     (not before), both EPs broken, and freeing everything gives back
 *     every descriptor.
 * Over tcp here; test/dapltest_progs_udp.sh runs it over udp. */
#define TSIDE_BUF_SIZE (4u << 20)
#include "tside.h"

#include <dat2/dat_iw_extensions.h>

#include <dirent.h>
#include <time.h>

#define SENDS 24		/* queued behind the first one */
#define MSG_MAX 65536
#define SEND_OFF 0		/* the sender's messages */
#define WRITE_OFF (512u << 10)	/* the Write: source and target */
#define WRITE_LEN 4096
#define RECV_OFF (1u << 20)	/* the receiver's slots, MSG_MAX each */
#define LATE_MS 300		/* the receiver posts this late */
#define WAIT_US 5000000

static struct side S, C;	/* server (posts late), client (sends) */
static DAT_PSP_HANDLE psp;
static DAT_CONN_QUAL qual;

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

/* The size of message i: small and large ones, the first a small one. */
static size_t msg_len(int i)
{
	static const size_t sz[] = { 64, MSG_MAX, 8, 4096, 1, 30000 };

	return sz[i % 6];
}

/* S's EP (on srq when not NULL), connected to C's. */
static void connect_pair(DAT_SRQ_HANDLE srq, const char *tag)
{
	if (srq) {
		if (dat_ep_create_with_srq(S.ia, S.pz, S.rcv, S.req, S.conn,
					   srq, NULL, &S.ep) != DAT_SUCCESS)
			BAIL("%s: dat_ep_create_with_srq", tag);
	} else {
		S.ep = side_ep(&S);
	}
	C.ep = side_ep(&C);
	side_connect(&S, &C, qual, tag);
}

static void free_pair(void)
{
	DAT_EVENT ev;

	dat_ep_disconnect(C.ep, DAT_CLOSE_ABRUPT_FLAG);
	dat_ep_disconnect(S.ep, DAT_CLOSE_ABRUPT_FLAG);
	/* Drain what the end left (flushed DTOs, the end events). */
	while (dat_evd_dequeue(S.rcv, &ev) == DAT_SUCCESS ||
	       dat_evd_dequeue(S.req, &ev) == DAT_SUCCESS ||
	       dat_evd_dequeue(C.rcv, &ev) == DAT_SUCCESS ||
	       dat_evd_dequeue(C.req, &ev) == DAT_SUCCESS ||
	       dat_evd_dequeue(S.conn, &ev) == DAT_SUCCESS ||
	       dat_evd_dequeue(C.conn, &ev) == DAT_SUCCESS)
		;
	dat_ep_free(C.ep);
	dat_ep_free(S.ep);
	C.ep = S.ep = DAT_HANDLE_NULL;
}

/* C, at once: a 64 B Send, a Write behind it, then SENDS more Sends. */
static int client_sends(void)
{
	DAT_LMR_TRIPLET l = side_lseg(&C, WRITE_OFF, WRITE_LEN);
	DAT_RMR_TRIPLET r = side_rseg(&S, WRITE_OFF, WRITE_LEN);
	int ok = 1;

	side_fill(C.buf + WRITE_OFF, WRITE_LEN, 99);
	ok &= side_send(&C, SEND_OFF, msg_len(0), 0) == DAT_SUCCESS;
	ok &= dat_ep_post_rdma_write(C.ep, 1, &l, side_ck(1000), &r,
				     DAT_COMPLETION_DEFAULT_FLAG) ==
	      DAT_SUCCESS;
	for (int i = 1; i <= SENDS; i++)
		ok &= side_send(&C, SEND_OFF, msg_len(i), (uint64_t)i) ==
		      DAT_SUCCESS;
	return ok;
}

/* S's receives, one slot each (to the SRQ when not NULL). */
static int post_receives(DAT_SRQ_HANDLE srq)
{
	int ok = 1;

	for (int i = 0; i <= SENDS; i++) {
		DAT_LMR_TRIPLET t = side_lseg(&S, RECV_OFF + (size_t)i * MSG_MAX,
					      MSG_MAX);

		ok &= (srq ? dat_srq_post_recv(srq, 1, &t, side_ck(
					       (uint64_t)i)) :
			     dat_ep_post_recv(S.ep, 1, &t, side_ck((uint64_t)i),
					      DAT_COMPLETION_DEFAULT_FLAG)) ==
		      DAT_SUCCESS;
	}
	return ok;
}

/* S's receive completions: all, in order, whole. */
static int receives_in_order(void)
{
	for (int i = 0; i <= SENDS; i++) {
		DAT_EVENT ev = side_wait(S.rcv, WAIT_US);
		const DAT_DTO_COMPLETION_EVENT_DATA *d =
			&ev.event_data.dto_completion_event_data;

		if (ev.event_number != DAT_DTO_COMPLETION_EVENT ||
		    d->status != DAT_DTO_SUCCESS ||
		    d->user_cookie.as_64 != (uint64_t)i ||
		    d->transfered_length != msg_len(i)) {
			printf("#   receive %d: event 0x%x status %d cookie %llu "
			       "length %llu\n", i, (unsigned)ev.event_number,
			       (int)d->status,
			       (unsigned long long)d->user_cookie.as_64,
			       (unsigned long long)d->transfered_length);
			return 0;
		}
	}
	return 1;
}

static uint64_t rnr_waits(DAT_EP_HANDLE ep)
{
	DAT_IW_STATS st;

	memset(&st, 0, sizeof(st));
	if (dat_iw_ep_stats_query(ep, &st) != DAT_SUCCESS)
		return 0;
	return st.rnr_waits;
}

static int write_landed(void)
{
	return side_same(S.buf + WRITE_OFF, WRITE_LEN, 99);
}

/* Receives posted LATE_MS after ESTABLISHED, the client sending at once. */
static void test_late(int use_srq)
{
	const char *tag = use_srq ? "late SRQ" : "late receives";
	DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
	DAT_SRQ_ATTR sa = { .max_recv_dtos = SENDS + 1, .max_recv_iov = 1 };
	int sent, held, ok = 1;

	unsetenv("IWDAPL_RNR_MS");	/* the default grace */
	if (use_srq && dat_srq_create(S.ia, S.pz, &sa, &srq) != DAT_SUCCESS)
		BAIL("dat_srq_create");
	memset(S.buf, 0, TSIDE_BUF_SIZE);
	side_fill(C.buf + SEND_OFF, MSG_MAX, 7);
	connect_pair(srq, tag);
	sent = client_sends();
	usleep(LATE_MS * 1000);
	held = !write_landed() &&
	       side_wait(S.rcv, 0).event_number == 0;
	ok = post_receives(srq);
	CHECK(sent && ok, "%s: %d Sends and a Write posted at once, the "
	      "receives %d ms later", tag, SENDS + 1, LATE_MS);
	CHECK(held, "%s: before the receives, nothing of the Sends nor the "
	      "Write behind the first one was delivered", tag);
	CHECK(receives_in_order(), "%s: every Send arrived, in order, with "
	      "its length", tag);
	for (int i = 0; i <= SENDS && ok; i++)
		ok = side_same(S.buf + RECV_OFF + (size_t)i * MSG_MAX,
			       msg_len(i), 7);
	CHECK(ok && write_landed(), "%s: their data whole, and the Write "
	      "placed after the first Send", tag);
	ok = side_dto_ok(C.req, 0, msg_len(0)) &&
	     side_dto_ok(C.req, 1000, WRITE_LEN);
	for (int i = 1; i <= SENDS && ok; i++)
		ok = side_dto_ok(C.req, (uint64_t)i, msg_len(i));
	CHECK(ok, "%s: the client's Sends and Write completed, in order", tag);
	CHECK(side_ep_state(S.ep) == DAT_EP_STATE_CONNECTED &&
	      side_ep_state(C.ep) == DAT_EP_STATE_CONNECTED &&
	      side_wait(S.conn, 0).event_number == 0 &&
	      side_wait(C.conn, 0).event_number == 0,
	      "%s: no Terminate, both EPs still connected", tag);
	CHECK(rnr_waits(S.ep) >= 1, "%s: the wait is counted (rnr_waits %llu)",
	      tag, (unsigned long long)rnr_waits(S.ep));
	free_pair();
	if (srq)
		dat_srq_free(srq);
}

/* A Send that never finds a receive: the Terminate, after grace_ms. */
static void test_terminate(int grace_ms)
{
	char v[16], tag[48];
	DAT_EVENT es, ec;
	long t0, dt;
	int fds0 = fds_open();

	if (grace_ms)
		snprintf(tag, sizeof(tag), "never posted (grace %d ms)",
			 grace_ms);
	else
		snprintf(tag, sizeof(tag), "grace 0");
	snprintf(v, sizeof(v), "%d", grace_ms);
	setenv("IWDAPL_RNR_MS", v, 1);
	connect_pair(DAT_HANDLE_NULL, tag);
	t0 = mono_ms();
	CHECK(side_send(&C, SEND_OFF, 64, 1) == DAT_SUCCESS,
	      "%s: the client sends", tag);
	es = side_wait(S.conn, WAIT_US);
	dt = mono_ms() - t0;
	ec = side_wait(C.conn, WAIT_US);
	CHECK(es.event_number == DAT_CONNECTION_EVENT_BROKEN &&
	      ec.event_number == DAT_CONNECTION_EVENT_BROKEN,
	      "%s: the RFC's Terminate: both EPs broken (0x%x, 0x%x)", tag,
	      (unsigned)es.event_number, (unsigned)ec.event_number);
	if (grace_ms)
		CHECK(dt >= grace_ms * 8 / 10 && dt < grace_ms + 4000,
		      "%s: once the grace ran out (%ld ms)", tag, dt);
	free_pair();
	/* The progress thread closes a freed EP's socket just after. */
	for (int i = 0; i < 200 && fds_open() > fds0; i++)
		usleep(10000);
	CHECK(fds_open() <= fds0, "%s: freed, no descriptor left (%d "
	      "before, %d after)", tag, fds0, fds_open());
	unsetenv("IWDAPL_RNR_MS");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	side_open(&S);
	side_open(&C);
	psp = side_psp(&S, &qual);
	test_late(0);
	test_late(1);
	test_terminate(0);
	test_terminate(700);
	dat_psp_free(psp);
	side_close(&C);
	side_close(&S);
	return tap_done();
}
