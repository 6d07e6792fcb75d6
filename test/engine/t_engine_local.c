/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Engine local objects: device, socket ownership, PD, MR/STag, MW, CQ and
 * completion channel.  TAP output; one CHECK per behaviour. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "iw_priv.h"
#include "tap.h"

/* ------------------------------------------------------------ helpers */

static struct iwe_device *open_err(const char *where, int *err)
{
	struct iwe_device *d;

	errno = 0;
	d = iwe_device_open(where, IWE_TRANSPORT_TCP);
	*err = errno;
	return d;
}

/* Opening 'where' fails with errno 'want'. */
static int open_fails(const char *where, int want)
{
	int err;
	struct iwe_device *d = open_err(where, &err);

	if (d)
		iwe_device_close(d);
	return !d && err == want;
}

static int fd_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static int tcp_socket_bound(const char *ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0)
		BAIL("socket: %s", strerror(errno));
	inet_pton(AF_INET, ip, &a.sin_addr);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(s);
		return -1;
	}
	return s;
}

/* A listener on ip (ephemeral port) and a client connected to it. */
static void tcp_pair(const char *ip, int *lst, int *cli, int *srv)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	*lst = tcp_socket_bound(ip);
	if (*lst < 0 || listen(*lst, 4) < 0)
		BAIL("listen on %s: %s", ip, strerror(errno));
	getsockname(*lst, (struct sockaddr *)&a, &len);
	*cli = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*cli, (struct sockaddr *)&a, sizeof(a)) < 0)
		BAIL("connect: %s", strerror(errno));
	*srv = accept(*lst, NULL, NULL);
	if (*srv < 0)
		BAIL("accept: %s", strerror(errno));
}

/* getifaddrs names IPv4 addresses by label: "eth0" or "eth0:1". */
static int same_link(const char *label, const char *ifname)
{
	size_t n = strlen(ifname);

	return !strncmp(label, ifname, n) &&
	       (label[n] == '\0' || label[n] == ':');
}

static int has_ipv4(const struct ifaddrs *all, const char *ifname)
{
	for (; all; all = all->ifa_next)
		if (all->ifa_addr && all->ifa_addr->sa_family == AF_INET &&
		    same_link(all->ifa_name, ifname))
			return 1;
	return 0;
}

/* What the host offers beyond lo: the first non-loopback interface with
 * an IPv4 address (other/ip, "" if none), and an interface without any
 * IPv4 address (noip, "" if none; e.g. a down dummy or ifb). */
struct host_ifs {
	char other[IFNAMSIZ], ip[INET_ADDRSTRLEN], noip[IFNAMSIZ];
};

static void scan_ifaces(struct host_ifs *h)
{
	struct ifaddrs *ifa, *i;
	struct sockaddr_in *sin;

	memset(h, 0, sizeof(*h));
	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_PACKET && !h->noip[0] &&
		    !has_ipv4(ifa, i->ifa_name))
			snprintf(h->noip, IFNAMSIZ, "%s", i->ifa_name);
		if (i->ifa_addr->sa_family != AF_INET || h->other[0] ||
		    (i->ifa_flags & IFF_LOOPBACK) || strchr(i->ifa_name, ':'))
			continue;
		snprintf(h->other, IFNAMSIZ, "%s", i->ifa_name);
		sin = (struct sockaddr_in *)i->ifa_addr;
		inet_ntop(AF_INET, &sin->sin_addr, h->ip, sizeof(h->ip));
	}
	freeifaddrs(ifa);
}

static struct ibv_wc mkwc(uint64_t id, enum ibv_wc_status st)
{
	return (struct ibv_wc){ .wr_id = id, .status = st,
				.opcode = IBV_WC_RECV };
}

/* ------------------------------------------------------------ device */

static void test_device_open(void)
{
	struct iwe_device_attr at, at2;
	struct iwe_device *d, *d2;
	struct host_ifs h;
	int err;

	d = open_err("lo", &err);
	CHECK(d != NULL, "open \"lo\" (%s)", strerror(err));
	if (!d)
		BAIL("cannot open lo");
	iwe_device_query(d, &at);
	CHECK(!strcmp(at.ifname, "lo"), "lo: ifname \"%s\"", at.ifname);
	CHECK(at.addr.sin_family == AF_INET &&
	      at.addr.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "lo: address 127.0.0.1");
	CHECK(at.mtu == 65536, "lo: mtu %u", at.mtu);
	CHECK(at.ifindex == (int)if_nametoindex("lo"), "lo: ifindex");
	CHECK(at.transport == IWE_TRANSPORT_TCP, "lo: transport tcp");
	CHECK(at.max_mr == IWE_MAX_MR && at.max_cqe == IWE_MAX_CQE &&
	      at.max_mr_size == IWE_MAX_MR_SIZE &&
	      at.max_private_data == IWE_MAX_PRIVATE_DATA &&
	      at.max_ird == IWE_MAX_IRD && at.max_pd == IWE_MAX_PD,
	      "lo: limits are the IWE_* values");

	d2 = iwe_device_open("127.0.0.1", IWE_TRANSPORT_UDP);
	CHECK(d2 != NULL, "open \"127.0.0.1\"");
	if (d2) {
		iwe_device_query(d2, &at2);
		CHECK(!strcmp(at2.ifname, "lo") && at2.ifindex == at.ifindex &&
		      at2.mtu == 65536 &&
		      at2.addr.sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
		      at2.transport == IWE_TRANSPORT_UDP,
		      "127.0.0.1 resolves to lo, udp transport kept");
		iwe_device_close(d2);
	}
	iwe_device_close(d);

	CHECK(open_fails("nosuchdev0", ENODEV), "unknown netdev -> ENODEV");
	CHECK(open_fails("999.1.1.1", EINVAL), "\"999.1.1.1\" -> EINVAL");
	CHECK(open_fails("", EINVAL), "\"\" -> EINVAL");
	CHECK(open_fails(NULL, EINVAL), "NULL -> EINVAL");
	CHECK(open_fails("0.0.0.0", EINVAL), "INADDR_ANY -> EINVAL");
	CHECK(open_fails("averyveryverylongifname", EINVAL),
	      "over-long name -> EINVAL");
	CHECK(open_fails("203.0.113.254", ENODEV),
	      "address on no interface -> ENODEV");
	errno = 0;
	d = iwe_device_open("lo", (enum iwe_transport)7);
	CHECK(!d && errno == EINVAL, "bad transport -> EINVAL");

	scan_ifaces(&h);
	if (h.noip[0])
		CHECK(open_fails(h.noip, EADDRNOTAVAIL),
		      "%s has no IPv4 -> EADDRNOTAVAIL", h.noip);
	else
		CHECK(1, "# SKIP no interface without IPv4");
	if (h.other[0]) {
		d = open_err(h.ip, &err);
		if (d)
			iwe_device_query(d, &at);
		CHECK(d && !strcmp(at.ifname, h.other) &&
		      at.ifindex == (int)if_nametoindex(h.other),
		      "%s resolves to %s", h.ip, h.other);
		if (d)
			iwe_device_close(d);
	} else {
		CHECK(1, "# SKIP no non-loopback IPv4 interface");
	}
}

static void test_owns_socket(void)
{
	struct iwe_device *lo = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	struct iwe_device *other;
	struct host_ifs h;
	int lst, cli, srv, s, p[2], u;

	if (!lo)
		BAIL("cannot open lo");
	tcp_pair("127.0.0.1", &lst, &cli, &srv);
	CHECK(iwe_device_owns_socket(lo, cli) == 0, "connected client is lo's");
	CHECK(iwe_device_owns_socket(lo, srv) == 0, "accepted socket is lo's");
	CHECK(iwe_device_owns_socket(lo, lst) == 0,
	      "listener bound to 127.0.0.1 is lo's");

	u = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(iwe_device_owns_socket(lo, u) == EINVAL, "UDP socket -> EINVAL");
	close(u);
	if (pipe(p) < 0)
		BAIL("pipe");
	CHECK(iwe_device_owns_socket(lo, p[0]) == EINVAL, "pipe -> EINVAL");
	close(p[0]);
	close(p[1]);
	u = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(iwe_device_owns_socket(lo, u) == EINVAL,
	      "unix stream socket -> EINVAL");
	close(u);
	s = socket(AF_INET, SOCK_STREAM, 0);
	close(s);
	CHECK(iwe_device_owns_socket(lo, s) == EINVAL, "closed fd -> EINVAL");
	CHECK(iwe_device_owns_socket(lo, -1) == EINVAL, "fd -1 -> EINVAL");

	s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(iwe_device_owns_socket(lo, s) == EADDRNOTAVAIL,
	      "unbound socket (INADDR_ANY, no peer) -> EADDRNOTAVAIL");
	close(s);
	s = tcp_socket_bound("127.0.0.2");
	CHECK(s >= 0 && iwe_device_owns_socket(lo, s) == 0,
	      "socket bound to 127.0.0.2 is lo's (127/8)");
	if (s >= 0)
		close(s);

	scan_ifaces(&h);
	if (h.other[0]) {
		s = tcp_socket_bound(h.ip);
		other = iwe_device_open(h.other, IWE_TRANSPORT_TCP);
		CHECK(s >= 0 && iwe_device_owns_socket(lo, s) == EADDRNOTAVAIL,
		      "socket on %s is not lo's", h.ip);
		CHECK(other && iwe_device_owns_socket(other, s) == 0,
		      "socket on %s is %s's", h.ip, h.other);
		CHECK(other && iwe_device_owns_socket(other, cli) ==
				       EADDRNOTAVAIL,
		      "loopback connection is not %s's", h.other);
		if (s >= 0)
			close(s);
		iwe_device_close(other);
	} else {
		for (s = 0; s < 3; s++)
			CHECK(1, "# SKIP no non-loopback IPv4 interface");
	}
	close(cli);
	close(srv);
	close(lst);
	iwe_device_close(lo);
}

/* The SSP's one-pass check: the cases its caller tells apart. */
static void test_check_socket(void)
{
	struct iwe_device *lo = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	struct iwe_device *ulo = iwe_device_open("lo", IWE_TRANSPORT_UDP);
	struct iwe_sock_facts f;
	struct sockaddr_in la, pa;
	socklen_t l1 = sizeof(la), l2 = sizeof(pa);
	int lst, cli, srv, s, p[2];

	if (!lo || !ulo)
		BAIL("cannot open lo");
	tcp_pair("127.0.0.1", &lst, &cli, &srv);
	CHECK(iwe_device_check_socket(lo, cli, &f) == 0 && f.connected == 1,
	      "check: connected client, connected");
	if (getsockname(cli, (struct sockaddr *)&la, &l1) ||
	    getpeername(cli, (struct sockaddr *)&pa, &l2))
		BAIL("getsockname/getpeername");
	CHECK(f.local.sin_port == la.sin_port &&
	      f.local.sin_addr.s_addr == la.sin_addr.s_addr &&
	      f.remote.sin_port == pa.sin_port &&
	      f.remote.sin_addr.s_addr == pa.sin_addr.s_addr,
	      "check: the facts carry the socket's local and peer addresses");
	CHECK(iwe_device_check_socket(lo, srv, &f) == 0 && f.connected == 1,
	      "check: accepted socket, connected");
	CHECK(iwe_device_check_socket(lo, lst, &f) == 0 && f.connected == 0,
	      "check: listener, not connected (its address not judged)");
	CHECK(iwe_device_check_socket(ulo, cli, &f) == EPROTOTYPE &&
	      f.connected == 0, "check: TCP socket on a udp device -> EPROTOTYPE");
	s = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(iwe_device_check_socket(lo, s, &f) == EPROTOTYPE,
	      "check: UDP socket on a tcp device -> EPROTOTYPE");
	CHECK(iwe_device_check_socket(ulo, s, &f) == 0 && f.connected == 0,
	      "check: unconnected UDP socket on a udp device, not connected");
	close(s);
	s = socket(AF_INET6, SOCK_STREAM, 0);
	CHECK(s < 0 || iwe_device_check_socket(lo, s, &f) == EINVAL,
	      "check: IPv6 TCP socket -> EINVAL");
	if (s >= 0)
		close(s);
	s = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
	CHECK(s < 0 || iwe_device_check_socket(lo, s, &f) == EINVAL,
	      "check: SCTP stream socket -> EINVAL");
	if (s >= 0)
		close(s);
	if (pipe(p) < 0)
		BAIL("pipe");
	CHECK(iwe_device_check_socket(lo, p[0], &f) == EINVAL,
	      "check: pipe -> EINVAL");
	close(p[0]);
	close(p[1]);
	CHECK(iwe_device_check_socket(lo, -1, &f) == EINVAL,
	      "check: fd -1 -> EINVAL");
	close(cli);
	close(srv);
	close(lst);
	iwe_device_close(ulo);
	iwe_device_close(lo);
}

/* ---------------------------------------------------------- PD / MR */

static void test_reg_mr_args(struct iwe_pd *pd, char *buf)
{
	struct {
		struct iwe_pd *pd;
		void *addr;
		size_t len;
		int access;
		const char *what;
	} bad[] = {
		{ NULL, buf, 64, 0, "NULL pd" },
		{ pd, NULL, 64, 0, "NULL addr" },
		{ pd, buf, 0, 0, "zero length" },
		{ pd, buf, 64, 1 << 20, "unknown access bit" },
		{ pd, buf, 64, IBV_ACCESS_REMOTE_WRITE,
		  "remote write without local write" },
		{ pd, buf, 64, IBV_ACCESS_REMOTE_ATOMIC,
		  "remote atomic without local write" },
		{ pd, buf, (size_t)IWE_MAX_MR_SIZE + 1, 0, "over max size" },
		{ pd, (void *)(UINTPTR_MAX - 15), 64, 0, "wrapping range" },
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		CHECK(!iwe_reg_mr(bad[i].pd, bad[i].addr, bad[i].len,
				  bad[i].access) && errno == EINVAL,
		      "reg_mr %s -> EINVAL", bad[i].what);
	}
	CHECK(iwe_dereg_mr(NULL) == EINVAL, "dereg_mr(NULL) -> EINVAL");
}

static void test_mr_check(struct iwe_device *d, struct iwe_pd *pd,
			  struct iwe_pd *pd2, char *buf)
{
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		 IBV_ACCESS_REMOTE_READ;
	struct iwe_mr *mr = iwe_reg_mr(pd, buf + 64, 256, rw);
	struct iwe_mr *ro = iwe_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_READ);
	uint64_t va = (uint64_t)(uintptr_t)(buf + 64);
	void *p = NULL;

	if (!mr || !ro)
		BAIL("reg_mr failed");
	CHECK(mr->lkey == mr->rkey && IWE_STAG_INDEX(mr->lkey) != 0,
	      "lkey == rkey, index %u != 0", IWE_STAG_INDEX(mr->lkey));
	CHECK(IWE_STAG_INDEX(mr->rkey) != IWE_STAG_INDEX(ro->rkey),
	      "two MRs have distinct indexes");
	CHECK(mr->rkey == IWE_STAG_MAKE(IWE_STAG_INDEX(mr->rkey),
					mr->rkey & 0xff) &&
	      mr->rkey >= 0x100, "stag = index << 8 | key");
	CHECK(iwe_mr_check(d, pd, mr->rkey, va + 16, 32,
			   IBV_ACCESS_REMOTE_WRITE, &p) == IWE_ACCESS_OK &&
	      p == buf + 80, "remote write inside -> OK, pointer right");
	CHECK(iwe_mr_check(d, pd, mr->lkey, va, 256, 0, &p) == IWE_ACCESS_OK,
	      "local read of whole region -> OK");
	CHECK(iwe_mr_check(d, pd, mr->lkey, va, 1, IBV_ACCESS_LOCAL_WRITE,
			   NULL) == IWE_ACCESS_OK, "local write -> OK");
	CHECK(iwe_mr_check(d, pd, mr->rkey ^ 0x01, va, 8,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_BAD_STAG,
	      "wrong key -> BAD_STAG");
	CHECK(iwe_mr_check(d, pd, 0x01, va, 8, 0, &p) == IWE_ACCESS_BAD_STAG,
	      "STag 1 (index 0) -> BAD_STAG");
	CHECK(iwe_mr_check(d, pd, IWE_STAG_MAKE(0xfffff0, 0), va, 8, 0, &p) ==
	      IWE_ACCESS_BAD_STAG, "index beyond table -> BAD_STAG");
	CHECK(iwe_mr_check(d, pd2, mr->rkey, va, 8, IBV_ACCESS_REMOTE_READ,
			   &p) == IWE_ACCESS_BAD_PD, "wrong PD -> BAD_PD");
	CHECK(iwe_mr_check(d, pd, ro->rkey, (uintptr_t)buf, 8,
			   IBV_ACCESS_REMOTE_WRITE, &p) == IWE_ACCESS_BAD_RIGHTS,
	      "remote write on read-only MR -> BAD_RIGHTS");
	CHECK(iwe_mr_check(d, pd, ro->lkey, (uintptr_t)buf, 8,
			   IBV_ACCESS_LOCAL_WRITE, &p) == IWE_ACCESS_BAD_RIGHTS,
	      "local write without LOCAL_WRITE -> BAD_RIGHTS");
	CHECK(iwe_mr_check(d, pd, mr->rkey, va - 1, 8, IBV_ACCESS_REMOTE_READ,
			   &p) == IWE_ACCESS_BAD_BOUNDS, "below start -> BAD_BOUNDS");
	CHECK(iwe_mr_check(d, pd, mr->rkey, va + 250, 7,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_BAD_BOUNDS,
	      "one past end -> BAD_BOUNDS");
	CHECK(iwe_mr_check(d, pd, mr->rkey, va + 256, 0,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_OK,
	      "zero length at end -> OK");
	CHECK(iwe_mr_check(d, pd, mr->rkey, va + 8, UINT64_MAX - 4,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_BAD_BOUNDS,
	      "va + len wraps -> BAD_BOUNDS");
	CHECK(iwe_mr_check(NULL, pd, mr->rkey, va, 8, 0, &p) ==
	      IWE_ACCESS_BAD_STAG, "NULL device -> BAD_STAG");
	iwe_dereg_mr(ro);
	iwe_dereg_mr(mr);
}

/* On a device of its own, so that the FIFO holds only what this test
 * frees. */
static void test_stag_reuse(char *buf)
{
	struct iwe_device *d = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	struct iwe_pd *pd = d ? iwe_alloc_pd(d) : NULL;
	struct iwe_mr *a, *b;
	uint32_t old, oldb;
	uint64_t va = (uint64_t)(uintptr_t)buf;

	if (!pd)
		BAIL("stag reuse setup");
	a = iwe_reg_mr(pd, buf, 64, 0);
	old = a->rkey;

	iwe_dereg_mr(a);
	CHECK(iwe_mr_check(d, pd, old, va, 8, 0, NULL) == IWE_ACCESS_BAD_STAG,
	      "STag after dereg -> BAD_STAG");
	a = iwe_reg_mr(pd, buf, 64, 0);
	CHECK(a && IWE_STAG_INDEX(a->rkey) != IWE_STAG_INDEX(old),
	      "default delay: freed index not reused at once");
	iwe_dereg_mr(a);

	iwe_stag_set_reuse_delay(d, 0);
	a = iwe_reg_mr(pd, buf, 64, 0);
	CHECK(a && IWE_STAG_INDEX(a->rkey) == IWE_STAG_INDEX(old) &&
	      IWE_STAG_KEY(a->rkey) == (uint8_t)(IWE_STAG_KEY(old) + 1),
	      "delay 0: index reused with key + 1");
	CHECK(iwe_mr_check(d, pd, old, va, 8, 0, NULL) == IWE_ACCESS_BAD_STAG &&
	      iwe_mr_check(d, pd, a->rkey, va, 8, 0, NULL) == IWE_ACCESS_OK,
	      "stale STag of reused index -> BAD_STAG, new one OK");
	b = iwe_reg_mr(pd, buf, 64, 0);
	old = a->rkey;
	oldb = b->rkey;
	iwe_dereg_mr(a);
	iwe_dereg_mr(b);
	a = iwe_reg_mr(pd, buf, 64, 0);
	b = iwe_reg_mr(pd, buf, 64, 0);
	CHECK(IWE_STAG_INDEX(a->rkey) == IWE_STAG_INDEX(old) &&
	      IWE_STAG_INDEX(b->rkey) == IWE_STAG_INDEX(oldb),
	      "freed indexes are reused in FIFO order");
	iwe_dereg_mr(a);
	iwe_dereg_mr(b);
	iwe_dealloc_pd(pd);
	iwe_device_close(d);
}

static void test_mw(struct iwe_device *d, struct iwe_pd *pd,
		    struct iwe_pd *pd2, char *buf)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_MW_BIND;
	struct iwe_mr *mr = iwe_reg_mr(pd, buf, 1024, acc);
	struct iwe_mr *nob = iwe_reg_mr(pd, buf, 1024, IBV_ACCESS_LOCAL_WRITE);
	struct iwe_mw *mw = iwe_alloc_mw(pd);
	struct iwe_mw_priv *w = IWE_CONTAINER_OF(mw, struct iwe_mw_priv, pub);
	uint64_t va = (uint64_t)(uintptr_t)buf;
	uint32_t first;
	void *p;

	errno = 0;
	CHECK(!iwe_alloc_mw(NULL) && errno == EINVAL, "alloc_mw(NULL) -> EINVAL");
	CHECK(mw && mw->rkey == 0 && mw->pd == pd, "new MW: rkey 0");
	CHECK(w->index != 0 && w->index != IWE_STAG_INDEX(mr->rkey) &&
	      w->index != IWE_STAG_INDEX(nob->rkey), "MW has its own index");
	CHECK(iwe_mr_check(d, pd, IWE_STAG_MAKE(w->index, 0), va, 8,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_BAD_STAG &&
	      iwe_mr_check(d, pd, IWE_STAG_MAKE(w->index, 1), va, 8,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_BAD_STAG,
	      "unbound MW index -> BAD_STAG");
	CHECK(iwe_mw_bind(mw, nob, va, 64, IBV_ACCESS_REMOTE_READ) == EINVAL,
	      "bind over MR without MW_BIND -> EINVAL");
	CHECK(iwe_mw_bind(mw, mr, va + 1000, 64, IBV_ACCESS_REMOTE_READ) ==
	      EINVAL, "bind beyond MR -> EINVAL");
	CHECK(iwe_mw_bind(mw, mr, va, 64, IBV_ACCESS_LOCAL_WRITE) == EINVAL,
	      "bind with local rights -> EINVAL");

	CHECK(iwe_mw_bind(mw, mr, va + 128, 64, IBV_ACCESS_REMOTE_READ) == 0 &&
	      mw->rkey && IWE_STAG_INDEX(mw->rkey) == w->index, "bind -> rkey");
	first = mw->rkey;
	CHECK(iwe_mr_check(d, pd, mw->rkey, va + 130, 8,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_OK &&
	      p == buf + 130, "read through window -> OK, pointer right");
	CHECK(iwe_mr_check(d, pd, mw->rkey, va + 64, 8, IBV_ACCESS_REMOTE_READ,
			   &p) == IWE_ACCESS_BAD_BOUNDS,
	      "inside MR but outside window -> BAD_BOUNDS");
	CHECK(iwe_mr_check(d, pd, mw->rkey, va + 128, 8,
			   IBV_ACCESS_REMOTE_WRITE, &p) == IWE_ACCESS_BAD_RIGHTS,
	      "write through read-only window -> BAD_RIGHTS");
	CHECK(iwe_mr_check(d, pd, mw->rkey, va + 128, 8, 0, &p) ==
	      IWE_ACCESS_BAD_RIGHTS, "local access through window -> BAD_RIGHTS");
	CHECK(iwe_mr_check(d, pd2, mw->rkey, va + 128, 8,
			   IBV_ACCESS_REMOTE_READ, &p) == IWE_ACCESS_BAD_PD,
	      "window from another PD -> BAD_PD");
	CHECK(iwe_dereg_mr(mr) == EBUSY, "dereg MR with bound MW -> EBUSY");
	CHECK(iwe_mw_bind(mw, mr, va, 32, IBV_ACCESS_REMOTE_READ) == 0 &&
	      mw->rkey != first && IWE_STAG_INDEX(mw->rkey) == w->index &&
	      iwe_mr_check(d, pd, first, va + 128, 8, IBV_ACCESS_REMOTE_READ,
			   &p) == IWE_ACCESS_BAD_STAG,
	      "rebind bumps the key; old STag -> BAD_STAG");
	first = mw->rkey;
	CHECK(iwe_mw_unbind(mw) == 0 && mw->rkey == 0 &&
	      iwe_mr_check(d, pd, first, va, 8, IBV_ACCESS_REMOTE_READ, &p) ==
		      IWE_ACCESS_BAD_STAG, "unbind invalidates the STag");
	CHECK(iwe_mw_unbind(mw) == EINVAL, "unbind twice -> EINVAL");
	CHECK(iwe_dealloc_pd(pd) == EBUSY, "dealloc PD with MW -> EBUSY");
	iwe_mw_bind(mw, mr, va, 32, IBV_ACCESS_REMOTE_READ);
	CHECK(iwe_dealloc_mw(mw) == 0 && iwe_dereg_mr(mr) == 0,
	      "dealloc bound MW releases the MR");
	CHECK(iwe_dealloc_mw(NULL) == EINVAL, "dealloc_mw(NULL) -> EINVAL");
	iwe_dereg_mr(nob);
}

/* Pages of [p, p + len) resident, by mincore; -1 if it fails. */
static long resident_pages(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (len + pg - 1) / pg;
	unsigned char v[256];
	long r = 0;

	if (n > sizeof(v) || mincore(p, len, v))
		return -1;
	for (size_t i = 0; i < n; i++)
		r += v[i] & 1;
	return r;
}

/* Registration makes a region resident (doc/semantics.md), as pinning
 * does, and leaves its bytes as they were; a region it cannot populate
 * whole (a hole in it) registers all the same. */
static void test_mr_resident(struct iwe_pd *pd)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 64 * pg;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct iwe_mr *mr;
	int same = 1;

	if (m == MAP_FAILED)
		BAIL("mmap");
	memset(m, 0x5a, 8 * pg);	/* the first 8 pages hold data */
	CHECK(resident_pages(m, len) == 8,
	      "a fresh mapping: only the written pages resident (%ld of 64)",
	      resident_pages(m, len));
	mr = iwe_reg_mr(pd, m, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && resident_pages(m, len) == 64,
	      "registered with local write: every page resident (%ld of 64)",
	      resident_pages(m, len));
	for (size_t i = 0; i < len; i++)
		same &= m[i] == (i < 8 * pg ? 0x5a : 0);
	CHECK(same, "and the region's bytes are as they were");
	if (mr)
		iwe_dereg_mr(mr);
	munmap(m + 32 * pg, pg);	/* a hole */
	mr = iwe_reg_mr(pd, m, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL, "a region with a hole registers all the same (its "
	      "pages are faulted, or fail, as they are used)");
	if (mr)
		iwe_dereg_mr(mr);
	munmap(m, len);
	/* Read-only memory, from an unaligned start: registration reads its
	 * pages (one byte of each, from the region only) and writes none. */
	m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		BAIL("mmap");
	mr = iwe_reg_mr(pd, m + pg / 2, len - pg, IBV_ACCESS_REMOTE_READ);
	CHECK(mr && resident_pages(m, len) == 64,
	      "a read-only mapping registers for remote read, resident "
	      "(%ld of 64)", resident_pages(m, len));
	if (mr)
		iwe_dereg_mr(mr);
	munmap(m, len);
}

static void test_pd_mr(void)
{
	struct iwe_device *d = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	struct iwe_pd *pd, *pd2;
	struct iwe_mr *mr;
	static char buf[4096];

	if (!d)
		BAIL("cannot open lo");
	errno = 0;
	CHECK(!iwe_alloc_pd(NULL) && errno == EINVAL, "alloc_pd(NULL) -> EINVAL");
	pd = iwe_alloc_pd(d);
	pd2 = iwe_alloc_pd(d);
	CHECK(pd && pd2 && pd != pd2, "alloc two PDs");
	if (!pd || !pd2)
		BAIL("alloc_pd");
	mr = iwe_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && mr->pd == pd && mr->addr == buf &&
	      mr->length == sizeof(buf), "reg_mr fills the MR");
	CHECK(iwe_dealloc_pd(pd) == EBUSY, "dealloc PD with MR -> EBUSY");
	CHECK(iwe_dereg_mr(mr) == 0, "dereg_mr -> 0");
	iwe_pd_get(pd);
	CHECK(iwe_dealloc_pd(pd) == EBUSY, "dealloc PD held by a QP -> EBUSY");
	iwe_pd_put(pd);
	test_reg_mr_args(pd, buf);
	test_mr_check(d, pd, pd2, buf);
	test_stag_reuse(buf);
	test_mw(d, pd, pd2, buf);
	test_mr_resident(pd);
	CHECK(iwe_dealloc_pd(pd) == 0 && iwe_dealloc_pd(pd2) == 0,
	      "dealloc unused PDs -> 0");
	CHECK(iwe_dealloc_pd(NULL) == EINVAL, "dealloc_pd(NULL) -> EINVAL");
	iwe_device_close(d);
}

/* The IWE_MAX_* caps are enforced, with ENOMEM, on a device of its own. */
static void test_limits(void)
{
	struct iwe_device *d = iwe_device_open("lo", IWE_TRANSPORT_TCP);
	static struct iwe_pd *pds[IWE_MAX_PD + 1];
	static struct iwe_mw *mws[IWE_MAX_MW + 1];
	static struct iwe_cq *cqs[IWE_MAX_CQ + 1];
	int n, err, i;

	if (!d)
		BAIL("cannot open lo");
	for (n = 0; n <= IWE_MAX_PD && (pds[n] = iwe_alloc_pd(d)); n++)
		;
	err = errno;
	CHECK(n == IWE_MAX_PD && err == ENOMEM, "PD cap %d -> ENOMEM", n);
	for (n = 0; n <= IWE_MAX_MW && (mws[n] = iwe_alloc_mw(pds[0])); n++)
		;
	err = errno;
	CHECK(n == IWE_MAX_MW && err == ENOMEM, "MW cap %d -> ENOMEM", n);
	for (i = 0; i < n; i++)
		iwe_dealloc_mw(mws[i]);
	for (n = 0; n <= IWE_MAX_CQ && (cqs[n] = iwe_create_cq(d, 1, NULL, NULL));
	     n++)
		;
	err = errno;
	CHECK(n == IWE_MAX_CQ && err == ENOMEM, "CQ cap %d -> ENOMEM", n);
	for (i = 0; i < n; i++)
		iwe_destroy_cq(cqs[i]);
	for (i = 0; i < IWE_MAX_PD; i++)
		iwe_dealloc_pd(pds[i]);
	iwe_device_close(d);
}

/* --------------------------------------------------------------- CQ */

static int poll_ids(struct iwe_cq *cq, int n, uint64_t first)
{
	struct ibv_wc wc[16];
	int got = iwe_poll_cq(cq, n, wc), i;

	if (got != n)
		return 0;
	for (i = 0; i < n; i++)
		if (wc[i].wr_id != first + (uint64_t)i)
			return 0;
	return 1;
}

static void push_ids(struct iwe_cq *cq, uint64_t first, int n)
{
	struct ibv_wc wc = mkwc(first, IBV_WC_SUCCESS);

	for (; n > 0; n--, wc.wr_id++)
		iwe_cq_push(cq, &wc, 0);
}

static void test_cq_ring(struct iwe_device *d)
{
	struct iwe_cq *cq;
	struct ibv_wc wc = mkwc(99, IBV_WC_SUCCESS);

	errno = 0;
	CHECK(!iwe_create_cq(d, 0, NULL, NULL) && errno == EINVAL,
	      "create_cq 0 entries -> EINVAL");
	CHECK(!iwe_create_cq(d, IWE_MAX_CQE + 1, NULL, NULL) &&
	      !iwe_create_cq(d, -1, NULL, NULL) &&
	      !iwe_create_cq(NULL, 4, NULL, NULL),
	      "create_cq too big / negative / no device -> NULL");
	cq = iwe_create_cq(d, 4, NULL, NULL);
	CHECK(cq && cq->cqe == 4 && iwe_cq_count(cq) == 0, "create_cq 4");
	if (!cq)
		BAIL("create_cq");
	push_ids(cq, 0, 3);
	CHECK(iwe_cq_count(cq) == 3, "count after 3 pushes");
	CHECK(poll_ids(cq, 2, 0), "poll 2 in order");
	push_ids(cq, 3, 3);
	CHECK(poll_ids(cq, 4, 2), "ring wraps in order");
	CHECK(iwe_poll_cq(cq, 4, &wc) == 0, "empty CQ polls 0");
	CHECK(iwe_poll_cq(cq, -1, &wc) == -EINVAL, "poll n<0 -> -EINVAL");
	push_ids(cq, 10, 4);
	CHECK(!iwe_cq_overflowed(cq), "full CQ not yet overflowed");
	CHECK(iwe_cq_push(cq, &wc, 0) == ENOSPC && iwe_cq_overflowed(cq) &&
	      iwe_cq_count(cq) == 4, "push on full CQ -> ENOSPC, overflow");
	CHECK(poll_ids(cq, 4, 10), "nothing queued was lost");
	push_ids(cq, 20, 3);
	iwe_poll_cq(cq, 1, &wc);	/* head now mid-ring */
	push_ids(cq, 23, 2);
	CHECK(iwe_resize_cq(cq, 8) == 0 && cq->cqe == 8 &&
	      iwe_cq_count(cq) == 4, "resize up keeps entries");
	push_ids(cq, 25, 4);
	CHECK(poll_ids(cq, 8, 21), "entries survive resize in order");
	push_ids(cq, 30, 3);
	CHECK(iwe_resize_cq(cq, 2) == EINVAL, "resize below count -> EINVAL");
	CHECK(iwe_resize_cq(cq, 0) == EINVAL &&
	      iwe_resize_cq(cq, IWE_MAX_CQE + 1) == EINVAL,
	      "resize 0 / too big -> EINVAL");
	CHECK(iwe_resize_cq(cq, 3) == 0 && poll_ids(cq, 3, 30),
	      "resize to exactly count keeps all");
	CHECK(iwe_destroy_cq(cq) == 0, "destroy_cq -> 0");
}

static void test_cq_notify(struct iwe_device *d)
{
	struct iwe_comp_channel *ch = iwe_create_comp_channel(d);
	struct iwe_cq *cq, *got = NULL;
	struct ibv_wc wc = mkwc(1, IBV_WC_SUCCESS);
	int ctx, fd;
	void *gctx = NULL;

	CHECK(ch && ch->fd >= 0 && (fcntl(ch->fd, F_GETFD) & FD_CLOEXEC),
	      "comp channel: fd with CLOEXEC");
	if (!ch)
		BAIL("create_comp_channel");
	fd = ch->fd;
	cq = iwe_create_cq(d, 16, &ctx, ch);
	if (!cq)
		BAIL("create_cq");
	CHECK(iwe_destroy_comp_channel(ch) == EBUSY,
	      "destroy channel with CQ -> EBUSY");
	iwe_cq_push(cq, &wc, 1);
	CHECK(!fd_readable(fd, 0), "no event without arming");
	set_nonblock(fd, 1);
	CHECK(iwe_get_cq_event(ch, &got, &gctx) == EAGAIN,
	      "non-blocking get_cq_event -> EAGAIN");
	set_nonblock(fd, 0);

	iwe_req_notify_cq(cq, 0);
	iwe_cq_push(cq, &wc, 0);
	CHECK(fd_readable(fd, 1000), "armed: push makes fd readable");
	CHECK(iwe_get_cq_event(ch, &got, &gctx) == 0 && got == cq &&
	      gctx == &ctx, "get_cq_event returns the CQ and its context");
	CHECK(!fd_readable(fd, 0), "one event only");
	iwe_cq_push(cq, &wc, 0);
	CHECK(!fd_readable(fd, 0), "arm is one-shot");

	iwe_req_notify_cq(cq, 1);
	iwe_cq_push(cq, &wc, 0);
	CHECK(!fd_readable(fd, 0), "solicited arm ignores unsolicited");
	iwe_cq_push(cq, &wc, 1);
	CHECK(fd_readable(fd, 1000), "solicited arm fires on solicited");
	iwe_get_cq_event(ch, &got, &gctx);
	wc.status = IBV_WC_LOC_PROT_ERR;
	iwe_req_notify_cq(cq, 1);
	iwe_cq_push(cq, &wc, 0);
	CHECK(fd_readable(fd, 1000), "solicited arm fires on error completion");
	iwe_get_cq_event(ch, &got, &gctx);

	CHECK(iwe_destroy_cq(cq) == EBUSY, "destroy with unacked events -> EBUSY");
	iwe_ack_cq_events(cq, 3);
	iwe_cq_get(cq);
	CHECK(iwe_destroy_cq(cq) == EBUSY, "destroy CQ held by a QP -> EBUSY");
	iwe_cq_put(cq);

	iwe_req_notify_cq(cq, 0);
	iwe_cq_push(cq, &wc, 0);	/* fired, never retrieved */
	CHECK(iwe_destroy_cq(cq) == 0, "destroy discards unretrieved events");
	set_nonblock(fd, 1);
	CHECK(iwe_get_cq_event(ch, &got, &gctx) == EAGAIN,
	      "discarded event is not delivered");
	CHECK(iwe_destroy_comp_channel(ch) == 0, "destroy channel -> 0");
}

static void *push_one(void *cq)
{
	struct ibv_wc wc = mkwc(7, IBV_WC_SUCCESS);

	iwe_cq_push(cq, &wc, 0);
	return NULL;
}

/* Several CQs on one channel: events name the right CQ, in firing order;
 * a consumer blocked in get_cq_event is woken by another thread's push. */
static void test_two_cqs(struct iwe_device *d)
{
	struct iwe_comp_channel *ch = iwe_create_comp_channel(d);
	int c1, c2;
	struct iwe_cq *a = iwe_create_cq(d, 4, &c1, ch);
	struct iwe_cq *b = iwe_create_cq(d, 4, &c2, ch);
	struct iwe_cq *g1 = NULL, *g2 = NULL;
	struct ibv_wc wc = mkwc(5, IBV_WC_SUCCESS);
	void *x1 = NULL, *x2 = NULL;
	pthread_t t;
	int r;

	iwe_req_notify_cq(a, 0);
	iwe_req_notify_cq(b, 0);
	iwe_cq_push(b, &wc, 0);
	iwe_cq_push(a, &wc, 0);
	iwe_get_cq_event(ch, &g1, &x1);
	iwe_get_cq_event(ch, &g2, &x2);
	CHECK(g1 == b && x1 == &c2 && g2 == a && x2 == &c1,
	      "two CQs on a channel: events in firing order");
	iwe_req_notify_cq(a, 0);
	pthread_create(&t, NULL, push_one, a);
	r = iwe_get_cq_event(ch, &g1, &x1);	/* blocking fd */
	pthread_join(t, NULL);
	CHECK(r == 0 && g1 == a && iwe_cq_count(a) == 2,
	      "blocking get_cq_event woken by another thread");
	iwe_ack_cq_events(a, 2);
	iwe_ack_cq_events(b, 1);
	CHECK(iwe_destroy_cq(a) == 0 && iwe_destroy_cq(b) == 0 &&
	      iwe_destroy_comp_channel(ch) == 0, "teardown of both");
}

#define NPRODUCED 100000

static void *producer_main(void *arg)
{
	struct iwe_cq *cq = arg;
	struct ibv_wc wc = mkwc(0, IBV_WC_SUCCESS);

	for (; wc.wr_id < NPRODUCED; wc.wr_id++) {
		/* Only producer: once count < cqe the push cannot fail. */
		while (iwe_cq_count(cq) >= cq->cqe)
			sched_yield();
		if (iwe_cq_push(cq, &wc, 0))
			return cq;
	}
	return NULL;
}

/* Consumer: drain; when empty, arm, re-poll (closing the race with a push
 * that landed before the arm), then sleep on the channel. */
static void test_threaded(struct iwe_device *d)
{
	struct iwe_comp_channel *ch = iwe_create_comp_channel(d);
	struct iwe_cq *cq = iwe_create_cq(d, 1024, NULL, ch), *g;
	struct ibv_wc wc[32];
	pthread_t t;
	uint64_t next = 0;
	int n, i, order_ok = 1, waits = 0;
	void *ret, *gctx;

	if (!ch || !cq || pthread_create(&t, NULL, producer_main, cq))
		BAIL("threaded setup");
	while (next < NPRODUCED) {
		n = iwe_poll_cq(cq, 32, wc);
		if (n == 0) {
			iwe_req_notify_cq(cq, 0);
			n = iwe_poll_cq(cq, 32, wc);
		}
		if (n == 0) {
			iwe_get_cq_event(ch, &g, &gctx);
			iwe_ack_cq_events(g, 1);
			waits++;
			continue;
		}
		for (i = 0; i < n; i++)
			if (wc[i].wr_id != next++)
				order_ok = 0;
	}
	pthread_join(t, &ret);
	CHECK(ret == NULL && order_ok && next == NPRODUCED,
	      "%d completions from a producer thread, in order (%d waits)",
	      NPRODUCED, waits);
	CHECK(!iwe_cq_overflowed(cq) && iwe_cq_count(cq) == 0,
	      "no overflow, CQ drained");
	CHECK(iwe_destroy_cq(cq) == 0 && iwe_destroy_comp_channel(ch) == 0,
	      "teardown after threaded run");
}

static void test_cq(void)
{
	struct iwe_device *d = iwe_device_open("lo", IWE_TRANSPORT_TCP);

	if (!d)
		BAIL("cannot open lo");
	test_cq_ring(d);
	test_cq_notify(d);
	test_two_cqs(d);
	test_threaded(d);
	iwe_device_close(d);
}

int main(void)
{
	test_device_open();
	test_owns_socket();
	test_check_socket();
	test_pd_mr();
	test_limits();
	test_cq();
	return tap_done();
}
