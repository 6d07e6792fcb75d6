/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Consumer-visible handles.
 *
 * The registry dereferences every handle to find the provider
 * (DAT_HANDLE_TO_PROVIDER reads the first word), so a handle must point to
 * memory that stays readable after its object is freed.  A handle is
 * therefore a pointer to a slot that is never freed while the library is
 * loaded: the slot keeps the provider pointer, so a stale handle still
 * reaches us, and we answer DAT_INVALID_HANDLE without reading the freed
 * object.  Freed slots are reused in FIFO order only after a long quarantine,
 * so a stale handle is detected for as long as possible.
 */
#ifndef DAPL_HANDLE_H
#define DAPL_HANDLE_H

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

struct dapl_hslot {
	const DAT_PROVIDER *provider;	/* must stay first: the registry reads it */
	int type;			/* DAT_HANDLE_TYPE_* or DAPL_HTYPE_FREE */
	unsigned int generation;	/* bumped at every reuse */
	void *obj;			/* NULL once freed */
	const void *owner;		/* the object's IA (scope of use) */
	struct dapl_hslot *next_free;
};

#define DAPL_HTYPE_FREE (-1)

/* Allocate a handle for obj of the given type, owned by 'owner' (its IA).
 * NULL when out of memory. */
DAT_HANDLE dapl_handle_alloc(const DAT_PROVIDER *provider, int type, void *obj,
			     const void *owner);

/* Invalidate a handle: later lookups fail.  The slot goes to quarantine. */
void dapl_handle_release(DAT_HANDLE handle);

/* The object behind a live handle of the given type, or NULL: for NULL
 * handles, pointers that are not ours, freed handles and wrong types. */
void *dapl_handle_obj(DAT_HANDLE handle, int type);

/* The same, further restricted, without reading the object (which another
 * thread may be freeing): to handles of 'provider' and of 'owner'; a NULL
 * restriction accepts any. */
void *dapl_handle_find(DAT_HANDLE handle, int type, const DAT_PROVIDER *provider,
		       const void *owner);

/* The type of a live handle, or DAPL_HTYPE_FREE. */
int dapl_handle_type(DAT_HANDLE handle);

/* Whether the pointer is one of our slots (live or not). */
int dapl_handle_is_ours(DAT_HANDLE handle);

#endif
