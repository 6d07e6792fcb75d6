/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Two QPs joined by TRP over a connected pair of UDP sockets on
 * 127.0.0.1 (a udp device on lo), driven by the progress calls of this
 * thread and TRP's retransmission timer on the device's progress thread.
 *
 *  - Send, Write and Read of 1 byte .. 16 MiB, data checked, with the
 *    test aid dropping 0, 1 and 10 % of the packets, and reordering and
 *    duplicating them: every message arrives once, intact, in order,
 *    and every WR completes once with success;
 *  - a path MTU of 1500 (datagrams never larger), also with 10 % loss
 *    over a full window: every hole told in the acks, RTT samples from
 *    selective acks;
 *  - PSNs that wrap past 2^32 during the transfers;
 *  - non-fatal Terminates: a Write and a Read with a bad STag fail with
 *    IBV_WC_REM_ACCESS_ERR and the connection goes on (later Writes,
 *    Reads and Sends succeed); a Write failed early by the marker whose
 *    source is unmapped at once still reaches the peer intact (its
 *    packets go again from the ring, not from the consumer's memory);
 *  - fatal Terminates: a Send with no receive posted fails both QPs; a
 *    packet with R set draws a Terminate whose quiet time is set, and
 *    nothing after it;
 *  - the peer's F ends the stream (ENOTCONN), and a peer that stops
 *    answering ends it with ETIMEDOUT after the retransmission limit;
 *  - completions at the ack, and delayed acks (an answered Send sends
 *    no pure ack). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "iw_trp.h"
#include "tap.h"

#define BUF (16u << 20)
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		IBV_ACCESS_REMOTE_READ)

struct side {
	struct iwe_pd *pd;
	struct iwe_cq *scq, *rcq;
	struct iwe_qp *qp;
	int fd;
	char *buf;
	struct iwe_mr *mr;
};

struct pair {
	struct side a, b;
};

static struct iwe_device *dev;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int udp_bound(struct sockaddr_in *a)
{
	socklen_t l = sizeof(*a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof(*a)) ||
	    getsockname(fd, (struct sockaddr *)a, &l))
		BAIL("udp socket: %s", strerror(errno));
	return fd;
}

static void udp_pair(int *x, int *y)
{
	struct sockaddr_in ax, ay;

	*x = udp_bound(&ax);
	*y = udp_bound(&ay);
	if (connect(*x, (struct sockaddr *)&ay, sizeof(ay)) ||
	    connect(*y, (struct sockaddr *)&ax, sizeof(ax)))
		BAIL("udp connect: %s", strerror(errno));
}

static void side_init(struct side *s)
{
	struct iwe_qp_init_attr at = { 0 };

	s->pd = iwe_alloc_pd(dev);
	s->scq = iwe_create_cq(dev, 1024, NULL, NULL);
	s->rcq = iwe_create_cq(dev, 1024, NULL, NULL);
	at.send_cq = s->scq;
	at.recv_cq = s->rcq;
	at.cap = (struct iwe_qp_cap){ .max_send_wr = 256, .max_recv_wr = 256,
				      .max_send_sge = 2, .max_recv_sge = 2 };
	at.sq_sig_all = 1;
	s->qp = iwe_create_qp(s->pd, &at);
	s->buf = calloc(1, BUF);
	s->mr = s->buf ? iwe_reg_mr(s->pd, s->buf, BUF, ACCESS) : NULL;
	if (!s->pd || !s->scq || !s->rcq || !s->qp || !s->mr)
		BAIL("side setup: %s", strerror(errno));
}

/* Attach both QPs; a's first PSN is psn_a, b's psn_b. */
static void pair_open(struct pair *p, uint32_t psn_a, uint32_t psn_b)
{
	struct iwe_stream_params sp = { .ird = 16, .ord = 16, .mpa_rev = 2 };
	struct iwe_trp_start sa = { .tx_psn = psn_a, .rx_psn = psn_b,
				    .peer_credits = 8 };
	struct iwe_trp_start sb = { .tx_psn = psn_b, .rx_psn = psn_a,
				    .peer_credits = 8 };

	memset(p, 0, sizeof(*p));
	side_init(&p->a);
	side_init(&p->b);
	udp_pair(&p->a.fd, &p->b.fd);
	if (iwe_modify_qp(p->a.qp, IWE_QPS_INIT) ||
	    iwe_modify_qp(p->b.qp, IWE_QPS_INIT) ||
	    iwe_qp_attach_llp(p->a.qp, p->a.fd, &sp, NULL, &iwe_llp_trp, &sa) ||
	    iwe_qp_attach_llp(p->b.qp, p->b.fd, &sp, NULL, &iwe_llp_trp, &sb))
		BAIL("attach");
}

static void side_close(struct side *s)
{
	iwe_destroy_qp(s->qp);
	iwe_dereg_mr(s->mr);
	iwe_destroy_cq(s->scq);
	iwe_destroy_cq(s->rcq);
	iwe_dealloc_pd(s->pd);
	free(s->buf);
	if (s->fd >= 0)
		close(s->fd);
}

static void pair_close(struct pair *p)
{
	side_close(&p->a);
	side_close(&p->b);
}

/* ---------------------------------------------------------- driving */

static void step(struct pair *p)
{
	struct pollfd pf[2] = { { p->a.fd, POLLIN, 0 }, { p->b.fd, POLLIN, 0 } };

	iwe_qp_progress_rx(p->a.qp);
	iwe_qp_progress_rx(p->b.qp);
	/* Sleep briefly when nothing is readable (retransmissions come from
	 * the timer on the progress thread). */
	poll(pf, 2, 1);
}

/* Until both CQs hold at least na and nb completions, or 60 s. */
static int pump(struct pair *p, struct iwe_cq *ca, int na, struct iwe_cq *cb,
		int nb)
{
	double end = now_s() + 60;

	while (now_s() < end) {
		if (iwe_cq_count(ca) >= na && (!cb || iwe_cq_count(cb) >= nb))
			return 1;
		step(p);
	}
	return 0;
}

static int poll1(struct iwe_cq *cq, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	return iwe_poll_cq(cq, 1, wc) == 1;
}

static void fill(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(seed + i * 7 + (i >> 9));
}

static int post_recv1(struct side *s, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge sg = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return iwe_post_recv(s->qp, &wr, &bad);
}

static int post_send1(struct side *s, uint64_t id, enum ibv_wr_opcode op,
		      size_t off, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1,
				  .opcode = op };
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return iwe_post_send(s->qp, &wr, &bad);
}

/* The completion at the head of cq: 1 if it has this id and status. */
static int next_wc(struct iwe_cq *cq, uint64_t id, enum ibv_wc_status st,
		   uint32_t *len)
{
	struct ibv_wc wc;

	if (!poll1(cq, &wc))
		return 0;
	if (len)
		*len = wc.byte_len;
	return wc.wr_id == id && wc.status == st;
}

/* ------------------------------------------------------- transfers */

/* A Send of len bytes, a Write of len bytes, and a Read of len bytes
 * back, each checked; returns 1 if all three were right. */
static int three_ops(struct pair *p, uint32_t len, unsigned seed)
{
	char *a = p->a.buf, *b = p->b.buf;
	uint32_t got = 0;
	int ok = 1;

	fill(a, len, seed);
	memset(b, 0, len);
	ok &= post_recv1(&p->b, 1, 0, len) == 0;
	ok &= post_send1(&p->a, 2, IBV_WR_SEND, 0, len, 0, 0) == 0;
	ok &= pump(p, p->a.scq, 1, p->b.rcq, 1);
	ok &= next_wc(p->a.scq, 2, IBV_WC_SUCCESS, NULL);
	ok &= next_wc(p->b.rcq, 1, IBV_WC_SUCCESS, &got) && got == len;
	ok &= !memcmp(a, b, len);
	/* Write a's other pattern into b, then a Send behind it: once it
	 * is received, the Write is placed. */
	fill(a, len, seed + 1);
	ok &= post_recv1(&p->b, 3, BUF - 64, 64) == 0;
	ok &= post_send1(&p->a, 4, IBV_WR_RDMA_WRITE, 0, len,
			 (uintptr_t)b, p->b.mr->rkey) == 0;
	ok &= post_send1(&p->a, 5, IBV_WR_SEND, BUF - 64, 8, 0, 0) == 0;
	ok &= pump(p, p->a.scq, 2, p->b.rcq, 1);
	ok &= next_wc(p->a.scq, 4, IBV_WC_SUCCESS, NULL);
	ok &= next_wc(p->a.scq, 5, IBV_WC_SUCCESS, NULL);
	ok &= next_wc(p->b.rcq, 3, IBV_WC_SUCCESS, NULL);
	ok &= !memcmp(a, b, len);
	/* Read b's pattern back into a. */
	fill(b, len, seed + 2);
	memset(a, 0, len);
	ok &= post_send1(&p->a, 6, IBV_WR_RDMA_READ, 0, len, (uintptr_t)b,
			 p->b.mr->rkey) == 0;
	ok &= pump(p, p->a.scq, 1, NULL, 0);
	ok &= next_wc(p->a.scq, 6, IBV_WC_SUCCESS, NULL);
	ok &= !memcmp(a, b, len);
	return ok;
}

/* n small Sends from a to b back to back: each delivered once, intact
 * and in order; their completions taken. */
static int exchange(struct pair *p, int n)
{
	int ok = 1, i;
	uint32_t got = 0;

	memset(p->b.buf, 0, (size_t)n * 64);
	for (i = 0; i < n; i++)
		ok &= post_recv1(&p->b, 100 + (uint64_t)i, (size_t)i * 64, 64) == 0;
	for (i = 0; i < n; i++) {
		memset(p->a.buf + (size_t)i * 64, i + 1, 64);
		ok &= post_send1(&p->a, 500 + (uint64_t)i, IBV_WR_SEND,
				 (size_t)i * 64, 64, 0, 0) == 0;
	}
	if (!pump(p, p->a.scq, n, p->b.rcq, n)) {
		printf("#   burst: %d send and %d receive completions\n",
		       iwe_cq_count(p->a.scq), iwe_cq_count(p->b.rcq));
		ok = 0;
	}
	for (i = 0; i < n; i++) {
		int s = next_wc(p->a.scq, 500 + (uint64_t)i, IBV_WC_SUCCESS,
				NULL);
		int r = next_wc(p->b.rcq, 100 + (uint64_t)i, IBV_WC_SUCCESS,
				&got);
		int d = got == 64 && p->b.buf[(size_t)i * 64] == (char)(i + 1) &&
			p->b.buf[(size_t)i * 64 + 63] == (char)(i + 1);

		if (ok && !(s && r && d))
			printf("#   burst: message %d: send %d recv %d data %d\n",
			       i, s, r, d);
		ok &= s && r && d;
	}
	return ok;
}

/* Nothing twice: no completion left over after more progress (50 steps,
 * about 50 ms when nothing comes). */
static int settled(struct pair *p)
{
	for (int i = 0; i < 50; i++)
		step(p);
	return iwe_cq_count(p->a.scq) == 0 && iwe_cq_count(p->b.rcq) == 0;
}

/* exchange, then nothing left over. */
static int burst(struct pair *p, int n)
{
	int ok = exchange(p, n);

	return settled(p) && ok;
}

static void sweep(const char *what, const char *spec, uint32_t psn_a,
		  uint32_t psn_b, uint32_t max_len)
{
	static const uint32_t sizes[] = { 1, 1000, 65536, 1u << 20, 16u << 20 };
	struct iwe_trp_stats sa, sb;
	struct pair p;
	double t0 = now_s();

	if (iwe_device_set_trp_test(dev, spec))
		BAIL("spec %s", spec);
	pair_open(&p, psn_a, psn_b);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (sizes[i] > max_len)
			continue;
		CHECK(three_ops(&p, sizes[i], (unsigned)i * 3),
		      "%s: Send, Write, Read of %u bytes intact", what, sizes[i]);
	}
	CHECK(burst(&p, 200), "%s: 200 Sends once each, in order", what);
	iwe_trp_stats(p.a.qp, &sa);
	iwe_trp_stats(p.b.qp, &sb);
	printf("# %s: %.2f s\n", what, now_s() - t0);
	printf("# %s: a sent %llu retx %llu (fast %llu, rto %llu) dropped %llu "
	       "reordered %llu dup %llu; b dup rcvd %llu ooo %llu acks %llu\n",
	       what, (unsigned long long)sa.sent, (unsigned long long)sa.retx,
	       (unsigned long long)sa.fast_retx, (unsigned long long)sa.rto,
	       (unsigned long long)sa.hook_drop,
	       (unsigned long long)sa.hook_reorder,
	       (unsigned long long)sa.hook_dup,
	       (unsigned long long)sb.dup_rcvd,
	       (unsigned long long)sb.ooo_rcvd,
	       (unsigned long long)sb.acks_sent);
	if (strstr(spec, "drop:10"))
		CHECK(sa.hook_drop > 0 && sa.retx > 0,
		      "%s: packets were dropped and retransmitted", what);
	if (strstr(spec, "drop:10") && iwe_trp_pkt_max(dev) < 2000) {
		/* A 1024-packet window with about 100 holes: each ack tells
		 * them all (16 blocks, the old limit, told the lowest 160
		 * PSNs), and the newly sacked packets time the path -- no
		 * cumulative range is free of retransmissions, and without
		 * these samples the timer's backoff never ended (a 16 MiB
		 * transfer took 8 s here). */
		CHECK(sb.sack_blocks_max > 16,
		      "%s: an ack told more than 16 holes (%llu blocks)", what,
		      (unsigned long long)sb.sack_blocks_max);
		CHECK(sa.rtt_sacked > 0,
		      "%s: RTT samples from selective acks (%llu)", what,
		      (unsigned long long)sa.rtt_sacked);
	}
	if (strstr(spec, "dup:"))
		CHECK(sb.dup_rcvd > 0, "%s: duplicates arrived and were dropped",
		      what);
	if (!*spec && iwe_trp_pkt_max(dev) < 2000) {
		CHECK(sa.gso_sends > 0, "%s: datagrams left in UDP GSO sends "
		      "(%llu), each cut to the path MTU", what,
		      (unsigned long long)sa.gso_sends);
		CHECK(sb.gro_rcvd > 0 && sa.gro_rcvd > 0,
		      "%s: packets read coalesced with UDP GRO on both sides "
		      "(%llu, %llu) and still intact", what,
		      (unsigned long long)sa.gro_rcvd,
		      (unsigned long long)sb.gro_rcvd);
	}
	pair_close(&p);
	iwe_device_set_trp_test(dev, "");
}

/* ------------------------------------------------------- terminates */

static void nonfatal(void)
{
	struct pair p;
	int ok;

	pair_open(&p, 1000, 2000);
	CHECK(post_send1(&p.a, 1, IBV_WR_RDMA_WRITE, 0, 100000,
			 (uintptr_t)p.b.buf, p.b.mr->rkey ^ 0x55) == 0 &&
	      pump(&p, p.a.scq, 1, NULL, 0) &&
	      next_wc(p.a.scq, 1, IBV_WC_REM_ACCESS_ERR, NULL),
	      "Write with a bad STag: IBV_WC_REM_ACCESS_ERR");
	CHECK(post_send1(&p.a, 2, IBV_WR_RDMA_READ, 0, 5000,
			 (uintptr_t)p.b.buf + BUF - 100, p.b.mr->rkey) == 0 &&
	      pump(&p, p.a.scq, 1, NULL, 0) &&
	      next_wc(p.a.scq, 2, IBV_WC_REM_ACCESS_ERR, NULL),
	      "Read beyond the region: IBV_WC_REM_ACCESS_ERR");
	ok = iwe_qp_get_state(p.a.qp) == IWE_QPS_RTS &&
	     iwe_qp_get_state(p.b.qp) == IWE_QPS_RTS;
	CHECK(ok, "both QPs still RTS");
	CHECK(three_ops(&p, 300000, 9), "the connection goes on: Send, Write, "
	      "Read after the Terminates");
	{
		struct iwe_term_info s, r;

		iwe_qp_terminate_info(p.b.qp, &s, NULL);
		iwe_qp_terminate_info(p.a.qp, NULL, &r);
		CHECK(s.valid && r.valid && r.layer == s.layer &&
		      r.ecode == s.ecode, "the Terminate went b -> a");
	}
	pair_close(&p);
}

/* A Write with a bad STag and a good one behind it, under 30 % loss in
 * both directions, with seeds 1..n: whatever the losses, the bad one
 * fails with a remote access error and the good one is flushed at the
 * marker.  A pure ack sent after the Terminate, arriving while the
 * Terminate was lost, had completed the bad Write successfully (seeds
 * where the peer's acks outran its Terminate); acks are now held until
 * everything the peer sent before them is delivered. */
static void terminate_outrun(int n)
{
	int bad = 0, lost = 0;

	for (int seed = 1; seed <= n; seed++) {
		char spec[40];
		struct iwe_trp_stats sb;
		struct ibv_wc wc[2];
		struct pair p;
		int got = 0;
		double end;

		snprintf(spec, sizeof(spec), "drop:30,seed:%d", seed);
		iwe_device_set_trp_test(dev, spec);
		pair_open(&p, 7000u * (uint32_t)seed, 0xfffffff8u);
		if (post_send1(&p.a, 1, IBV_WR_RDMA_WRITE, 0, 100,
			       (uintptr_t)p.b.buf, p.b.mr->rkey ^ 0x55) ||
		    post_send1(&p.a, 2, IBV_WR_RDMA_WRITE, 0, 20000,
			       (uintptr_t)p.b.buf, p.b.mr->rkey))
			BAIL("post: %s", strerror(errno));
		end = now_s() + 30;
		while (got < 2 && now_s() < end) {
			step(&p);
			got += iwe_poll_cq(p.a.scq, 2 - got, wc + got);
		}
		iwe_trp_stats(p.b.qp, &sb);
		lost += sb.retx > 0;
		if (got != 2 || wc[0].wr_id != 1 ||
		    wc[0].status != IBV_WC_REM_ACCESS_ERR || wc[1].wr_id != 2 ||
		    wc[1].status != IBV_WC_WR_FLUSH_ERR ||
		    iwe_qp_get_state(p.a.qp) != IWE_QPS_RTS) {
			printf("#   seed %d: %d completions, status %d and %d\n",
			       seed, got, got > 0 ? (int)wc[0].status : -1,
			       got > 1 ? (int)wc[1].status : -1);
			bad++;
		}
		pair_close(&p);
	}
	iwe_device_set_trp_test(dev, "");
	CHECK(bad == 0, "a lost Terminate: the bad Write fails and the one "
	      "behind it is flushed, %d seeds of 30 %% loss (%d failed; the "
	      "peer retransmitted in %d)", n, bad, lost);
}

/* A Write failed early by the marker (posted behind a Write the peer
 * refused) whose packets still go again: they must come from the ring,
 * not from the consumer's memory, which it may free as soon as the
 * completion is out.  The source is unmapped right after that
 * completion; a retransmission read from it would fail the QP (EFAULT)
 * or send other bytes.  The test aid drops packets so that some of the
 * Write's go again after the marker. */
static void marker_owns_payload(const char *spec)
{
	const uint32_t len = 256u << 10;	/* in flight at once (8 credits) */
	struct ibv_wc wc[2];
	struct iwe_mr *mr;
	struct pair p;
	char *src, *want = malloc(len);
	int n = 0, flushed = 0;
	double end;

	iwe_device_set_trp_test(dev, spec);
	pair_open(&p, 300, 600);
	src = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED || !want)
		BAIL("mmap: %s", strerror(errno));
	fill(src, len, 31);
	memcpy(want, src, len);
	mr = iwe_reg_mr(p.a.pd, src, len, ACCESS);
	{
		struct ibv_sge bad_sg = { (uintptr_t)p.a.buf, 100,
					  p.a.mr->lkey };
		struct ibv_sge sg = { (uintptr_t)src, len, mr ? mr->lkey : 0 };
		struct ibv_send_wr w2 = { .wr_id = 2, .sg_list = &sg,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE };
		struct ibv_send_wr w1 = { .wr_id = 1, .sg_list = &bad_sg,
					  .num_sge = 1, .next = &w2,
					  .opcode = IBV_WR_RDMA_WRITE };
		struct ibv_send_wr *bad;

		w1.wr.rdma.remote_addr = (uintptr_t)p.b.buf;
		w1.wr.rdma.rkey = p.b.mr->rkey ^ 0x55;
		w2.wr.rdma.remote_addr = (uintptr_t)p.b.buf;
		w2.wr.rdma.rkey = p.b.mr->rkey;
		if (!mr || iwe_post_send(p.a.qp, &w1, &bad))
			BAIL("post: %s", strerror(errno));
	}
	end = now_s() + 30;
	while (n < 2 && now_s() < end) {
		step(&p);
		n += iwe_poll_cq(p.a.scq, 2 - n, wc + n);
	}
	flushed = n == 2 && wc[1].status == IBV_WC_WR_FLUSH_ERR;
	munmap(src, len);
	CHECK(n == 2 && wc[0].wr_id == 1 &&
	      wc[0].status == IBV_WC_REM_ACCESS_ERR && wc[1].wr_id == 2 &&
	      flushed, "%s: a bad Write and the Write behind it fail at the "
	      "marker (%s)", spec, flushed ? "flushed" : "not flushed");
	/* The flushed Write's packets reach the peer all the same. */
	end = now_s() + 10;
	while (memcmp(p.b.buf, want, len) && now_s() < end)
		step(&p);
	CHECK(!memcmp(p.b.buf, want, len),
	      "%s: its packets sent again after the source was unmapped "
	      "carry its bytes", spec);
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_RTS && three_ops(&p, 5000, 4),
	      "%s: and the connection goes on", spec);
	iwe_dereg_mr(mr);
	free(want);
	pair_close(&p);
	iwe_device_set_trp_test(dev, "");
}

static void fatal_no_receive(void)
{
	struct iwe_term_info s, r;
	struct pair p;
	double end;

	pair_open(&p, 1, 1);
	CHECK(post_send1(&p.a, 1, IBV_WR_SEND, 0, 10, 0, 0) == 0,
	      "Send posted with no receive at the peer");
	end = now_s() + 20;
	while (now_s() < end &&
	       (iwe_qp_get_state(p.a.qp) != IWE_QPS_ERROR ||
		iwe_qp_get_state(p.b.qp) != IWE_QPS_ERROR))
		step(&p);
	CHECK(iwe_qp_get_state(p.a.qp) == IWE_QPS_ERROR &&
	      iwe_qp_get_state(p.b.qp) == IWE_QPS_ERROR,
	      "fatal Terminate: both QPs in ERROR");
	iwe_qp_terminate_info(p.b.qp, &s, NULL);
	iwe_qp_terminate_info(p.a.qp, NULL, &r);
	CHECK(s.valid && r.valid && s.layer == IW_TERM_LAYER_DDP &&
	      s.ecode == IW_TERM_DDP_UNTAG_NO_BUF && r.ecode == s.ecode,
	      "the peer sent DDP 'no buffer' and the sender received it");
	pair_close(&p);
}

/* A raw UDP peer sends a packet with R set: the QP answers with one
 * Terminate carrying its quiet time, then stays silent. */
static void fatal_reserved_bit(void)
{
	struct iwe_stream_params sp = { .mpa_rev = 2 };
	struct iwe_trp_start st = { .tx_psn = 77, .rx_psn = 5,
				    .peer_credits = 8 };
	struct side s;
	uint8_t pkt[64] = { 0 }, got[256];
	struct iw_trp_fields f = { 0 };
	struct iw_terminate_hdr th;
	int raw, n, more = 0;

	memset(&s, 0, sizeof(s));
	side_init(&s);
	udp_pair(&s.fd, &raw);
	iwe_modify_qp(s.qp, IWE_QPS_INIT);
	if (iwe_qp_attach_llp(s.qp, s.fd, &sp, NULL, &iwe_llp_trp, &st))
		BAIL("attach");
	iw_trp_put(pkt, 5, 76, IW_TRP_R, 8);
	if (send(raw, pkt, IW_TRP_HDR_LEN + 18, 0) < 0)
		BAIL("send");
	for (int i = 0; i < 100; i++) {
		iwe_qp_progress_rx(s.qp);
		usleep(1000);
	}
	n = (int)recv(raw, got, sizeof(got), MSG_DONTWAIT);
	memset(&th, 0, sizeof(th));
	if (n >= (int)(IW_TRP_HDR_LEN + sizeof(th))) {
		iw_trp_get(got, &f);
		memcpy(&th, got + IW_TRP_HDR_LEN, sizeof(th));
	}
	CHECK(n >= (int)(IW_TRP_HDR_LEN + sizeof(th)) && f.psn == 77 &&
	      iw_ctrl_opcode(iw_be16(th.hdr.ctrl_be)) == IW_OP_TERMINATE,
	      "R set: the QP answers with a Terminate as its next packet");
	CHECK((iw_be32(th.term_ctrl_be) & IW_TERM_QUIET_MS_MASK) == TRP_QUIET_MS,
	      "the fatal Terminate carries the quiet time (%u ms)",
	      TRP_QUIET_MS);
	CHECK(iwe_qp_get_state(s.qp) == IWE_QPS_ERROR, "the QP failed");
	/* More packets from the peer are ignored: nothing comes back. */
	iw_trp_put(pkt, 5, 77, 0, 8);
	if (send(raw, pkt, IW_TRP_HDR_LEN + 18, 0) < 0)
		BAIL("send");
	for (int i = 0; i < 50; i++) {
		iwe_qp_progress_rx(s.qp);
		usleep(1000);
		while (recv(raw, got, sizeof(got), MSG_DONTWAIT) > 0)
			more++;
	}
	CHECK(more == 0, "sent once, then quiet");
	side_close(&s);
	close(raw);
}

static void fin_and_lost_peer(void)
{
	struct pair p;
	int err = 0;
	double end;

	pair_open(&p, 1, 1);
	iwe_trp_send_fin(p.a.qp);
	for (int i = 0; i < 2000 && !err; i++) {
		err = iwe_qp_progress_rx(p.b.qp);
		iwe_qp_progress_rx(p.a.qp);
		usleep(500);
	}
	CHECK(err == ENOTCONN, "the peer's F ends the stream (ENOTCONN)");
	pair_close(&p);

	/* The peer acknowledges a Send and closes at once: the ack and the
	 * F reach the sender in one batch, and the Send still succeeds. */
	pair_open(&p, 1, 1);
	post_recv1(&p.b, 1, 0, 64);
	post_send1(&p.a, 2, IBV_WR_SEND, 0, 64, 0, 0);
	for (int i = 0; i < 200 && !iwe_cq_count(p.b.rcq); i++) {
		iwe_qp_progress_rx(p.b.qp);
		usleep(100);
	}
	iwe_trp_send_fin(p.b.qp);
	usleep(2000);
	err = iwe_qp_progress_rx(p.a.qp);
	CHECK(iwe_cq_count(p.b.rcq) == 1 && err == ENOTCONN &&
	      next_wc(p.a.scq, 2, IBV_WC_SUCCESS, NULL),
	      "ack and F in one batch: the Send completes with success, then "
	      "the stream ends");
	pair_close(&p);

	pair_open(&p, 1, 1);
	close(p.b.fd);			/* b vanishes without a word */
	p.b.fd = -1;
	post_send1(&p.a, 1, IBV_WR_RDMA_WRITE, 0, 100, (uintptr_t)p.b.buf,
		   p.b.mr->rkey);
	end = now_s() + 40;
	err = 0;
	while (!err && now_s() < end) {
		err = iwe_qp_progress_rx(p.a.qp);
		usleep(2000);
	}
	CHECK(err == ECONNREFUSED || err == ETIMEDOUT,
	      "a vanished peer: the stream ends (%s)", strerror(err));
	pair_close(&p);

	/* The peer sends its F and vanishes; our own datagram to it draws
	 * the ICMP port unreachable before we read.  Linux reports that
	 * error ahead of the F already queued: the F must still be read,
	 * and the end is the peer's orderly one (DISCONNECTED), not a lost
	 * peer (BROKEN).  (dapltest's abrupt close over udp, under ASan.) */
	pair_open(&p, 1, 1);
	iwe_trp_send_fin(p.a.qp);
	close(p.a.fd);
	p.a.fd = -1;
	usleep(2000);
	if (send(p.b.fd, "x", 1, 0) != 1)
		BAIL("send: %s", strerror(errno));
	usleep(2000);
	err = iwe_qp_progress_rx(p.b.qp);
	CHECK(err == ENOTCONN,
	      "an F queued behind an ICMP port unreachable: the peer's "
	      "orderly end (%s)", strerror(err));
	pair_close(&p);

	/* A receiver with nothing of its own outstanding sends nothing;
	 * its idle probe (a pure ack every TRP_IDLE_PROBE_MS) meets the ICMP
	 * port unreachable of the vanished peer's kernel. */
	pair_open(&p, 1, 1);
	post_recv1(&p.a, 1, 0, 64);
	close(p.b.fd);
	p.b.fd = -1;
	end = now_s() + 5;
	err = 0;
	while (!err && now_s() < end) {
		err = iwe_qp_progress_rx(p.a.qp);
		usleep(2000);
	}
	CHECK(err == ECONNREFUSED,
	      "a vanished peer of an idle receiver: the stream ends within "
	      "5 s (%s)", strerror(err));
	pair_close(&p);
}

/* A receiver that does not read: the sender stops at the credits it was
 * granted (the receive socket holds them all), and everything arrives
 * once the receiver reads again. */
static void slow_receiver(void)
{
	struct iwe_trp_stats sa, sb;
	struct pair p;
	uint32_t win = 2u << 20;
	int n = 200, got = 0;

	win /= iwe_trp_pkt_max(dev);
	pair_open(&p, 5, 5);
	for (int i = 0; i < n; i++)
		post_recv1(&p.b, (uint64_t)i, (size_t)i * 64, 64);
	for (int i = 0; i < n; i++)
		post_send1(&p.a, (uint64_t)i, IBV_WR_SEND, 0, 64, 0, 0);
	for (int i = 0; i < 30; i++) {	/* only a runs, 300 ms */
		iwe_qp_progress_rx(p.a.qp);
		usleep(10000);
	}
	iwe_trp_stats(p.a.qp, &sa);
	CHECK(sa.sent - sa.retx <= win + 1 && sa.sent - sa.retx >= 8,
	      "a receiver that does not read: %llu packets sent (window %u, "
	      "%llu of them again)", (unsigned long long)sa.sent, win,
	      (unsigned long long)sa.retx);
	pump(&p, p.a.scq, n, p.b.rcq, n);
	iwe_trp_stats(p.b.qp, &sb);
	got = iwe_cq_count(p.b.rcq);
	CHECK(got == n && iwe_cq_count(p.a.scq) == n && sb.ooo_rcvd == 0,
	      "once it reads, all %d arrive, none out of order (%d)", n, got);
	pair_close(&p);
}

/* Every packet lost: after the retransmission limit the stream ends
 * (ETIMEDOUT), the WR is flushed, and the best-effort Terminate (sent
 * past the test aid) tells the peer, which acts on it ahead of the gap. */
static void lost_for_good(void)
{
	struct iwe_term_info r;
	struct ibv_wc wc;
	struct pair p;
	int err = 0, berr = 0;
	double end;

	iwe_device_set_trp_test(dev, "drop:100");
	pair_open(&p, 1, 1);
	iwe_device_set_trp_test(dev, "");
	post_send1(&p.a, 1, IBV_WR_RDMA_WRITE, 0, 100, (uintptr_t)p.b.buf,
		   p.b.mr->rkey);
	end = now_s() + 60;
	while (!err && now_s() < end) {
		err = iwe_qp_progress_rx(p.a.qp);
		usleep(5000);
	}
	CHECK(err == ETIMEDOUT && poll1(p.a.scq, &wc) && wc.wr_id == 1 &&
	      wc.status == IBV_WC_WR_FLUSH_ERR,
	      "nothing gets through: ETIMEDOUT after the retransmission "
	      "limit, the Write flushed (%s)", strerror(err));
	for (int i = 0; i < 100 && !berr; i++) {
		berr = iwe_qp_progress_rx(p.b.qp);
		usleep(1000);
	}
	iwe_qp_terminate_info(p.b.qp, NULL, &r);
	CHECK(berr == EPROTO && r.valid && r.layer == IW_TERM_LAYER_LLP &&
	      r.ecode == IW_TERM_LLP_TCP_LOST,
	      "the peer gets the best-effort Terminate (LLP, connection lost) "
	      "and fails too");
	pair_close(&p);
}

/* Drive one side until its CQ holds n completions (or 10 s). */
static int drive_until(struct side *s, struct iwe_cq *cq, int n)
{
	double end = now_s() + 10;

	while (iwe_cq_count(cq) < n && now_s() < end)
		iwe_qp_progress_rx(s->qp);
	return iwe_cq_count(cq) >= n;
}

static uint64_t acks_of(struct side *s)
{
	struct iwe_trp_stats st;

	iwe_trp_stats(s->qp, &st);
	return st.acks_sent;
}

static void drain(struct iwe_cq *cq)
{
	struct ibv_wc wc;

	while (iwe_cq_count(cq) && poll1(cq, &wc))
		;
}

/* n Sends from a, each answered at once by a Send from b; 1 if all went. */
static int ping_pong_sends(struct pair *p, int n)
{
	int ok = 1;

	for (int i = 0; i < n && ok; i++) {
		ok &= post_recv1(&p->b, 10, 0, 64) == 0;
		ok &= post_recv1(&p->a, 11, 0, 64) == 0;
		ok &= post_send1(&p->a, 12, IBV_WR_SEND, 0, 8, 0, 0) == 0;
		ok &= drive_until(&p->b, p->b.rcq, 1);
		ok &= post_send1(&p->b, 13, IBV_WR_SEND, 64, 8, 0, 0) == 0;
		ok &= drive_until(&p->a, p->a.rcq, 1);
		drain(p->a.rcq);
		drain(p->b.rcq);
		drain(p->a.scq);
		drain(p->b.scq);
	}
	return ok;
}

/* A lost packet that ends a flight -- each Send of a ping-pong is one
 * -- leaves no later packet whose selective ack would show the hole:
 * the probe timeout sends it again (RFC 8985's tail loss probe) before
 * the retransmission timeout would.  The PTO always comes first, so
 * counting probes holds on a busy machine too; how many losses still
 * needed the RTO (a probe lost as well, or late) is only printed. */
static void tail_loss(void)
{
	struct iwe_trp_stats sa, sb;
	struct pair p;
	int ok;

	iwe_device_set_trp_test(dev, "drop:20,seed:17");
	pair_open(&p, 0xfffffff0u, 5);
	ok = ping_pong_sends(&p, 100);
	iwe_trp_stats(p.a.qp, &sa);
	iwe_trp_stats(p.b.qp, &sb);
	printf("# tail loss: dropped %llu, probes %llu, timeouts %llu\n",
	       (unsigned long long)(sa.hook_drop + sb.hook_drop),
	       (unsigned long long)(sa.tlp + sb.tlp),
	       (unsigned long long)(sa.rto + sb.rto));
	CHECK(ok, "100 Send ping-pongs with 20%% of the packets dropped");
	CHECK(sa.hook_drop + sb.hook_drop > 0 && sa.tlp + sb.tlp > 0,
	      "lost tails drew tail loss probes (%llu), the PTO coming first",
	      (unsigned long long)(sa.tlp + sb.tlp));
	pair_close(&p);
	iwe_device_set_trp_test(dev, "");
}

/* Completions and delayed acks (doc/trp.md, "Acknowledging" and
 * "Sending"), with the longest hold (5 ms) so that a scheduler delay
 * hardly ever ends one: a Send or Write completes once acknowledged; a
 * Send that is answered is acknowledged by the answer alone; a lone
 * unanswered Send is acknowledged after the delay, two packets at once. */
static void delayed_ack(void)
{
	struct iwe_trp_stats st;
	uint64_t a0, b0, dup0;
	struct pair p;
	int ok = 1, i;
	double t0, dt;

	setenv("IWDAPL_TRP_ACK_DELAY_US", "5000", 1);
	pair_open(&p, 0xfffffff8u, 77);
	unsetenv("IWDAPL_TRP_ACK_DELAY_US");

	post_recv1(&p.b, 1, 0, 64);
	post_send1(&p.a, 2, IBV_WR_SEND, 0, 8, 0, 0);
	iwe_qp_progress_rx(p.a.qp);
	CHECK(iwe_cq_count(p.a.scq) == 0 && !iwe_qp_tx_drained(p.a.qp),
	      "a Send sent but not acknowledged: not complete, the send side "
	      "not drained (an abrupt close after it would lose it)");
	CHECK(drive_until(&p.b, p.b.rcq, 1) && next_wc(p.b.rcq, 1,
						       IBV_WC_SUCCESS, NULL),
	      "and arrives");
	for (i = 0; i < 1000 && !iwe_qp_tx_drained(p.a.qp); i++) {
		iwe_qp_progress_rx(p.b.qp);
		iwe_qp_progress_rx(p.a.qp);
		usleep(100);
	}
	CHECK(iwe_qp_tx_drained(p.a.qp) &&
	      next_wc(p.a.scq, 2, IBV_WC_SUCCESS, NULL),
	      "complete and drained once acknowledged");

	/* b's held ack of that Send went (a is drained): now nothing but
	 * this test drives b. */
	post_send1(&p.a, 3, IBV_WR_RDMA_WRITE, 0, 100, (uintptr_t)p.b.buf,
		   p.b.mr->rkey);
	for (i = 0; i < 5; i++)
		iwe_qp_progress_rx(p.a.qp);
	ok = iwe_cq_count(p.a.scq) == 0;
	iwe_qp_progress_rx(p.b.qp);
	CHECK(ok && drive_until(&p.a, p.a.scq, 1) &&
	      next_wc(p.a.scq, 3, IBV_WC_SUCCESS, NULL),
	      "a Write completes only once acknowledged, and a Write is "
	      "acknowledged at once");

	/* Ping-pong: every Send answered at once by a Send. */
	drive_until(&p.b, p.b.rcq, 0);
	a0 = acks_of(&p.a);
	b0 = acks_of(&p.b);
	ok = ping_pong_sends(&p, 50);
	CHECK(ok && acks_of(&p.a) - a0 + acks_of(&p.b) - b0 <= 2,
	      "50 answered Sends: the answers carry the acks, no pure ack "
	      "(%llu)", (unsigned long long)(acks_of(&p.a) - a0 +
					     acks_of(&p.b) - b0));

	/* Two Sends read in one round, each a whole message: held for the
	 * answer as a lone one is (the end of a 64 KiB Write, two packets,
	 * was acknowledged at once: a pure ack each way per message), and
	 * the answer carries the ack of both. */
	post_recv1(&p.b, 20, 0, 64);
	post_recv1(&p.b, 21, 64, 64);
	post_recv1(&p.a, 24, 0, 64);
	post_send1(&p.a, 22, IBV_WR_SEND, 0, 8, 0, 0);
	post_send1(&p.a, 23, IBV_WR_SEND, 0, 8, 0, 0);
	iwe_qp_progress_rx(p.a.qp);
	b0 = acks_of(&p.b);
	iwe_qp_progress_rx(p.b.qp);
	ok = iwe_cq_count(p.b.rcq) == 2 && acks_of(&p.b) == b0;
	post_send1(&p.b, 25, IBV_WR_SEND, 64, 8, 0, 0);
	CHECK(ok && drive_until(&p.a, p.a.scq, 2) &&
	      next_wc(p.a.scq, 22, IBV_WC_SUCCESS, NULL) &&
	      next_wc(p.a.scq, 23, IBV_WC_SUCCESS, NULL) &&
	      acks_of(&p.b) == b0,
	      "two whole messages read together wait for the answer, which "
	      "acknowledges both (%llu pure acks)",
	      (unsigned long long)(acks_of(&p.b) - b0));
	drive_until(&p.a, p.a.rcq, 1);
	drain(p.a.rcq);
	drain(p.b.rcq);
	drain(p.b.scq);
	drain(p.a.scq);

	/* A quarter of the window read unacknowledged: acknowledged at
	 * once, answer or not (the sender keeps three quarters). */
	{
		int quarter = (int)iwe_trp_window(dev) / 4;

		for (i = 0; i < quarter; i++)
			post_recv1(&p.b, 100 + (uint64_t)i,
				   (uint64_t)i * 64, 64);
		for (i = 0; i < quarter; i++)
			post_send1(&p.a, 300 + (uint64_t)i, IBV_WR_SEND, 0, 8,
				   0, 0);
		iwe_qp_progress_rx(p.a.qp);
		b0 = acks_of(&p.b);
		iwe_qp_progress_rx(p.b.qp);	/* one read takes them all */
		CHECK(iwe_cq_count(p.b.rcq) == quarter &&
		      acks_of(&p.b) == b0 + 1 &&
		      drive_until(&p.a, p.a.scq, quarter),
		      "%d whole messages read in one round (a quarter of the "
		      "window): acknowledged at once", quarter);
		drain(p.b.rcq);
		drain(p.a.scq);
	}

	/* A lone Send nobody answers: its ack goes after the delay. */
	post_recv1(&p.b, 30, 0, 64);
	post_send1(&p.a, 31, IBV_WR_SEND, 0, 8, 0, 0);
	iwe_qp_progress_rx(p.a.qp);
	iwe_trp_stats(p.b.qp, &st);
	b0 = st.acks_sent;
	dup0 = st.dup_rcvd;
	t0 = now_s();
	while (acks_of(&p.b) == b0 && now_s() < t0 + 10) {
		iwe_qp_progress_rx(p.b.qp);
		usleep(100);
	}
	dt = now_s() - t0;
	iwe_trp_stats(p.b.qp, &st);
	/* The sender's tail loss probe waits twice the delay: a duplicate
	 * before the ack means it did not, unless the hold itself ran that
	 * late (a loaded machine's timers). */
	CHECK(st.acks_sent == b0 + 1 && dt >= 0.0045 &&
	      (st.dup_rcvd == dup0 || dt >= 0.010),
	      "an unanswered Send is acknowledged after the delay (%.1f ms), "
	      "before the sender's probe", dt * 1000);

	/* An abrupt close while an ack is held: the ack goes on its own,
	 * then the best-effort F carries it again.  (b answers again first:
	 * the hold that ran out unanswered stopped its holds.) */
	for (i = 0; i < 1000 && !iwe_qp_tx_drained(p.a.qp); i++) {
		iwe_qp_progress_rx(p.a.qp);
		usleep(100);
	}
	drain(p.a.scq);
	drain(p.b.rcq);
	ok = ping_pong_sends(&p, 2);
	post_recv1(&p.b, 40, 0, 64);
	post_send1(&p.a, 41, IBV_WR_SEND, 0, 8, 0, 0);
	iwe_qp_progress_rx(p.a.qp);
	ok = ok && drive_until(&p.b, p.b.rcq, 1);
	b0 = acks_of(&p.b);
	iwe_modify_qp(p.b.qp, IWE_QPS_ERROR);
	iwe_trp_send_fin(p.b.qp);
	CHECK(ok && acks_of(&p.b) == b0 + 1,
	      "an abrupt close sends a held ack on its own before the F "
	      "(%llu pure acks)", (unsigned long long)(acks_of(&p.b) - b0));
	CHECK(drive_until(&p.a, p.a.scq, 1) &&
	      next_wc(p.a.scq, 41, IBV_WC_SUCCESS, NULL),
	      "and the peer's Send completes");
	pair_close(&p);
}

/* Sends one at a time, each acknowledged before the next: the transmit
 * ring reuses one packet buffer or a few, not one per slot of its window
 * (1024 at a path MTU of 1500; walking them all cost a ping-pong twice
 * its time over its first thousand round trips). */
/* A connection idle for a probe period frees its spare packet buffers;
 * traffic after takes new ones. */
static void idle_gives_back(struct pair *p)
{
	struct iwe_trp_stats before, after;
	double end;
	int ok;

	iwe_trp_stats(p->a.qp, &before);
	/* The probe comes a second after the last ack; the bound only
	 * stops a broken run (a busy machine may be late). */
	end = now_s() + 10;
	do {
		step(p);
		usleep(10000);
		iwe_trp_stats(p->a.qp, &after);
	} while ((after.spares || !after.bufs_trimmed) && now_s() < end);
	CHECK(before.spares > 0 && after.spares == 0 &&
	      after.bufs_trimmed >= before.spares,
	      "idle past a probe period, the sender gave back its spare "
	      "packet buffers (%llu held, %llu freed)",
	      (unsigned long long)before.spares,
	      (unsigned long long)after.bufs_trimmed);
	ok = burst(p, 1) && burst(p, 4);
	CHECK(ok, "Sends after the idle period are delivered");
}

static void buffer_reuse(void)
{
	struct iwe_trp_stats sa;
	struct pair p;
	int ok = 1;

	iwe_device_set_trp_test(dev, "");
	pair_open(&p, 5, 5);
	/* Settled once at the end: 50 idle steps after each Send made
	 * this case 2 of the suite's 17 minutes. */
	for (int i = 0; i < 2000 && ok; i++)
		ok = exchange(&p, 1);
	ok = settled(&p) && ok;
	iwe_trp_stats(p.a.qp, &sa);
	CHECK(ok, "2000 Sends one at a time, each delivered once");
	CHECK(sa.tx_bufs > 0 && sa.tx_bufs <= 8,
	      "the sender's ring reused its packet buffers (%llu allocated "
	      "for %llu packets)", (unsigned long long)sa.tx_bufs,
	      (unsigned long long)sa.sent);
	idle_gives_back(&p);
	pair_close(&p);
}

int main(void)
{
	dev = iwe_device_open("127.0.0.1", IWE_TRANSPORT_UDP);
	if (!dev)
		BAIL("udp device on 127.0.0.1: %s", strerror(errno));
	sweep("clean", "", 1, 1, 16u << 20);
	sweep("wrap", "", 0xfffffff0u, 0xffffff00u, 16u << 20);
	sweep("drop 1%", "drop:1,seed:7", 0x7ffffff0u, 3, 16u << 20);
	sweep("drop 10%", "drop:10,seed:3", 0xfffffffau, 9, 1u << 20);
	sweep("reorder+dup 10%", "reorder:10,dup:10,seed:5", 0xffffff00u,
	      0xfffffff0u, 1u << 20);
	if (iwe_device_set_mtu(dev, 1500))
		BAIL("mtu");
	sweep("mtu 1500", "", 0x7fffff00u, 0xffffff00u, 16u << 20);
	sweep("mtu 1500 drop 1% reorder dup", "drop:1,reorder:5,dup:5,seed:11",
	      0xfffff000u, 40, 1u << 20);
	sweep("mtu 1500 drop 10%", "drop:10,seed:13", 0xffff0000u, 77,
	      16u << 20);
	buffer_reuse();
	CHECK(iwe_device_set_mtu(dev, 575) == EINVAL &&
	      iwe_device_set_mtu(dev, 65536) == EINVAL,
	      "path MTU outside 576..65535 refused");
	iwe_device_set_mtu(dev, 65535);
	nonfatal();
	marker_owns_payload("drop:30,seed:21");
	terminate_outrun(40);
	fatal_no_receive();
	fatal_reserved_bit();
	fin_and_lost_peer();
	slow_receiver();
	lost_for_good();
	tail_loss();
	delayed_ack();
	iwe_device_close(dev);
	return tap_done();
}
