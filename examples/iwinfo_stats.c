/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iwinfo --stats: the counters of a running process that uses iwdapl.
 * While such a process has an IA open, the provider serves its counters
 * as text on the abstract unix socket "\0iwdapl-stats-<pid>" (iwdapl(7),
 * "Counters"); reading it needs no privilege and no file.  The sockets
 * in /proc/net/unix tell which processes serve them. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "iwinfo.h"

#define SOCK_PREFIX "iwdapl-stats-"
#define READ_TIMEOUT_S 5

static int connect_stats(long pid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = READ_TIMEOUT_S };
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1,
			 SOCK_PREFIX "%ld", pid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				(size_t)n)) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int iwinfo_stats_pid(long pid)
{
	char buf[4096];
	ssize_t n;
	int fd = connect_stats(pid);

	if (fd < 0) {
		fprintf(stderr, "iwinfo: no iwdapl counters for pid %ld "
			"(no process with an open IA: %s)\n", pid,
			strerror(errno));
		return 1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	close(fd);
	if (n < 0) {
		fprintf(stderr, "iwinfo: reading the counters of pid %ld: "
			"%s\n", pid, strerror(errno));
		return 1;
	}
	return 0;
}

/* The command name of a process, or "?". */
static void comm_of(long pid, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(out, len, "?");
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* Each pid once: a served client's socket shows the same name. */
static int seen_before(const long *pids, int n, long pid)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

int iwinfo_stats_list(void)
{
	char line[512], comm[64];
	long pids[256];
	int n = 0;
	FILE *f = fopen("/proc/net/unix", "r");

	printf("processes serving iwdapl counters (iwinfo --stats PID)\n");
	if (!f) {
		printf("  (cannot read /proc/net/unix)\n");
		return 0;
	}
	while (fgets(line, sizeof(line), f) && n < 256) {
		char *at = strstr(line, " @" SOCK_PREFIX);
		long pid;

		if (!at || sscanf(at + 2 + strlen(SOCK_PREFIX), "%ld",
				  &pid) != 1 || seen_before(pids, n, pid))
			continue;
		pids[n++] = pid;
		comm_of(pid, comm, sizeof(comm));
		printf("  %-8ld %s\n", pid, comm);
	}
	fclose(f);
	if (!n)
		printf("  (none)\n");
	return 0;
}
