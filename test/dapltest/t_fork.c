/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A consumer that forks: the child must not disturb the parent's
 * connections (doc/semantics.md, "fork").  Two IAs of iw-lo in this
 * process hold a live connection; then a child
 *   - leaves at once with _exit, even with requests in flight;
 *   - leaves with exit(), running every atexit handler and library
 *     destructor (libdat2's, the provider's) on the copied state;
 *   - execs /bin/sleep: none of the provider's descriptors (sockets,
 *     epoll, eventfds) may survive the exec (they are O_CLOEXEC), and
 *     while that child lives, freeing a connected EP still ends the
 *     connection at the other side (a socket inherited by the child would
 *     keep it open);
 *   - lives on without exec, holding copies of every descriptor: freeing
 *     a connected EP must still end the connection at the other side.
 * After each, the parent's connection must carry data both ways,
 * validated.
 */
#include <sys/wait.h>

#include "tpeer.h"

#define QUIET_US   300000
#define MSG        65536
#define INFLIGHT   32		/* Sends in flight across the fork */
#define END_US     1000000	/* the other side learns of a freed EP */
#define MAX_FDS    256

static struct side S, C;	/* server, client */
static DAT_PSP_HANDLE psp;
static DAT_CONN_QUAL qual;

/* ------------------------------------------------------ descriptors */

struct fd_ent {
	int fd;
	char target[128];
};

/* The descriptors of a process (pid 0: this one) and what they are. */
static int fd_list(pid_t pid, struct fd_ent *v, int max)
{
	char dir[64], path[320];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), pid ? "/proc/%d/fd" : "/proc/self/fd",
		 (int)pid);
	d = opendir(dir);
	if (!d)
		return -1;
	while ((e = readdir(d)) && n < max) {
		ssize_t k;

		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		v[n].fd = atoi(e->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		k = readlink(path, v[n].target, sizeof(v[n].target) - 1);
		v[n].target[k > 0 ? k : 0] = 0;
		n++;
	}
	closedir(d);
	return n;
}

static int fd_in(const struct fd_ent *v, int n, const struct fd_ent *x)
{
	for (int i = 0; i < n; i++)
		if (v[i].fd == x->fd && !strcmp(v[i].target, x->target))
			return 1;
	return 0;
}

/* --------------------------------------------------------- the link */

static int conn_event(struct side *s, DAT_EVENT_NUMBER want, DAT_TIMEOUT us)
{
	DAT_EVENT ev = side_wait(s->conn, us);

	if (ev.event_number != want)
		printf("#   connection event 0x%x, want 0x%x\n",
		       ev.event_number, want);
	return ev.event_number == want;
}

static int establish(void)
{
	DAT_EVENT ev;

	C.ep = side_ep(&C);
	S.ep = side_ep(&S);
	if (connect_lo(C.ep, qual) != DAT_SUCCESS)
		return 0;
	ev = side_wait(S.cr, TSIDE_WAIT_US);
	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, S.ep,
			  0, NULL) != DAT_SUCCESS)
		return 0;
	return conn_event(&C, DAT_CONNECTION_EVENT_ESTABLISHED, TSIDE_WAIT_US) &&
	       conn_event(&S, DAT_CONNECTION_EVENT_ESTABLISHED, TSIDE_WAIT_US);
}

/* One validated Send from a to b (seed picks the pattern). */
static int one_send(struct side *a, struct side *b, unsigned seed)
{
	side_fill(a->buf, MSG, seed);
	memset(b->buf + MSG, 0, MSG);
	return side_recv(b, MSG, MSG, seed) == DAT_SUCCESS &&
	       side_send(a, 0, MSG, seed) == DAT_SUCCESS &&
	       side_dto_ok(a->req, seed, MSG) &&
	       side_dto_ok(b->rcv, seed, MSG) &&
	       side_same(b->buf + MSG, MSG, seed);
}

static int both_ways(unsigned seed)
{
	return one_send(&C, &S, seed) && one_send(&S, &C, seed + 1);
}

/* ------------------------------------------------------------ cases */

/* The child's wait status, or -1 if it is still running after ms. */
static int child_status(pid_t pid, int ms)
{
	int st = 0;

	for (int i = 0; i <= ms / 5; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(5000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static void test_fork_exit_now(void)
{
	pid_t pid;
	int st, ok = 1;

	side_fill(C.buf, MSG, 3);
	for (int i = 0; i < INFLIGHT && ok; i++)
		ok = side_recv(&S, MSG, MSG, 100 + (uint64_t)i) == DAT_SUCCESS &&
		     side_send(&C, 0, MSG, 200 + (uint64_t)i) == DAT_SUCCESS;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(0);
	st = child_status(pid, 5000);
	CHECK(ok && st == 0, "fork with %d Sends in flight; the child "
	      "_exits at once (status 0x%x)", INFLIGHT, st);
	for (int i = 0; i < INFLIGHT && ok; i++)
		ok = side_dto_ok(C.req, 200 + (uint64_t)i, MSG) &&
		     side_dto_ok(S.rcv, 100 + (uint64_t)i, MSG);
	CHECK(ok && side_same(S.buf + MSG, MSG, 3),
	      "every Send in flight across the fork completes, data intact");
	CHECK(both_ways(10), "the connection carries data both ways after");
}

/* The exit status a leak checker gives a process with leaks, or -1.
 * A forked child's exit() frees libdat2's registry under the parent's
 * open IAs, and LeakSanitizer or valgrind (test/valgrind.sh) call what
 * that orphans a leak: only the child's copy, not ours to judge. */
static int leak_checker_status(void)
{
#ifdef __SANITIZE_ADDRESS__
	return 1;	/* ASan's exitcode */
#else
	return under_valgrind() ? 99 : -1;
#endif
}

static void test_fork_exit_handlers(void)
{
	uint64_t t0 = now_us();
	pid_t pid;
	int st, clean;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(10);
		exit(0);
	}
	st = child_status(pid, 5000);
	clean = st == 0 || (st > 0 && WIFEXITED(st) &&
			    WEXITSTATUS(st) == leak_checker_status());
	CHECK(clean, "a child that calls exit() (atexit handlers, library "
	      "destructors) ends by itself (status 0x%x, %.1f ms)", st,
	      (now_us() - t0) / 1000.0);
	CHECK(both_ways(20), "the parent's connection carries data both ways "
	      "after it");
}

/* Whether pid's command line has an argument naming program prog
 * (under valgrind /proc/PID/exe is valgrind's, the arguments tell). */
static int runs(pid_t pid, const char *prog)
{
	char path[64], buf[4096];
	size_t n, plen = strlen(prog);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
		size_t l = strlen(buf + i);

		if (l >= plen && !strcmp(buf + i + l - plen, prog) &&
		    (l == plen || buf[i + l - plen - 1] == '/'))
			return 1;
	}
	return 0;
}

/* Wait (bounded) until pid has exec'd prog. */
static int exec_done(pid_t pid, const char *prog)
{
	for (int i = 0; i < 1000; i++) {
		if (runs(pid, prog))
			return 1;
		usleep(5000);
	}
	return 0;
}

/* Free the connected client EP: the server EP's connection must end
 * within END_US all the same. */
static void free_client_while(const char *while_what)
{
	uint64_t t0 = now_us();
	int ev;

	CHECK_RET(dat_ep_free(C.ep), DAT_SUCCESS, "free the connected client "
		  "EP while %s", while_what);
	C.ep = DAT_HANDLE_NULL;
	ev = side_wait(S.conn, END_US).event_number;
	CHECK(ev == DAT_CONNECTION_EVENT_DISCONNECTED ||
	      ev == DAT_CONNECTION_EVENT_BROKEN,
	      "... the server EP's connection ends within %d ms (event 0x%x "
	      "after %.1f ms)", END_US / 1000, ev, (now_us() - t0) / 1000.0);
}

static void test_fork_exec(const struct fd_ent *before, int nbefore)
{
	struct fd_ent mine[MAX_FDS], child[MAX_FDS];
	int nmine = fd_list(0, mine, MAX_FDS), nchild, inherited = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "10", (char *)NULL);
		_exit(127);
	}
	CHECK(exec_done(pid, "sleep"), "the child execs /bin/sleep");
	nchild = fd_list(pid, child, MAX_FDS);
	for (int i = 0; i < nchild; i++)
		if (fd_in(mine, nmine, &child[i]) &&
		    !fd_in(before, nbefore, &child[i])) {
			printf("#   inherited: fd %d -> %s\n", child[i].fd,
			       child[i].target);
			inherited++;
		}
	CHECK(nchild >= 0 && inherited == 0,
	      "none of the provider's %d descriptors survives the exec "
	      "(%d found in the child)", nmine - nbefore, inherited);
	CHECK(both_ways(30), "the connection carries data both ways while "
	      "the exec'd child runs");
	/* Freeing a connected EP closes its socket: the other side must
	 * learn of it although a child process exists. */
	free_client_while("the exec'd child runs");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	dat_ep_free(S.ep);
	S.ep = DAT_HANDLE_NULL;
}

/* A child that lives on without exec holds copies of every descriptor:
 * the provider must still end a connection it frees (a reset, not a
 * close that the copies would keep from reaching the peer). */
static void test_fork_child_lives(void)
{
	pid_t pid;

	CHECK(establish(), "a new connection between the two IAs");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(30);
		pause();
		_exit(0);
	}
	CHECK(both_ways(40), "the connection carries data both ways while a "
	      "forked child (no exec) lives");
	free_client_while("a forked child holding copies of its socket "
			  "lives");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	dat_ep_free(S.ep);
	S.ep = DAT_HANDLE_NULL;
}

int main(int argc, char **argv)
{
	struct fd_ent before[MAX_FDS];
	int nbefore, fds0;

	(void)argc;
	(void)argv;
	test_watchdog(120);
	nbefore = fd_list(0, before, MAX_FDS);
	fds0 = fd_count();
	side_open(&S);
	side_open(&C);
	psp = side_psp(&S, &qual);
	CHECK(establish(), "a connection between two IAs of this process");
	test_fork_exit_now();
	test_fork_exit_handlers();
	test_fork_exec(before, nbefore);
	test_fork_child_lives();
	dat_psp_free(psp);
	side_close(&C);
	side_close(&S);
	CHECK(fd_count_settled(fds0, 2000) == fds0,
	      "closing both IAs closes every descriptor they opened (%d)",
	      fds0);
	return tap_done();
}
