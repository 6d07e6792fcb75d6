/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Blocking waits that sleep at once (IWDAPL_WAIT_SPIN_US=0, what every
 * wait does whose answer comes after its spin).  Such a wait sleeps on
 * the socket of the connection it waits for and reads that input itself
 * when it wakes (doc/architecture.md, "The progress model"); what the
 * progress thread completes meanwhile -- another connection's input on
 * the same EVD -- must still wake it, and a wait for nothing must end at
 * its timeout.  Each answer here comes 20 ms after the wait began, long
 * past any spin; the connection events of many connections wake their
 * sleeping waits too.  Over tcp here, over udp in dapltest_progs_udp.sh. */
#include "tside.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define THINK_MS 20
#define BOUND_MS 1000
#define ROUNDS 10
#define CYCLES 200
#define MSG 256

static struct side S, C;	/* S waits; C answers late */

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* C's answer: THINK_MS after it was asked, a Send of MSG bytes from
 * offset off of C's buffer over ep. */
struct late_send {
	DAT_EP_HANDLE ep;
	size_t off;
	uint64_t cookie;
	int ok;
};

static void *send_late(void *arg)
{
	struct late_send *l = arg;
	DAT_LMR_TRIPLET iov = side_lseg(&C, l->off, MSG);

	usleep(THINK_MS * 1000);
	l->ok = dat_ep_post_send(l->ep, 1, &iov, side_ck(l->cookie),
				 DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS &&
		side_dto_ok(C.req, l->cookie, MSG);
	return NULL;
}

/* S waits for one Send that C posts late over c_ep, into a receive
 * posted on s_ep; 1 when it came, whole, within the bound. */
static int wait_for_late(DAT_EP_HANDLE s_ep, DAT_EP_HANDLE c_ep,
			 unsigned seed, long *took)
{
	struct late_send l = { c_ep, (size_t)seed * MSG, seed, 0 };
	DAT_LMR_TRIPLET iov = side_lseg(&S, (size_t)seed * MSG, MSG);
	const DAT_DTO_COMPLETION_EVENT_DATA *d;
	DAT_EVENT ev;
	pthread_t th;
	long t0;

	memset(S.buf + (size_t)seed * MSG, 0, MSG);
	side_fill(C.buf + (size_t)seed * MSG, MSG, seed);
	if (dat_ep_post_recv(s_ep, 1, &iov, side_ck(seed),
			     DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
		return 0;
	t0 = mono_ms();
	pthread_create(&th, NULL, send_late, &l);
	ev = side_wait(S.rcv, BOUND_MS * 1000);
	*took = mono_ms() - t0;
	pthread_join(th, NULL);
	d = &ev.event_data.dto_completion_event_data;
	return l.ok && ev.event_number == DAT_DTO_COMPLETION_EVENT &&
	       d->status == DAT_DTO_SUCCESS && d->user_cookie.as_64 == seed &&
	       d->transfered_length == MSG &&
	       side_same(S.buf + (size_t)seed * MSG, MSG, seed);
}

/* A ping-pong whose every answer comes late: each wait sleeps, on the
 * connection's own socket, and wakes for the message. */
static void test_late_answers(DAT_EP_HANDLE s_ep, DAT_EP_HANDLE c_ep)
{
	long took, worst = 0;
	int good = 0;

	for (unsigned i = 1; i <= ROUNDS; i++) {
		good += wait_for_late(s_ep, c_ep, i, &took);
		if (took > worst)
			worst = took;
	}
	CHECK(good == ROUNDS && worst < BOUND_MS,
	      "late answers: %d of %d sleeping waits woke for their Send, "
	      "whole (slowest %ld ms; the answer came after %d ms)", good,
	      ROUNDS, worst, THINK_MS);
}

/* Two connections complete into S's receive EVD; the wait sleeps on
 * the socket of the one that completed last, and the Send comes over
 * the other: the progress thread reads it and its completion wakes the
 * sleeper. */
static void test_other_connection(DAT_EP_HANDLE s_ep1, DAT_EP_HANDLE c_ep1,
				  DAT_EP_HANDLE s_ep2, DAT_EP_HANDLE c_ep2)
{
	long took1 = -1, took2 = -1;
	int ok1, ok2;

	ok1 = wait_for_late(s_ep1, c_ep1, ROUNDS + 1, &took1);
	ok2 = wait_for_late(s_ep2, c_ep2, ROUNDS + 2, &took2);
	CHECK(ok1 && ok2 && took2 < BOUND_MS,
	      "other connection: a wait last served by one connection woke "
	      "for the other's Send, whole (%ld ms)", took2);
}

/* Connections made and ended with waits that sleep: each connection
 * event wakes its sleeper, including the ones the loop delivers on the
 * sleeper's own thread while it sleeps (the DISCONNECTED of an abrupt
 * close is decided inside dat_ep_disconnect and queued for the loop,
 * which the wait's sleep runs).  A wake-up lost there ends the wait at
 * its timeout. */
static void test_connection_cycles(DAT_CONN_QUAL qual)
{
	DAT_EVENT ev;
	int i, ok = 1;

	for (i = 0; i < CYCLES && ok; i++) {
		S.ep = side_ep(&S);
		C.ep = side_ep(&C);
		ok = !side_connect_within(&S, &C, qual, BOUND_MS * 1000) &&
		     dat_ep_disconnect(C.ep, DAT_CLOSE_ABRUPT_FLAG) ==
		     DAT_SUCCESS &&
		     side_wait(C.conn, BOUND_MS * 1000).event_number ==
		     DAT_CONNECTION_EVENT_DISCONNECTED;
		/* The passive side learns of the abrupt close as it can. */
		ev = side_wait(S.conn, BOUND_MS * 1000);
		ok = ok && ev.event_number != 0;
		dat_ep_free(C.ep);
		dat_ep_free(S.ep);
	}
	S.ep = C.ep = DAT_HANDLE_NULL;
	CHECK(ok, "connection cycles: %d of %d connected and ended, every "
	      "wait for their events woken within %d ms", ok ? i : i - 1,
	      CYCLES, BOUND_MS);
}

/* Nothing comes: the sleep ends at the wait's timeout, not before and
 * not much after. */
static void test_timeout(void)
{
	DAT_EVENT ev;
	DAT_COUNT n;
	DAT_RETURN r;
	long t0 = mono_ms(), took;

	r = dat_evd_wait(S.rcv, 30000, 1, &ev, &n);
	took = mono_ms() - t0;
	CHECK(DAT_GET_TYPE(r) == DAT_TIMEOUT_EXPIRED && took >= 29 &&
	      took < BOUND_MS,
	      "timeout: a 30 ms wait for nothing expired after %ld ms", took);
}

int main(void)
{
	DAT_EP_HANDLE s_ep1, c_ep1, s_ep2, c_ep2;
	DAT_PSP_HANDLE psp;
	DAT_CONN_QUAL qual;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Read once, at the first wait: every wait of this process sleeps
	 * without spinning. */
	setenv("IWDAPL_WAIT_SPIN_US", "0", 1);
	side_open(&S);
	side_open(&C);
	psp = side_psp(&S, &qual);
	S.ep = side_ep(&S);
	C.ep = side_ep(&C);
	side_connect(&S, &C, qual, "first");
	s_ep1 = S.ep;
	c_ep1 = C.ep;
	test_late_answers(s_ep1, c_ep1);
	S.ep = side_ep(&S);
	C.ep = side_ep(&C);
	side_connect(&S, &C, qual, "second");
	s_ep2 = S.ep;
	c_ep2 = C.ep;
	test_other_connection(s_ep1, c_ep1, s_ep2, c_ep2);
	test_timeout();

	side_disconnect_free(&S, &C);
	test_connection_cycles(qual);
	S.ep = s_ep1;
	C.ep = c_ep1;
	side_disconnect_free(&S, &C);
	dat_psp_free(psp);
	side_close(&C);
	side_close(&S);
	return tap_done();
}
