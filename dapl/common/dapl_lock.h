/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Mutexes that know their owner, so that a function whose name ends in
 * _locked can assert that its caller holds the lock it relies on.
 *
 * A struct dapl_lock is a plain pthread mutex plus the pthread_self() of
 * the thread holding it (0 when free).  Only the holder writes that word
 * (after locking, and back to 0 before unlocking), so a thread reading it
 * sees its own identity exactly when it holds the lock; relaxed atomics
 * are enough and keep ThreadSanitizer quiet.  With NDEBUG the owner is
 * neither kept nor checked, and the lock is the bare mutex.
 *
 * pthread_t is an integer on glibc, the only C library this provider is
 * built for; the static assertion below says so if that ever changes.
 */
#ifndef DAPL_LOCK_H
#define DAPL_LOCK_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct dapl_lock {
	pthread_mutex_t mutex;
#ifndef NDEBUG
	atomic_uintptr_t owner;
#endif
};

#ifndef NDEBUG
_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t),
	       "pthread_t must fit the owner word");
#define DAPL_LOCK_INITIALIZER { PTHREAD_MUTEX_INITIALIZER, 0 }
#else
#define DAPL_LOCK_INITIALIZER { PTHREAD_MUTEX_INITIALIZER }
#endif

static inline void dapl_lock_init(struct dapl_lock *l)
{
	pthread_mutex_init(&l->mutex, NULL);
#ifndef NDEBUG
	atomic_init(&l->owner, 0);
#endif
}

static inline void dapl_lock_destroy(struct dapl_lock *l)
{
	pthread_mutex_destroy(&l->mutex);
}

#ifndef NDEBUG
static inline void dapl_lock_own(struct dapl_lock *l, int mine)
{
	atomic_store_explicit(&l->owner, mine ? (uintptr_t)pthread_self() : 0,
			      memory_order_relaxed);
}

/* Whether the calling thread holds l. */
static inline int dapl_lock_held(struct dapl_lock *l)
{
	return atomic_load_explicit(&l->owner, memory_order_relaxed) ==
	       (uintptr_t)pthread_self();
}
#else
static inline void dapl_lock_own(struct dapl_lock *l, int mine)
{
	(void)l;
	(void)mine;
}
#endif

static inline void dapl_lock(struct dapl_lock *l)
{
	pthread_mutex_lock(&l->mutex);
	dapl_lock_own(l, 1);
}

static inline void dapl_unlock(struct dapl_lock *l)
{
	dapl_lock_own(l, 0);
	pthread_mutex_unlock(&l->mutex);
}

/* 1 with l taken; 0, nothing taken, while another thread holds it. */
static inline int dapl_trylock(struct dapl_lock *l)
{
	if (pthread_mutex_trylock(&l->mutex))
		return 0;
	dapl_lock_own(l, 1);
	return 1;
}

/* pthread_cond_wait on a struct dapl_lock: the owner word follows the
 * mutex, which the wait releases and takes back. */
static inline void dapl_cond_wait(pthread_cond_t *cond, struct dapl_lock *l)
{
	dapl_lock_own(l, 0);
	pthread_cond_wait(cond, &l->mutex);
	dapl_lock_own(l, 1);
}

/* At the top of every function that relies on its caller holding l. */
#define DAPL_ASSERT_LOCKED(l) assert(dapl_lock_held(l))

#endif
