/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwscale: what the system gives a run of many connections -- the
 * descriptors a process may hold, the kernel's memory for sockets, the
 * ports one address:port can take. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "iwscale.h"

int nofile_raise(long need)
{
	struct rlimit was, want;

	if (getrlimit(RLIMIT_NOFILE, &was)) {
		perror("iwscale: getrlimit(RLIMIT_NOFILE)");
		return -1;
	}
	if (was.rlim_cur != RLIM_INFINITY && (long)was.rlim_cur >= need)
		return 0;
	want = was;
	want.rlim_cur = (rlim_t)need;
	/* Above the hard limit only with CAP_SYS_RESOURCE (root): raised
	 * for this process and the peer it forks, not for the machine. */
	if (was.rlim_max != RLIM_INFINITY && (long)was.rlim_max < need)
		want.rlim_max = (rlim_t)need;
	if (setrlimit(RLIMIT_NOFILE, &want)) {
		fprintf(stderr, "iwscale: cannot raise RLIMIT_NOFILE to %ld (soft %ld, hard %ld): %s%s\n",
			need, (long)was.rlim_cur, (long)was.rlim_max, strerror(errno),
			errno != EPERM ? "" : geteuid() == 0 ?
			" (root, but without CAP_SYS_RESOURCE: not in this machine's capability bounding set)" :
			" (raising the hard limit needs CAP_SYS_RESOURCE: root)");
		/* The soft limit up to the hard one still helps. */
		want.rlim_max = was.rlim_max;
		want.rlim_cur = was.rlim_max;
		if (was.rlim_cur < was.rlim_max && setrlimit(RLIMIT_NOFILE, &want) == 0)
			fprintf(stderr, "iwscale: RLIMIT_NOFILE raised to the hard limit, %ld: the run stops near %ld connections\n",
				(long)was.rlim_max, (long)was.rlim_max - 256);
		else
			fprintf(stderr, "iwscale: the run stops near %ld connections\n",
				(long)was.rlim_cur - 256);
		return -1;
	}
	fprintf(stderr, "iwscale: RLIMIT_NOFILE raised for this run from soft %ld, hard %ld to %ld%s\n",
		(long)was.rlim_cur, (long)was.rlim_max, need,
		want.rlim_max != was.rlim_max ? " (the hard limit too: CAP_SYS_RESOURCE, root)" : "");
	return 0;
}

/* The "mem" pages of sockstat's TCP line. */
static long sockstat_tcp_pages(void)
{
	char line[256];
	long pages = 0;
	FILE *f = fopen("/proc/net/sockstat", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		const char *m = strstr(line, " mem ");

		if (strncmp(line, "TCP:", 4) == 0 && m)
			sscanf(m + 5, "%ld", &pages);
	}
	fclose(f);
	return pages;
}

static long meminfo_kb(const char *key)
{
	char line[256];
	long kb = 0;
	size_t len = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, len) == 0 && line[len] == ':')
			sscanf(line + len + 1, "%ld", &kb);
	fclose(f);
	return kb;
}

struct kernel_usage kernel_usage_now(void)
{
	struct kernel_usage k;

	k.sock_bytes = sockstat_tcp_pages() * sysconf(_SC_PAGESIZE);
	k.slab_bytes = meminfo_kb("Slab") * 1024;
	return k;
}

long ephemeral_ports(void)
{
	long lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &lo, &hi) != 2)
			lo = 32768, hi = 60999;
		fclose(f);
	}
	return hi - lo + 1;
}
