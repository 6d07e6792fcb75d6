/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Per-connection objects from prefaulted chunks; see iw_slab.h.
 *
 * A chunk is SLAB_CHUNK bytes of address space aligned to its size, so
 * an object's chunk is its address rounded down.  The chunk's first bytes
 * are its header; objects are cut from the rest in order ("bump"), and
 * freed ones are kept on the chunk's list, linked through their first
 * word.  Pages are faulted in by one madvise(MADV_POPULATE_WRITE) each
 * time the bump passes what is faulted, doubling it: a chunk costs six
 * system calls instead of 63 faults, and a process with one connection
 * faults in a page or two per cache.  (On a kernel without the advice
 * pages fault as before.)  One global lock: objects are made and freed
 * when connections are, never per message. */
#include "iw_slab.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IW_SLAB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define IW_SLAB_ASAN 1
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define SLAB_CHUNK   (256u << 10)
#define SLAB_CACHES  64	/* sizes; a process uses some 20 */
#define SLAB_ALIGN   16u
#define SLAB_HDR     64u
#define SLAB_OBJ_MAX ((SLAB_CHUNK - SLAB_HDR) / 8)	/* 8 or more a chunk */
#define SLAB_SPARE   (16u << 10)	/* of a spare chunk, stays faulted in */

struct slab_cache;

struct slab_chunk {
	struct slab_cache *cache;
	struct slab_chunk *prev, *next;	/* the cache's chunks with room */
	void *free;			/* freed objects */
	uint32_t live;			/* objects handed out */
	uint32_t bump;			/* offset of the first byte never used */
	uint32_t dirty;			/* bytes below it may hold old objects'
					 * data: the rest is as the system
					 * gave it, zero */
	uint32_t populated;		/* bytes faulted in, from the start */
	int has_room;			/* on the cache's list */
};

struct slab_cache {
	size_t size;			/* 0: slot unused */
	struct slab_chunk *room;
	uint32_t empty;			/* chunks with no object: at most 1 */
};

_Static_assert(sizeof(struct slab_chunk) <= SLAB_HDR, "chunk header");

static pthread_mutex_t slab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slab_cache slab_caches[SLAB_CACHES];
static size_t slab_chunks_mapped;

int iw_slab_direct(void)
{
#ifdef IW_SLAB_ASAN
	return 1;
#elif defined(RUNNING_ON_VALGRIND)
	static atomic_int direct = -1;	/* the same answer in any thread */
	int d = atomic_load_explicit(&direct, memory_order_relaxed);

	if (d < 0) {
		d = RUNNING_ON_VALGRIND ? 1 : 0;
		atomic_store_explicit(&direct, d, memory_order_relaxed);
	}
	return d;
#else
	return 0;
#endif
}

static size_t round_size(size_t size)
{
	return (size + SLAB_ALIGN - 1) & ~(size_t)(SLAB_ALIGN - 1);
}

/* slab_lock held.  The cache of objects of size bytes; make: add one if
 * there is none.  NULL when none (all slots taken: that size goes to
 * calloc for good, since slots are never given back). */
static struct slab_cache *cache_of(size_t size, int make)
{
	for (int i = 0; i < SLAB_CACHES; i++) {
		struct slab_cache *c = &slab_caches[i];

		if (c->size == size)
			return c;
		if (!c->size) {
			if (!make)
				return NULL;
			c->size = size;
			return c;
		}
	}
	return NULL;
}

static void room_add(struct slab_cache *c, struct slab_chunk *ch)
{
	ch->prev = NULL;
	ch->next = c->room;
	if (c->room)
		c->room->prev = ch;
	c->room = ch;
	ch->has_room = 1;
}

static void room_del(struct slab_cache *c, struct slab_chunk *ch)
{
	if (ch->prev)
		ch->prev->next = ch->next;
	else
		c->room = ch->next;
	if (ch->next)
		ch->next->prev = ch->prev;
	ch->prev = ch->next = NULL;
	ch->has_room = 0;
}

static struct slab_chunk *chunk_new(struct slab_cache *c)
{
	size_t span = 2 * (size_t)SLAB_CHUNK;
	uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t base;
	size_t head;
	struct slab_chunk *ch;

	if (m == MAP_FAILED)
		return NULL;
	/* Keep the aligned chunk inside, give back the rest. */
	base = ((uintptr_t)m + SLAB_CHUNK - 1) & ~(uintptr_t)(SLAB_CHUNK - 1);
	head = base - (uintptr_t)m;
	if (head)
		munmap(m, head);
	munmap((uint8_t *)base + SLAB_CHUNK, span - head - SLAB_CHUNK);
	ch = (struct slab_chunk *)base;
	ch->cache = c;
	ch->bump = SLAB_HDR;
	ch->populated = (uint32_t)sysconf(_SC_PAGESIZE);
	room_add(c, ch);
	c->empty++;
	slab_chunks_mapped++;
	return ch;
}

static void chunk_unmap(struct slab_cache *c, struct slab_chunk *ch)
{
	if (ch->has_room)
		room_del(c, ch);
	munmap(ch, SLAB_CHUNK);
	slab_chunks_mapped--;
}

/* The chunk's last object went and it stays as its cache's spare: it
 * starts over from its first object, and what it had faulted in past
 * SLAB_SPARE goes back to the system (a teardown of thousands of
 * connections leaves a spare per cache, which kept 256 KiB each; a
 * connection made and freed over and over stays within the first
 * pages, and costs no system call). */
static void chunk_reset(struct slab_chunk *ch)
{
	uint32_t kept = ch->bump < SLAB_SPARE ? ch->bump : SLAB_SPARE;

	/* What an earlier life used stays dirty too. */
	if (ch->dirty < kept)
		ch->dirty = kept;
	ch->free = NULL;
	ch->bump = SLAB_HDR;
	if (ch->populated > SLAB_SPARE) {
		(void)madvise((uint8_t *)ch + SLAB_SPARE,
			      ch->populated - SLAB_SPARE, MADV_DONTNEED);
		ch->populated = SLAB_SPARE;
	}
}

/* The bump passed what is faulted in: fault in up to twice as much. */
static void populate(struct slab_chunk *ch)
{
	uint32_t page = (uint32_t)sysconf(_SC_PAGESIZE);
	uint32_t want = (ch->bump + page - 1) & ~(page - 1);
	uint32_t to = 2 * ch->populated;

	if (to < want)
		to = want;
	if (to > SLAB_CHUNK)
		to = SLAB_CHUNK;
	(void)madvise((uint8_t *)ch + ch->populated, to - ch->populated,
		      MADV_POPULATE_WRITE);
	ch->populated = to;
}

/* An object of ch; *used: it may hold old data (else it is zero). */
static void *take(struct slab_cache *c, struct slab_chunk *ch, int *used)
{
	void *p;

	if (ch->free) {
		p = ch->free;
		memcpy(&ch->free, p, sizeof(void *));
		*used = 1;
	} else {
		p = (uint8_t *)ch + ch->bump;
		*used = ch->bump < ch->dirty;
		ch->bump += (uint32_t)c->size;
		if (ch->bump > ch->populated)
			populate(ch);
	}
	if (ch->live++ == 0)
		c->empty--;
	if (!ch->free && ch->bump + c->size > SLAB_CHUNK)
		room_del(c, ch);
	return p;
}

void *iw_slab_zalloc(size_t size)
{
	struct slab_cache *c;
	struct slab_chunk *ch;
	void *p = NULL;
	int used = 0;

	size = round_size(size ? size : 1);
	if (iw_slab_direct() || size > SLAB_OBJ_MAX)
		return calloc(1, size);
	pthread_mutex_lock(&slab_lock);
	c = cache_of(size, 1);
	if (c) {
		ch = c->room ? c->room : chunk_new(c);
		if (ch)
			p = take(c, ch, &used);
	}
	pthread_mutex_unlock(&slab_lock);
	if (!c)
		return calloc(1, size);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	/* Fresh memory is zero already: writing it would only pull a
	 * new object's lines into the cache for nothing (a 2.7 KiB QP's
	 * memset was 7 % of a setup's samples). */
	if (used)
		memset(p, 0, size);
	return p;
}

void iw_slab_free(void *p, size_t size)
{
	struct slab_cache *c;
	struct slab_chunk *ch;

	if (!p)
		return;
	size = round_size(size ? size : 1);
	if (iw_slab_direct() || size > SLAB_OBJ_MAX) {
		free(p);
		return;
	}
	ch = (struct slab_chunk *)((uintptr_t)p & ~(uintptr_t)(SLAB_CHUNK - 1));
	pthread_mutex_lock(&slab_lock);
	c = cache_of(size, 0);
	if (!c) {
		pthread_mutex_unlock(&slab_lock);
		free(p);
		return;
	}
	if (ch->cache != c)
		abort();	/* freed with another size than it was made */
	memcpy(p, &ch->free, sizeof(void *));
	ch->free = p;
	if (!ch->has_room)
		room_add(c, ch);
	/* One empty chunk stays, so that a connection made and freed over
	 * and over maps nothing. */
	if (--ch->live == 0) {
		if (c->empty) {
			chunk_unmap(c, ch);
		} else {
			chunk_reset(ch);
			c->empty++;
		}
	}
	pthread_mutex_unlock(&slab_lock);
}

size_t iw_slab_chunks(void)
{
	size_t n;

	pthread_mutex_lock(&slab_lock);
	n = slab_chunks_mapped;
	pthread_mutex_unlock(&slab_lock);
	return n;
}
