/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale's control channel: a socketpair between the two processes that
 * steps them through the phases together and carries each side's figures
 * to the active side, which reports.  Every receive is bounded, so a peer
 * that died or hangs ends the run instead of stalling it. */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "iwscale.h"
#include "proc_io.h"

static const char *step_name(int64_t step)
{
	static const char *const names[] = {
		[STEP_TCP_READY] = "TCP_READY", [STEP_TCP_DONE] = "TCP_DONE",
		[STEP_TCP_CLOSED] = "TCP_CLOSED", [STEP_DAT_READY] = "DAT_READY",
		[STEP_LONE_READY] = "LONE_READY", [STEP_LONE_UP] = "LONE_UP",
		[STEP_PRIMED] = "PRIMED", [STEP_FIRST_UP] = "FIRST_UP", [STEP_BUSY] = "BUSY", [STEP_BUSY_DONE] = "BUSY_DONE",
		[STEP_SETUP_DONE] = "SETUP_DONE", [STEP_USE] = "USE", [STEP_USE_DONE] = "USE_DONE",
		[STEP_TEARDOWN] = "TEARDOWN", [STEP_TEARDOWN_DONE] = "TEARDOWN_DONE",
		[STEP_LEAK] = "LEAK", [STEP_STOP] = "STOP",
	};

	return step > 0 && step <= STEP_STOP && names[step] ? names[step] : "?";
}

int ctl_send(int fd, const struct scale_msg *m)
{
	if (io_full(fd, (void *)m, sizeof *m, 1) == 0)
		return 0;
	fprintf(stderr, "iwscale: the peer is gone (sending %s)\n", step_name(m->step));
	return -1;
}

int ctl_recv(int fd, int64_t step, double wait_s, struct scale_msg *m)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	memset(m, 0, sizeof *m);
	if (poll(&p, 1, (int)(wait_s * 1000)) != 1) {
		fprintf(stderr, "iwscale: no %s from the peer within %.0f s\n", step_name(step),
			wait_s);
		return -1;
	}
	if (io_full(fd, m, sizeof *m, 0)) {
		fprintf(stderr, "iwscale: the peer is gone (waiting for %s)\n", step_name(step));
		return -1;
	}
	if (m->step == STEP_STOP) {
		fprintf(stderr, "iwscale: the peer gave up%s%s (waiting for %s)\n",
			m->what[0] ? ": " : "", m->what, step_name(step));
		return -1;
	}
	if (m->step != step) {
		fprintf(stderr, "iwscale: got %s from the peer, expected %s\n",
			step_name(m->step), step_name(step));
		return -1;
	}
	return 0;
}

int ctl_peer_gone(int fd, const char *waiting_for)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct scale_msg m;

	if (poll(&p, 1, 0) != 1)
		return 0;
	/* Nothing is due while a phase runs: a STOP, or the end. */
	if (io_full(fd, &m, sizeof m, 0))
		fprintf(stderr, "iwscale: the peer is gone (waiting for %s)\n", waiting_for);
	else
		fprintf(stderr, "iwscale: the peer gave up%s%s (waiting for %s)\n",
			m.what[0] ? ": " : "", m.what, waiting_for);
	return 1;
}

void ctl_stop(int fd, const char *why)
{
	struct scale_msg m = { .step = STEP_STOP };

	snprintf(m.what, sizeof m.what, "%s", why);
	/* Best effort: a peer that is gone needs no telling. */
	(void)ctl_send(fd, &m);
}
