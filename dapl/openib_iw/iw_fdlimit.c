/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The process's descriptor limit.  Every connection is a socket, so a
 * process at Debian's default soft limit of 1024 descriptors cannot hold
 * a thousand connections.  The first device opened raises the soft
 * RLIMIT_NOFILE to the hard limit, as servers do (IWDAPL_RAISE_NOFILE=0
 * leaves it alone: a consumer that select()s on descriptors must keep
 * them under FD_SETSIZE).  A call refused for want of a descriptor says
 * so once, naming the limit. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "iw_env.h"
#include "iw_fdlimit.h"
#include "iw_log.h"

static void raise_once(void)
{
	struct rlimit r;
	rlim_t was;

	if (!iw_env_bool("IWDAPL_RAISE_NOFILE", 1) ||
	    getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur >= r.rlim_max)
		return;
	was = r.rlim_cur;
	r.rlim_cur = r.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &r) == 0)
		iw_log(IW_LOG_INFO, "descriptor limit (RLIMIT_NOFILE) raised "
		       "from %llu to the hard limit %llu",
		       (unsigned long long)was, (unsigned long long)r.rlim_max);
}

void iwe_fd_limit_raise(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, raise_once);
}

int iwe_fd_limit_note(int err, const char *what)
{
	static atomic_int said;
	struct rlimit r = { 0, 0 };

	if (err != EMFILE && err != ENFILE)
		return err;
	if (atomic_exchange(&said, 1))
		return err;
	if (err == ENFILE) {
		iw_log(IW_LOG_ERROR, "%s: the system's file table is full "
		       "(fs.file-max)", what);
		return err;
	}
	getrlimit(RLIMIT_NOFILE, &r);
	iw_log(IW_LOG_ERROR, "%s: out of descriptors: this process may hold "
	       "%llu (RLIMIT_NOFILE; hard limit %llu), one per connection",
	       what, (unsigned long long)r.rlim_cur,
	       (unsigned long long)r.rlim_max);
	return err;
}
