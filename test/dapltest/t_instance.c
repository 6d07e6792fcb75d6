/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Instance data of dat.conf lines: each malformed line gives its documented
 * error at dat_ia_open, each good one opens.  Runs against the test
 * registry file test/dat-test.conf (DAT_OVERRIDE is set before the first
 * registry call, by re-executing this program). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tcommon.h"

#ifndef TEST_DATCONF
#error TEST_DATCONF must name test/dat-test.conf
#endif

/* Opens and closes an IA; what the query said is copied out first. */
static DAT_RETURN try_open(const char *name, DAT_IA_ATTR *attr,
			   struct sockaddr_in *addr)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia;
	DAT_RETURN r = dat_ia_open((DAT_NAME_PTR)name, 4, &evd, &ia);

	if (r == DAT_SUCCESS) {
		if (attr) {
			dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, attr, 0, NULL);
			memcpy(addr, attr->ia_address_ptr, sizeof(*addr));
			attr->ia_address_ptr = NULL;	/* dies with the IA */
		}
		dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	}
	return r;
}

/* EVDs are shared only inside one provider instance (one dat.conf line):
 * a connect EVD of another IA of the same line will do, one of another
 * line, even on the same device, will not. */
static void test_evd_scope(void)
{
	DAT_IA_HANDLE ia = test_open_ia(NULL), same = test_open_ia(NULL), other;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, c_same, c_other;
	DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;

	if (dat_ia_open((DAT_NAME_PTR)"iw-lo-opts", 4, &async, &other) !=
	    DAT_SUCCESS)
		BAIL("dat_ia_open(iw-lo-opts)");
	if (dat_pz_create(ia, &pz) != DAT_SUCCESS ||
	    dat_evd_create(same, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG,
			   &c_same) != DAT_SUCCESS ||
	    dat_evd_create(other, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG,
			   &c_other) != DAT_SUCCESS)
		BAIL("dat_pz_create / dat_evd_create");
	CHECK_RET(dat_ep_create(ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
				c_same, NULL, &ep), DAT_SUCCESS,
		  "connect EVD of another IA of the same instance");
	dat_ep_free(ep);
	CHECK_RET(dat_ep_create(ia, pz, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
				c_other, NULL, &ep), DAT_INVALID_HANDLE,
		  "connect EVD of another instance (iw-lo-opts) -> DAT_INVALID_HANDLE");
	dat_ia_close(other, DAT_CLOSE_ABRUPT_FLAG);
	dat_ia_close(same, DAT_CLOSE_ABRUPT_FLAG);
	dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

int main(int argc, char **argv)
{
	DAT_IA_ATTR a;
	struct sockaddr_in sa;

	/* libdat2 reads DAT_OVERRIDE when it loads: start over with it set. */
	if (!getenv("IW_INSTANCE_REEXEC")) {
		setenv("IW_INSTANCE_REEXEC", "1", 1);
		setenv("DAT_OVERRIDE", TEST_DATCONF, 1);
		execv(argv[0], argv);	/* argv[0]: valgrind follows it */
		BAIL("re-exec failed");
	}
	(void)argc;
	CHECK_RET(try_open("iw-lo", &a, &sa), DAT_SUCCESS, "\"127.0.0.1 tcp\" opens");
	CHECK_RET(try_open("iw-lo-opts", &a, &sa), DAT_SUCCESS,
		  "\"lo tcp\" with every option opens");
	CHECK(sa.sin_family == AF_INET && sa.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	      "a netdev name resolves to its IPv4 address (lo -> 127.0.0.1)");
	CHECK(strstr(a.adapter_name, "lo") != NULL, "adapter name names the interface (%s)", a.adapter_name);
	CHECK_RET(try_open("iw-lo-udp", NULL, NULL), DAT_SUCCESS, "\"lo udp\" opens");
	CHECK_RET(try_open("iw-lo-udp-opts", NULL, NULL), DAT_SUCCESS,
		  "\"lo udp\" with mtu= and trp_test= opens");
	CHECK_RET(try_open("iw-bad-mtu", NULL, NULL), DAT_INVALID_PARAMETER,
		  "mtu below 576 -> DAT_INVALID_PARAMETER");
	CHECK_RET(try_open("iw-bad-trp-test", NULL, NULL), DAT_INVALID_PARAMETER,
		  "malformed trp_test -> DAT_INVALID_PARAMETER");
	CHECK_RET(try_open("iw-bad-transport", NULL, NULL), DAT_INVALID_PARAMETER,
		  "unknown transport -> DAT_INVALID_PARAMETER");
	CHECK_RET(try_open("iw-bad-dev", NULL, NULL), DAT_INVALID_ADDRESS,
		  "unknown netdev -> DAT_INVALID_ADDRESS");
	CHECK_RET(try_open("iw-bad-addr", NULL, NULL), DAT_INVALID_ADDRESS,
		  "an IPv4 address on no local interface -> DAT_INVALID_ADDRESS");
	CHECK_RET(try_open("iw-bad-opt", NULL, NULL), DAT_INVALID_PARAMETER,
		  "unknown option -> DAT_INVALID_PARAMETER");
	CHECK_RET(try_open("iw-bad-val", NULL, NULL), DAT_INVALID_PARAMETER,
		  "out-of-range option value -> DAT_INVALID_PARAMETER");
	CHECK_RET(try_open("iw-bad-short", NULL, NULL), DAT_INVALID_PARAMETER,
		  "missing transport -> DAT_INVALID_PARAMETER");
	test_evd_scope();
	return tap_done();
}
