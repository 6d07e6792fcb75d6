/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A CQ's want lists (iw_cq_hook.c): a hook that asked for the next poll
 * or arm is looked at by it once; one whose want was met elsewhere
 * (iwe_cq_hook_unwant: the progress thread sent the held burst) is not
 * looked at by either -- a CQ of 10,000 connections whose bursts all
 * went out must not have its next poll look at each of them -- and one
 * removed from the CQ leaves the lists whole.  Fake hooks count their
 * looks.  TAP output. */
#include <errno.h>
#include <string.h>

#include "iw_priv.h"
#include "tap.h"

#define NHOOKS 1000		/* past CQ_HOOKS_DIRECT: the epoll and lists */

struct fake {
	struct iwe_cq_hook hook;
	int polls, arms;
};

static struct fake g_fake[NHOOKS];

static int fake_poll(struct iwe_cq_hook *h, int wait)
{
	(void)wait;
	IWE_CONTAINER_OF(h, struct fake, hook)->polls++;
	return 0;
}

static void fake_arm(struct iwe_cq_hook *h)
{
	IWE_CONTAINER_OF(h, struct fake, hook)->arms++;
}

static void fake_spin(struct iwe_cq_hook *h, int on)
{
	(void)h;
	(void)on;
}

static void reset_counts(void)
{
	for (int i = 0; i < NHOOKS; i++)
		g_fake[i].polls = g_fake[i].arms = 0;
}

/* Hooks looked at by the last poll (or arm), and whether all of them
 * are those for which want(i) is 1. */
static int looked(int arm, int (*want)(int), int *wrong)
{
	int n = 0;

	*wrong = 0;
	for (int i = 0; i < NHOOKS; i++) {
		int c = arm ? g_fake[i].arms : g_fake[i].polls;

		n += c;
		if (c != want(i))
			(*wrong)++;
	}
	return n;
}

static int every_third(int i) { return i % 3 == 0; }
static int none(int i) { (void)i; return 0; }
static int thirds_kept(int i) { return i % 3 == 0 && i % 2; }

int main(void)
{
	struct iwe_device *dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	struct iwe_cq *cq;
	struct ibv_wc wc;
	int wrong, n;

	if (!dev)
		BAIL("open lo: %s", strerror(errno));
	cq = iwe_create_cq(dev, 16, NULL, NULL);
	if (!cq)
		BAIL("create cq: %s", strerror(errno));
	for (int i = 0; i < NHOOKS; i++) {
		g_fake[i].hook = IWE_CQ_HOOK_INIT(fake_poll, fake_arm, fake_spin);
		iwe_cq_add_hook(cq, &g_fake[i].hook);
	}

	/* Every third asks for both; a poll looks at those alone, once. */
	for (int i = 0; i < NHOOKS; i += 3)
		iwe_cq_hook_want(cq, &g_fake[i].hook,
				 IWE_CQ_WANT_POLL | IWE_CQ_WANT_ARM);
	CHECK(iwe_poll_cq(cq, 1, &wc) == 0, "an empty CQ polls empty");
	n = looked(0, every_third, &wrong);
	CHECK(n == (NHOOKS + 2) / 3 && !wrong,
	      "the poll looked at the %d hooks that asked, once each (%d looks, %d wrong)",
	      (NHOOKS + 2) / 3, n, wrong);
	reset_counts();
	CHECK(iwe_poll_cq(cq, 1, &wc) == 0 && looked(0, none, &wrong) == 0,
	      "the next poll owes them nothing");

	/* Their arm wants stay until an arm, or until met elsewhere: half
	 * of them (the odd ones) stay. */
	for (int i = 0; i < NHOOKS; i += 3)
		if (!(i % 2))
			iwe_cq_hook_unwant(cq, &g_fake[i].hook,
					   IWE_CQ_WANT_POLL | IWE_CQ_WANT_ARM);
	CHECK(iwe_req_notify_cq(cq, 0) == 0, "arm");
	n = looked(1, thirds_kept, &wrong);
	CHECK(!wrong, "the arm looked at the %d hooks still wanting it, not at those met elsewhere (%d wrong)",
	      n, wrong);
	reset_counts();

	/* Wants met elsewhere, a poll looks at none of them. */
	for (int i = 0; i < NHOOKS; i++)
		iwe_cq_hook_want(cq, &g_fake[i].hook, IWE_CQ_WANT_POLL);
	for (int i = 0; i < NHOOKS; i++)
		iwe_cq_hook_unwant(cq, &g_fake[i].hook, IWE_CQ_WANT_POLL);
	(void)iwe_poll_cq(cq, 1, &wc);
	CHECK(looked(0, none, &wrong) == 0,
	      "all %d wants met elsewhere: the poll looked at none", NHOOKS);

	/* Removing hooks from the middle, the head and the tail of a list
	 * leaves the others on it. */
	for (int i = 0; i < NHOOKS; i += 3)
		iwe_cq_hook_want(cq, &g_fake[i].hook, IWE_CQ_WANT_POLL);
	iwe_cq_del_hook(cq, &g_fake[0].hook);		/* the tail */
	iwe_cq_del_hook(cq, &g_fake[NHOOKS / 2 / 3 * 3].hook);	/* middle */
	iwe_cq_del_hook(cq, &g_fake[(NHOOKS - 1) / 3 * 3].hook);	/* head */
	(void)iwe_poll_cq(cq, 1, &wc);
	n = looked(0, every_third, &wrong);
	CHECK(n == (NHOOKS + 2) / 3 - 3 && wrong == 3,
	      "after 3 removals the poll looked at the %d others (%d looks, %d missed)",
	      (NHOOKS + 2) / 3 - 3, n, wrong);

	for (int i = 0; i < NHOOKS; i++)
		iwe_cq_del_hook(cq, &g_fake[i].hook);
	CHECK(iwe_destroy_cq(cq) == 0, "destroy the CQ");
	iwe_device_close(dev);
	return tap_done();
}
