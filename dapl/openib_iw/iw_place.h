/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Placing received payload into consumer memory.
 *
 * MPI's RDMA "fast path" (and any consumer that polls memory instead of a
 * completion queue) watches the last word of a buffer the peer RDMA-writes
 * and reads the message the instant that word appears.  Hardware adapters
 * let it rely on the bytes of one placement becoming visible in increasing
 * address order; a plain memcpy does not (glibc's copies store the tail of
 * a 64 B - 1 KiB buffer before its middle).  So every byte the engine
 * places into registered memory goes through iw_place_ordered.
 */
#ifndef IW_PLACE_H
#define IW_PLACE_H

#include <stddef.h>

/* Copy len bytes to dst so that another thread polling dst never sees a
 * byte of the tail before the ones below it: on x86-64 (TSO) a short copy
 * is all forward 16-byte stores, so the bytes appear in increasing address
 * order, and a long one (over 8 KiB) stores all but its last 64
 * bytes with memcpy, fences (sfence), then stores those 64 forward; on
 * other CPUs the last bytes are stored after a release fence, so they
 * appear after everything ahead of them.  Buffers must not overlap. */
void iw_place_ordered(void *dst, const void *src, size_t len);

/* Make the bytes already placed ahead of a tail visible before the tail
 * is stored (a release fence), for placements done in pieces. */
void iw_place_fence(void);

#endif
