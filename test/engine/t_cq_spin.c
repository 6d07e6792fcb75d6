/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Which connections a waiting consumer takes the input of (iwe_cq_spin,
 * iw_cq_hook.c): those that completed something into the CQ during its
 * last IWE_CQ_ACTIVE_WAITS waits, when there are at most IWE_CQ_SPIN_MAX;
 * else the one that completed last (here: none, as no fake hook's look
 * completes anything).  The wait sleeps on exactly their sockets
 * (iwe_cq_sleep_fds), and hands each back when it ends.  Fake hooks
 * count how often they are spun on and looked at; their sockets are
 * pipes.  TAP output. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "iw_priv.h"
#include "tap.h"

#define NHOOKS (IWE_CQ_SPIN_MAX + 4)

struct fake {
	struct iwe_cq_hook hook;
	int fds[2];
	int spinning, spins;
	int looks;		/* polls that looked at it */
	int gone;		/* removed from the CQ */
	int busy;		/* its QP runs on another thread */
	int waited;		/* looks that waited for that thread */
};

static struct fake g_fake[NHOOKS];
static struct iwe_cq *g_cq;

static int fake_poll(struct iwe_cq_hook *h, int wait)
{
	struct fake *f = IWE_CONTAINER_OF(h, struct fake, hook);

	if (f->busy && !wait)
		return IWE_CQ_HOOK_BUSY;
	f->looks++;
	f->waited += wait;
	return 0;
}

static void fake_arm(struct iwe_cq_hook *h)
{
	(void)h;
}

static void fake_spin(struct iwe_cq_hook *h, int on)
{
	struct fake *f = IWE_CONTAINER_OF(h, struct fake, hook);

	f->spinning += on ? 1 : -1;
	f->spins += on;
}

/* A completion from hook i, polled out again (the CQ stays empty). */
static void complete(int i)
{
	struct ibv_wc wc = { .wr_id = (uint64_t)i, .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV };

	iwe_cq_push_from(g_cq, &g_fake[i].hook, &wc, 0);
	(void)iwe_poll_cq(g_cq, 1, &wc);
}

/* One wait: spin on, the sockets named, spin off.  Returns the set of
 * hooks spun on as a bit mask; *socks_ok: the sockets named were exactly
 * theirs; *back: every one was handed back at the end. */
static unsigned one_wait(int *socks_ok, int *back)
{
	int fds[IWE_CQ_SPIN_MAX + 1], before[NHOOKS], n, i, k;
	unsigned spun = 0, named = 0;

	for (i = 0; i < NHOOKS; i++)
		before[i] = g_fake[i].spins;
	iwe_cq_spin(g_cq, 1);
	for (i = 0; i < NHOOKS; i++)
		if (g_fake[i].spins != before[i])
			spun |= 1u << i;
	n = iwe_cq_sleep_fds(g_cq, fds, IWE_CQ_SPIN_MAX + 1);
	for (k = 0; k < n; k++)
		for (i = 0; i < NHOOKS; i++)
			if (!g_fake[i].gone && fds[k] == g_fake[i].fds[0])
				named |= 1u << i;
	*socks_ok = named == spun && n == __builtin_popcount(spun);
	iwe_cq_spin(g_cq, 0);
	*back = 1;
	for (i = 0; i < NHOOKS; i++)
		*back &= g_fake[i].gone || g_fake[i].spinning == 0;
	return spun;
}

static void test_window(void)
{
	unsigned want = (1u << 1) | (1u << 3) | (1u << 4), spun;
	int socks_ok, back, all_ok = 1, w;

	spun = one_wait(&socks_ok, &back);
	CHECK(spun == 0 && socks_ok && back,
	      "nothing completed yet: a wait takes no connection (spun 0x%x)", spun);

	complete(1);
	complete(3);
	complete(4);
	complete(3);
	spun = one_wait(&socks_ok, &back);
	CHECK(spun == want && socks_ok && back,
	      "after completions of hooks 1, 3, 4: the wait took exactly those, slept on "
	      "their sockets and handed them back (spun 0x%x)", spun);

	for (w = 1; w < IWE_CQ_ACTIVE_WAITS; w++) {
		spun = one_wait(&socks_ok, &back);
		all_ok &= spun == want && socks_ok && back;
	}
	CHECK(all_ok, "with nothing more completed, the next %d waits took them too",
	      IWE_CQ_ACTIVE_WAITS - 1);
	spun = one_wait(&socks_ok, &back);
	CHECK(spun == 0 && socks_ok && back,
	      "the wait after %d without a completion of theirs took none (spun 0x%x)",
	      IWE_CQ_ACTIVE_WAITS, spun);

	/* A completion keeps a hook in: hook 3 completes in each wait. */
	complete(3);
	complete(5);
	all_ok = 1;
	for (w = 0; w < 2 * IWE_CQ_ACTIVE_WAITS; w++) {
		unsigned expect = w < IWE_CQ_ACTIVE_WAITS ? (1u << 3) | (1u << 5) : 1u << 3;

		spun = one_wait(&socks_ok, &back);
		all_ok &= spun == expect && socks_ok && back;
		complete(3);
	}
	CHECK(all_ok, "a hook completing in every wait stays taken; one that stopped "
		      "leaves after %d waits", IWE_CQ_ACTIVE_WAITS);
	for (w = 0; w <= IWE_CQ_ACTIVE_WAITS; w++)
		(void)one_wait(&socks_ok, &back);
}

static void test_too_many(void)
{
	unsigned spun;
	int socks_ok, back, i, w;

	for (i = 0; i <= IWE_CQ_SPIN_MAX; i++)
		complete(i);
	spun = one_wait(&socks_ok, &back);
	CHECK(spun == 0 && back,
	      "%d connections completed: more than %d, the wait took none of them "
	      "(spun 0x%x)", IWE_CQ_SPIN_MAX + 1, IWE_CQ_SPIN_MAX, spun);
	for (w = 0; w < IWE_CQ_ACTIVE_WAITS; w++)
		(void)one_wait(&socks_ok, &back);
	complete(2);
	complete(7);
	spun = one_wait(&socks_ok, &back);
	CHECK(spun == ((1u << 2) | (1u << 7)) && socks_ok && back,
	      "%d waits later, two that completed are taken again (spun 0x%x)",
	      IWE_CQ_ACTIVE_WAITS, spun);
	for (w = 0; w <= IWE_CQ_ACTIVE_WAITS; w++)
		(void)one_wait(&socks_ok, &back);
}

/* A hook removed while a wait has it, or while it counts as active, is
 * neither slept on nor told of the wait's end, nor taken later. */
static void test_removed(void)
{
	int fds[IWE_CQ_SPIN_MAX], n, socks_ok, back;
	unsigned spun;

	complete(6);
	complete(8);
	iwe_cq_spin(g_cq, 1);
	CHECK(g_fake[6].spinning == 1 && g_fake[8].spinning == 1,
	      "removal: the wait took hooks 6 and 8");
	iwe_cq_del_hook(g_cq, &g_fake[6].hook);
	g_fake[6].gone = 1;
	n = iwe_cq_sleep_fds(g_cq, fds, IWE_CQ_SPIN_MAX);
	CHECK(n == 1 && fds[0] == g_fake[8].fds[0],
	      "removal: hook 6 removed mid-wait, the wait sleeps on hook 8's socket alone");
	iwe_cq_spin(g_cq, 0);
	CHECK(g_fake[6].spinning == 1 && g_fake[8].spinning == 0,
	      "removal: the wait's end told hook 8, not the removed hook 6");
	complete(9);
	iwe_cq_del_hook(g_cq, &g_fake[9].hook);
	g_fake[9].gone = 1;
	spun = one_wait(&socks_ok, &back);
	CHECK(spun == 1u << 8 && socks_ok,
	      "removal: a hook removed after completing is not taken (spun 0x%x)", spun);
}

/* The hooks a poll looked at, as a bit mask. */
static unsigned one_poll(void)
{
	struct ibv_wc wc;
	int before[NHOOKS], i;
	unsigned looked = 0;

	for (i = 0; i < NHOOKS; i++)
		before[i] = g_fake[i].looks;
	(void)iwe_poll_cq(g_cq, 1, &wc);
	for (i = 0; i < NHOOKS; i++)
		if (!g_fake[i].gone && g_fake[i].looks != before[i])
			looked |= 1u << i;
	return looked;
}

/* While a wait spins on one connection among many, its polls read that
 * one directly, whether or not its socket has input, and leave the
 * others' input to the progress thread; once it ends, polls ask the
 * CQ's epoll which have input. */
static void test_spun_polls(void)
{
	int socks_ok, back, w;
	unsigned looked;
	char c = 'x';

	for (w = 0; w <= IWE_CQ_ACTIVE_WAITS; w++)
		(void)one_wait(&socks_ok, &back);
	complete(2);
	if (write(g_fake[5].fds[1], &c, 1) != 1)
		BAIL("write: %s", strerror(errno));
	iwe_cq_spin(g_cq, 1);
	looked = one_poll();
	CHECK(g_fake[2].spinning == 1 && looked == 1u << 2,
	      "a poll during a wait on hook 2 looks at hook 2 alone, not at hook 5 with "
	      "input (looked 0x%x)", looked);
	iwe_cq_spin(g_cq, 0);
	looked = one_poll();
	CHECK(looked == 1u << 5,
	      "after the wait a poll looks at hook 5, whose socket has input, alone "
	      "(looked 0x%x)", looked);
	if (read(g_fake[5].fds[0], &c, 1) != 1)
		BAIL("read: %s", strerror(errno));
}

/* A look that finds its QP running on another thread says so: the drive
 * returns IWE_CQ_DRIVE_BUSY and the CQ waits elsewhere, which makes an
 * empty poll yield.  iwe_cq_drive_wait, for a waiter that would sleep on
 * that QP's socket, waits for each QP the wait spins on and drives it --
 * those alone.  A QP whose sends wait for room makes the CQ wait
 * elsewhere too. */
static void test_busy(void)
{
	int socks_ok, back, w, r, others = 0, before[NHOOKS], i;

	for (w = 0; w <= IWE_CQ_ACTIVE_WAITS; w++)
		(void)one_wait(&socks_ok, &back);
	complete(4);
	iwe_cq_spin(g_cq, 1);
	g_fake[4].busy = 1;
	r = iwe_cq_drive(g_cq);
	CHECK((r & IWE_CQ_DRIVE_BUSY) && iwe_cq_waits_elsewhere(g_cq),
	      "busy: a drive that found hook 4's QP on another thread says so "
	      "(flags 0x%x)", r);
	for (i = 0; i < NHOOKS; i++)
		before[i] = g_fake[i].waited;
	iwe_cq_drive_wait(g_cq);
	for (i = 0; i < NHOOKS; i++)
		others += i != 4 && g_fake[i].waited != before[i];
	CHECK(g_fake[4].waited == before[4] + 1 && !others,
	      "busy: the waiter's drive waited for hook 4, the one it spins on, "
	      "and for no other (%d others)", others);
	g_fake[4].busy = 0;
	r = iwe_cq_drive(g_cq);
	CHECK(!(r & IWE_CQ_DRIVE_BUSY) && !iwe_cq_waits_elsewhere(g_cq),
	      "busy: free again, the next drive says nothing of it (flags 0x%x)", r);
	iwe_cq_spin(g_cq, 0);
	iwe_cq_hook_blocked(g_cq, &g_fake[7].hook, 1);
	w = iwe_cq_waits_elsewhere(g_cq);
	iwe_cq_hook_blocked(g_cq, &g_fake[7].hook, 0);
	CHECK(w && !iwe_cq_waits_elsewhere(g_cq),
	      "busy: while hook 7's sends wait for room the CQ waits elsewhere, "
	      "and not after");
}

/* A QP's socket joins the CQ's epoll at its first completion: before
 * it, its input is the progress thread's and a poll does not look at
 * it (an idle connection among 10,000 costs no epoll_ctl); after it,
 * the poll does.  Hook 5 has input too, to show the epoll answering. */
static void test_join(void)
{
	struct fake late = { .hook = IWE_CQ_HOOK_INIT(fake_poll, fake_arm, fake_spin) };
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV };
	int looks;
	char c = 'x';

	if (pipe(late.fds))
		BAIL("pipe: %s", strerror(errno));
	iwe_cq_add_hook(g_cq, &late.hook);
	iwe_cq_hook_watch(g_cq, &late.hook, late.fds[0], 1);
	if (write(late.fds[1], &c, 1) != 1 || write(g_fake[5].fds[1], &c, 1) != 1)
		BAIL("write: %s", strerror(errno));
	looks = late.looks;
	CHECK(one_poll() == 1u << 5 && late.looks == looks,
	      "a hook that never completed is not looked at for its socket's input, "
	      "hook 5 beside it is");
	iwe_cq_push_from(g_cq, &late.hook, &wc, 0);
	(void)iwe_poll_cq(g_cq, 1, &wc);
	looks = late.looks;
	(void)one_poll();
	CHECK(late.looks == looks + 1,
	      "after its first completion the poll looks at it (%d looks)", late.looks - looks);
	iwe_cq_del_hook(g_cq, &late.hook);
	CHECK(!late.hook.joined && !late.hook.attached, "removed, it is out of the epoll");
	if (read(g_fake[5].fds[0], &c, 1) != 1)
		BAIL("read: %s", strerror(errno));
	close(late.fds[0]);
	close(late.fds[1]);
}

/* With at most 2 hooks joined (a busy connection or two among idle
 * ones), a poll looks at those directly, input or not, and at no other;
 * a hook that went quiet (iwe_cq_hook_leave) is looked at no more until
 * its next completion; past 2 joined, the epoll says which have input. */
#define FEW 6

/* One poll of cq: which of the n fakes it looked at, as a bit mask. */
static int poll_looked(struct iwe_cq *cq, const struct fake *f, int n)
{
	struct ibv_wc wc;
	int before[FEW], looked = 0, i;

	for (i = 0; i < n; i++)
		before[i] = f[i].looks;
	(void)iwe_poll_cq(cq, 1, &wc);
	for (i = 0; i < n; i++)
		looked |= (f[i].looks != before[i]) << i;
	return looked;
}

static void test_few_joined(struct iwe_device *dev)
{
	struct iwe_cq *cq = iwe_create_cq(dev, 16, NULL, NULL);
	struct fake f[FEW];
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV };
	int looked, i;
	char c = 'x';

	if (!cq)
		BAIL("create cq: %s", strerror(errno));
	for (i = 0; i < FEW; i++) {
		f[i] = (struct fake){ .hook = IWE_CQ_HOOK_INIT(fake_poll, fake_arm, fake_spin) };
		if (pipe(f[i].fds))
			BAIL("pipe: %s", strerror(errno));
		iwe_cq_add_hook(cq, &f[i].hook);
		iwe_cq_hook_watch(cq, &f[i].hook, f[i].fds[0], 1);
	}
	if (write(f[4].fds[1], &c, 1) != 1)
		BAIL("write: %s", strerror(errno));
	iwe_cq_push_from(cq, &f[2].hook, &wc, 0);
	(void)iwe_poll_cq(cq, 1, &wc);
	looked = poll_looked(cq, f, FEW);
	CHECK(looked == 1 << 2, "one hook joined among %d: a poll looks at it alone, "
	      "its socket empty, not at hook 4 with input (looked 0x%x)", FEW, looked);
	iwe_cq_hook_leave(cq, &f[2].hook);
	looked = poll_looked(cq, f, FEW);
	CHECK(looked == 0, "gone quiet, it is looked at no more (looked 0x%x)", looked);
	for (i = 1; i <= 4; i++) {
		iwe_cq_push_from(cq, &f[i].hook, &wc, 0);
		(void)iwe_poll_cq(cq, 1, &wc);
	}
	looked = poll_looked(cq, f, FEW);
	CHECK(looked == 1 << 4, "4 joined: the epoll names hook 4, with input (looked 0x%x)",
	      looked);
	for (i = 0; i < FEW; i++) {
		iwe_cq_del_hook(cq, &f[i].hook);
		close(f[i].fds[0]);
		close(f[i].fds[1]);
	}
	CHECK(iwe_destroy_cq(cq) == 0, "destroy the second CQ");
}

int main(void)
{
	struct iwe_device *dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	int i;

	if (!dev)
		BAIL("open lo: %s", strerror(errno));
	g_cq = iwe_create_cq(dev, 16, NULL, NULL);
	if (!g_cq)
		BAIL("create cq: %s", strerror(errno));
	for (i = 0; i < NHOOKS; i++) {
		g_fake[i].hook = IWE_CQ_HOOK_INIT(fake_poll, fake_arm, fake_spin);
		if (pipe(g_fake[i].fds))
			BAIL("pipe: %s", strerror(errno));
		iwe_cq_add_hook(g_cq, &g_fake[i].hook);
		iwe_cq_hook_watch(g_cq, &g_fake[i].hook, g_fake[i].fds[0], 1);
	}
	test_window();
	test_too_many();
	test_removed();
	test_spun_polls();
	test_busy();
	test_join();
	test_few_joined(dev);
	for (i = 0; i < NHOOKS; i++) {
		if (!g_fake[i].gone)
			iwe_cq_del_hook(g_cq, &g_fake[i].hook);
		close(g_fake[i].fds[0]);
		close(g_fake[i].fds[1]);
	}
	CHECK(iwe_destroy_cq(g_cq) == 0, "destroy the CQ");
	iwe_device_close(dev);
	return tap_done();
}
