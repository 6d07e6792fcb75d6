/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Protection domains, memory regions, memory windows and the STag table.
 *
 * An STag is a 24-bit index into the device's table and an 8-bit key.
 * The table maps an index to what the STag currently grants (memory,
 * bounds, rights, PD).  Every time an index is handed out again its key
 * changes, and freed indexes wait in a FIFO before reuse: a peer still
 * holding an old STag then meets an invalid entry or a different key, and
 * gets a Terminate instead of someone else's memory.
 *
 * Addressing is by virtual address (no zero-based offsets yet): the tagged
 * offset of a region is the host address at which it was registered.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "iw_env.h"
#include "iw_guard.h"
#include "iw_priv.h"

/* Linux 5.14; glibc's headers have them from 2.35. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MR_ACCESS_ALLOWED                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |          \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |         \
	 IBV_ACCESS_MW_BIND)
#define REMOTE_ACCESS                                                \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |          \
	 IBV_ACCESS_REMOTE_ATOMIC)
/* Rights that let a peer modify memory; verbs demand local write too. */
#define REMOTE_MODIFY (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
#define STAG_FIRST_CAP 256u

/* ---------------------------------------------- STag table (dev->lock) */

static int stag_grow(struct iwe_stag_table *t)
{
	uint32_t ncap = t->cap ? t->cap * 2 : STAG_FIRST_CAP;
	struct iwe_stag_entry *n;

	if (ncap > IWE_STAG_MAX_INDEX + 1)
		ncap = IWE_STAG_MAX_INDEX + 1;
	if (ncap <= t->cap)
		return ENOMEM;
	n = realloc(t->ent, (size_t)ncap * sizeof(*n));
	if (!n)
		return ENOMEM;
	memset(n + t->cap, 0, (size_t)(ncap - t->cap) * sizeof(*n));
	t->ent = n;
	t->cap = ncap;
	return 0;
}

static uint32_t stag_pop_free(struct iwe_stag_table *t)
{
	uint32_t idx = t->free_head;
	struct iwe_stag_entry *e = &t->ent[idx];

	t->free_head = e->next_free;
	if (!t->free_head)
		t->free_tail = 0;
	t->nfree--;
	e->next_free = 0;
	e->key++;		/* reuse: a stale STag no longer matches */
	atomic_fetch_add(&t->gen, 1);
	return idx;
}

/* A fresh index, or 0 when the index space or memory is exhausted. */
static uint32_t stag_take_fresh(struct iwe_stag_table *t)
{
	if (!t->next_fresh)
		t->next_fresh = 1;	/* index 0 is reserved */
	if (t->next_fresh > IWE_STAG_MAX_INDEX)
		return 0;
	if (t->next_fresh >= t->cap && stag_grow(t))
		return 0;
	return t->next_fresh++;
}

/* Reuse a freed index only once enough others have been freed after it;
 * until then prefer a never-used one.  Returns 0 when none is left. */
static uint32_t stag_alloc(struct iwe_stag_table *t, enum iwe_stag_kind kind,
			   void *obj)
{
	uint32_t idx = 0;

	if (t->nfree > t->reuse_delay)
		idx = stag_pop_free(t);
	if (!idx)
		idx = stag_take_fresh(t);
	if (!idx && t->nfree)
		idx = stag_pop_free(t);
	if (idx) {
		t->ent[idx].kind = (uint8_t)kind;
		t->ent[idx].obj = obj;
		t->ent[idx].valid = 0;
	}
	return idx;
}

static void stag_free(struct iwe_stag_table *t, uint32_t idx)
{
	struct iwe_stag_entry *e = &t->ent[idx];
	uint8_t key = e->key;

	memset(e, 0, sizeof(*e));
	e->key = key;
	atomic_fetch_add(&t->gen, 1);
	if (t->free_tail)
		t->ent[t->free_tail].next_free = idx;
	else
		t->free_head = idx;
	t->free_tail = idx;
	t->nfree++;
}

void iwe_stag_set_reuse_delay(struct iwe_device *dev, uint32_t delay)
{
	iwe_lock(&dev->lock);
	dev->stags.reuse_delay = delay;
	iwe_unlock(&dev->lock);
}

/* For the fuzz rig: an empty table back to a new device's state (every
 * index never used, keys 0; the reuse delay kept), so the next objects
 * get a new device's STags without the cost of opening one.  EBUSY while
 * an MR or MW lives. */
int iwe_stag_table_reset(struct iwe_device *dev)
{
	struct iwe_stag_table *t = &dev->stags;
	int err = EBUSY;

	iwe_lock(&dev->lock);
	if (!t->nmr && !t->nmw) {
		if (t->cap)
			memset(t->ent, 0, (size_t)t->cap * sizeof(*t->ent));
		t->next_fresh = 0;
		t->free_head = t->free_tail = t->nfree = 0;
		err = 0;
	}
	iwe_unlock(&dev->lock);
	return err;
}

/* --------------------------------------------------------------- PDs */

struct iwe_pd *iwe_alloc_pd(struct iwe_device *dev)
{
	struct iwe_pd *pd;

	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->dev = dev;
	iwe_lock(&dev->lock);
	if (dev->npd >= IWE_MAX_PD) {
		iwe_unlock(&dev->lock);
		free(pd);
		errno = ENOMEM;
		return NULL;
	}
	dev->npd++;
	iwe_unlock(&dev->lock);
	return pd;
}

int iwe_dealloc_pd(struct iwe_pd *pd)
{
	struct iwe_device *dev;

	if (!pd)
		return EINVAL;
	dev = pd->dev;
	iwe_lock(&dev->lock);
	if (pd->users) {
		iwe_unlock(&dev->lock);
		return EBUSY;
	}
	dev->npd--;
	iwe_unlock(&dev->lock);
	free(pd);
	return 0;
}

void iwe_pd_get(struct iwe_pd *pd)
{
	iwe_lock(&pd->dev->lock);
	pd->users++;
	iwe_unlock(&pd->dev->lock);
}

void iwe_pd_put(struct iwe_pd *pd)
{
	iwe_lock(&pd->dev->lock);
	if (pd->users)
		pd->users--;
	iwe_unlock(&pd->dev->lock);
}

/* --------------------------------------------------------------- MRs */

static int mr_args_valid(const struct iwe_pd *pd, const void *addr,
			 size_t length, int access)
{
	if (!pd || !addr || length == 0 || length > IWE_MAX_MR_SIZE)
		return 0;
	if ((uintptr_t)addr > UINTPTR_MAX - (length - 1))
		return 0;	/* range would wrap around */
	if (access & ~MR_ACCESS_ALLOWED)
		return 0;
	if ((access & REMOTE_MODIFY) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return 0;
	return 1;
}

static void mr_fill_entry(struct iwe_stag_entry *e, struct iwe_mr_priv *m)
{
	e->base = (uint64_t)(uintptr_t)m->pub.addr;
	e->length = m->pub.length;
	e->host = m->pub.addr;
	e->pd = m->pub.pd;
	e->access = m->pub.access;
	e->valid = 1;
}

/* One byte of every page of [addr, addr + length) read from user space,
 * guarded as the engine's copies are (a page unmapped meanwhile is
 * skipped).  Only bytes of the region: a byte before addr on its first
 * page may be another object's. */
static void mr_touch(uintptr_t addr, size_t length, uintptr_t page)
{
	uintptr_t end = addr + length;
	char c;

	for (uintptr_t p = addr; p < end; p = (p | (page - 1)) + 1)
		(void)iwe_copy_guarded(&c, (const void *)p, 1,
				       IWE_COPY_PLAIN, NULL);
}

/* Registration makes the region resident, as an adapter's pinning does:
 * its pages are faulted in now (writable ones for a region the engine may
 * write into), not one at a time while data is placed.  Debian's dtest
 * sends its 4 MiB messages through 100 fresh buffers, and a page fault
 * per 4 KiB in the receive path held its ping-pong at 200 MB/s.
 * Then each page is read once from user space, where the engine's own
 * copies run (placement through the staging buffer, the sender's CRC):
 * on a hypervisor that shadows page tables (this VM), the first access
 * from user space to a page costs an exit, some 5 us, even on a page
 * that populating made resident, and dtest's 4 MiB ping-pong (CRC on)
 * still ran at 470-530 MB/s, at 0.9-2.4 GB/s with these reads.  A page the
 * consumer has written costs a load.  (The kernel's own first access,
 * for recvmsg in place and sendmsg with the CRC off, costs as much again
 * and is left to the first transfer: reading every page from the kernel
 * here too would double the cost of a region used once with the CRC on;
 * doc/performance.md.)
 * Best effort: a range the kernel cannot populate (holes, a read-only
 * mapping with local write asked, device memory) is left as it is,
 * faulted as it is used, and fails as it did if it is not mapped then.
 * Regions larger than IWDAPL_MR_POPULATE_MB (default 1024; 0: none) are
 * left alone: a reservation far larger than what it will hold must not
 * take that much memory at once. */
static void mr_populate(void *addr, size_t length, int access)
{
	static long max_mb = -1;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)addr & ~(page - 1);

	if (length > (size_t)iw_env_long_once(&max_mb, "IWDAPL_MR_POPULATE_MB",
					      1024, 0, 1L << 20) << 20)
		return;
	/* madvise wants the start page-aligned and rounds the length up;
	 * the range does not wrap (mr_args_valid). */
	if (madvise((void *)lo, length + ((uintptr_t)addr - lo),
		    access & IBV_ACCESS_LOCAL_WRITE ? MADV_POPULATE_WRITE
						    : MADV_POPULATE_READ))
		return;
	mr_touch((uintptr_t)addr, length, page);
}

struct iwe_mr *iwe_reg_mr(struct iwe_pd *pd, void *addr, size_t length,
			  int access)
{
	iwe_guard_install();
	struct iwe_mr_priv *m;
	struct iwe_device *dev;
	uint32_t idx = 0;

	if (!mr_args_valid(pd, addr, length, access)) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	mr_populate(addr, length, access);
	m->pub = (struct iwe_mr){ .pd = pd, .addr = addr, .length = length,
				  .access = access };
	dev = pd->dev;
	iwe_lock(&dev->lock);
	if (dev->stags.nmr < IWE_MAX_MR)
		idx = stag_alloc(&dev->stags, IWE_STAG_MR, m);
	if (idx) {
		mr_fill_entry(&dev->stags.ent[idx], m);
		m->index = idx;
		m->pub.lkey = m->pub.rkey =
			IWE_STAG_MAKE(idx, dev->stags.ent[idx].key);
		dev->stags.nmr++;
		pd->users++;
	}
	iwe_unlock(&dev->lock);
	if (!idx) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	return &m->pub;
}

int iwe_dereg_mr(struct iwe_mr *mr)
{
	struct iwe_mr_priv *m;
	struct iwe_device *dev;

	if (!mr)
		return EINVAL;
	m = IWE_CONTAINER_OF(mr, struct iwe_mr_priv, pub);
	dev = mr->pd->dev;
	iwe_lock(&dev->lock);
	if (m->binds) {
		iwe_unlock(&dev->lock);
		return EBUSY;
	}
	stag_free(&dev->stags, m->index);
	dev->stags.nmr--;
	mr->pd->users--;
	iwe_unlock(&dev->lock);
	free(m);
	return 0;
}

/* ------------------------------------------------------ access checks */

static enum iwe_access_error check_entry(const struct iwe_stag_entry *e,
					 const struct iwe_pd *pd, uint8_t key,
					 uint64_t va, uint64_t len, int access)
{
	if (!e->valid || e->key != key)
		return IWE_ACCESS_BAD_STAG;
	if (e->pd != pd)
		return IWE_ACCESS_BAD_PD;
	if ((e->access & access) != access)
		return IWE_ACCESS_BAD_RIGHTS;
	/* A window is a remote grant: local work requests must name the
	 * region itself. */
	if (e->kind == IWE_STAG_MW && !(access & REMOTE_ACCESS))
		return IWE_ACCESS_BAD_RIGHTS;
	if (len > UINT64_MAX - va)
		return IWE_ACCESS_BAD_BOUNDS;	/* va + len wraps */
	if (va < e->base || len > e->length || va - e->base > e->length - len)
		return IWE_ACCESS_BAD_BOUNDS;
	return IWE_ACCESS_OK;
}

/* O(1) and allocation-free: it runs for every tagged DDP segment.  The
 * pointer is valid as long as the STag is; a consumer that deregisters
 * memory with I/O in flight gets what hardware would give it. */
enum iwe_access_error iwe_mr_check(struct iwe_device *dev,
				   const struct iwe_pd *pd, uint32_t stag,
				   uint64_t va, uint64_t len, int access,
				   void **ptr)
{
	return iwe_mr_check_cached(dev, NULL, pd, stag, va, len, access, ptr);
}

/* A hit answers only a check that passes; anything else is decided by
 * the table itself, so errors are always today's. */
enum iwe_access_error iwe_mr_check_cached(struct iwe_device *dev,
					  struct iwe_mr_cache *c,
					  const struct iwe_pd *pd,
					  uint32_t stag, uint64_t va,
					  uint64_t len, int access,
					  void **ptr)
{
	uint32_t idx = IWE_STAG_INDEX(stag);
	const struct iwe_stag_entry *e;
	enum iwe_access_error r;

	if (!dev || idx == 0)
		return IWE_ACCESS_BAD_STAG;
	if (c && c->stag == stag &&
	    c->gen == atomic_load_explicit(&dev->stags.gen,
					   memory_order_acquire) &&
	    check_entry(&c->e, pd, IWE_STAG_KEY(stag), va, len,
			access) == IWE_ACCESS_OK) {
		if (ptr)
			*ptr = c->e.host + (va - c->e.base);
		return IWE_ACCESS_OK;
	}
	iwe_lock(&dev->lock);
	if (idx >= dev->stags.next_fresh) {
		iwe_unlock(&dev->lock);
		return IWE_ACCESS_BAD_STAG;
	}
	e = &dev->stags.ent[idx];
	r = check_entry(e, pd, IWE_STAG_KEY(stag), va, len, access);
	if (r == IWE_ACCESS_OK && ptr)
		*ptr = e->host + (va - e->base);
	if (r == IWE_ACCESS_OK && c) {
		c->stag = stag;
		c->gen = atomic_load(&dev->stags.gen);
		c->e = *e;
	}
	iwe_unlock(&dev->lock);
	return r;
}

/* --------------------------------------------------------------- MWs */

struct iwe_mw *iwe_alloc_mw(struct iwe_pd *pd)
{
	struct iwe_mw_priv *w;
	struct iwe_device *dev;
	uint32_t idx = 0;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	w->pub.pd = pd;
	dev = pd->dev;
	iwe_lock(&dev->lock);
	if (dev->stags.nmw < IWE_MAX_MW)
		idx = stag_alloc(&dev->stags, IWE_STAG_MW, w);
	if (idx) {
		w->index = idx;
		w->last_key = dev->stags.ent[idx].key;
		dev->stags.nmw++;
		pd->users++;
	}
	iwe_unlock(&dev->lock);
	if (!idx) {
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	return &w->pub;
}

/* dev->lock held. */
static void mw_unbind_locked(struct iwe_device *dev, struct iwe_mw_priv *w)
{
	IWE_ASSERT_LOCKED(&dev->lock);
	struct iwe_stag_entry *e = &dev->stags.ent[w->index];

	e->valid = 0;
	e->host = NULL;
	atomic_fetch_add(&dev->stags.gen, 1);
	w->mr->binds--;
	w->mr = NULL;
	w->pub.rkey = 0;
}

/* Deallocating a bound window invalidates its STag, as verbs allow. */
int iwe_dealloc_mw(struct iwe_mw *mw)
{
	struct iwe_mw_priv *w;
	struct iwe_device *dev;

	if (!mw)
		return EINVAL;
	w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	dev = mw->pd->dev;
	iwe_lock(&dev->lock);
	if (w->pending) {		/* a send queue will still bind it */
		iwe_unlock(&dev->lock);
		return EBUSY;
	}
	if (w->mr)
		mw_unbind_locked(dev, w);
	stag_free(&dev->stags, w->index);
	dev->stags.nmw--;
	mw->pd->users--;
	iwe_unlock(&dev->lock);
	free(w);
	return 0;
}

/* dev->lock held: may 'mr' back a window [addr, addr+len) with 'access'? */
static int mw_bind_allowed(const struct iwe_mw *mw, const struct iwe_mr *mr,
			   uint64_t addr, uint64_t len, int access)
{
	uint64_t base = (uint64_t)(uintptr_t)mr->addr;

	if (mw->pd != mr->pd || !(mr->access & IBV_ACCESS_MW_BIND))
		return 0;
	if ((access & REMOTE_MODIFY) && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return 0;
	return addr >= base && len <= mr->length &&
	       addr - base <= mr->length - len;
}

/* dev->lock held.  A key for the next binding of the window, never the
 * one its STag has now, so a stale STag cannot match the new binding. */
static uint32_t mw_next_rkey(struct iwe_device *dev, struct iwe_mw_priv *w)
{
	uint8_t cur = dev->stags.ent[w->index].key;

	if (++w->last_key == cur)
		++w->last_key;
	return IWE_STAG_MAKE(w->index, w->last_key);
}

/* dev->lock held.  Point the window's entry at [addr, addr+len) of mr
 * under STag rkey. */
static void mw_bind_locked(struct iwe_device *dev, struct iwe_mw_priv *w,
			   struct iwe_mr_priv *m, uint64_t addr, uint64_t len,
			   int access, uint32_t rkey)
{
	IWE_ASSERT_LOCKED(&dev->lock);
	struct iwe_stag_entry *e = &dev->stags.ent[w->index];
	const struct iwe_mr *mr = &m->pub;

	if (w->mr)
		mw_unbind_locked(dev, w);
	e->key = IWE_STAG_KEY(rkey);
	e->base = addr;
	e->length = len;
	e->host = (char *)mr->addr + (addr - (uint64_t)(uintptr_t)mr->addr);
	e->pd = w->pub.pd;
	e->access = access;
	e->valid = 1;
	atomic_fetch_add(&dev->stags.gen, 1);
	w->mr = m;
	m->binds++;
	w->pub.rkey = rkey;
}

static int bind_args_ok(struct iwe_mw *mw, struct iwe_mr *mr, uint64_t addr,
			uint64_t len, int access)
{
	return mw && mr && len != 0 && len <= UINT64_MAX - addr &&
	       !(access & ~REMOTE_ACCESS);
}

int iwe_mw_bind(struct iwe_mw *mw, struct iwe_mr *mr, uint64_t addr,
		uint64_t len, int access)
{
	struct iwe_mw_priv *w;
	struct iwe_device *dev;

	if (!bind_args_ok(mw, mr, addr, len, access))
		return EINVAL;
	w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	dev = mw->pd->dev;
	iwe_lock(&dev->lock);
	if (!mw_bind_allowed(mw, mr, addr, len, access)) {
		iwe_unlock(&dev->lock);
		return EINVAL;
	}
	mw_bind_locked(dev, w, IWE_CONTAINER_OF(mr, struct iwe_mr_priv, pub),
		       addr, len, access, mw_next_rkey(dev, w));
	iwe_unlock(&dev->lock);
	return 0;
}

int iwe_mw_unbind(struct iwe_mw *mw)
{
	struct iwe_mw_priv *w;
	struct iwe_device *dev;
	int err = 0;

	if (!mw)
		return EINVAL;
	w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	dev = mw->pd->dev;
	iwe_lock(&dev->lock);
	if (w->mr)
		mw_unbind_locked(dev, w);
	else
		err = EINVAL;
	iwe_unlock(&dev->lock);
	return err;
}

/* ------------------------------------------- binds posted on a QP */

int iwe_mw_bind_reserve(const struct iwe_pd *pd, struct iwe_mw *mw,
			struct iwe_mr *mr, uint64_t addr, uint64_t len,
			int access, uint32_t *rkey)
{
	struct iwe_mw_priv *w;
	struct iwe_device *dev;

	if (!mw || mw->pd != pd)
		return EINVAL;
	if (len && !bind_args_ok(mw, mr, addr, len, access))
		return EINVAL;
	w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	dev = mw->pd->dev;
	iwe_lock(&dev->lock);
	if (len && !mw_bind_allowed(mw, mr, addr, len, access)) {
		iwe_unlock(&dev->lock);
		return EINVAL;
	}
	w->pending++;
	*rkey = 0;
	if (len) {
		/* The MR counts the window as bound from now on. */
		IWE_CONTAINER_OF(mr, struct iwe_mr_priv, pub)->binds++;
		*rkey = mw_next_rkey(dev, w);
	}
	iwe_unlock(&dev->lock);
	return 0;
}

/* dev->lock held.  Drop what iwe_mw_bind_reserve pinned. */
static void bind_unpin_locked(struct iwe_mw_priv *w, struct iwe_mr *mr)
{
	IWE_ASSERT_LOCKED(&w->pub.pd->dev->lock);
	if (mr)
		IWE_CONTAINER_OF(mr, struct iwe_mr_priv, pub)->binds--;
	w->pending--;
}

void iwe_mw_bind_execute(struct iwe_mw *mw, struct iwe_mr *mr,
			 uint64_t addr, uint64_t len, int access,
			 uint32_t rkey)
{
	struct iwe_mw_priv *w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	struct iwe_device *dev = mw->pd->dev;

	iwe_lock(&dev->lock);
	if (len)
		mw_bind_locked(dev, w,
			       IWE_CONTAINER_OF(mr, struct iwe_mr_priv, pub),
			       addr, len, access, rkey);
	else if (w->mr)
		mw_unbind_locked(dev, w);
	bind_unpin_locked(w, len ? mr : NULL);
	iwe_unlock(&dev->lock);
}

void iwe_mw_bind_cancel(struct iwe_mw *mw, struct iwe_mr *mr)
{
	struct iwe_mw_priv *w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	struct iwe_device *dev = mw->pd->dev;

	iwe_lock(&dev->lock);
	if (w->mr)
		mw_unbind_locked(dev, w);
	bind_unpin_locked(w, mr);
	iwe_unlock(&dev->lock);
}

/* ------------------------------------------ invalidation, read sinks */

enum iwe_access_error iwe_stag_invalidate(struct iwe_device *dev,
					  const struct iwe_pd *pd,
					  uint32_t stag)
{
	uint32_t idx = IWE_STAG_INDEX(stag);
	struct iwe_stag_entry *e;
	enum iwe_access_error r = IWE_ACCESS_BAD_STAG;

	iwe_lock(&dev->lock);
	if (idx == 0 || idx >= dev->stags.next_fresh)
		goto out;
	e = &dev->stags.ent[idx];
	if (!e->valid || e->key != IWE_STAG_KEY(stag))
		goto out;
	r = IWE_ACCESS_BAD_PD;
	if (e->pd != pd)
		goto out;
	r = IWE_ACCESS_BAD_RIGHTS;
	if (e->kind != IWE_STAG_MW)
		goto out;
	mw_unbind_locked(dev, e->obj);
	r = IWE_ACCESS_OK;
out:
	iwe_unlock(&dev->lock);
	return r;
}

enum iwe_access_error iwe_read_sink_check(struct iwe_device *dev,
					  const struct iwe_pd *pd,
					  uint32_t stag, uint64_t va,
					  uint64_t len, void **ptr)
{
	uint32_t idx = IWE_STAG_INDEX(stag);
	int access = IBV_ACCESS_LOCAL_WRITE;

	if (!dev || idx == 0)
		return IWE_ACCESS_BAD_STAG;
	iwe_lock(&dev->lock);
	if (idx < dev->stags.next_fresh &&
	    dev->stags.ent[idx].kind == IWE_STAG_MW)
		access = IBV_ACCESS_REMOTE_WRITE;
	iwe_unlock(&dev->lock);
	/* The kind of an index never changes while it is allocated; a
	 * freed and reused index fails the key check below. */
	return iwe_mr_check(dev, pd, stag, va, len, access, ptr);
}

/* ------------------------------------------------- local SGE lookups */

/* The lkey must name memory of our PD covering the range, with the
 * rights its use needs. */
static int sge_resolve(const struct iwe_pd *pd, const struct ibv_sge *s,
		       enum iwe_sge_use use, struct iwe_sge_res *out)
{
	void *p = NULL;
	enum iwe_access_error e;

	out->length = s->length;
	out->lkey = s->lkey;
	out->addr = NULL;
	if (s->length == 0)
		return 0;
	if (use == IWE_SGE_READ_SINK)
		e = iwe_read_sink_check(pd->dev, pd, s->lkey, s->addr,
					s->length, &p);
	else
		e = iwe_mr_check(pd->dev, pd, s->lkey, s->addr, s->length,
				 use == IWE_SGE_SINK ? IBV_ACCESS_LOCAL_WRITE : 0,
				 &p);
	if (e)
		return EINVAL;
	out->addr = p;
	return 0;
}

int iwe_sgl_resolve(const struct iwe_pd *pd, const struct ibv_sge *sg,
		    int n, enum iwe_sge_use use, struct iwe_sge_res *out,
		    uint64_t *total)
{
	int i;

	*total = 0;
	for (i = 0; i < n; i++) {
		if (sge_resolve(pd, &sg[i], use, &out[i]))
			return EINVAL;
		*total += sg[i].length;
	}
	return 0;
}
