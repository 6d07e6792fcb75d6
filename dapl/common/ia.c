/* The Interface Adapter: open, close, and the calls that work on any
 * handle (consumer context, handle type). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dapl.h"
#include "dapl_evd.h"

/* The registry's own lookup; it maps an index, and also accepts a
 * provider IA pointer it knows.  Not in Debian's headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

#define DEFAULT_ASYNC_QLEN 64

/* ---------------------------------------------------------- objects */

DAT_RETURN dapl_obj_init(struct dapl_obj *obj, struct dapl_ia *ia,
			 enum dapl_kind kind, int htype,
			 void (*destroy)(struct dapl_obj *))
{
	obj->kind = kind;
	obj->htype = htype;
	obj->ia = ia;
	obj->destroy = destroy;
	obj->users = 0;
	obj->context.as_64 = 0;
	obj->handle = dapl_handle_alloc(&ia->prov->dat, htype, obj);
	if (!obj->handle)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	dapl_ia_lock(ia);
	obj->prev = NULL;
	obj->next = ia->objs[kind];
	if (obj->next)
		obj->next->prev = obj;
	ia->objs[kind] = obj;
	dapl_ia_unlock(ia);
	return DAT_SUCCESS;
}

void dapl_obj_fini_locked(struct dapl_obj *obj)
{
	struct dapl_ia *ia = obj->ia;

	dapl_handle_release(obj->handle);
	if (obj->prev)
		obj->prev->next = obj->next;
	else if (ia->objs[obj->kind] == obj)
		ia->objs[obj->kind] = obj->next;
	if (obj->next)
		obj->next->prev = obj->prev;
	obj->prev = obj->next = NULL;
}

void *dapl_obj_get(DAT_HANDLE handle, int htype)
{
	return dapl_handle_obj(handle, htype);
}

/* Any live object, whatever its type: every one begins with dapl_obj. */
static struct dapl_obj *any_obj(DAT_HANDLE handle)
{
	int type = dapl_handle_type(handle);

	if (type == DAPL_HTYPE_FREE)
		return NULL;
	return dapl_handle_obj(handle, type);
}

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

int dapl_deadline(DAT_TIMEOUT timeout_us, struct timespec *deadline)
{
	if (timeout_us == DAT_TIMEOUT_INFINITE)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, deadline);
	deadline->tv_sec += timeout_us / 1000000;
	deadline->tv_nsec += (long)(timeout_us % 1000000) * 1000;
	if (deadline->tv_nsec >= 1000000000L) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000L;
	}
	return 1;
}

/* --------------------------------------------------------- open/close */

static DAT_RETURN device_error(int err)
{
	switch (err) {
	case EINVAL:
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG1;
	case ENODEV:
	case EADDRNOTAVAIL:
		return DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNREACHABLE;
	default:
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	}
}

static DAT_RETURN attach_async_evd(struct dapl_ia *ia, DAT_COUNT qlen,
				   DAT_EVD_HANDLE *async_evd)
{
	struct dapl_evd *evd;
	DAT_RETURN ret;

	if (*async_evd == DAT_EVD_ASYNC_EXISTS)
		return DAT_SUCCESS;	/* this IA reports no async events */
	if (*async_evd != DAT_HANDLE_NULL)
		/* An EVD belongs to an IA, so none can exist before it. */
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EVD_ASYNC;
	if (qlen <= 0)
		qlen = DEFAULT_ASYNC_QLEN;
	ret = dapl_evd_create_internal(ia, qlen, DAT_EVD_ASYNC_FLAG, &evd);
	if (ret != DAT_SUCCESS)
		return ret;
	ia->async_evd = evd;
	ia->async_evd_ours = 1;
	*async_evd = evd->obj.handle;
	return DAT_SUCCESS;
}

static struct dapl_provider *provider_of(const DAT_NAME_PTR name)
{
	return dapl_provider_find(name);
}

static void ia_free(struct dapl_ia *ia)
{
	if (ia->dev)
		iwe_device_close(ia->dev);
	pthread_mutex_destroy(&ia->lock);
	free(ia);
}

DAT_RETURN dapl_ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen,
			DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle)
{
	struct dapl_provider *prov;
	struct dapl_ia *ia;
	struct sockaddr_in *sin;
	DAT_RETURN ret;

	if (!ia_handle)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG4;
	if (!async_evd)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	prov = name ? provider_of(name) : NULL;
	if (!prov)
		return DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED;
	if (prov->cfg.error[0])
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG1;
	ia = calloc(1, sizeof(*ia));
	if (!ia)
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	pthread_mutex_init(&ia->lock, NULL);
	ia->prov = prov;
	ia->dev = iwe_device_open(prov->cfg.where, prov->cfg.transport);
	if (!ia->dev) {
		ret = device_error(errno);
		ia_free(ia);
		return ret;
	}
	iwe_device_query(ia->dev, &ia->dev_attr);
	sin = (struct sockaddr_in *)&ia->ia_addr;
	*sin = ia->dev_attr.addr;
	sin->sin_port = 0;
	ia->obj.kind = DAPL_K_COUNT;	/* not in any list */
	ia->obj.ia = ia;
	ia->obj.htype = DAT_HANDLE_TYPE_IA;
	ia->obj.handle = dapl_handle_alloc(&prov->dat, DAT_HANDLE_TYPE_IA, ia);
	if (!ia->obj.handle) {
		ia_free(ia);
		return DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY;
	}
	ret = attach_async_evd(ia, async_qlen, async_evd);
	if (ret != DAT_SUCCESS) {
		dapl_handle_release(ia->obj.handle);
		ia_free(ia);
		return ret;
	}
	*ia_handle = ia->obj.handle;
	return DAT_SUCCESS;
}

/* Live objects other than the async EVD the IA created for itself. */
static int ia_in_use(struct dapl_ia *ia)
{
	for (int k = 0; k < DAPL_K_COUNT; k++)
		for (struct dapl_obj *o = ia->objs[k]; o; o = o->next)
			if (!(ia->async_evd_ours &&
			      o == &ia->async_evd->obj && o->users == 0))
				return 1;
	return 0;
}

static void destroy_all(struct dapl_ia *ia)
{
	for (int k = 0; k < DAPL_K_COUNT; k++) {
		struct dapl_obj *o;

		dapl_ia_lock(ia);
		while ((o = ia->objs[k])) {
			dapl_ia_unlock(ia);
			o->destroy(o);	/* unlinks itself */
			dapl_ia_lock(ia);
		}
		dapl_ia_unlock(ia);
	}
}

DAT_RETURN dapl_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	dapl_ia_lock(ia);
	if (ia->closing) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE;
	}
	if (flags == DAT_CLOSE_GRACEFUL_FLAG && ia_in_use(ia)) {
		dapl_ia_unlock(ia);
		return DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE;
	}
	ia->closing = 1;
	dapl_ia_unlock(ia);
	destroy_all(ia);
	dapl_handle_release(ia->obj.handle);
	ia_free(ia);
	return DAT_SUCCESS;
}

DAT_RETURN dapl_ia_ha_related(DAT_IA_HANDLE ia_handle, const DAT_NAME_PTR name,
			      DAT_BOOLEAN *answer)
{
	struct dapl_ia *ia = dapl_obj_get(ia_handle, DAT_HANDLE_TYPE_IA);

	if (!ia)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
	if (!name)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG2;
	if (!answer)
		return DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
	/* No high availability: an IA is related only to itself. */
	*answer = strcmp(name, ia->prov->ia_name) == 0 ? DAT_TRUE : DAT_FALSE;
	return DAT_SUCCESS;
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
