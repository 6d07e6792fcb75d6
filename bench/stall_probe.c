/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* stall_probe: how long the machine itself takes a CPU away from a thread
 * that never sleeps.  One thread per online CPU, pinned to it, reads the
 * monotonic clock in a loop; a gap between two reads is time the thread
 * did not run (an interrupt, a kernel thread, or on a VM the hypervisor
 * running something else on that vCPU).  A polling ping-pong's worst
 * one-way time cannot be below what this machine does to any spinner, so
 * bench/run.sh prints it beside that target.
 *
 *   stall_probe [-t SECONDS] [--csv]
 *
 * --csv: "what,cpus,seconds,stalls_over_100us,stalls_over_1ms,longest_us"
 * and one row "stall,..." for all CPUs together.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct probe {
	pthread_t th;
	int cpu;
	double seconds;
	uint64_t over_100us, over_1ms, longest_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *spin(void *arg)
{
	struct probe *p = arg;
	cpu_set_t set;
	uint64_t start, last, end;

	CPU_ZERO(&set);
	CPU_SET(p->cpu, &set);
	/* Unpinned, the scheduler could hide a stall by moving the thread. */
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
		return (void *)1;
	start = last = now_ns();
	end = start + (uint64_t)(p->seconds * 1e9);
	while (last < end) {
		uint64_t t = now_ns(), gap = t - last;

		p->over_100us += gap > 100000u;
		p->over_1ms += gap > 1000000u;
		if (gap > p->longest_ns)
			p->longest_ns = gap;
		last = t;
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: stall_probe [-t SECONDS] [--csv]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double seconds = 1.0;
	int csv = 0, ncpu, failed = 0;
	uint64_t o100 = 0, o1 = 0, longest = 0;
	struct probe *p;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--csv"))
			csv = 1;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else
			usage();
	}
	if (!(seconds > 0 && seconds <= 600))
		usage();
	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	p = calloc((size_t)ncpu, sizeof(*p));
	if (!p) {
		perror("stall_probe");
		return 1;
	}
	for (int i = 0; i < ncpu; i++) {
		p[i].cpu = i;
		p[i].seconds = seconds;
		if (pthread_create(&p[i].th, NULL, spin, &p[i])) {
			fprintf(stderr, "stall_probe: no thread for CPU %d\n", i);
			return 1;
		}
	}
	for (int i = 0; i < ncpu; i++) {
		void *r;

		pthread_join(p[i].th, &r);
		failed |= r != NULL;
		o100 += p[i].over_100us;
		o1 += p[i].over_1ms;
		if (p[i].longest_ns > longest)
			longest = p[i].longest_ns;
		if (!csv)
			printf("CPU %d: stalls > 100 us %llu, > 1 ms %llu, longest %.0f us\n",
			       i, (unsigned long long)p[i].over_100us,
			       (unsigned long long)p[i].over_1ms,
			       p[i].longest_ns / 1e3);
	}
	if (failed) {
		fprintf(stderr, "stall_probe: could not pin a thread to its CPU\n");
		free(p);
		return 1;
	}
	if (csv)
		printf("what,cpus,seconds,stalls_over_100us,stalls_over_1ms,longest_us\n"
		       "stall,%d,%g,%llu,%llu,%.1f\n", ncpu, seconds,
		       (unsigned long long)o100, (unsigned long long)o1,
		       longest / 1e3);
	free(p);
	return 0;
}
