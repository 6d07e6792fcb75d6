/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared by the progress-loop tests (t_prog_call.c, t_prog_watch.c):
 * the loopback device's progress thread, and input made
 * with an eventfd.  Header-only (static inline), like qp_harness.h. */
#ifndef IW_TEST_PROG_HARNESS_H
#define IW_TEST_PROG_HARNESS_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "iw_engine.h"
#include "iw_progress.h"

/* Make eventfd fd readable (one more event for its watch). */
static inline void prog_poke(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		BAIL("eventfd write: %s", strerror(errno));
}

/* Open the loopback TCP device (into *dev) and start its progress
 * thread; bails out on failure. */
static inline struct iwe_prog *prog_on_lo(struct iwe_device **dev)
{
	struct iwe_prog *p;

	*dev = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	if (!*dev)
		BAIL("open lo: %s", strerror(errno));
	p = iwe_prog_get(*dev);
	if (!p)
		BAIL("progress thread: %s", strerror(errno));
	return p;
}

#endif
