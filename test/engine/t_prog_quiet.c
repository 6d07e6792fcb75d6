/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A consumer's spin on connection events keeps the progress thread
 * asleep (iwe_device_spin), and what that may never cost:
 *  - an established connection's input is still placed by the thread
 *    while a spinner looks at nothing (a spinner that lost its CPU for
 *    a time slice): an RDMA Write lands with nobody polling;
 *  - events that came during a spin are dispatched once the last of
 *    overlapping spins ends, with nobody polling: a connection request
 *    made meanwhile reaches the listener, and the pair connects.
 */
#include <signal.h>

#include "cpair.h"

#define WRITE_LEN 65536

/* Both sides are on g_dev: once ESTABLISHED, the thread places the
 * input of both QPs. */
static void test_spin_keeps_placing(void)
{
	struct cpair p;
	long t0;

	cpair_open(&p);
	if (!cpair_std_connect(&p, 31420, "placing")) {
		CHECK(0, "placing: pair connected");
		cpair_close(&p);
		return;
	}
	CHECK(iwe_device_spin(g_dev, 1) == 1,
	      "placing: a spin begins on a device with a progress thread");
	fill(p.a.buf + 65536, WRITE_LEN, 41);
	t0 = now_ms();
	CHECK(post_send1(&p.a, 20, IBV_WR_RDMA_WRITE, 65536, WRITE_LEN,
			 (uintptr_t)(p.b.buf + 131072), p.b.mr->rkey, 0) == 0 &&
	      wait_bytes(p.b.buf + 131072, p.a.buf + 65536, WRITE_LEN),
	      "placing: a 64 KiB RDMA Write lands while a spinner looks at "
	      "nothing and nobody polls (%ld ms)", now_ms() - t0);
	iwe_device_spin(g_dev, 0);
	cpair_disconnect_close(&p, "placing");
}

/* No connection is established on g_dev: the spins quiet the thread. */
static void test_spin_end_dispatches(void)
{
	struct sockaddr_in dst = lo_addr(0);
	struct cpair p;
	struct rec *r;
	int ok;

	cpair_open(&p);
	cpair_std_params(&p);
	ok = iwe_cm_listen(g_dev, 31421, &p.bp, 0, on_event, &p.lp,
			   &p.l) == 0;
	ok = ok && iwe_device_spin(g_dev, 1) == 1 &&
	     iwe_device_spin(g_dev, 1) == 1;
	ok = ok && iwe_cm_connect(p.a.qp, &dst, 31421, NULL, 0, 2000, &p.ap,
				  on_event, &p.la, &p.ca) == 0;
	sleep_ms(50);
	iwe_device_spin(g_dev, 0);	/* one spin still on */
	sleep_ms(50);
	iwe_device_spin(g_dev, 0);
	r = ok ? wait_ev(&p.lp, 0, WAIT_MS) : NULL;
	CHECK(r && r->type == IWE_CM_CONNECT_REQUEST,
	      "spin end: a request made during two overlapping spins reaches "
	      "the listener once both ended, with nobody polling");
	if (r && r->type == IWE_CM_CONNECT_REQUEST) {
		p.cb = r->conn;
		CHECK(iwe_cm_accept(p.cb, p.b.qp, NULL, 0, on_event,
				    &p.lb) == 0 &&
		      wait_type(&p.la, 0, IWE_CM_ESTABLISHED) &&
		      wait_type(&p.lb, 0, IWE_CM_ESTABLISHED),
		      "spin end: the pair then connects");
	}
	cpair_close(&p);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	g_dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!g_dev)
		BAIL("open lo: %s", strerror(errno));
	test_spin_keeps_placing();
	test_spin_end_dispatches();
	iwe_device_close(g_dev);
	return tap_done();
}
