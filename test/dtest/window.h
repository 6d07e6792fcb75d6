/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The window of outstanding operations, one rule for iwdtest and
 * bench/tcp_baseline so that their message rates compare like for like.
 *
 * A window of W means: the sender never has more than W messages (RDMA
 * Writes, Sends, TCP send()s) that the receiving application has not yet
 * acknowledged, or more than W RDMA Reads whose completion it has not yet
 * seen.  The receiver acknowledges every W/2 messages, so the sender keeps
 * streaming while an acknowledgement is on its way.  Large messages get a
 * smaller window: at most WIN_BYTES in flight, which already fills any pipe
 * and bounds the memory the receiver must expose. */
#ifndef IWDTEST_WINDOW_H
#define IWDTEST_WINDOW_H

#include <stddef.h>

#define WIN_DEFAULT 32			/* operations, when none is asked for */
#define WIN_LIMIT 64			/* the most either tool supports */
#define WIN_BYTES (8u << 20)		/* at most this many bytes in flight */

/* The window used for messages of `size` bytes when `asked` were asked
 * for (0: the default). */
static inline long win_for_size(size_t size, long asked)
{
	long w = asked > 0 ? asked : WIN_DEFAULT, by_bytes = (long)(WIN_BYTES / size);

	if (w > WIN_LIMIT)
		w = WIN_LIMIT;
	if (by_bytes < w)
		w = by_bytes;
	return w < 1 ? 1 : w;
}

/* Messages per acknowledgement in a window of w. */
static inline long win_ack_every(long w)
{
	return w / 2 > 0 ? w / 2 : 1;
}

#endif
