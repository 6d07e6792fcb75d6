/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Handle slots: see dapl_handle.h for why they are never freed. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "dapl_handle.h"
#include "dapl_lock.h"

#define SLOTS_PER_CHUNK 1024
/* A freed slot is reused only once this many others wait behind it. */
#define QUARANTINE 4096

struct slot_chunk {
	struct dapl_hslot slots[SLOTS_PER_CHUNK];
	struct slot_chunk *next;
};

static struct dapl_lock table_lock = DAPL_LOCK_INITIALIZER;
static struct slot_chunk *chunks;	/* kept for the life of the process */
static size_t nchunks;
static struct slot_chunk **chunk_index;	/* sorted by address, for lookups */
static size_t next_unused;		/* in the newest chunk */
static struct dapl_hslot *free_head, *free_tail;
static size_t free_count;

static int chunk_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(struct slot_chunk *const *)a;
	uintptr_t y = (uintptr_t)*(struct slot_chunk *const *)b;
	return (x > y) - (x < y);
}

static int add_chunk(void)
{
	struct slot_chunk *c = calloc(1, sizeof(*c));
	struct slot_chunk **idx;

	if (!c)
		return -1;
	idx = realloc(chunk_index, (nchunks + 1) * sizeof(*idx));
	if (!idx) {
		free(c);
		return -1;
	}
	chunk_index = idx;
	chunk_index[nchunks++] = c;
	qsort(chunk_index, nchunks, sizeof(*idx), chunk_cmp);
	c->next = chunks;
	chunks = c;
	next_unused = 0;
	return 0;
}

static struct dapl_hslot *take_slot(void)
{
	struct dapl_hslot *s;

	if (free_count > QUARANTINE) {
		s = free_head;
		free_head = s->next_free;
		if (!free_head)
			free_tail = NULL;
		free_count--;
		s->next_free = NULL;
		s->generation++;
		return s;
	}
	if (!chunks || next_unused == SLOTS_PER_CHUNK)
		if (add_chunk())
			return NULL;
	return &chunks->slots[next_unused++];
}

DAT_HANDLE dapl_handle_alloc(const DAT_PROVIDER *provider, int type, void *obj,
			     const void *owner)
{
	struct dapl_hslot *s;

	dapl_lock(&table_lock);
	s = take_slot();
	if (s) {
		s->provider = provider;
		s->type = type;
		s->obj = obj;
		s->owner = owner;
	}
	dapl_unlock(&table_lock);
	return (DAT_HANDLE)s;
}

static int is_ours_locked(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	size_t lo = 0, hi = nchunks;

	DAPL_ASSERT_LOCKED(&table_lock);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uintptr_t base = (uintptr_t)chunk_index[mid]->slots;
		uintptr_t end = base + sizeof(chunk_index[mid]->slots);

		if (a < base)
			hi = mid;
		else if (a >= end)
			lo = mid + 1;
		else
			return (a - base) % sizeof(struct dapl_hslot) == 0;
	}
	return 0;
}

void dapl_handle_release(DAT_HANDLE handle)
{
	struct dapl_hslot *s = (struct dapl_hslot *)handle;

	dapl_lock(&table_lock);
	if (s && is_ours_locked(s) && s->type != DAPL_HTYPE_FREE) {
		s->type = DAPL_HTYPE_FREE;
		s->obj = NULL;
		s->owner = NULL;
		s->next_free = NULL;
		if (free_tail)
			free_tail->next_free = s;
		else
			free_head = s;
		free_tail = s;
		free_count++;
	}
	dapl_unlock(&table_lock);
}

void *dapl_handle_find(DAT_HANDLE handle, int type, const DAT_PROVIDER *provider,
		       const void *owner)
{
	struct dapl_hslot *s = (struct dapl_hslot *)handle;
	void *obj = NULL;

	if (!s)
		return NULL;
	dapl_lock(&table_lock);
	if (is_ours_locked(s) && s->type == type &&
	    (!provider || s->provider == provider) &&
	    (!owner || s->owner == owner))
		obj = s->obj;
	dapl_unlock(&table_lock);
	return obj;
}

void *dapl_handle_obj(DAT_HANDLE handle, int type)
{
	return dapl_handle_find(handle, type, NULL, NULL);
}

int dapl_handle_type(DAT_HANDLE handle)
{
	struct dapl_hslot *s = (struct dapl_hslot *)handle;
	int type = DAPL_HTYPE_FREE;

	if (!s)
		return type;
	dapl_lock(&table_lock);
	if (is_ours_locked(s))
		type = s->type;
	dapl_unlock(&table_lock);
	return type;
}

int dapl_handle_is_ours(DAT_HANDLE handle)
{
	int ours;

	dapl_lock(&table_lock);
	ours = is_ours_locked(handle);
	dapl_unlock(&table_lock);
	return ours;
}

/* The registry dlcloses the provider at exit: nothing can use a handle
 * after that, so the slots go with the library. */
__attribute__((destructor)) static void handle_table_fini(void)
{
	while (chunks) {
		struct slot_chunk *c = chunks;

		chunks = c->next;
		free(c);
	}
	free(chunk_index);
	chunk_index = NULL;
	nchunks = 0;
	free_head = free_tail = NULL;
	free_count = 0;
}
