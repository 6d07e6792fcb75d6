/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What a bench process holds, read from itself: its resident set and the
 * anonymous part of it, the process's own pages without the files it maps
 * such as library code (/proc/self/statm: resident, resident - shared),
 * its malloc heap in use (mallinfo2: bytes handed out,
 * touched or not, mmap'ed blocks included), its open descriptors
 * (/proc/self/fd) and its threads (/proc/self/task).  iwmem and iwscale
 * take two snapshots and report the difference. */
#ifndef BENCH_PROC_USAGE_H
#define BENCH_PROC_USAGE_H

#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

struct proc_usage {
	long rss, anon, heap;	/* bytes */
	long fds, threads;
};

/* Entries of a /proc directory, "." and ".." not counted; -1 if it
 * cannot be read.  Listing /proc/self/fd opens one descriptor itself,
 * which the caller subtracts. */
static inline long proc_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Resident and anonymous resident bytes. */
static inline void proc_resident(long *rss, long *anon)
{
	long pages = 0, shared = 0, page = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%*d %ld %ld", &pages, &shared) != 2)
			pages = shared = 0;
		fclose(f);
	}
	*rss = pages * page;
	*anon = (pages - shared) * page;
}

static inline struct proc_usage proc_usage_now(void)
{
	struct mallinfo2 m = mallinfo2();
	struct proc_usage u;

	u.heap = (long)(m.uordblks + m.hblkhd);
	proc_resident(&u.rss, &u.anon);
	u.fds = proc_count_entries("/proc/self/fd") - 1;
	u.threads = proc_count_entries("/proc/self/task");
	return u;
}

/* now - before, field by field. */
static inline struct proc_usage proc_usage_diff(struct proc_usage now, struct proc_usage before)
{
	now.rss -= before.rss;
	now.anon -= before.anon;
	now.heap -= before.heap;
	now.fds -= before.fds;
	now.threads -= before.threads;
	return now;
}

#endif
