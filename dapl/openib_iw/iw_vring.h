/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A mirrored byte ring: cap bytes of memory mapped twice, back to back,
 * so that any cap bytes starting anywhere in the first copy are one
 * contiguous range of addresses.  A receive buffer built on it never
 * moves a partly read record to its front: the record simply goes on
 * past the end and is whole where it began. */
#ifndef IW_VRING_H
#define IW_VRING_H

#include <stdint.h>

/* 2 * cap bytes of address space, the second half the first one again;
 * NULL (errno set) when cap is not a multiple of the page size or the
 * system refuses (then use plain memory).  Not inherited by fork()ed
 * children: the two halves are shared memory, which a child would
 * otherwise write into under its parent. */
uint8_t *iw_vring_map(uint32_t cap);
void iw_vring_unmap(uint8_t *ring, uint32_t cap);

#endif
