/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Which posts of a burst are held (iw_qp.c, iwe_qp_post_kick): a post of
 * half a held burst's bytes (32 KiB) or more goes out in its own sendmsg
 * before its post returns, in a burst of its like and after small posts
 * alike -- holding it would save one sendmsg for a wake-up of the
 * progress thread -- and takes any small posts held before it along.
 * What the posts carry lands, every byte.  TAP output. */
#include <signal.h>

#include "cpair.h"

#define BURST 8
#define LARGE 32768u
#define SMALL 1024u
#define SMALLS 4

static struct iwe_qp_stats stats_of(struct iwe_qp *qp)
{
	struct iwe_qp_stats st;

	iwe_qp_query_stats(qp, &st);
	return st;
}

/* n Writes of len bytes back to back, from a's offset `off` to b's,
 * unsignaled; 0 when every post was taken. */
static int post_writes(struct cpair *p, int n, size_t off, uint32_t len)
{
	for (int k = 0; k < n; k++, off += len)
		if (post_send1(&p->a, 100 + (uint64_t)k, IBV_WR_RDMA_WRITE, off, len,
			       (uintptr_t)(p->b.buf + off), p->b.mr->rkey, 0))
			return -1;
	return 0;
}

static void test_large_burst(struct cpair *p)
{
	struct iwe_qp_stats s0, s1;
	int posted;

	fill(p->a.buf, BURST * LARGE, 71);
	s0 = stats_of(p->a.qp);
	posted = post_writes(p, BURST, 0, LARGE) == 0;
	s1 = stats_of(p->a.qp);
	CHECK(posted, "large: %d Writes of 32 KiB posted back to back", BURST);
	CHECK(s1.tx_syscalls - s0.tx_syscalls == BURST &&
	      s1.tx_segments - s0.tx_segments == BURST,
	      "large: each went out in a sendmsg of its own before its post "
	      "returned (%llu sendmsg, %llu segments)",
	      (unsigned long long)(s1.tx_syscalls - s0.tx_syscalls),
	      (unsigned long long)(s1.tx_segments - s0.tx_segments));
	CHECK(wait_bytes(p->b.buf, p->a.buf, BURST * LARGE),
	      "large: every byte landed");
}

static void test_large_after_small(struct cpair *p)
{
	size_t off = BURST * LARGE;
	struct iwe_qp_stats s0, s1;
	int posted;

	fill(p->a.buf + off, SMALLS * SMALL + LARGE, 72);
	s0 = stats_of(p->a.qp);
	posted = post_writes(p, SMALLS, off, SMALL) == 0 &&
		 post_writes(p, 1, off + SMALLS * SMALL, LARGE) == 0;
	s1 = stats_of(p->a.qp);
	CHECK(posted, "mixed: %d Writes of 1 KiB, then one of 32 KiB, posted "
	      "back to back", SMALLS);
	CHECK(s1.tx_segments - s0.tx_segments == SMALLS + 1,
	      "mixed: the 32 KiB Write was not held, and took the small ones "
	      "held before it along (%llu of %d segments out when its post "
	      "returned)", (unsigned long long)(s1.tx_segments - s0.tx_segments),
	      SMALLS + 1);
	CHECK(wait_bytes(p->b.buf + off, p->a.buf + off, SMALLS * SMALL + LARGE),
	      "mixed: every byte landed");
}

int main(void)
{
	struct cpair p;

	signal(SIGPIPE, SIG_IGN);
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	cpair_open(&p);
	if (cpair_std_connect(&p, 31430, "hold")) {
		test_large_burst(&p);
		test_large_after_small(&p);
		cpair_disconnect_close(&p, "hold");
	} else {
		CHECK(0, "hold: pair connected");
		cpair_close(&p);
	}
	iwe_device_close(g_dev);
	return tap_done();
}
