/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The log (iw_log.h, doc/man/iwdapl.7 ENVIRONMENT): each bad input and
 * failed connection prints its one-line reason on stderr by default, and
 * the DAT return codes and events stay what they were.
 *
 * Every case runs in a child process of its own (the log's variables are
 * read once per process) with stderr on a file; the parent asserts the
 * exact lines.  The registry file is written here: the library of this
 * build tree under IA names of this test. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <regex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tside.h"

#ifndef TEST_LIBDAPL
#error TEST_LIBDAPL must name the built libdaploiw.so.2
#endif

#define WAIT_US 5000000
#define SKIP_STATUS 77

static const char *const conf_lines[][2] = {
	{ "iw-lo", "127.0.0.1 tcp" },
	{ "iw-log-nodev", "nosuchdev0 tcp" },
	{ "iw-log-notlocal", "203.0.113.254 tcp" },
	{ "iw-log-lo", "lo tcp" },
	{ "iw-log-badopt", "lo tcp frob=1" },
};

static unsigned short g_port;	/* the case's port, set before the fork */

/* ------------------------------------------------------------ children */

struct run {
	pid_t pid;
	int status;		/* exit status, -1: killed */
	char err[16384];	/* its stderr */
};

/* Run fn in a child with the variables of env (NAME, VALUE pairs, NULL
 * ended) set and its stderr on a file; what it wrote is in r->err. */
static void run_child(int (*fn)(void), const char *const *env, struct run *r)
{
	char path[] = "/tmp/t_log_err.XXXXXX";
	int fd = mkstemp(path), st;
	ssize_t n;

	if (fd < 0)
		BAIL("mkstemp: %s", strerror(errno));
	unlink(path);
	fflush(stdout);
	r->pid = fork();
	if (r->pid < 0)
		BAIL("fork: %s", strerror(errno));
	if (r->pid == 0) {
		for (int i = 0; env && env[i]; i += 2)
			setenv(env[i], env[i + 1], 1);
		dup2(fd, 2);
		alarm(30);
		st = fn();
		fflush(stdout);
		_exit(st);
	}
	if (waitpid(r->pid, &st, 0) < 0)
		BAIL("waitpid: %s", strerror(errno));
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	n = pread(fd, r->err, sizeof(r->err) - 1, 0);
	r->err[n > 0 ? n : 0] = '\0';
	close(fd);
}

/* Lines of text that match the extended regex pat (whole lines). */
static int count_lines(const char *text, const char *pat)
{
	char anchored[600], line[1024];
	regex_t re;
	int n = 0;

	snprintf(anchored, sizeof(anchored), "^%s$", pat);
	if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB))
		BAIL("bad regex %s", anchored);
	while (*text) {
		size_t len = strcspn(text, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)len, text);
		n += regexec(&re, line, 0, NULL, 0) == 0;
		text += len + (text[len] == '\n');
	}
	regfree(&re);
	return n;
}

/* The child's lines on stderr; -1 if one is not a whole line of its own
 * prefixed "iwdapl[PID]: ". */
/* The child's stderr as TAP comments. */
static void show(const struct run *r)
{
	const char *t = r->err;

	while (*t) {
		size_t len = strcspn(t, "\n");

		printf("#   %.*s\n", (int)len, t);
		t += len + (t[len] == '\n');
	}
}

static int nlines(const struct run *r)
{
	char pfx[32];
	const char *t = r->err;
	int n = 0;

	snprintf(pfx, sizeof(pfx), "iwdapl[%d]: ", (int)r->pid);
	while (*t) {
		const char *nl = strchr(t, '\n');

		if (!nl || strncmp(t, pfx, strlen(pfx)))
			return -1;
		n++;
		t = nl + 1;
	}
	return n;
}

/* Say in the child why it fails (stdout is the TAP stream). */
static int fail(const char *fmt, ...)
{
	va_list ap;

	printf("#   child: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return 1;
}

/* The return code without the class bits the registry may add. */
static int same_code(DAT_RETURN got, DAT_RETURN want)
{
	unsigned m = DAT_TYPE_MASK | DAT_SUBTYPE_MASK;

	return ((unsigned)got & m) == ((unsigned)want & m);
}

static int open_fails_with(const char *name, DAT_RETURN want)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_RETURN r = dat_ia_open((DAT_NAME_PTR)name, 4, &evd, &ia);

	if (r == DAT_SUCCESS)
		dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	return same_code(r, want) ? 0 : fail("%s: 0x%x", name, r);
}

static int sc_nodev(void)
{
	return open_fails_with("iw-log-nodev", DAT_INVALID_ADDRESS |
			       DAT_INVALID_ADDRESS_UNREACHABLE);
}

static int sc_notlocal(void)
{
	return open_fails_with("iw-log-notlocal", DAT_INVALID_ADDRESS |
			       DAT_INVALID_ADDRESS_UNREACHABLE);
}

/* A new network namespace has a loopback netdev without any address. */
static int sc_noipv4(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		return SKIP_STATUS;
	return open_fails_with("iw-log-lo", DAT_INVALID_ADDRESS |
			       DAT_INVALID_ADDRESS_UNREACHABLE);
}

static int sc_badopt(void)
{
	return open_fails_with("iw-log-badopt", DAT_INVALID_PARAMETER |
			       DAT_INVALID_ARG1);
}

/* ------------------------------------------------------- connections */

static DAT_RETURN connect_port(struct side *c, DAT_TIMEOUT us)
{
	struct sockaddr_in to = { .sin_family = AF_INET };

	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return dat_ep_connect(c->ep, (DAT_IA_ADDRESS_PTR)&to, g_port, us, 0,
			      NULL, DAT_QOS_BEST_EFFORT,
			      DAT_CONNECT_DEFAULT_FLAG);
}

/* Connect to g_port: the connection event must be 'want'. */
static int connect_expect(DAT_EVENT_NUMBER want, DAT_TIMEOUT us)
{
	struct side c;
	DAT_EVENT ev;
	int ok;

	side_open(&c);
	c.ep = side_ep(&c);
	if (connect_port(&c, us) != DAT_SUCCESS) {
		side_close(&c);
		return fail("dat_ep_connect");
	}
	ev = side_wait(c.conn, WAIT_US);
	ok = ev.event_number == want;
	side_close(&c);
	return ok ? 0 : fail("event 0x%x, want 0x%x", ev.event_number, want);
}

static int sc_refused(void)
{
	return connect_expect(DAT_CONNECTION_EVENT_UNREACHABLE, WAIT_US);
}

/* A wait on a DTO EVD (which may spin), then a refused connect. */
static int wait_then_refused(void)
{
	struct side c;

	side_open(&c);
	side_wait(c.rcv, 1000);
	side_close(&c);
	return sc_refused();
}

/* Each IA and each connect reads the variables again. */
static int sc_refused_twice(void)
{
	return wait_then_refused() || wait_then_refused();
}

static int sc_rejected(void)
{
	struct side s, c;
	DAT_PSP_HANDLE psp;
	DAT_EVENT ev;
	int ok = 0;

	side_open(&s);
	side_open(&c);
	c.ep = side_ep(&c);
	if (dat_psp_create(s.ia, g_port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS)
		return fail("dat_psp_create");
	if (connect_port(&c, WAIT_US) == DAT_SUCCESS) {
		ev = side_wait(s.cr, WAIT_US);
		if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT)
			dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle,
				      0, NULL);
		ev = side_wait(c.conn, WAIT_US);
		ok = ev.event_number == DAT_CONNECTION_EVENT_PEER_REJECTED;
	}
	dat_psp_free(psp);
	side_close(&c);
	side_close(&s);
	return ok ? 0 : fail("no PEER_REJECTED");
}

/* A plain TCP listener on g_port (the kernel completes handshakes). */
static int raw_listener(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(g_port);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 8) < 0)
		BAIL("raw listener on %u: %s", g_port, strerror(errno));
	return fd;
}

static int sc_timed_out(void)
{
	int l = raw_listener();
	int r = connect_expect(DAT_CONNECTION_EVENT_TIMED_OUT, 300000);

	close(l);
	return r;
}

/* The raw peer's answer to our MPA request. */
static uint8_t g_reply[64];
static size_t g_reply_len;

static void *answer_once(void *arg)
{
	int l = *(int *)arg, fd = accept(l, NULL, NULL);
	char sink[512];

	if (fd < 0)
		return NULL;
	if (recv(fd, sink, sizeof(sink), 0) > 0 &&
	    send(fd, g_reply, g_reply_len, MSG_NOSIGNAL) > 0)
		while (recv(fd, sink, sizeof(sink), 0) > 0)
			;
	close(fd);
	return NULL;
}

static int reply_expect(DAT_EVENT_NUMBER want)
{
	int l = raw_listener(), r;
	pthread_t th;

	pthread_create(&th, NULL, answer_once, &l);
	r = connect_expect(want, WAIT_US);
	shutdown(l, SHUT_RDWR);
	pthread_join(th, NULL);
	close(l);
	return r;
}

/* A reply of the right length that is not MPA. */
static int sc_bad_reply(void)
{
	g_reply_len = 24;
	memcpy(g_reply, "HTTP/1.0 400 Bad Request", g_reply_len);
	return reply_expect(DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
}

/* An MPA reply frame: flags, revision, private data. */
static void mpa_frame(uint8_t *b, const char *key, uint8_t flags, uint8_t rev,
		      const uint8_t *pd, uint16_t pd_len)
{
	memcpy(b, key, 16);
	b[16] = flags;
	b[17] = rev;
	b[18] = (uint8_t)(pd_len >> 8);
	b[19] = (uint8_t)pd_len;
	if (pd_len)
		memcpy(b + 20, pd, pd_len);
}

/* Revision 2: peer-to-peer with a Write RTR, and an ORD of 16383 that
 * no IRD of ours covers. */
static int sc_insufficient_ird(void)
{
	static const uint8_t words[4] = { 0x80, 0x01, 0xbf, 0xff };

	mpa_frame(g_reply, "MPA ID Rep Frame", 0x10, 2, words, 4);
	g_reply_len = 24;
	return reply_expect(DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
}

/* Send bytes to g_port from a raw socket and read until the provider
 * closes it; the client's port goes to *port. */
static int raw_request(const void *b, size_t len, unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 5 };
	socklen_t al = sizeof(a);
	char sink[512];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(g_port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, b, len, MSG_NOSIGNAL) != (ssize_t)len) {
		close(fd);
		return fail("raw client: %s", strerror(errno));
	}
	getsockname(fd, (struct sockaddr *)&a, &al);
	*port = ntohs(a.sin_port);
	while ((n = recv(fd, sink, sizeof(sink), 0)) > 0)
		;
	close(fd);
	return n == 0 ? 0 : fail("raw client: no close from the provider");
}

/* Three bad requests to a PSP: not MPA, revision 3, markers. */
static int sc_bad_requests(void)
{
	uint8_t rev3[20], markers[20];
	struct side s;
	DAT_PSP_HANDLE psp;
	unsigned p[3];
	int r;

	mpa_frame(rev3, "MPA ID Req Frame", 0, 3, NULL, 0);
	mpa_frame(markers, "MPA ID Req Frame", 0x80, 1, NULL, 0);
	side_open(&s);
	if (dat_psp_create(s.ia, g_port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS)
		return fail("dat_psp_create");
	r = raw_request("GET / HTTP/1.0\r\n\r\nHost", 20, &p[0]) ||
	    raw_request(rev3, sizeof(rev3), &p[1]) ||
	    raw_request(markers, sizeof(markers), &p[2]);
	printf("# raw client ports %u %u %u\n", p[0], p[1], p[2]);
	if (side_wait(s.cr, 100000).event_number != 0)
		r = fail("a bad request reached the consumer");
	dat_psp_free(psp);
	side_close(&s);
	return r;
}

/* An RDMA Write to an STag the peer never registered: the peer sends a
 * Terminate, we receive it and the connection breaks. */
static int sc_terminate(void)
{
	struct side s, c;
	DAT_PSP_HANDLE psp;
	DAT_LMR_TRIPLET l;
	DAT_RMR_TRIPLET rr;
	DAT_EVENT ev;
	int ok = 0;

	side_open(&s);
	side_open(&c);
	c.ep = side_ep(&c);
	s.ep = side_ep(&s);
	if (dat_psp_create(s.ia, g_port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp) !=
	    DAT_SUCCESS || connect_port(&c, WAIT_US) != DAT_SUCCESS)
		return fail("dat_psp_create / dat_ep_connect");
	ev = side_wait(s.cr, WAIT_US);
	if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT &&
	    dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, s.ep,
			  0, NULL) == DAT_SUCCESS &&
	    side_wait(c.conn, WAIT_US).event_number ==
	    DAT_CONNECTION_EVENT_ESTABLISHED &&
	    side_wait(s.conn, WAIT_US).event_number ==
	    DAT_CONNECTION_EVENT_ESTABLISHED) {
		l = side_lseg(&c, 0, 64);
		rr = side_rseg(&s, 0, 64);
		rr.rmr_context ^= 0x5a5a5a00;	/* not an STag of s */
		ok = dat_ep_post_rdma_write(c.ep, 1, &l, side_ck(7), &rr,
					    DAT_COMPLETION_DEFAULT_FLAG) ==
		     DAT_SUCCESS &&
		     side_wait(c.conn, WAIT_US).event_number ==
		     DAT_CONNECTION_EVENT_BROKEN &&
		     side_wait(s.conn, WAIT_US).event_number ==
		     DAT_CONNECTION_EVENT_BROKEN;
	}
	dat_psp_free(psp);
	side_close(&c);
	side_close(&s);
	return ok ? 0 : fail("the bad RDMA Write broke no connection");
}

/* --------------------------------------------------------------- cases */

static unsigned short free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		BAIL("free port: %s", strerror(errno));
	close(fd);
	return ntohs(a.sin_port);
}

/* "iwdapl[PID]: " as a regex (nlines checks the PID). */
#define PFX "iwdapl\\[[0-9]+\\]: "
#define IP "127\\.0\\.0\\.1"

/* One case: its child succeeded and wrote exactly the one line. */
static void expect_one_line(const char *what, int (*fn)(void),
			    const char *const *env, const char *line_fmt)
{
	struct run r;

	run_child(fn, env, &r);
	CHECK(r.status == 0, "%s: the DAT code or event is unchanged", what);
	CHECK(nlines(&r) == 1 && count_lines(r.err, line_fmt) == 1,
	      "%s: one line on stderr saying why", what);
	show(&r);
}

static void test_ia_open(void)
{
	struct run r;

	expect_one_line("unknown netdev", sc_nodev, NULL,
			PFX "ia iw-log-nodev: netdev \"nosuchdev0\" does not exist");
	expect_one_line("address not local", sc_notlocal, NULL,
			PFX "ia iw-log-notlocal: address 203\\.0\\.113\\.254 "
			"is not on this host");
	expect_one_line("bad instance data", sc_badopt, NULL,
			PFX "ia iw-log-badopt: bad instance data: unknown "
			"option \"frob\"");
	run_child(sc_noipv4, NULL, &r);
	if (r.status == SKIP_STATUS) {
		printf("ok %d # SKIP netdev without IPv4: no new network "
		       "namespace (needs CAP_SYS_ADMIN)\n", ++tap_count);
		return;
	}
	CHECK(r.status == 0 && nlines(&r) == 1 &&
	      count_lines(r.err, PFX "ia iw-log-lo: netdev \"lo\" has no IPv4 "
			  "address") == 1,
	      "netdev without IPv4 (lo of a new netns): DAT_INVALID_ADDRESS "
	      "and one line saying why");
	show(&r);
}

static void test_connections(void)
{
	/* The local end has no port yet when the TCP connect fails. */
	static const struct {
		const char *what;
		int (*fn)(void);
		const char *local_port, *cause;
	} cases[] = {
		{ "refused connection", sc_refused, "",
		  "unreachable: TCP connect failed \\(Connection refused\\)" },
		{ "rejected connection", sc_rejected, ":[0-9]+",
		  "rejected by the peer" },
		{ "timed-out connection", sc_timed_out, ":[0-9]+",
		  "timed out: no MPA reply in time \\(Connection timed out\\)" },
		{ "MPA reply with a bad key", sc_bad_reply, ":[0-9]+",
		  "refused: not an MPA request or reply \\(bad key\\)" },
	};
	char line[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		g_port = free_port();
		snprintf(line, sizeof(line), "%sconn %s%s->%s:%u: %s", PFX, IP,
			 cases[i].local_port, IP, g_port, cases[i].cause);
		expect_one_line(cases[i].what, cases[i].fn, NULL, line);
	}
}

static void test_insufficient_ird(void)
{
	struct run r;
	char pat[256];

	g_port = free_port();
	run_child(sc_insufficient_ird, NULL, &r);
	CHECK(r.status == 0, "MPA reply with an ORD above our IRD: "
	      "NON_PEER_REJECTED");
	snprintf(pat, sizeof(pat), "%s%u%s", PFX "qp [0-9]+ " IP ":[0-9]+->" IP
		 ":", g_port, ": sent Terminate: layer 2 \\(LLP\\), type 0, "
		 "code 0x06");
	CHECK(count_lines(r.err, pat) == 1,
	      "... the LLP Terminate we sent, with its layer, type and code");
	snprintf(pat, sizeof(pat), "%s%u%s", PFX "conn " IP ":[0-9]+->" IP ":",
		 g_port, ": refused: responder's ORD exceeds our IRD "
		 "\\(insufficient IRD\\)");
	CHECK(count_lines(r.err, pat) == 1 && nlines(&r) == 2,
	      "... and why the connection was refused");
	show(&r);
}

static void test_bad_requests(void)
{
	static const char *const why[] = {
		"dropped: not an MPA request or reply \\(bad key\\)",
		"refused: unsupported MPA revision \\(only 1 and 2 are\\)",
		"refused: MPA markers are not supported",
	};
	struct run r;
	char pat[256];

	g_port = free_port();
	run_child(sc_bad_requests, NULL, &r);
	CHECK(r.status == 0, "bad MPA requests never reach the consumer");
	for (int i = 0; i < 3; i++) {
		snprintf(pat, sizeof(pat), "%s%u%s%s", PFX "conn " IP ":",
			 g_port, "->" IP ":[0-9]+: MPA request ", why[i]);
		CHECK(count_lines(r.err, pat) == 1,
		      "passive side, %s: one line with the peer's address",
		      why[i]);
	}
	CHECK(nlines(&r) == 3, "... and nothing else (%d lines)",
	      nlines(&r));
	show(&r);
}

static void test_terminate(void)
{
	struct run r;
	char pat[256];
	unsigned lay, ty, code;
	const char *s;

	g_port = free_port();
	run_child(sc_terminate, NULL, &r);
	CHECK(r.status == 0, "RDMA Write to a bad STag: both sides BROKEN");
	snprintf(pat, sizeof(pat), "%s%u%s", PFX "qp [0-9]+ " IP ":", g_port,
		 "->" IP ":[0-9]+: sent Terminate: layer [01] \\((RDMAP|DDP)\\), "
		 "type [0-9]+, code 0x[0-9a-f]{2}");
	CHECK(count_lines(r.err, pat) == 1,
	      "the target logs the Terminate it sent");
	snprintf(pat, sizeof(pat), "%s%u%s", PFX "qp [0-9]+ " IP ":[0-9]+->" IP
		 ":", g_port, ": received Terminate: layer [01] "
		 "\\((RDMAP|DDP)\\), type [0-9]+, code 0x[0-9a-f]{2}");
	CHECK(count_lines(r.err, pat) == 1,
	      "the initiator logs the Terminate it received");
	s = strstr(r.err, "sent Terminate: layer ");
	CHECK(s && sscanf(s, "sent Terminate: layer %u (%*[A-Z]), type %u, "
			  "code 0x%x", &lay, &ty, &code) == 3 &&
	      (s = strstr(r.err, "received Terminate: layer ")) &&
	      snprintf(pat, sizeof(pat), ".*received Terminate: layer %u "
		       "\\([A-Z]+\\), type %u, code 0x%02x", lay, ty, code) > 0 &&
	      count_lines(s, pat) == 1,
	      "... the same layer, type and code on both sides");
	CHECK(nlines(&r) == 2, "nothing else at the default level (%d "
	      "lines)", nlines(&r));
	show(&r);
}

/* ------------------------------------------------- the variables */

static void test_variables(void)
{
	static const char *const bad_env[] = { "IWDAPL_CRC", "maybe",
		"IWDAPL_WAIT_SPIN_US", "abc", NULL };
	static const char *const none[] = { "IWDAPL_LOG", "none", NULL };
	static const char *const zero[] = { "IWDAPL_LOG", "0", NULL };
	static const char *const syslog_dest[] = { "IWDAPL_LOG_DEST",
		"syslog", NULL };
	static const char *const bad_log[] = { "IWDAPL_LOG", "loud",
		"IWDAPL_LOG_DEST", "paper", NULL };
	static const char *const debug[] = { "IWDAPL_DEBUG", "1", NULL };
	static const char *const info[] = { "IWDAPL_LOG", "info", NULL };
	struct run r;

	g_port = free_port();
	run_child(sc_refused_twice, bad_env, &r);
	CHECK(r.status == 0, "bad IWDAPL_CRC, IWDAPL_WAIT_SPIN_US: defaults "
	      "used, connections behave as before");
	CHECK(count_lines(r.err, PFX "IWDAPL_CRC=maybe: not 0, 1, off, on, no "
			  "or yes; using 1") == 1,
	      "a bad IWDAPL_CRC is reported once across two IAs and connects");
	CHECK(count_lines(r.err, PFX "IWDAPL_WAIT_SPIN_US=abc: not an integer "
			  "in 0\\.\\.1000000; using 100") == 1,
	      "a bad IWDAPL_WAIT_SPIN_US is reported once");
	CHECK(count_lines(r.err, PFX "conn .*: unreachable: .*") == 2 &&
	      nlines(&r) == 4, "... next to the two refused connections");
	show(&r);

	run_child(sc_nodev, none, &r);
	CHECK(r.status == 0 && r.err[0] == '\0',
	      "IWDAPL_LOG=none: same code, nothing on stderr");
	run_child(sc_refused, zero, &r);
	CHECK(r.status == 0 && r.err[0] == '\0',
	      "IWDAPL_LOG=0: same event, nothing on stderr");
	run_child(sc_nodev, syslog_dest, &r);
	CHECK(r.status == 0 && r.err[0] == '\0',
	      "IWDAPL_LOG_DEST=syslog: nothing on stderr");

	run_child(sc_nodev, bad_log, &r);
	CHECK(r.status == 0 &&
	      count_lines(r.err, PFX "IWDAPL_LOG=loud: not none, error, warn, "
			  "info, debug or 0\\.\\.4; using error") == 1 &&
	      count_lines(r.err, PFX "IWDAPL_LOG_DEST=paper: not stderr or "
			  "syslog; using stderr") == 1 &&
	      count_lines(r.err, PFX "ia iw-log-nodev: .*") == 1 &&
	      nlines(&r) == 3,
	      "bad IWDAPL_LOG and IWDAPL_LOG_DEST: reported, then the "
	      "defaults");
	show(&r);

	g_port = free_port();
	run_child(sc_refused, debug, &r);
	CHECK(r.status == 0 &&
	      count_lines(r.err, PFX "ep 0x[0-9a-f]+: state [0-9]+ -> [0-9]+")
	      >= 2 &&
	      count_lines(r.err, PFX "conn .*: unreachable: .*") == 1,
	      "IWDAPL_DEBUG=1 still means debug: EP state changes too");
	run_child(sc_rejected, info, &r);
	CHECK(r.status == 0 &&
	      count_lines(r.err, PFX "conn .*: connection request") == 1 &&
	      count_lines(r.err, PFX "ep .*") == 0,
	      "IWDAPL_LOG=info: routine connection events, no debug lines");
}

int main(int argc, char **argv)
{
	const char *conf = getenv("IW_LOG_CONF");
	char path[] = "/tmp/t_log_dat.conf.XXXXXX";
	FILE *f;
	int fd;

	(void)argc;
	if (!conf) {
		/* libdat2 reads DAT_OVERRIDE when it loads: write the file,
		 * then start over with it set. */
		fd = mkstemp(path);
		f = fd < 0 ? NULL : fdopen(fd, "w");
		if (!f)
			BAIL("registry file: %s", strerror(errno));
		for (size_t i = 0; i < sizeof(conf_lines) / sizeof(conf_lines[0]);
		     i++)
			fprintf(f, "%s u2.0 nonthreadsafe default %s dapl.2.0 "
				"\"%s\" \"\"\n", conf_lines[i][0], TEST_LIBDAPL,
				conf_lines[i][1]);
		fclose(f);
		setenv("IW_LOG_CONF", path, 1);
		setenv("DAT_OVERRIDE", path, 1);
		unsetenv("IWDAPL_LOG");
		unsetenv("IWDAPL_LOG_DEST");
		unsetenv("IWDAPL_DEBUG");
		execv(argv[0], argv);	/* argv[0]: valgrind follows it */
		BAIL("re-exec failed");
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_watchdog(240);
	test_ia_open();
	test_connections();
	test_insufficient_ird();
	test_bad_requests();
	test_terminate();
	test_variables();
	unlink(conf);
	return tap_done();
}
