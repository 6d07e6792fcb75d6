/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Memory for the objects every connection has (its EP, QP, Read rings,
 * CM conn), taken from chunks of address space whose pages are faulted
 * in many at a time, ahead of use.  Thousands of connections made at
 * once grew malloc's heap a page at a time, each page a fault when first
 * touched -- about 9 us each on a virtual machine, where the hypervisor
 * takes every fault -- and the faults were a fifth of the setup's time.
 *
 * An object of a given size comes from that size's cache; a cache keeps
 * its chunks while any object in them lives, and one more to come back
 * to.  Under AddressSanitizer or valgrind everything goes to calloc and
 * free, so that the checkers see each object as its own block. */
#ifndef IW_SLAB_H
#define IW_SLAB_H

#include <stddef.h>

/* size bytes, zeroed; NULL (errno ENOMEM) when out of memory. */
void *iw_slab_zalloc(size_t size);
/* p from iw_slab_zalloc(size), the same size; NULL is ignored. */
void iw_slab_free(void *p, size_t size);

/* 1 when every object goes to calloc (a memory checker runs). */
int iw_slab_direct(void);
/* Chunks mapped now, over all caches (for tests). */
size_t iw_slab_chunks(void);

#endif
