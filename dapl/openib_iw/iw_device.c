/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine device: one network interface and one IPv4 address on it.
 *
 * There is no RDMA hardware: a "device" is just the interface the engine's
 * sockets bind to, plus the per-device tables (STags) that hardware would
 * keep.  Interfaces and addresses come from the kernel over rtnetlink
 * (libnl-route-3), never from parsing /proc or ioctl(SIOCGIF*).
 */
#include <errno.h>
#include <stdio.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <netlink/cache.h>
#include <netlink/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/addr.h>

#include "iw_fdlimit.h"
#include "iw_priv.h"
#include "iw_env.h"
#include "iw_llp.h"
#include "iw_progress.h"
#include "iw_trp.h"

/* ------------------------------------------------------ rtnetlink helpers */

static struct nl_sock *rtnl_open(void)
{
	struct nl_sock *sk = nl_socket_alloc();

	if (!sk)
		return NULL;
	if (nl_connect(sk, NETLINK_ROUTE) < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

static void rtnl_close(struct nl_sock *sk)
{
	nl_close(sk);
	nl_socket_free(sk);
}

/* What a walk over the address table looks for, and what it found. */
struct addr_walk {
	int ifindex;			/* 0: any interface */
	struct in_addr want;		/* INADDR_ANY: any address */
	int found;
	int found_ifindex;
	struct in_addr found_addr;
	int found_primary;
};

static int rtnl_addr_ipv4(struct rtnl_addr *ra, struct in_addr *out)
{
	struct nl_addr *local;

	if (rtnl_addr_get_family(ra) != AF_INET)
		return -1;
	local = rtnl_addr_get_local(ra);
	if (!local || nl_addr_get_len(local) != sizeof(*out))
		return -1;
	memcpy(out, nl_addr_get_binary_addr(local), sizeof(*out));
	return 0;
}

/* Keep the first primary match; a secondary one only until a primary
 * shows up, so "the interface's address" is the one `ip addr` lists
 * first rather than an alias. */
static void addr_walk_cb(struct nl_object *obj, void *arg)
{
	struct rtnl_addr *ra = (struct rtnl_addr *)obj;
	struct addr_walk *w = arg;
	struct in_addr a;
	int primary;

	if (rtnl_addr_ipv4(ra, &a) < 0)
		return;
	if (w->ifindex && rtnl_addr_get_ifindex(ra) != w->ifindex)
		return;
	if (w->want.s_addr != INADDR_ANY && a.s_addr != w->want.s_addr)
		return;
	primary = !(rtnl_addr_get_flags(ra) & IFA_F_SECONDARY);
	if (w->found && (w->found_primary || !primary))
		return;
	w->found = 1;
	w->found_primary = primary;
	w->found_ifindex = rtnl_addr_get_ifindex(ra);
	w->found_addr = a;
}

/* Walk the kernel's current address table.  Returns 0 (w->found tells
 * the outcome) or an errno when netlink itself fails. */
static int addr_walk_run(struct nl_sock *sk, struct addr_walk *w)
{
	struct nl_cache *addrs;

	if (rtnl_addr_alloc_cache(sk, &addrs) < 0)
		return EIO;
	nl_cache_foreach(addrs, addr_walk_cb, w);
	nl_cache_free(addrs);
	return 0;
}

static int addr_walk_once(struct addr_walk *w)
{
	struct nl_sock *sk = rtnl_open();
	int err;

	if (!sk)
		return EIO;
	err = addr_walk_run(sk, w);
	rtnl_close(sk);
	return err;
}

/* ------------------------------------------------------------- opening */

/* 'where' is an address if it is made of digits and dots only; then it
 * must parse as dotted-quad IPv4, else it is malformed ("999.1.1.1").
 * Otherwise it must be a plausible interface name. */
static int parse_where(const char *where, struct in_addr *addr, int *is_addr)
{
	size_t len;

	if (!where || !*where)
		return EINVAL;
	len = strlen(where);
	if (strspn(where, "0123456789.") == len) {
		*is_addr = 1;
		return inet_pton(AF_INET, where, addr) == 1 ? 0 : EINVAL;
	}
	*is_addr = 0;
	if (len >= IFNAMSIZ || strpbrk(where, "/ \t\n:") ||
	    !strcmp(where, ".") || !strcmp(where, ".."))
		return EINVAL;
	return 0;
}

/* Fill name, index, MTU and the loopback flag from the link itself. */
static int fill_link(struct nl_sock *sk, int ifindex, const char *name,
		     struct iwe_device *dev)
{
	struct rtnl_link *link = NULL;
	const char *lname;

	if (rtnl_link_get_kernel(sk, ifindex, name, &link) < 0 || !link)
		return ENODEV;
	lname = rtnl_link_get_name(link);
	snprintf(dev->attr.ifname, sizeof(dev->attr.ifname), "%s",
		 lname ? lname : "");
	dev->attr.ifindex = rtnl_link_get_ifindex(link);
	dev->attr.mtu = rtnl_link_get_mtu(link);
	dev->is_loopback = !!(rtnl_link_get_flags(link) & IFF_LOOPBACK);
	rtnl_link_put(link);
	return 0;
}

/* Resolve 'where' to interface and address through one netlink socket. */
static int resolve_where(const char *where, struct iwe_device *dev)
{
	struct addr_walk w = { 0 };
	struct in_addr addr;
	struct nl_sock *sk;
	int is_addr, err;

	err = parse_where(where, &addr, &is_addr);
	if (err)
		return err;
	if (is_addr && addr.s_addr == INADDR_ANY)
		return EINVAL;	/* a device binds one concrete address */
	sk = rtnl_open();
	if (!sk)
		return EIO;
	if (is_addr) {
		w.want = addr;
		err = addr_walk_run(sk, &w);
		if (!err && !w.found)
			err = ENODEV;
		if (!err)
			err = fill_link(sk, w.found_ifindex, NULL, dev);
	} else {
		err = fill_link(sk, 0, where, dev);
		if (!err) {
			w.ifindex = dev->attr.ifindex;
			err = addr_walk_run(sk, &w);
		}
		if (!err && !w.found)
			err = EADDRNOTAVAIL;
	}
	rtnl_close(sk);
	if (!err)
		dev->attr.addr.sin_addr = w.found_addr;
	return err;
}

static void fill_limits(struct iwe_device_attr *a)
{
	static long max_eps = -1;

	a->max_qp = (uint32_t)iw_env_long_once(&max_eps, "IWDAPL_MAX_EPS",
					       IWE_MAX_QP, 1, IWE_MAX_QP);
	a->max_cq = IWE_MAX_CQ;
	a->max_cqe = IWE_MAX_CQE;
	a->max_mr = IWE_MAX_MR;
	a->max_mw = IWE_MAX_MW;
	a->max_pd = IWE_MAX_PD;
	a->max_mr_size = IWE_MAX_MR_SIZE;
	a->max_sge = IWE_MAX_SGE;
	a->max_qp_wr = IWE_MAX_QP_WR;
	a->max_srq_wr = IWE_MAX_SRQ_WR;
	a->max_ord = IWE_MAX_ORD;
	a->max_ird = IWE_MAX_IRD;
	a->max_private_data = IWE_MAX_PRIVATE_DATA;
}

struct iwe_device *iwe_device_open(const char *where,
				   enum iwe_transport transport)
{
	struct iwe_device *dev;
	int err;

	iwe_fd_limit_raise();
	if (transport != IWE_TRANSPORT_TCP && transport != IWE_TRANSPORT_UDP) {
		errno = EINVAL;
		return NULL;
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		errno = ENOMEM;
		return NULL;
	}
	err = resolve_where(where, dev);
	if (err) {
		free(dev);
		errno = err;
		return NULL;
	}
	dev->attr.addr.sin_family = AF_INET;
	dev->attr.transport = transport;
	fill_limits(&dev->attr);
	dev->stags.reuse_delay = IWE_STAG_REUSE_DELAY;
	dev->gro_hold = transport == IWE_TRANSPORT_UDP ? trp_gro_key_hold()
						      : -1;
	iwe_lock_init(&dev->lock);
	return dev;
}

char *iwe_device_open_why(const char *where, int err, char *buf,
			  size_t len)
{
	struct in_addr addr;
	int is_addr = 0;

	if (!where)
		where = "";
	if (err == ENODEV || err == EADDRNOTAVAIL)
		parse_where(where, &addr, &is_addr);
	if (err == ENODEV && is_addr)
		snprintf(buf, len, "address %s is not on this host", where);
	else if (err == ENODEV)
		snprintf(buf, len, "netdev \"%s\" does not exist", where);
	else if (err == EADDRNOTAVAIL)
		snprintf(buf, len, "netdev \"%s\" has no IPv4 address", where);
	else if (err == EINVAL)
		snprintf(buf, len, "\"%s\" is neither a netdev name nor a "
			 "local IPv4 address", where);
	else if (err == EIO)
		snprintf(buf, len, "the interfaces of this host cannot be "
			 "read (netlink)");
	else
		snprintf(buf, len, "%s: %s", where, strerror(err));
	return buf;
}

/* The device owns the STag table.  Closing a device that still has PDs,
 * MRs, MWs or CQs is a caller bug (dapl/common frees children first); those
 * objects then point at freed memory, exactly as verbs objects outliving
 * ibv_close_device would. */
void iwe_device_close(struct iwe_device *dev)
{
	if (!dev)
		return;
	if (dev->prog) {
		iwe_cm_dev_fini(dev);
		iwe_prog_stop(dev->prog);
	}
	if (dev->gro_hold >= 0)
		close(dev->gro_hold);
	iwe_mpa_tx_spares_free(dev);
	pthread_mutex_destroy(&dev->lock.m);
	free(dev->stags.ent);
	free(dev);
}

/* The device's progress thread, if started (QPs and connections do). */
static struct iwe_prog *dev_prog(struct iwe_device *dev)
{
	return atomic_load_explicit(&dev->prog, memory_order_acquire);
}

void iwe_device_poll(struct iwe_device *dev)
{
	struct iwe_prog *p = dev_prog(dev);

	if (p)
		iwe_prog_poll(p);
}

int iwe_device_spin(struct iwe_device *dev, int on)
{
	struct iwe_prog *p = dev_prog(dev);

	if (p)
		iwe_prog_spin(p, on);
	return p != NULL;
}

void iwe_device_awaited(struct iwe_device *dev)
{
	struct iwe_prog *p = dev_prog(dev);

	if (p && atomic_load_explicit(&dev->cm_awaited, memory_order_relaxed))
		iwe_prog_note_awaited(p);
}

int iwe_device_sleep(struct iwe_device *dev, const int *fds, int nfds,
		     const struct timespec *deadline,
		     void (*awake)(void *arg), void *arg)
{
	struct iwe_prog *p = dev_prog(dev);

	if (!p)
		return 0;
	if (iwe_prog_sleep(p, fds, nfds, deadline ? iwe_ts_ns(deadline) :
						    ~0ull, awake, arg))
		return 1;
	/* Another consumer sleeps in the loop, or the thread reads. */
	iwe_prog_note_sleeper(p);
	return 0;
}

void iwe_device_query(const struct iwe_device *dev,
		      struct iwe_device_attr *attr)
{
	if (dev && attr)
		*attr = dev->attr;
}

/* ------------------------------------------------- socket ownership */

int iwe_device_set_mtu(struct iwe_device *dev, uint32_t mtu)
{
	if (!dev || mtu < TRP_MIN_MTU || mtu > TRP_MAX_MTU)
		return EINVAL;
	dev->attr.mtu = mtu;
	return 0;
}

int iwe_device_set_trp_test(struct iwe_device *dev, const char *spec)
{
	struct iwe_trp_test t;
	int err = iwe_trp_test_parse(spec, &t);

	if (!err && dev)
		dev->trp_test = t;
	return err;
}

/* Whether 'a' is an address of the device: its own, any 127/8 address
 * on the loopback device, or any other address configured (now) on its
 * interface. */
static int device_has_addr(const struct iwe_device *dev, struct in_addr a)
{
	struct addr_walk w = { 0 };

	if (a.s_addr == dev->attr.addr.sin_addr.s_addr)
		return 1;
	if (dev->is_loopback && (ntohl(a.s_addr) >> 24) == 127)
		return 1;
	w.ifindex = dev->attr.ifindex;
	w.want = a;
	return addr_walk_once(&w) == 0 && w.found;
}

/* The address rule: a concrete local address (what getsockname reports;
 * any connected socket has one) must be an address of the device
 * (device_has_addr): the kernel sends from that address, so it names the
 * interface.  A socket still bound to INADDR_ANY has not chosen its
 * egress yet: if it is connected to a peer that is itself an address of
 * the device, the traffic stays on it; anything else is undecidable and
 * is refused rather than guessed. */
static int addrs_owned(const struct iwe_device *dev,
		       const struct sockaddr_in *local,
		       const struct sockaddr_in *peer)
{
	if (local->sin_addr.s_addr != htonl(INADDR_ANY))
		return device_has_addr(dev, local->sin_addr);
	return peer && device_has_addr(dev, peer->sin_addr);
}

/* One pass over the socket, four system calls (an SSP's create or
 * connect asked 13 across three layers: each one a few hundred ns on a
 * VM, on the path of an upgrade); the adopt that follows takes the
 * addresses from *f. */
int iwe_device_check_socket(const struct iwe_device *dev, int fd,
			    struct iwe_sock_facts *f)
{
	struct sockaddr_storage ls, ps;
	socklen_t len = sizeof(ls);
	int t;

	memset(f, 0, sizeof(*f));
	if (!dev || fd < 0 || (t = iwe_socket_transport(fd)) < 0)
		return EINVAL;
	if (t != (int)dev->attr.transport)
		return EPROTOTYPE;
	if (getsockname(fd, (struct sockaddr *)&ls, &len) < 0 ||
	    ls.ss_family != AF_INET)
		return EINVAL;
	memcpy(&f->local, &ls, sizeof(f->local));
	len = sizeof(ps);
	if (getpeername(fd, (struct sockaddr *)&ps, &len) < 0)
		return errno == ENOTCONN ? 0 : EINVAL;
	if (ps.ss_family != AF_INET)
		return EINVAL;
	memcpy(&f->remote, &ps, sizeof(f->remote));
	f->connected = 1;
	return addrs_owned(dev, &f->local, &f->remote) ? 0 : EADDRNOTAVAIL;
}

int iwe_device_owns_socket(const struct iwe_device *dev, int fd)
{
	struct iwe_sock_facts f;
	int err = iwe_device_check_socket(dev, fd, &f);

	if (err == EPROTOTYPE)
		return EINVAL;
	if (err || f.connected)
		return err;
	/* Not connected: only its own address can tell. */
	return addrs_owned(dev, &f.local, NULL) ? 0 : EADDRNOTAVAIL;
}
