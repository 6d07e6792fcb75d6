/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The object layer: what every DAT object of this provider shares (struct
 * dapl_obj), its handle, its place in its IA's lists, the count of
 * dependents, and the calls that work on any handle (consumer context,
 * handle type).  Everything above this file names objects through here;
 * this file knows no object kind in particular.
 *
 * Looking an object up is cheap and safe for a stale handle (see
 * dapl_handle.h), but the object may be freed by another thread right
 * after.  A caller that changes or frees an object therefore looks it up
 * again under its IA's lock (dapl_obj_lock, dapl_obj_get_locked): frees
 * release the handle under that lock, so a handle that still names the
 * object there names a live object until the lock is dropped.
 */
#include "config.h"

#include <stdint.h>

#include "dapl.h"

/* The registry's own lookup; it maps an index, and also accepts a
 * provider IA pointer it knows.  Not in Debian's headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

/* ------------------------------------------------------ registration */

/* dat_ia_query's max_eps holds: the EP past it is refused here (the
 * engine caps its QPs per device as well). */
static int kind_full_locked(const struct dapl_ia *ia, enum dapl_kind kind)
{
	return kind == DAPL_K_EP && ia->nobjs[kind] >= ia->dev_attr.max_qp;
}

DAT_RETURN dapl_obj_init_locked(struct dapl_obj *obj, struct dapl_ia *ia,
				enum dapl_kind kind, int htype,
				void (*destroy)(struct dapl_obj *))
{
	DAPL_ASSERT_IA_LOCKED(ia);
	if (kind_full_locked(ia, kind))
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEP;
	obj->kind = kind;
	obj->htype = htype;
	obj->ia = ia;
	obj->destroy = destroy;
	obj->users = 0;
	obj->context.as_64 = 0;
	obj->handle = dapl_handle_alloc(&ia->prov->dat, htype, obj, ia);
	if (!obj->handle)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	obj->prev = NULL;
	obj->next = ia->objs[kind];
	if (obj->next)
		obj->next->prev = obj;
	ia->objs[kind] = obj;
	ia->nobjs[kind]++;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_obj_init(struct dapl_obj *obj, struct dapl_ia *ia,
			 enum dapl_kind kind, int htype,
			 void (*destroy)(struct dapl_obj *))
{
	DAT_RETURN r;

	dapl_ia_lock(ia);
	r = dapl_obj_init_locked(obj, ia, kind, htype, destroy);
	dapl_ia_unlock(ia);
	return r;
}

void dapl_obj_fini_locked(struct dapl_obj *obj)
{
	struct dapl_ia *ia = obj->ia;

	DAPL_ASSERT_IA_LOCKED(ia);
	dapl_handle_release(obj->handle);
	if (obj->prev || ia->objs[obj->kind] == obj)
		ia->nobjs[obj->kind]--;
	if (obj->prev)
		obj->prev->next = obj->next;
	else if (ia->objs[obj->kind] == obj)
		ia->objs[obj->kind] = obj->next;
	if (obj->next)
		obj->next->prev = obj->prev;
	obj->prev = obj->next = NULL;
}

/* ----------------------------------------------------------- look-up */

void *dapl_obj_get(DAT_HANDLE handle, int htype)
{
	return dapl_handle_obj(handle, htype);
}

void *dapl_obj_get_locked(struct dapl_ia *ia, DAT_HANDLE handle, int htype)
{
	DAPL_ASSERT_IA_LOCKED(ia);
	return dapl_handle_find(handle, htype, NULL, ia);
}

void *dapl_obj_lock(DAT_HANDLE handle, int htype)
{
	struct dapl_obj *obj = dapl_obj_get(handle, htype);
	struct dapl_ia *ia;

	if (!obj)
		return NULL;
	ia = obj->ia;
	dapl_ia_lock(ia);
	if (dapl_obj_get_locked(ia, handle, htype) != obj) {
		dapl_ia_unlock(ia);	/* a concurrent free won */
		return NULL;
	}
	return obj;
}

void *dapl_obj_query_get(DAT_HANDLE handle, int htype, DAT_RETURN bad_handle,
			 DAT_UINT64 mask, DAT_UINT64 all, int param_missing,
			 DAT_RETURN *r)
{
	void *obj = dapl_obj_get(handle, htype);

	if (!obj)
		*r = DAT_INVALID_HANDLE | bad_handle;
	else if (mask & ~all)
		*r = DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	else if (param_missing)
		*r = DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	else
		return obj;
	return NULL;
}

/* Any live object, whatever its type: every one begins with dapl_obj. */
static struct dapl_obj *any_obj(DAT_HANDLE handle)
{
	int type = dapl_handle_type(handle);

	if (type == DAPL_HTYPE_FREE)
		return NULL;
	return dapl_handle_obj(handle, type);
}

/* ------------------------------------------------------ dependents */

void *dapl_obj_pin(struct dapl_ia *ia, DAT_HANDLE handle, int htype)
{
	struct dapl_obj *obj;

	dapl_ia_lock(ia);
	obj = dapl_obj_get_locked(ia, handle, htype);
	if (obj)
		obj->users++;
	dapl_ia_unlock(ia);
	return obj;
}

void dapl_obj_unpin_locked(struct dapl_obj *obj)
{
	DAPL_ASSERT_IA_LOCKED(obj->ia);
	if (obj->users > 0)
		obj->users--;
}

void dapl_obj_unpin(struct dapl_obj *obj)
{
	struct dapl_ia *ia = obj->ia;

	dapl_ia_lock(ia);
	dapl_obj_unpin_locked(obj);
	dapl_ia_unlock(ia);
}

/* -------------------------------------------------------------- IA */

DAT_IA_HANDLE dapl_ia_consumer_handle(struct dapl_ia *ia)
{
	DAT_IA_HANDLE h;

	if (ia->consumer_handle)
		return ia->consumer_handle;
	/* The registry hands consumers small indexes; find ours once. */
	for (uintptr_t i = 1; i < 4096; i++) {
		if (dats_get_ia_handle((DAT_IA_HANDLE)i, &h) == DAT_SUCCESS &&
		    h == ia->obj.handle) {
			ia->consumer_handle = (DAT_IA_HANDLE)i;
			return ia->consumer_handle;
		}
	}
	return ia->obj.handle;	/* the registry accepts this too */
}

/* ------------------------------------------------- handle-generic calls */

DAT_RETURN dapl_set_consumer_context(DAT_HANDLE handle, DAT_CONTEXT context)
{
	struct dapl_obj *o = any_obj(handle);

	if (!o)
		return DAT_INVALID_HANDLE;
	o->context = context;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_get_consumer_context(DAT_HANDLE handle, DAT_CONTEXT *context)
{
	struct dapl_obj *o = any_obj(handle);

	if (!o)
		return DAT_INVALID_HANDLE;
	if (!context)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	*context = o->context;
	return DAT_SUCCESS;
}

DAT_RETURN dapl_get_handle_type(DAT_HANDLE handle, DAT_HANDLE_TYPE *type)
{
	int t = dapl_handle_type(handle);

	if (t == DAPL_HTYPE_FREE)
		return DAT_INVALID_HANDLE;
	if (!type)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	*type = (DAT_HANDLE_TYPE)t;
	return DAT_SUCCESS;
}
