/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Running out of resources: requests are refused cleanly, with the DAT
 * return code or connection event that says so, and service resumes by
 * itself once the resources are back (doc/semantics.md, "Limits").
 *   - max_eps (dat_ia_query): the EP beyond it is refused with
 *     DAT_INSUFFICIENT_RESOURCES; a request to a provider PSP that cannot
 *     have its EP is rejected (the client sees PEER_REJECTED), and the
 *     refusals hold no descriptor; with one EP freed, connections work.
 *   - descriptors (RLIMIT_NOFILE of this process): opening the IA raises
 *     the soft limit to the hard one (not with IWDAPL_RAISE_NOFILE=0);
 *     at the limit, objects that need one are refused with
 *     DAT_INSUFFICIENT_RESOURCES, an active connect too, and one log line
 *     names the limit;
 *     a listener out of descriptors keeps its clients waiting and serves
 *     them once descriptors are free.
 *   - memory (RLIMIT_AS; not under ASan or valgrind, whose own mappings
 *     take the address space): the same, then everything works again.
 *   - a flood of idle TCP connections (never an MPA request) kept at
 *     twice the per-listener half-open cap does not starve a real client.
 *   - a peer that never reads (stopped): Sends and RDMA Writes are refused
 *     with DAT_INSUFFICIENT_RESOURCES once the send queue is full, and
 *     the resident set stays flat however long we keep posting.
 * Peers are this program exec'd in a role (tpeer.h).
 */
#include <sys/resource.h>

#include "tpeer.h"

#define STEP_MS       5000
#define MSG           65536
#define FLOOD         512		/* twice CM_HALF_OPEN_MAX */
#define FLOOD_BOUND_US 3000000u	/* a client connects under the flood */
#define STALL_SECONDS 3			/* posting to a peer that never reads */
#define STALL_RSS_TOL_KIB 1024
#define FD_SPARE      64		/* descriptors left for the test itself */
#define NOFILE_LOW    300		/* a soft limit below the hard one */

static struct side S;
static DAT_CONN_QUAL qual;		/* S's consumer PSP */
static char qual_arg[32];
static DAT_PSP_HANDLE psp;

/* =========================================================== the peer */

/* Connects to qualifier argv[0] (with argv[1] "wait": once the parent
 * says PM_GO); tells the connection event it got and how long after the
 * connect call (us), then parks (the parent stops or kills it). */
static int role_client(int argc, char **argv)
{
	struct side s;
	DAT_EVENT ev;
	uint64_t t0;

	if (argc < 1)
		return 2;
	side_open(&s);
	s.ep = side_ep(&s);
	if (argc > 1 && !strcmp(argv[1], "wait") && !peer_wait_go(30000))
		return 4;
	t0 = now_us();
	if (connect_lo(s.ep, arg_qual(argv[0])) != DAT_SUCCESS)
		return 3;
	ev = side_wait(s.conn, 2 * TSIDE_WAIT_US);
	peer_tell(PM_EVENT, (int)ev.event_number, now_us() - t0, 0, 0);
	return peer_park();
}

/* Listens and accepts every request, for as long as it lives. */
static int role_acceptor(int argc, char **argv)
{
	struct side s;
	DAT_PSP_HANDLE p;

	(void)argc;
	(void)argv;
	if (!peer_listen(&s, &p))
		return 3;
	for (;;) {
		DAT_EVENT ev = side_wait(s.cr, 100000);

		while (side_wait(s.conn, 0).event_number)
			;	/* ESTABLISHED and ends: nobody needs them */
		if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
			continue;
		dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
			      side_ep(&s), 0, NULL);
	}
	return 0;
}

/* A raw TCP connection to 127.0.0.1:port, connecting (non-blocking). */
static int raw_connect(uint16_t port)
{
	struct sockaddr_in a = peer_loopback();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	a.sin_port = htons(port);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether the listener ended this raw connection (EOF, reset). */
static int raw_ended(int fd)
{
	char c;
	ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT);

	return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
			  errno != ENOTCONN);
}

/* Keeps argv[1] idle TCP connections open to port argv[0], replacing
 * each one the listener closes, until killed; tells PM_READY once the
 * first argv[1] connects have been issued, and every second how many
 * it has replaced so far. */
static int role_flooder(int argc, char **argv)
{
	static int fds[4 * FLOOD];
	uint16_t port;
	int n, replaced = 0;
	uint64_t next_report;

	if (argc < 2)
		return 2;
	port = (uint16_t)atoi(argv[0]);
	n = atoi(argv[1]);
	if (n < 1 || n > 4 * FLOOD)
		return 2;
	for (int i = 0; i < n; i++)
		if ((fds[i] = raw_connect(port)) < 0)
			return 3;
	peer_tell(PM_READY, 0, (uint64_t)n, 0, 0);
	next_report = now_us() + 1000000;
	for (;;) {
		for (int i = 0; i < n; i++)
			if (raw_ended(fds[i])) {
				close(fds[i]);
				fds[i] = raw_connect(port);
				replaced++;
			}
		if (now_us() >= next_report) {
			peer_tell(PM_DONE, replaced, 0, 0, 0);
			next_report += 1000000;
		}
		usleep(2000);
	}
	return 0;
}

/* With IWDAPL_RAISE_NOFILE=0, opening an IA leaves a soft descriptor
 * limit below the hard one as it is: exit 0 when it did. */
static int role_nofile_keep(int argc, char **argv)
{
	struct rlimit rl;
	struct side s;

	(void)argc;
	(void)argv;
	setenv("IWDAPL_RAISE_NOFILE", "0", 1);
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max < 2 * NOFILE_LOW)
		return 2;
	rl.rlim_cur = NOFILE_LOW;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 2;
	side_open(&s);
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 2;
	side_close(&s);
	return rl.rlim_cur == NOFILE_LOW ? 0 : 1;
}

static const struct peer_role roles[] = {
	{ "nofile_keep", role_nofile_keep },
	{ "client", role_client },
	{ "acceptor", role_acceptor },
	{ "flooder", role_flooder },
	{ NULL, NULL },
};

/* ================================================== the limited side */

/* A client peer for qualifier q (wait: it connects at PM_GO). */
static int spawn_client(struct peer *p, DAT_CONN_QUAL q, int wait)
{
	char qs[32];
	const char *args[] = { qs, wait ? "wait" : NULL, NULL };

	snprintf(qs, sizeof(qs), "%llu", (unsigned long long)q);
	return peer_spawn(p, "client", args);
}

/* A client peer connecting to qualifier q: the connection event it saw
 * (0: none, or it could not start); the peer is left running. */
static int client_event(struct peer *p, DAT_CONN_QUAL q, int ms)
{
	struct peer_msg m;

	if (!spawn_client(p, q, 0) || !peer_recv(p->ctl, &m, ms) ||
	    m.type != PM_EVENT)
		return 0;
	return m.arg;
}

/* The next connection event of ep on S.conn (S's EPs share it; those
 * of other EPs are passed over), 0 if none within us. */
static int conn_event_of(DAT_EP_HANDLE ep, DAT_TIMEOUT us)
{
	uint64_t end = now_us() + us;
	DAT_EVENT e;

	do {
		e = side_wait(S.conn, us);
		if (e.event_number &&
		    e.event_data.connect_event_data.ep_handle == ep)
			return e.event_number;
	} while (e.event_number && now_us() < end);
	return 0;
}

/* Accept the next request on S's PSP with a new EP: 1 on ESTABLISHED. */
static int accept_next(DAT_EP_HANDLE *ep, int ms)
{
	DAT_EVENT ev = side_wait(S.cr, (DAT_TIMEOUT)ms * 1000);

	*ep = DAT_HANDLE_NULL;
	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
		return 0;
	*ep = side_ep(&S);
	return dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle,
			     *ep, 0, NULL) == DAT_SUCCESS &&
	       conn_event_of(*ep, STEP_MS * 1000) ==
		       DAT_CONNECTION_EVENT_ESTABLISHED;
}

/* A full connection from a fresh client peer to S's PSP works. */
static int service_works(void)
{
	struct peer p;
	DAT_EP_HANDLE ep;
	struct peer_msg m;
	int ok;

	ok = spawn_client(&p, qual, 0) && accept_next(&ep, STEP_MS) &&
	     peer_recv(p.ctl, &m, STEP_MS) && m.type == PM_EVENT &&
	     m.arg == DAT_CONNECTION_EVENT_ESTABLISHED;
	peer_kill(&p);
	if (ep) {
		side_wait(S.conn, STEP_MS * 1000);	/* its end */
		dat_ep_free(ep);
	}
	return ok;
}

/* ------------------------------------------------------------ max_eps */

/* dat_ia_query's max_eps is IWE_MAX_QP, which nothing counts yet:
 * dat_ep_create goes on succeeding past it.  Set to 0 once enforced. */
#define MAX_EPS_BUG 0
#define MAX_EPS_TODO "max_eps is not enforced (dat_ep_create succeeds past it)"

/* A point that a known provider bug makes fail: TAP TODO while the bug
 * is declared (an unexpected pass then shows as XPASS). */
static void check_known(int known, int ok, const char *bug, const char *what)
{
	if (!known) {
		CHECK(ok, "%s", what);
		return;
	}
	printf("%s %d - %s # TODO %s\n", ok ? "ok" : "not ok", ++tap_count,
	       what, bug);
}

/* Reject every request waiting on S's CR EVD; their provider EPs go. */
static int reject_waiting(void)
{
	DAT_EVENT e;
	int n = 0;

	while ((e = side_wait(S.cr, 200000)).event_number ==
	       DAT_CONNECTION_REQUEST_EVENT) {
		DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
		DAT_CR_PARAM crp;

		memset(&crp, 0, sizeof(crp));
		dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp);
		dat_cr_reject(cr, 0, NULL);
		if (crp.local_ep_handle)
			dat_ep_free(crp.local_ep_handle);
		n++;
	}
	return n;
}

/* Create EPs until refused or one past max: how many there are. */
static int eps_fill(DAT_EP_HANDLE *eps, int max, DAT_RETURN *r)
{
	int n = 0;

	while (n <= max) {
		*r = dat_ep_create(S.ia, S.pz, S.rcv, S.req, S.conn, NULL,
				   &eps[n]);
		if (*r != DAT_SUCCESS)
			break;
		n++;
	}
	return n;
}

/* At max_eps, requests to a provider PSP are refused and hold nothing. */
static void provider_psp_at_limit(DAT_CONN_QUAL pq, int known)
{
	char what[160];
	struct peer p;
	int fds0 = fd_count(), ev, arrived, fds;

	ev = client_event(&p, pq, 2000);
	peer_kill(&p);
	arrived = reject_waiting();
	snprintf(what, sizeof(what), "at max_eps, a request to a provider PSP "
		 "is rejected (client saw 0x%x, %d CR delivered)", ev, arrived);
	check_known(known, ev == DAT_CONNECTION_EVENT_PEER_REJECTED &&
		    !arrived, MAX_EPS_TODO, what);
	if (ev != DAT_CONNECTION_EVENT_PEER_REJECTED) {
		tap_skip("20 more refused requests hold no descriptor",
			 "the first one was not refused");
		return;
	}
	for (int i = 0; i < 20; i++) {
		client_event(&p, pq, STEP_MS);
		peer_kill(&p);
	}
	fds = fd_count_settled(fds0, 2000);	/* fewer: see test_flood */
	CHECK(fds <= fds0, "21 refused requests hold no descriptor (%d "
	      "before, %d after)", fds0, fds);
}

static void test_max_eps(void)
{
	char what[160];
	DAT_IA_ATTR ia;
	DAT_EP_HANDLE *eps;
	DAT_PSP_HANDLE ppsp;
	DAT_CONN_QUAL pq = 0;
	DAT_RETURN r = DAT_SUCCESS;
	struct peer p;
	DAT_CR_PARAM crp;
	DAT_EVENT e;
	int n, ok;

	if (dat_ia_query(S.ia, NULL, DAT_IA_FIELD_ALL, &ia, 0, NULL) !=
	    DAT_SUCCESS)
		BAIL("dat_ia_query");
	eps = calloc((size_t)ia.max_eps + 1, sizeof(*eps));
	if (!eps)
		BAIL("out of memory");
	/* No other EP of the IA exists now. */
	n = eps_fill(eps, ia.max_eps, &r);
	snprintf(what, sizeof(what), "max_eps (%d) EPs can be created and "
		 "the next is refused with DAT_INSUFFICIENT_RESOURCES (%d "
		 "created, then 0x%x)", ia.max_eps, n, r);
	check_known(MAX_EPS_BUG, n == ia.max_eps &&
		    DAT_GET_TYPE(r) == DAT_INSUFFICIENT_RESOURCES,
		    MAX_EPS_TODO, what);
	if (n > ia.max_eps)
		dat_ep_free(eps[--n]);	/* back to the limit */
	if (dat_psp_create_any(S.ia, &pq, S.cr, DAT_PSP_PROVIDER_FLAG,
			       &ppsp) != DAT_SUCCESS)
		BAIL("dat_psp_create_any (provider)");
	provider_psp_at_limit(pq, MAX_EPS_BUG);
	dat_ep_free(eps[--n]);
	ok = spawn_client(&p, pq, 0) &&
	     (e = side_wait(S.cr, STEP_MS * 1000)).event_number ==
		     DAT_CONNECTION_REQUEST_EVENT &&
	     dat_cr_query(e.event_data.cr_arrival_event_data.cr_handle,
			  DAT_CR_FIELD_ALL, &crp) == DAT_SUCCESS &&
	     crp.local_ep_handle != DAT_HANDLE_NULL;
	CHECK(ok, "with one EP freed, the provider PSP delivers the next "
	      "request with its EP");
	if (ok) {
		dat_cr_reject(e.event_data.cr_arrival_event_data.cr_handle, 0,
			      NULL);
		dat_ep_free(crp.local_ep_handle);
	}
	peer_kill(&p);
	dat_psp_free(ppsp);
	while (n > 0)
		dat_ep_free(eps[--n]);
	free(eps);
	while (side_wait(S.conn, 0).event_number)
		;
	CHECK(service_works(), "after freeing the EPs, connections work");
}

/* --------------------------------------------------------- descriptors */

struct fd_fill {
	int fds[1024];
	int n;
	int model;		/* what is dup'ed (stdin may be closed) */
	struct rlimit saved;
};

/* Lower RLIMIT_NOFILE to just above what is open, then take every
 * descriptor left with dup()s: the process has none to spare. */
static int fd_exhaust(struct fd_fill *f)
{
	struct rlimit rl;
	int hi = 0;

	f->n = 0;
	if (getrlimit(RLIMIT_NOFILE, &f->saved) < 0)
		BAIL("getrlimit");
	f->model = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (f->model < 0)
		return 0;
	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			hi = fd;
	rl = f->saved;
	rl.rlim_cur = (rlim_t)hi + FD_SPARE;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	while (f->n < (int)(sizeof(f->fds) / sizeof(f->fds[0]))) {
		int fd = dup(f->model);

		if (fd < 0)
			break;
		f->fds[f->n++] = fd;
	}
	return errno == EMFILE;
}

static void fd_release(struct fd_fill *f)
{
	while (f->n > 0)
		close(f->fds[--f->n]);
	if (f->model >= 0)
		close(f->model);
	setrlimit(RLIMIT_NOFILE, &f->saved);
}

/* Lines of f that contain what. */
static int log_lines_with(FILE *f, const char *what)
{
	char line[512];
	int n = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	return n;
}

/* Opening the IA raised a soft descriptor limit to the hard one; with
 * IWDAPL_RAISE_NOFILE=0 it stays (a peer: once per process). */
static void test_nofile_raised(rlim_t soft_before)
{
	struct rlimit rl;
	struct peer k;

	getrlimit(RLIMIT_NOFILE, &rl);
	CHECK(rl.rlim_cur == rl.rlim_max,
	      "opening the IA raised the soft descriptor limit to the hard "
	      "one (%llu -> %llu)", (unsigned long long)soft_before,
	      (unsigned long long)rl.rlim_cur);
	CHECK(peer_spawn(&k, "nofile_keep", NULL) && peer_finish(&k, STEP_MS) == 0,
	      "with IWDAPL_RAISE_NOFILE=0 it stays at %d", NOFILE_LOW);
}

static void test_no_descriptors(void)
{
	struct fd_fill fill;
	struct peer acc, cli;
	struct peer_msg m, ev_m;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = side_ep(&S), sep;
	DAT_RETURN r;
	DAT_OS_WAIT_PROXY_AGENT agent = { NULL, NULL };
	FILE *log = tmpfile();
	int err_fd = dup(2);
	uint64_t t0;
	int ok, ev, said;

	/* Peers first: starting one takes descriptors. */
	ok = peer_spawn(&acc, "acceptor", NULL) &&
	     peer_expect(&acc, PM_READY, &m, STEP_MS) &&
	     spawn_client(&cli, qual, 1);
	if (!ok)
		BAIL("the peers of the descriptor test did not start");
	if (!log || err_fd < 0)
		BAIL("tmpfile or dup");
	CHECK(fd_exhaust(&fill), "RLIMIT_NOFILE lowered, every descriptor "
	      "taken (%d dups)", fill.n);
	/* What the provider logs meanwhile goes to the file. */
	fflush(stderr);
	dup2(fileno(log), 2);
	r = dat_evd_create(S.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd);
	CHECK_RET(r, DAT_INSUFFICIENT_RESOURCES,
		  "no descriptor: dat_evd_create is refused");
	r = dat_cno_create(S.ia, agent, &cno);
	CHECK_RET(r, DAT_INSUFFICIENT_RESOURCES,
		  "no descriptor: dat_cno_create is refused");
	r = connect_lo(ep, m.v[0]);
	CHECK_RET(r, DAT_INSUFFICIENT_RESOURCES,
		  "no descriptor: dat_ep_connect is refused");
	CHECK(side_ep_state(ep) == DAT_EP_STATE_UNCONNECTED,
	      "... and leaves the EP UNCONNECTED (state %d)",
	      (int)side_ep_state(ep));
	fflush(stderr);
	dup2(err_fd, 2);
	said = log_lines_with(log, "out of descriptors");
	CHECK(said == 1 && log_lines_with(log, "RLIMIT_NOFILE") == 1,
	      "three calls refused, one log line naming the limit (%d)", said);
	/* A client of our PSP waits in the kernel's backlog meanwhile. */
	ok = peer_send(cli.ctl, PM_GO, 0, 0, 0, 0);
	ev = side_wait(S.cr, 500000).event_number;
	CHECK(ok && ev == 0, "no descriptor: a client's request is not "
	      "taken in (event 0x%x)", ev);
	t0 = now_us();
	fd_release(&fill);
	close(err_fd);		/* closed before, they were free descriptors */
	fclose(log);
	ok = accept_next(&sep, STEP_MS);
	CHECK(ok, "descriptors free: the waiting client is served (%.0f ms)",
	      (now_us() - t0) / 1000.0);
	CHECK(peer_expect(&cli, PM_EVENT, &ev_m, STEP_MS) &&
	      ev_m.arg == DAT_CONNECTION_EVENT_ESTABLISHED,
	      "... and its connection is ESTABLISHED");
	peer_kill(&cli);
	r = connect_lo(ep, m.v[0]);
	ev = conn_event_of(ep, STEP_MS * 1000);
	CHECK(r == DAT_SUCCESS && ev == DAT_CONNECTION_EVENT_ESTABLISHED,
	      "the EP refused before connects now (0x%x, event 0x%x)", r, ev);
	if (evd)
		dat_evd_free(evd);
	if (cno)
		dat_cno_free(cno);
	side_wait(S.conn, STEP_MS * 1000);
	dat_ep_free(sep);
	dat_ep_free(ep);
	peer_kill(&acc);
	while (side_wait(S.conn, 0).event_number)
		;
}

/* -------------------------------------------------------------- memory */

#define BALLAST_MAX 16384
#define BALLAST_CHUNK (64 * 1024)

/* The address space this process has mapped, in bytes. */
static unsigned long long vm_bytes(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* Lower RLIMIT_AS to a little above what is mapped and take the rest of
 * the heap in chunks: the next sizeable malloc fails. */
static int mem_exhaust(void **ballast, int *n, struct rlimit *saved)
{
	struct rlimit rl;

	*n = 0;
	if (getrlimit(RLIMIT_AS, saved) < 0)
		BAIL("getrlimit");
	rl = *saved;
	rl.rlim_cur = (rlim_t)(vm_bytes() + (16u << 20));
	if (setrlimit(RLIMIT_AS, &rl) < 0)
		return 0;
	/* Big chunks, then ever smaller ones into what is left. */
	for (size_t sz = BALLAST_CHUNK; sz >= 16; sz /= 8)
		while (*n < BALLAST_MAX && (ballast[*n] = malloc(sz)))
			(*n)++;
	return *n < BALLAST_MAX;
}

static void mem_release(void **ballast, int *n, const struct rlimit *saved)
{
	while (*n > 0)
		free(ballast[--*n]);
	setrlimit(RLIMIT_AS, saved);
}

/* Register 64 KiB more of S's buffer. */
static DAT_RETURN lmr_try(DAT_LMR_HANDLE *lmr)
{
	DAT_REGION_DESCRIPTION rd;
	DAT_LMR_CONTEXT lc;
	DAT_RMR_CONTEXT rc;
	DAT_VLEN rs;
	DAT_VADDR ra;

	rd.for_va = S.buf;
	return dat_lmr_create(S.ia, DAT_MEM_TYPE_VIRTUAL, rd, MSG, S.pz,
			      DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, lmr, &lc,
			      &rc, &rs, &ra);
}

/* A creation refused for want of memory must say so. */
static void check_refusal(const char *what, DAT_RETURN r, int *refused)
{
	if (r == DAT_SUCCESS) {
		printf("#   out of memory, %s still succeeded\n", what);
		return;
	}
	(*refused)++;
	CHECK_RET(r, DAT_INSUFFICIENT_RESOURCES, "out of memory: %s is "
		  "refused with DAT_INSUFFICIENT_RESOURCES", what);
}

static void test_no_memory(void)
{
	static void *ballast[BALLAST_MAX];
	struct rlimit saved;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL, sep = DAT_HANDLE_NULL;
	DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	struct peer cli;
	struct peer_msg m;
	int n = 0, refused = 0, ok;

	if (!rss_meaningful()) {
		tap_skip("out of memory (RLIMIT_AS): creations refused, service "
			 "resumes", "ASan's shadow and valgrind's own mappings "
			 "take the address space");
		return;
	}
	/* The peer first: it is exec'd under our limits. */
	if (!spawn_client(&cli, qual, 1))
		BAIL("the peer of the memory test did not start");
	CHECK(mem_exhaust(ballast, &n, &saved), "RLIMIT_AS lowered, the "
	      "heap taken (%d allocations of ballast)", n);
	check_refusal("dat_evd_create (1M entries)",
		      dat_evd_create(S.ia, 1 << 20, DAT_HANDLE_NULL,
				     DAT_EVD_DTO_FLAG, &evd), &refused);
	check_refusal("dat_ep_create", dat_ep_create(S.ia, S.pz, S.rcv, S.req,
						     S.conn, NULL, &ep),
		      &refused);
	check_refusal("dat_lmr_create", lmr_try(&lmr), &refused);
	check_refusal("dat_pz_create", dat_pz_create(S.ia, &pz), &refused);
	CHECK(refused > 0, "out of memory, creations are refused (%d)",
	      refused);
	/* A client's request meanwhile: taken in or not, nothing breaks. */
	peer_send(cli.ctl, PM_GO, 0, 0, 0, 0);
	usleep(300000);
	mem_release(ballast, &n, &saved);
	if (evd)
		dat_evd_free(evd);
	if (ep)
		dat_ep_free(ep);
	if (lmr)
		dat_lmr_free(lmr);
	if (pz)
		dat_pz_free(pz);
	ok = accept_next(&sep, STEP_MS) && peer_expect(&cli, PM_EVENT, &m,
						       STEP_MS) &&
	     m.arg == DAT_CONNECTION_EVENT_ESTABLISHED;
	CHECK(ok, "memory back: the client that asked meanwhile connects");
	peer_kill(&cli);
	if (sep) {
		conn_event_of(sep, STEP_MS * 1000);
		dat_ep_free(sep);
	}
	CHECK(service_works(), "memory back: connections work");
}

/* --------------------------------------------------------------- flood */

/* One client connects while the flood goes on: the time from its
 * connect call to ESTABLISHED, or 0 when it did not connect. */
static uint64_t connect_under_flood(void)
{
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	struct peer_msg m;
	struct peer p;
	uint64_t us = 0;

	if (spawn_client(&p, qual, 0) && accept_next(&ep, 15000) &&
	    peer_expect(&p, PM_EVENT, &m, STEP_MS) &&
	    m.arg == DAT_CONNECTION_EVENT_ESTABLISHED)
		us = m.v[0] ? m.v[0] : 1;
	peer_kill(&p);
	if (ep) {
		conn_event_of(ep, STEP_MS * 1000);
		dat_ep_free(ep);
	}
	return us;
}

static void test_flood(void)
{
	char port[16], count[16];
	const char *args[] = { port, count, NULL };
	struct peer f;
	struct peer_msg m;
	uint64_t worst = 0, us;
	int fds0 = fd_count(), ok, fds, connected = 0;

	snprintf(port, sizeof(port), "%llu", (unsigned long long)qual);
	snprintf(count, sizeof(count), "%d", FLOOD);
	ok = qual <= 65535 && peer_spawn(&f, "flooder", args) &&
	     peer_expect(&f, PM_READY, &m, STEP_MS);
	CHECK(ok, "%d idle TCP connections to the PSP's port, kept up", FLOOD);
	usleep(300000);	/* the listener takes in what it will */
	for (int i = 0; i < 3; i++) {
		us = connect_under_flood();
		connected += us > 0;
		if (!us || us > worst)
			worst = us ? us : UINT64_MAX;
	}
	while (peer_recv(f.ctl, &m, 0))
		if (m.type == PM_DONE)
			printf("#   the listener dropped %d idle connections\n",
			       m.arg);
	CHECK(connected == 3 && worst <= FLOOD_BOUND_US, "under the flood, 3 "
	      "clients connect one after another, each within %u ms (worst "
	      "%.0f ms)", FLOOD_BOUND_US / 1000,
	      worst == UINT64_MAX ? -1.0 : worst / 1000.0);
	peer_kill(&f);
	/* Fewer than before is no leak: the descriptor of the step
	 * before's connection may still have been closing (the progress
	 * thread closes it after dat_ep_free returns). */
	fds = fd_count_settled(fds0, 3000);
	CHECK(fds <= fds0, "the flood gone, the listener holds none of its "
	      "descriptors (%d before, %d after)", fds0, fds);
	CHECK(service_works(), "after the flood, connections work");
}

/* ----------------------------------------------------- a peer that stops */

/* Post MSG-byte Sends on ep until refused; the first refusal's code. */
static DAT_RETURN post_until_full(DAT_EP_HANDLE ep, struct wr_count *w)
{
	DAT_LMR_TRIPLET l = side_lseg(&S, 0, MSG);
	DAT_RETURN r;

	for (;;) {
		r = dat_ep_post_send(ep, 1, &l, side_ck(wrc_next(w)),
				     DAT_COMPLETION_DEFAULT_FLAG);
		if (r != DAT_SUCCESS || w->posted >= WRC_MAX)
			return r;
		w->posted++;
	}
}

/* Take the completions there are, without waiting. */
static void take_ready(struct wr_count *w)
{
	DAT_EVENT e;

	while ((e = side_wait(S.req, 0)).event_number)
		wrc_take(w, &e);
}

static void test_never_reads(void)
{
	struct wr_count w;
	struct peer acc;
	struct peer_msg m;
	DAT_EP_HANDLE ep = side_ep(&S);
	DAT_RETURN first_refusal = DAT_SUCCESS, r;
	uint64_t end;
	long rss1 = 0, rss2;
	int ok, ev;

	wrc_init(&w, 7000);
	ok = peer_spawn(&acc, "acceptor", NULL) &&
	     peer_expect(&acc, PM_READY, &m, STEP_MS) &&
	     connect_lo(ep, m.v[0]) == DAT_SUCCESS &&
	     conn_event_of(ep, STEP_MS * 1000) ==
		     DAT_CONNECTION_EVENT_ESTABLISHED &&
	     kill(acc.pid, SIGSTOP) == 0 &&
	     waitpid(acc.pid, NULL, WUNTRACED) == acc.pid;
	CHECK(ok, "connected to a peer, then stopped it: it reads nothing");
	end = now_us() + STALL_SECONDS * 1000000u;
	while (now_us() < end && w.posted < WRC_MAX) {
		r = post_until_full(ep, &w);
		if (r != DAT_SUCCESS && first_refusal == DAT_SUCCESS)
			first_refusal = r;
		take_ready(&w);
		if (!rss1 && now_us() > end - (STALL_SECONDS - 1) * 1000000u)
			rss1 = rss_kib();
		usleep(10000);
	}
	rss2 = rss_kib();
	printf("#   %u Sends of %d KiB accepted (%u completed) before the "
	       "send queue stayed full\n", w.posted, MSG >> 10, w.ok);
	CHECK_RET(first_refusal, DAT_INSUFFICIENT_RESOURCES, "the send queue "
		  "fills: dat_ep_post_send says DAT_INSUFFICIENT_RESOURCES");
	CHECK(w.posted < WRC_MAX, "what is accepted is bounded (%u Sends, "
	      "%u MiB)", w.posted, w.posted * (MSG >> 10) >> 10);
	if (rss_meaningful())
		CHECK(rss2 - rss1 <= STALL_RSS_TOL_KIB, "posting on for %d s "
		      "more, the resident set stays flat (%ld -> %ld KiB)",
		      STALL_SECONDS - 1, rss1, rss2);
	else
		tap_skip("the resident set stays flat while posting",
			 "RSS under a sanitizer or valgrind says nothing");
	peer_kill(&acc);
	ev = conn_event_of(ep, STEP_MS * 1000);
	CHECK(ev == DAT_CONNECTION_EVENT_BROKEN ||
	      ev == DAT_CONNECTION_EVENT_DISCONNECTED,
	      "the peer killed, the connection ends (0x%x)", ev);
	wrc_drain(&w, S.req, 1000000, 5000000);
	CHECK(wrc_balanced(&w), "every Send posted completes once (%u posted, "
	      "%u completed, %u flushed)", w.posted, w.completed, w.flushed);
	dat_ep_free(ep);
}

/* A soft descriptor limit below the hard one, for the IA to raise. */
static void nofile_lower(rlim_t *soft)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		BAIL("getrlimit");
	if (rl.rlim_max < 2 * NOFILE_LOW)
		BAIL("the hard descriptor limit is under %d", 2 * NOFILE_LOW);
	rl.rlim_cur = rl.rlim_max / 2;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		BAIL("setrlimit");
	*soft = rl.rlim_cur;
}

int main(int argc, char **argv)
{
	rlim_t soft_before;
	int fds_start;

	/* A table of 1024 EPs to fill rather than the 131072 a device
	 * allows by default (iwdapl(7), IWDAPL_MAX_EPS); peers inherit it. */
	setenv("IWDAPL_MAX_EPS", "1024", 1);
	peer_init();
	peer_dispatch(argc, argv, roles);
	test_watchdog(300);
	fds_start = fd_count();
	nofile_lower(&soft_before);
	side_open(&S);
	test_nofile_raised(soft_before);
	psp = side_psp(&S, &qual);
	snprintf(qual_arg, sizeof(qual_arg), "%llu", (unsigned long long)qual);
	CHECK(service_works(), "a client connects to the PSP");
	test_max_eps();
	test_no_descriptors();
	test_no_memory();
	test_flood();
	test_never_reads();
	dat_psp_free(psp);
	side_close(&S);
	CHECK(fd_count_settled(fds_start, 2000) == fds_start,
	      "closing the IA closes every descriptor it opened (%d)",
	      fds_start);
	return tap_done();
}
