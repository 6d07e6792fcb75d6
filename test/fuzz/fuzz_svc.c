/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Learning the service header's magic (fuzz_svc.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_svc.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "iw_mpa.h"

#define WAIT_MS 3000

static void ignore_event(const struct iwe_cm_event *ev, void *ctx)
{
	(void)ev;
	(void)ctx;
}

/* A listening socket on a free port of the shared range; *port gets it. */
static int listen_shared_port(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	unsigned i;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < IWE_CM_SERVICE_PORTS; i += 7) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		a.sin_port = htons((uint16_t)(IWE_CM_SERVICE_PORT_BASE + i));
		if (!bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
		    !listen(fd, 1)) {
			*port = (uint16_t)(IWE_CM_SERVICE_PORT_BASE + i);
			return fd;
		}
		close(fd);
	}
	return -1;
}

/* Read one whole MPA request from fd into buf. */
static int read_request(int fd, uint8_t *buf, size_t cap,
			struct iw_mpa_frame *f)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int rc = iw_mpa_parse(buf, got, IW_MPA_EXPECT_REQ, f, NULL);
		ssize_t n;

		if (rc == IW_MPA_OK)
			return 0;
		if (rc != IW_MPA_NEED_MORE || poll(&p, 1, WAIT_MS) <= 0)
			return EPROTO;
		n = recv(fd, buf + got, cap - got, 0);
		if (n <= 0)
			return EPROTO;
		got += (size_t)n;
	}
}

static int capture(int lfd, uint64_t svc, uint8_t *magic)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	uint8_t buf[IW_MPA_MAX_RR_LEN];
	struct iw_mpa_frame f;
	uint64_t svc_be;
	int fd, err;

	if (poll(&p, 1, WAIT_MS) <= 0)
		return ETIMEDOUT;
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return errno;
	err = read_request(fd, buf, sizeof(buf), &f);
	close(fd);
	if (err)
		return err;
	if (f.pdata_len < IWE_CM_SERVICE_HDR_LEN)
		return EPROTO;
	memcpy(&svc_be, f.pdata + FUZZ_SVC_MAGIC_LEN, sizeof(svc_be));
	if (iw_be64(svc_be) != svc)
		return EPROTO;
	memcpy(magic, f.pdata, FUZZ_SVC_MAGIC_LEN);
	return 0;
}

int fuzz_learn_svc_magic(struct iwe_device *dev,
			 uint8_t magic[FUZZ_SVC_MAGIC_LEN])
{
	struct iwe_cm_params prm = { .mpa_rev = 2, .ird = 1, .ord = 1 };
	struct iwe_qp_init_attr at = { .cap = { 1, 1, 1, 1 } };
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct iwe_conn *conn = NULL;
	struct iwe_pd *pd = iwe_alloc_pd(dev);
	struct iwe_cq *cq = iwe_create_cq(dev, 4, NULL, NULL);
	struct iwe_qp *qp = NULL;
	uint16_t port = 0;
	int lfd = listen_shared_port(&port), err = ENOMEM;
	/* Any service above 65535 that maps onto port. */
	uint64_t svc = 1000000000ull + (port - IWE_CM_SERVICE_PORT_BASE);

	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (pd && cq) {
		at.send_cq = at.recv_cq = cq;
		qp = iwe_create_qp(pd, &at);
	}
	if (lfd < 0)
		err = EADDRINUSE;
	else if (qp && !iwe_modify_qp(qp, IWE_QPS_INIT))
		err = iwe_cm_connect(qp, &dst, svc, NULL, 0, WAIT_MS, &prm,
				     ignore_event, NULL, &conn);
	if (!err)
		err = capture(lfd, svc, magic);
	if (conn)
		iwe_cm_conn_destroy(conn);
	if (lfd >= 0)
		close(lfd);
	if (qp)
		iwe_destroy_qp(qp);
	if (cq)
		iwe_destroy_cq(cq);
	if (pd)
		iwe_dealloc_pd(pd);
	return err;
}
