/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Counters (DAT_IW_STATS): a scripted exchange over iw-lo between IA A
 * (active) and IA B (passive) of this process, then exact counts through
 * the consumer query (dat_iw_ia_stats_query / dat_iw_ep_stats_query),
 * through `iwinfo --stats <pid>` run against this live process, and in
 * the dump IWDAPL_STATS=1 asks for at dat_ia_close.
 *
 * The script: 3 Sends of 100 bytes, 2 RDMA Writes of 4096, 1 RDMA Read
 * of 512 (A -> B), one connection B rejects, one connect to a port with
 * no listener; then an RDMA Write with a bad STag (B sends a Terminate,
 * DDP tagged buffer error / invalid STag, code 0x1100, A receives it).
 * A child run over UDP with the TRP test aid dropping packets counts
 * retransmissions. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TSIDE_BUF_SIZE (1u << 20)
#include "tcommon.h"
#include "tside.h"
#include <dat2/dat_iw_extensions.h>

#ifndef IWINFO_PATH
#define IWINFO_PATH "examples/iwinfo"
#endif

#define WAIT_US 5000000
#define SEND_LEN 100
#define WRITE_LEN 4096
#define READ_LEN 512
#define READ_REQ_BYTES 0	/* a Read Request carries no payload */
#define TERM_BAD_STAG 0x1100	/* DDP, tagged buffer, invalid STag */
#define OUT_MAX (256 * 1024)

static struct side A, B;
static DAT_EP_HANDLE ep_rej, ep_none;

/* --------------------------------------------------------- helpers */

static DAT_IW_STATS ep_stats(DAT_EP_HANDLE ep)
{
	DAT_IW_STATS s;

	memset(&s, 0xff, sizeof(s));
	if (dat_iw_ep_stats_query(ep, &s) != DAT_SUCCESS)
		memset(&s, 0xff, sizeof(s));
	return s;
}

static DAT_IW_STATS ia_stats(DAT_IA_HANDLE ia)
{
	DAT_IW_STATS s;

	memset(&s, 0xff, sizeof(s));
	if (dat_iw_ia_stats_query(ia, &s) != DAT_SUCCESS)
		memset(&s, 0xff, sizeof(s));
	return s;
}

#define CHECK_EQ(got, want, what)                                        \
	do {                                                             \
		unsigned long long g_ = (got), w_ = (want);              \
		CHECK(g_ == w_, "%s = %llu", what, w_);                  \
		if (g_ != w_)                                            \
			printf("#   got %llu\n", g_);                    \
	} while (0)

static DAT_CR_HANDLE wait_cr(void)
{
	DAT_EVENT ev = side_wait(B.cr, WAIT_US);

	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
		return DAT_HANDLE_NULL;
	return ev.event_data.cr_arrival_event_data.cr_handle;
}

static DAT_RETURN connect_to(DAT_EP_HANDLE ep, DAT_CONN_QUAL q)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&a, q, WAIT_US, 0, NULL,
			      DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
}

/* A TCP port of 127.0.0.1 that nobody listens on (just freed). */
static DAT_CONN_QUAL unused_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		BAIL("no free port");
	close(fd);
	return ntohs(a.sin_port);
}

/* n DTO completions, all successful, on evd. */
static int dtos_ok(DAT_EVD_HANDLE evd, int n)
{
	for (int i = 0; i < n; i++) {
		DAT_EVENT ev = side_wait(evd, WAIT_US);

		if (ev.event_number != DAT_DTO_COMPLETION_EVENT ||
		    ev.event_data.dto_completion_event_data.status !=
			    DAT_DTO_SUCCESS)
			return 0;
	}
	return 1;
}

/* ------------------------------------------------------- the script */

static void connect_pair(DAT_CONN_QUAL q)
{
	DAT_CR_HANDLE cr;

	A.ep = side_ep(&A);
	B.ep = side_ep(&B);
	CHECK(connect_to(A.ep, q) == DAT_SUCCESS, "A connects");
	cr = wait_cr();
	CHECK(cr && dat_cr_accept(cr, B.ep, 0, NULL) == DAT_SUCCESS,
	      "B accepts");
	CHECK(side_wait(A.conn, WAIT_US).event_number ==
		      DAT_CONNECTION_EVENT_ESTABLISHED &&
	      side_wait(B.conn, WAIT_US).event_number ==
		      DAT_CONNECTION_EVENT_ESTABLISHED,
	      "both sides ESTABLISHED");
}

static void transfers(void)
{
	int ok = 1;

	for (int i = 0; i < 3; i++)
		ok &= side_recv(&B, (size_t)i * SEND_LEN, SEND_LEN, 10 + i) ==
		      DAT_SUCCESS;
	for (int i = 0; i < 3; i++)
		ok &= side_send(&A, (size_t)i * SEND_LEN, SEND_LEN, 20 + i) ==
		      DAT_SUCCESS;
	CHECK(ok && dtos_ok(A.req, 3) && dtos_ok(B.rcv, 3),
	      "3 Sends of %d bytes complete", SEND_LEN);
	ok = 1;
	for (int i = 0; i < 2; i++) {
		DAT_LMR_TRIPLET l = side_lseg(&A, 0x10000, WRITE_LEN);
		DAT_RMR_TRIPLET r = side_rseg(&B, 0x20000 + (size_t)i *
						      WRITE_LEN, WRITE_LEN);

		ok &= dat_ep_post_rdma_write(A.ep, 1, &l, side_ck(30 + i), &r,
					     DAT_COMPLETION_DEFAULT_FLAG) ==
		      DAT_SUCCESS;
	}
	CHECK(ok && dtos_ok(A.req, 2), "2 RDMA Writes of %d bytes complete",
	      WRITE_LEN);
	{
		DAT_LMR_TRIPLET l = side_lseg(&A, 0x40000, READ_LEN);
		DAT_RMR_TRIPLET r = side_rseg(&B, 0x30000, READ_LEN);

		CHECK(dat_ep_post_rdma_read(A.ep, 1, &l, side_ck(40), &r,
					    DAT_COMPLETION_DEFAULT_FLAG) ==
			      DAT_SUCCESS && dtos_ok(A.req, 1),
		      "1 RDMA Read of %d bytes completes", READ_LEN);
	}
}

static void rejected_and_refused(DAT_CONN_QUAL q)
{
	DAT_CR_HANDLE cr;
	DAT_EVENT ev;

	ep_rej = side_ep(&A);
	CHECK(connect_to(ep_rej, q) == DAT_SUCCESS, "A connects again");
	cr = wait_cr();
	CHECK(cr && dat_cr_reject(cr, 0, NULL) == DAT_SUCCESS, "B rejects");
	CHECK(side_wait(A.conn, WAIT_US).event_number ==
		      DAT_CONNECTION_EVENT_PEER_REJECTED,
	      "A sees PEER_REJECTED");
	ep_none = side_ep(&A);
	CHECK(connect_to(ep_none, unused_port()) == DAT_SUCCESS,
	      "A connects to a port with no listener");
	ev = side_wait(A.conn, WAIT_US);
	CHECK(ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
	      ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE,
	      "... which fails (0x%x)", ev.event_number);
}

/* ------------------------------------------------- exact counts */

/* s->field == want, named after who (in scope: s, who, what[]). */
#define EQ(field, want)                                                  \
	do {                                                             \
		snprintf(what, sizeof(what), "%s %s", who, #field);      \
		CHECK_EQ(s->field, want, what);                          \
	} while (0)

static void check_active(const DAT_IW_STATS *s, const char *who)
{
	char what[96];

	EQ(tx_msgs[DAT_IW_STATS_SEND], 3);
	EQ(tx_bytes[DAT_IW_STATS_SEND], 3 * SEND_LEN);
	EQ(tx_msgs[DAT_IW_STATS_RDMA_WRITE], 2);
	EQ(tx_bytes[DAT_IW_STATS_RDMA_WRITE], 2 * WRITE_LEN);
	EQ(tx_msgs[DAT_IW_STATS_RDMA_READ_REQ], 1);
	EQ(tx_bytes[DAT_IW_STATS_RDMA_READ_REQ], READ_REQ_BYTES);
	EQ(rx_msgs[DAT_IW_STATS_RDMA_READ_RESP], 1);
	EQ(rx_bytes[DAT_IW_STATS_RDMA_READ_RESP], READ_LEN);
	EQ(rx_msgs[DAT_IW_STATS_SEND], 0);
	EQ(rx_msgs[DAT_IW_STATS_RDMA_WRITE], 0);
	EQ(tx_msgs[DAT_IW_STATS_RDMA_READ_RESP], 0);
	EQ(crc_errors, 0);
	EQ(queue_full, 0);
	EQ(term_sent, 0);
	EQ(term_rcvd, 0);
}

static void check_passive(const DAT_IW_STATS *s, const char *who)
{
	char what[96];

	EQ(rx_msgs[DAT_IW_STATS_SEND], 3);
	EQ(rx_bytes[DAT_IW_STATS_SEND], 3 * SEND_LEN);
	EQ(rx_msgs[DAT_IW_STATS_RDMA_WRITE], 2);
	EQ(rx_bytes[DAT_IW_STATS_RDMA_WRITE], 2 * WRITE_LEN);
	EQ(rx_msgs[DAT_IW_STATS_RDMA_READ_REQ], 1);
	EQ(rx_bytes[DAT_IW_STATS_RDMA_READ_REQ], READ_REQ_BYTES);
	EQ(tx_msgs[DAT_IW_STATS_RDMA_READ_RESP], 1);
	EQ(tx_bytes[DAT_IW_STATS_RDMA_READ_RESP], READ_LEN);
	EQ(tx_msgs[DAT_IW_STATS_SEND], 0);
	EQ(tx_msgs[DAT_IW_STATS_RDMA_WRITE], 0);
	EQ(term_sent, 0);
	EQ(term_rcvd, 0);
}

/* The connection counters of one object; -1: not checked. */
struct conn_want {
	const char *who;
	const DAT_IW_STATS *s;
	long long requested, opened, accepted, peer_rejected, failed;
	long long received, rejected, eps_open;
};

static void check_conn(const struct conn_want *w)
{
	const long long want[] = { w->requested, w->opened, w->accepted,
				   w->peer_rejected, w->failed, w->received,
				   w->rejected, w->eps_open };
	const DAT_UINT64 got[] = { w->s->conn_requested, w->s->conn_opened,
				   w->s->conn_accepted,
				   w->s->conn_peer_rejected, w->s->conn_failed,
				   w->s->conn_received, w->s->conn_rejected,
				   w->s->eps_open };
	static const char *const names[] = {
		"conn_requested", "conn_opened", "conn_accepted",
		"conn_peer_rejected", "conn_failed", "conn_received",
		"conn_rejected", "eps_open"
	};
	char what[96];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (want[i] < 0)
			continue;
		snprintf(what, sizeof(what), "%s %s", w->who, names[i]);
		CHECK_EQ(got[i], (unsigned long long)want[i], what);
	}
}

static void check_query(void)
{
	DAT_IW_STATS a = ep_stats(A.ep), b = ep_stats(B.ep);
	DAT_IW_STATS r = ep_stats(ep_rej), n = ep_stats(ep_none);
	DAT_IW_STATS ia = ia_stats(A.ia), ib = ia_stats(B.ia);
	const struct conn_want conns[] = {
		/* who, s, requested opened accepted peer_rejected failed
		 * received rejected eps_open */
		{ "EP A", &a, 1, 1, 0, 0, 0, 0, 0, -1 },
		{ "EP B", &b, 0, 0, 1, 0, 0, 0, 0, -1 },
		{ "EP rejected", &r, 1, 0, 0, 1, 0, 0, 0, -1 },
		{ "EP no listener", &n, 1, 0, 0, 0, 1, 0, 0, -1 },
		{ "IA A", &ia, 3, 1, 0, 1, 1, 0, 0, 3 },
		{ "IA B", &ib, 0, 0, 1, 0, 0, 2, 1, 1 },
	};

	CHECK(a.version == DAT_IW_STATS_VERSION && a.size == sizeof(a),
	      "version and size filled");
	check_active(&a, "EP A");
	check_active(&ia, "IA A");
	check_passive(&b, "EP B");
	check_passive(&ib, "IA B");
	for (size_t i = 0; i < sizeof(conns) / sizeof(conns[0]); i++)
		check_conn(&conns[i]);
	CHECK_EQ(ia.eps_closed, 0, "IA A eps_closed");
}

static void check_query_errors(void)
{
	DAT_IW_STATS s;

	CHECK_CODE_TYPE(dat_iw_ia_stats_query(A.ia, NULL),
			DAT_INVALID_PARAMETER | DAT_INVALID_ARG2,
			"NULL stats: INVALID_PARAMETER");
	CHECK_CODE_TYPE(dat_iw_ep_stats_query(A.pz, &s), DAT_INVALID_HANDLE,
			"a PZ handle: INVALID_HANDLE");
}

/* An EP with room for 2 receives: the third post is refused and counted
 * as queue-full, in the EP and its IA. */
static void queue_full(void)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_EP_ATTR a;
	int posted = 0;

	memset(&a, 0, sizeof(a));
	a.service_type = DAT_SERVICE_TYPE_RC;
	a.qos = DAT_QOS_BEST_EFFORT;
	a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.max_recv_dtos = 2;
	a.max_request_dtos = 2;
	a.max_recv_iov = 1;
	a.max_request_iov = 1;
	a.srq_soft_hw = DAT_HW_DEFAULT;
	if (dat_ep_create(A.ia, A.pz, A.rcv, A.req, A.conn, &a, &ep) !=
	    DAT_SUCCESS)
		BAIL("dat_ep_create (2 deep)");
	for (int i = 0; i < 3; i++) {
		DAT_LMR_TRIPLET l = side_lseg(&A, 0x50000, 64);

		posted += dat_ep_post_recv(ep, 1, &l, side_ck(60 + i),
					   DAT_COMPLETION_DEFAULT_FLAG) ==
			  DAT_SUCCESS;
	}
	CHECK(posted == 2, "2 of 3 receives posted on a 2-deep EP");
	CHECK_EQ(ep_stats(ep).queue_full, 1, "EP queue_full");
	CHECK_EQ(ia_stats(A.ia).queue_full, 1, "IA A queue_full");
	CHECK(dat_ep_free(ep) == DAT_SUCCESS, "the EP is freed");
	CHECK_EQ(ia_stats(A.ia).queue_full, 1,
		 "IA A keeps the count of a freed EP");
	CHECK_EQ(ia_stats(A.ia).eps_closed, 1, "IA A: 1 EP closed");
}

/* --------------------------------------------- iwinfo --stats PID */

/* The output of a command, in a static buffer ("" on failure). */
static const char *run(const char *cmd)
{
	static char out[OUT_MAX];
	size_t n = 0, r;
	FILE *p = popen(cmd, "r");

	out[0] = '\0';
	if (!p)
		return out;
	while (n < sizeof(out) - 1 &&
	       (r = fread(out + n, 1, sizeof(out) - 1 - n, p)) > 0)
		n += r;
	out[n] = '\0';
	if (pclose(p) != 0)
		out[0] = '\0';
	return out;
}

/* The value of "  key N" in the section whose header line starts with
 * head; -1 when absent. */
static long long value_in(const char *text, const char *head,
			  const char *key)
{
	const char *s = text;
	size_t hl = strlen(head), kl = strlen(key);

	while (s && *s && strncmp(s, head, hl) != 0) {
		s = strchr(s, '\n');
		s = s ? s + 1 : NULL;
	}
	while (s && *s) {
		s = strchr(s, '\n');
		if (!s || strncmp(++s, "  ", 2) != 0)
			return -1;	/* the section ended */
		if (!strncmp(s + 2, key, kl) && s[2 + kl] == ' ')
			return atoll(s + 3 + kl);
	}
	return -1;
}

static void check_text_ep(const char *out, const char *head,
			  const DAT_IW_STATS *s, const char *who)
{
	static const char *const ops[] = { "send", "rdma_write",
					   "rdma_read_req", "rdma_read_resp" };
	char key[64], what[128];

	for (int op = 0; op < DAT_IW_STATS_OPS; op++) {
		snprintf(key, sizeof(key), "tx_msgs.%s", ops[op]);
		snprintf(what, sizeof(what), "%s %s", who, key);
		CHECK_EQ(value_in(out, head, key), s->tx_msgs[op], what);
		snprintf(key, sizeof(key), "rx_bytes.%s", ops[op]);
		snprintf(what, sizeof(what), "%s %s", who, key);
		CHECK_EQ(value_in(out, head, key), s->rx_bytes[op], what);
	}
	snprintf(what, sizeof(what), "%s conn_opened", who);
	CHECK_EQ(value_in(out, head, "conn_opened"), s->conn_opened, what);
	snprintf(what, sizeof(what), "%s conn_accepted", who);
	CHECK_EQ(value_in(out, head, "conn_accepted"), s->conn_accepted,
		 what);
}

static void check_iwinfo(void)
{
	char cmd[512], head[64];
	const char *out;
	DAT_IW_STATS a = ep_stats(A.ep), b = ep_stats(B.ep);

	snprintf(cmd, sizeof(cmd), "%s --stats", IWINFO_PATH);
	snprintf(head, sizeof(head), "  %ld ", (long)getpid());
	out = run(cmd);
	CHECK(strstr(out, head) != NULL, "iwinfo --stats lists this process");
	snprintf(cmd, sizeof(cmd), "%s --stats %ld", IWINFO_PATH,
		 (long)getpid());
	out = run(cmd);
	CHECK(strstr(out, "iwdapl-stats 1 pid") != NULL,
	      "iwinfo --stats PID prints our counters");
	snprintf(head, sizeof(head), "ep %p ", (void *)A.ep);
	check_text_ep(out, head, &a, "iwinfo EP A");
	CHECK_EQ(value_in(out, head, "tx_msgs.send"), 3, "iwinfo EP A Sends");
	snprintf(head, sizeof(head), "ep %p ", (void *)B.ep);
	check_text_ep(out, head, &b, "iwinfo EP B");
	CHECK_EQ(value_in(out, head, "rx_bytes.rdma_write"), 2 * WRITE_LEN,
		 "iwinfo EP B Write bytes");
	snprintf(head, sizeof(head), "ep %p ", (void *)ep_rej);
	CHECK_EQ(value_in(out, head, "conn_peer_rejected"), 1,
		 "iwinfo: the rejected EP");
	snprintf(head, sizeof(head), "ep %p ", (void *)ep_none);
	CHECK_EQ(value_in(out, head, "conn_failed"), 1,
		 "iwinfo: the EP with no listener");
	CHECK(run(IWINFO_PATH " --stats 999999999")[0] == '\0',
	      "iwinfo --stats of a pid without counters fails");
}

/* ------------------------------------------------------- Terminate */

static void terminate(void)
{
	DAT_LMR_TRIPLET l = side_lseg(&A, 0x10000, 64);
	DAT_RMR_TRIPLET r = side_rseg(&B, 0x20000, 64);
	DAT_IW_STATS a, b;
	char cmd[512], head[64];

	r.rmr_context ^= 0x7fff00;	/* an STag B never issued */
	CHECK(dat_ep_post_rdma_write(A.ep, 1, &l, side_ck(50), &r,
				     DAT_COMPLETION_DEFAULT_FLAG) ==
		      DAT_SUCCESS,
	      "A posts an RDMA Write with a bad STag");
	if (test_ia_is_udp(A.ia)) {
		/* TRP: a bad STag's Terminate is non-fatal (doc/trp.md). */
		DAT_EVENT ev = side_wait(A.req, WAIT_US);

		CHECK(ev.event_number == DAT_DTO_COMPLETION_EVENT &&
		      ev.event_data.dto_completion_event_data.status ==
			      DAT_DTO_ERR_REMOTE_ACCESS,
		      "A's Write fails with a remote access error (udp)");
		CHECK(side_wait(B.conn, 200000).event_number == 0 &&
		      side_wait(A.conn, 0).event_number == 0,
		      "both connections go on (udp)");
	} else {
		CHECK(side_wait(B.conn, WAIT_US).event_number ==
			      DAT_CONNECTION_EVENT_BROKEN &&
		      side_wait(A.conn, WAIT_US).event_number ==
			      DAT_CONNECTION_EVENT_BROKEN,
		      "both connections break");
	}
	a = ep_stats(A.ep);
	b = ep_stats(B.ep);
	CHECK_EQ(b.term_sent, 1, "B sent 1 Terminate");
	CHECK_EQ(b.term_sent_code[0].code, TERM_BAD_STAG, "... code 0x1100");
	CHECK_EQ(b.term_sent_code[0].count, 1, "... counted once");
	CHECK_EQ(b.term_sent_code[1].count, 0, "... and no other code");
	CHECK_EQ(a.term_rcvd, 1, "A received 1 Terminate");
	CHECK_EQ(a.term_rcvd_code[0].code, TERM_BAD_STAG, "... code 0x1100");
	CHECK_EQ(a.term_rcvd_code[0].count, 1, "... counted once");
	CHECK_EQ(a.term_sent, 0, "A sent none");
	CHECK_EQ(ia_stats(B.ia).term_sent_code[0].count, 1,
		 "IA B counts it by code");
	snprintf(cmd, sizeof(cmd), "%s --stats %ld", IWINFO_PATH,
		 (long)getpid());
	snprintf(head, sizeof(head), "ep %p ", (void *)B.ep);
	CHECK_EQ(value_in(run(cmd), head, "term_sent.0x1100"), 1,
		 "iwinfo shows term_sent.0x1100 1 for B");
}

/* --------------------------------------------- dump at dat_ia_close */

static void dump_at_close(void)
{
	DAT_IW_STATS s = ia_stats(A.ia);
	char path[] = "/tmp/t_stats_XXXXXX", head[32];
	static char text[OUT_MAX];
	int fd = mkstemp(path), saved = dup(2);
	ssize_t n;

	if (fd < 0 || saved < 0)
		BAIL("mkstemp/dup");
	setenv("IWDAPL_STATS", "1", 1);
	fflush(stderr);
	dup2(fd, 2);
	side_close(&A);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	unsetenv("IWDAPL_STATS");
	n = pread(fd, text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	CHECK(strstr(text, "iwdapl: counters at dat_ia_close") != NULL,
	      "IWDAPL_STATS=1 dumps at dat_ia_close");
	snprintf(head, sizeof(head), "ia ");
	CHECK_EQ(value_in(text, head, "eps_closed"), 4,
		 "dump: 4 EPs closed");
	CHECK_EQ(value_in(text, head, "eps_open"), 0, "dump: none open");
	CHECK_EQ(value_in(text, head, "tx_msgs.send"),
		 s.tx_msgs[DAT_IW_STATS_SEND], "dump: Sends");
	CHECK_EQ(value_in(text, head, "tx_bytes.rdma_write"),
		 s.tx_bytes[DAT_IW_STATS_RDMA_WRITE], "dump: Write bytes");
	CHECK_EQ(value_in(text, head, "conn_peer_rejected"), 1,
		 "dump: 1 rejected");
	CHECK_EQ(value_in(text, head, "conn_failed"), 1, "dump: 1 failed");
	CHECK_EQ(value_in(text, head, "queue_full"), 1, "dump: 1 queue-full");
	CHECK_EQ(value_in(text, head, "term_rcvd.0x1100"), 1,
		 "dump: the Terminate by code");
}

/* ------------------------------------------------- named attributes */

static void check_named_attrs(void)
{
	DAT_PROVIDER_ATTR p;
	DAT_IA_ATTR ia;
	char sock[64];
	int crc = 0, stats = 0;

	snprintf(sock, sizeof(sock), "@iwdapl-stats-%ld", (long)getpid());
	if (dat_ia_query(A.ia, NULL, 0, &ia, DAT_PROVIDER_FIELD_ALL, &p) !=
	    DAT_SUCCESS)
		BAIL("dat_ia_query");
	for (int i = 0; i < p.num_provider_specific_attr; i++) {
		const DAT_NAMED_ATTR *a = &p.provider_specific_attr[i];

		if (!strcmp(a->name, "IWDAPL_CRC32C"))
			/* e.g. "isa-l (sse4.2 below 256 bytes)" */
			crc = !strncmp(a->value, "isa-l", 5) ||
			      !strncmp(a->value, "sse4.2", 6) ||
			      !strncmp(a->value, "table", 5);
		if (!strcmp(a->name, DAT_IW_ATTR_STATS))
			stats = !strcmp(a->value, sock);
	}
	CHECK(crc, "IWDAPL_CRC32C names the CRC implementation");
	CHECK(stats, DAT_IW_ATTR_STATS " names the stats socket");
}

/* ------------------------------------ retransmissions over TRP (UDP) */

/* In a child with DAT_OVERRIDE naming a lossy UDP IA: 0 when a transfer
 * counted retransmissions, consistently in the EP and the IA. */
static int lossy_role(void)
{
	DAT_PSP_HANDLE psp;
	DAT_CONN_QUAL q = 0;
	DAT_IW_STATS e, i;
	int ok;

	side_open(&A);
	side_open(&B);
	if (dat_psp_create_any(B.ia, &q, B.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS)
		return 2;
	connect_pair(q);
	ok = 1;
	for (int k = 0; k < 16 && ok; k++) {
		DAT_LMR_TRIPLET l = side_lseg(&A, 0, 1 << 16);
		DAT_RMR_TRIPLET r = side_rseg(&B, 0, 1 << 16);

		ok = dat_ep_post_rdma_write(A.ep, 1, &l, side_ck(k), &r,
					    DAT_COMPLETION_DEFAULT_FLAG) ==
			     DAT_SUCCESS && dtos_ok(A.req, 1);
	}
	e = ep_stats(A.ep);
	i = ia_stats(A.ia);
	printf("# lossy: %d writes ok, retransmits ep %llu ia %llu\n", ok,
	       (unsigned long long)e.retransmits,
	       (unsigned long long)i.retransmits);
	side_close(&A);
	side_close(&B);
	return ok && e.retransmits > 0 && e.retransmits == i.retransmits &&
			       e.tx_msgs[DAT_IW_STATS_RDMA_WRITE] == 16
		       ? 0 : 1;
}

static void check_retransmits(const char *self)
{
	char conf[] = "/tmp/t_stats_conf_XXXXXX", lib[4096];
	const char *over = getenv("DAT_OVERRIDE");
	FILE *in = over ? fopen(over, "r") : NULL;
	char line[4096];
	int fd = mkstemp(conf), st = -1;
	pid_t pid;

	lib[0] = '\0';
	/* The library of the current dat.conf's iw-lo line. */
	while (in && fgets(line, sizeof(line), in))
		if (!strncmp(line, "iw-lo ", 6))
			sscanf(line, "%*s %*s %*s %*s %4095s", lib);
	if (in)
		fclose(in);
	if (fd < 0 || !lib[0]) {
		printf("ok %d - retransmissions over TRP # SKIP no iw-lo line\n",
		       ++tap_count);
		return;
	}
	dprintf(fd, "iw-lossy u2.0 nonthreadsafe default %s dapl.2.0 "
		"\"lo udp trp_test=drop:5,seed:3\" \"\"\n", lib);
	close(fd);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(2, 1);	/* its checks are not this program's TAP */
		setenv("DAT_OVERRIDE", conf, 1);
		setenv("IW_TEST_IA", "iw-lossy", 1);
		execl(self, self, "lossy", (char *)NULL);
		_exit(3);
	}
	if (pid > 0)
		waitpid(pid, &st, 0);
	unlink(conf);
	CHECK(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "TRP with 5%% loss counts retransmissions (EP == IA)");
}

int main(int argc, char **argv)
{
	DAT_PSP_HANDLE psp;
	DAT_CONN_QUAL q = 0;

	test_watchdog(120);
	if (argc > 1 && !strcmp(argv[1], "lossy"))
		return lossy_role();
	side_open(&A);
	side_open(&B);
	if (dat_psp_create_any(B.ia, &q, B.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS)
		BAIL("dat_psp_create_any");
	connect_pair(q);
	transfers();
	rejected_and_refused(q);
	check_query();
	check_query_errors();
	queue_full();
	check_named_attrs();
	check_iwinfo();
	terminate();
	dump_at_close();
	side_close(&B);
	check_retransmits(argv[0]);
	return tap_done();
}
