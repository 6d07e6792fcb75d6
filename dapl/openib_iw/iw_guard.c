/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Guarded copies; see iw_guard.h. */
#include "iw_guard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

#include "iw_crc32c.h"
#include "iw_place.h"

/* The copy this thread is in, or NULL. */
static __thread sigjmp_buf *guard_env;
static struct sigaction prev_segv, prev_bus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* Not ours: run what was there before, as if we had never been here. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *p = sig == SIGBUS ? &prev_bus : &prev_segv;

	if (p->sa_flags & SA_SIGINFO) {
		p->sa_sigaction(sig, si, uc);
		return;
	}
	if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
		p->sa_handler(sig);
		return;
	}
	/* Default action: restore it; the faulting instruction runs again
	 * and the process ends as it would have without us. */
	sigaction(sig, p, NULL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *env = guard_env;

	if (!env) {
		chain(sig, si, uc);
		return;
	}
	guard_env = NULL;
	siglongjmp(*env, 1);
}

static void install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/* SA_NODEFER: siglongjmp does not restore the signal mask (saving
	 * it would cost a system call per copy), so the signal must not
	 * stay blocked after a jump. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &prev_segv);
	sigaction(SIGBUS, &sa, &prev_bus);
}

void iwe_guard_install(void)
{
	pthread_once(&guard_once, install);
}

int iwe_copy_guarded(void *dst, const void *src, size_t len,
		     enum iwe_copy_kind kind, uint32_t *crc)
{
	sigjmp_buf env, *volatile prev = guard_env;

	if (sigsetjmp(env, 0)) {
		guard_env = prev;
		return EFAULT;
	}
	guard_env = &env;
	switch (kind) {
	case IWE_COPY_ORDERED:
		iw_place_ordered(dst, src, len);
		break;
	case IWE_COPY_CRC:
		*crc = iw_crc32c_copy(*crc, dst, src, len);
		break;
	default:
		memcpy(dst, src, len);
		break;
	}
	guard_env = prev;
	return 0;
}
