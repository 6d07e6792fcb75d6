/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: the lone connection the busy one is held against.
 *
 * Measured in different phases of a run -- connection 0 before the
 * others connect, then among them after their use, seconds apart -- the
 * two figures moved with the machine more than with the connections: on
 * the 2-CPU test VM the same build's busy/lone ratio of the 8 B
 * ping-pong swung from 0.8 to 1.6 between runs.  So the lone connection
 * is one of its own, on a second IA (its own device, progress thread,
 * EVDs and region), made before the snapshots (its memory is in none of
 * the differences), and in the busy phase the two take turns -- lone,
 * busy, lone, busy... -- each turn a share of the round trips and
 * seconds; the report pools each kind's turns.  Connection 0 before the
 * others is still measured ("first"). */
#include <stdio.h>

#include "iwscale.h"

int lone_open(struct scale_side *lone, struct scale_opts *lo, const struct scale_side *s)
{
	struct scale_msg m = { 0 };

	*lo = *s->o;
	lo->n = 1;
	lo->listeners = 1;
	lo->qual = s->o->qual + SCALE_LONE_QUAL_OFFSET;
	*lone = (struct scale_side){ .o = lo, .active = s->active, .ctl = s->ctl };
	side_log(s, "the lone connection's IA");
	if (side_ready(lone, STEP_LONE_READY))
		return -1;
	if (!s->active)
		return accept_range(lone, 0, 1, &m) ||
		       ctl_send(s->ctl, &(struct scale_msg){ .step = STEP_LONE_UP });
	return connect_range(lone, 0, 1, &m) ||
	       ctl_recv(s->ctl, STEP_LONE_UP, s->o->wait_s, &(struct scale_msg){ 0 });
}

int lone_teardown(struct scale_side *lone)
{
	struct scale_msg m = { 0 };

	if (!lone->o || lone->up < 1)
		return 0;
	return teardown(lone, &m) || m.count != 1 ? -1 : 0;
}

void lone_close(struct scale_side *lone)
{
	if (!lone->o)
		return;		/* never opened */
	if (!lone->active)
		unlisten_all(lone);
	side_close(lone);
}

int turns_active(struct scale_side *lone, struct scale_side *s, struct busy_result *lone_r,
		 struct busy_result *busy_r)
{
	const struct scale_opts *o = s->o;
	struct busy_plan p = { .pp_iters = o->pp_iters / SCALE_TURNS > 0 ?
						   o->pp_iters / SCALE_TURNS : 1,
			       .secs = o->busy_s / SCALE_TURNS };
	struct busy_pool lp = { 0 }, bp = { 0 };
	struct busy_result r;
	int rc = -1;

	if (busy_pool_init(&lp, o->pp_iters) || busy_pool_init(&bp, o->pp_iters))
		goto out;
	for (int t = 0; t < SCALE_TURNS; t++) {
		side_log(s, "turn %d of %d: lone, then busy", t + 1, SCALE_TURNS);
		if (busy_active(lone, &p, &r))
			goto out;
		busy_pool_add(&lp, lone, &r);
		if (busy_active(s, &p, &r))
			goto out;
		busy_pool_add(&bp, s, &r);
	}
	rc = 0;
out:
	busy_pool_result(&lp, lone_r);
	busy_pool_result(&bp, busy_r);
	return rc;
}

int turns_passive(struct scale_side *lone, struct scale_side *s)
{
	for (int t = 0; t < SCALE_TURNS; t++)
		if (busy_passive(lone) || busy_passive(s))
			return -1;
	return 0;
}
