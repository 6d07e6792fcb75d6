/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Compile and layout test of <dat2/dat_iw_extensions.h> from C.
 *
 * It includes Debian's dat_ib_extensions.h in the same unit on purpose:
 * a consumer that knows both transports must be able to do so.  The
 * values checked here are the interface the provider's dispatcher reads,
 * so a change to any of them is an ABI change. */
#include <netinet/in.h> /* dat_ib_extensions.h needs struct sockaddr_in6 */
#include <stddef.h>
#include <string.h>

#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>
#include <dat2/dat_iw_extensions.h>
#include <dat2/dat_iw_extensions.h> /* the include guard must hold */

#include "tap.h"

/* Never true at run time, but the compiler cannot know it, so the calls
 * below are compiled and type-checked without being executed. */
static volatile int never;

/* Each macro must expand to a well-typed dat_extension_op call. */
static DAT_RETURN expand_all(DAT_IA_HANDLE ia, DAT_EP_HANDLE ep,
			     DAT_EVD_HANDLE evd)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_IW_SSP_PARAM param;
	DAT_IW_SOCKET sock = 3;
	char msg[] = "go";
	const char pd[4] = { 1, 2, 3, 4 };
	DAT_RETURN r = DAT_SUCCESS;

	r |= dat_iw_ssp_create(ia, sock, ep, evd, msg, sizeof(msg), &ssp);
	r |= dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_ALL, &param);
	r |= dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_EP_HANDLE |
				   DAT_IW_SSP_FIELD_SSP_STATE, &param);
	r |= dat_iw_ssp_free(ssp);
	r |= dat_iw_socket_connect(ep, sock, DAT_TIMEOUT_INFINITE, 0, NULL);
	r |= dat_iw_socket_connect(ep, sock, 1000000u, (DAT_COUNT)sizeof(pd),
				   pd);
	return r;
}

/* How a consumer tells the extension event apart without -Wenum-compare. */
static int classify(const DAT_EVENT *ev)
{
	switch ((int)ev->event_number) {
	case DAT_CONNECTION_REQUEST_EVENT:
		return 1;
	case DAT_CONNECTION_EVENT_SOCKET_DOWN:
		return 2;
	default:
		return 0;
	}
}

static int is_pow2(unsigned v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

int main(void)
{
	/* ---- version and attribute names */
	char buf[16];

	CHECK(DAT_IW_EXTENSION_VERSION == 200, "extension version is 200");
	snprintf(buf, sizeof(buf), "%d", DAT_IW_EXTENSION_VERSION);
	CHECK(strcmp(buf, DAT_IW_EXTENSION_VERSION_STR) == 0,
	      "version string \"%s\" matches the number",
	      DAT_IW_EXTENSION_VERSION_STR);
	CHECK(strcmp(DAT_IW_ATTR_SSP, "DAT_IW_ATTR_SSP") == 0,
	      "DAT_IW_ATTR_SSP names the SSP attribute");
	CHECK(strcmp(DAT_EXTENSION_ATTR, "DAT_EXTENSION_INTERFACE") == 0 &&
	      strcmp(DAT_EXTENSION_ATTR_VERSION, "DAT_EXTENSION_VERSION") == 0,
	      "generic extension attribute names");

	/* ---- socket and handle types */
	CHECK(sizeof(DAT_IW_SOCKET) == sizeof(int) && (DAT_IW_SOCKET)-1 < 0,
	      "DAT_IW_SOCKET is a signed int (a file descriptor)");
	CHECK(sizeof(DAT_IW_SSP_HANDLE) == sizeof(DAT_HANDLE),
	      "DAT_IW_SSP_HANDLE is a DAT_HANDLE");
	CHECK((int)DAT_IW_HANDLE_TYPE_SSP == (int)DAT_HANDLE_TYPE_EXTENSION_BASE,
	      "SSP handle type is DAT_HANDLE_TYPE_EXTENSION_BASE");
	CHECK((int)DAT_IW_HANDLE_TYPE_SSP > (int)DAT_HANDLE_TYPE_CSP,
	      "SSP handle type is beyond every core handle type");

	/* ---- SSP state and param */
	CHECK(DAT_IW_SSP_STATE_OPERATIONAL != DAT_IW_SSP_STATE_NON_OPERATIONAL,
	      "SSP states are distinct");
	CHECK(offsetof(DAT_IW_SSP_PARAM, ia_handle) == 0 &&
	      offsetof(DAT_IW_SSP_PARAM, ia_handle) <
		      offsetof(DAT_IW_SSP_PARAM, socket_id) &&
	      offsetof(DAT_IW_SSP_PARAM, socket_id) <
		      offsetof(DAT_IW_SSP_PARAM, evd_handle) &&
	      offsetof(DAT_IW_SSP_PARAM, evd_handle) <
		      offsetof(DAT_IW_SSP_PARAM, ep_handle) &&
	      offsetof(DAT_IW_SSP_PARAM, ep_handle) <
		      offsetof(DAT_IW_SSP_PARAM, ssp_state),
	      "DAT_IW_SSP_PARAM fields in spec order");
	{
		DAT_IW_SSP_PARAM p;
		CHECK(sizeof(p.ia_handle) == sizeof(DAT_IA_HANDLE) &&
		      sizeof(p.socket_id) == sizeof(DAT_IW_SOCKET) &&
		      sizeof(p.evd_handle) == sizeof(DAT_EVD_HANDLE) &&
		      sizeof(p.ep_handle) == sizeof(DAT_EP_HANDLE) &&
		      sizeof(p.ssp_state) == sizeof(DAT_IW_SSP_STATE),
		      "DAT_IW_SSP_PARAM field sizes");
	}

	/* ---- param mask */
	CHECK(DAT_IW_SSP_FIELD_IA_HANDLE == 0x01, "FIELD_IA_HANDLE == 0x01");
	CHECK(DAT_IW_SSP_FIELD_SOCKET_ID == 0x02, "FIELD_SOCKET_ID == 0x02");
	CHECK(DAT_IW_SSP_FIELD_EVD_HANDLE == 0x04, "FIELD_EVD_HANDLE == 0x04");
	CHECK(DAT_IW_SSP_FIELD_EP_HANDLE == 0x08, "FIELD_EP_HANDLE == 0x08");
	CHECK(DAT_IW_SSP_FIELD_SSP_STATE == 0x10, "FIELD_SSP_STATE == 0x10");
	CHECK(DAT_IW_SSP_FIELD_ALL ==
		      (DAT_IW_SSP_FIELD_IA_HANDLE | DAT_IW_SSP_FIELD_SOCKET_ID |
		       DAT_IW_SSP_FIELD_EVD_HANDLE | DAT_IW_SSP_FIELD_EP_HANDLE |
		       DAT_IW_SSP_FIELD_SSP_STATE),
	      "FIELD_ALL is the OR of every field");
	CHECK(is_pow2(DAT_IW_SSP_FIELD_IA_HANDLE) &&
	      is_pow2(DAT_IW_SSP_FIELD_SOCKET_ID) &&
	      is_pow2(DAT_IW_SSP_FIELD_EVD_HANDLE) &&
	      is_pow2(DAT_IW_SSP_FIELD_EP_HANDLE) &&
	      is_pow2(DAT_IW_SSP_FIELD_SSP_STATE),
	      "each field is a single bit");

	/* ---- event number */
	CHECK((int)DAT_CONNECTION_EVENT_SOCKET_DOWN ==
		      (int)DAT_IW_EXTENSION_RANGE_BASE,
	      "SOCKET_DOWN is DAT_IW_EXTENSION_RANGE_BASE");
	CHECK((int)DAT_CONNECTION_EVENT_SOCKET_DOWN != (int)DAT_IB_DTO_EVENT &&
	      (int)DAT_CONNECTION_EVENT_SOCKET_DOWN !=
		      (int)DAT_IB_UD_CONNECTION_ERROR_EVENT,
	      "SOCKET_DOWN does not collide with IB extension events");
	{
		DAT_EVENT ev;
		memset(&ev, 0, sizeof(ev));
		ev.event_number =
			(DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN;
		CHECK(DAT_IW_EVENT_IS_SOCKET_DOWN(&ev) && classify(&ev) == 2,
		      "event_number holds SOCKET_DOWN and it is recognised");
		ev.event_number = DAT_CONNECTION_REQUEST_EVENT;
		CHECK(!DAT_IW_EVENT_IS_SOCKET_DOWN(&ev) && classify(&ev) == 1,
		      "a core event is not taken for SOCKET_DOWN");
	}

	/* ---- event data inside DAT_EVENT */
	{
		DAT_EVENT ev, copy;
		DAT_IW_SSP_EVENT_DATA *d;
		int marker;

		CHECK(sizeof(DAT_IW_SSP_EVENT_DATA) <=
			      sizeof(ev.event_extension_data),
		      "event data fits event_extension_data");
		memset(&ev, 0xA5, sizeof(ev));
		d = DAT_IW_SSP_EVENT_DATA_PTR(&ev);
		CHECK((void *)d == (void *)ev.event_extension_data,
		      "DAT_IW_SSP_EVENT_DATA_PTR points at event_extension_data");
		ev.event_number =
			(DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN;
		d->ssp_handle = (DAT_IW_SSP_HANDLE)&marker;
		d->socket_id = 42;
		copy = ev; /* an EVD hands events out by copy */
		CHECK(DAT_IW_SSP_EVENT_DATA_PTR(&copy)->ssp_handle ==
				      (DAT_IW_SSP_HANDLE)&marker &&
		      DAT_IW_SSP_EVENT_DATA_PTR(&copy)->socket_id == 42,
		      "event data round trips through a DAT_EVENT copy");
	}

	/* ---- operation codes */
	{
		static const int ops[] = {
			DAT_IW_SSP_CREATE_OP, DAT_IW_SSP_FREE_OP,
			DAT_IW_SSP_QUERY_OP, DAT_IW_SOCKET_CONNECT_OP,
			DAT_IW_STATS_QUERY_OP
		};
		size_t i, j, n = sizeof(ops) / sizeof(ops[0]);
		int distinct = 1, small = 1, clear = 1, not_ib = 1;

		for (i = 0; i < n; i++) {
			for (j = i + 1; j < n; j++)
				distinct &= ops[i] != ops[j];
			small &= ops[i] > 0 && ops[i] < 0x1000;
			clear &= (ops[i] & (DAT_OPEN_EXTENSION_BASE |
					    DAT_CLOSE_EXTENSION_BASE)) == 0;
			not_ib &= ops[i] > (int)DAT_IB_UD_AH_FREE_OP;
		}
		CHECK(distinct, "op codes are distinct");
		CHECK(small, "op codes are below 0x1000");
		CHECK(clear, "op codes avoid the registry's open/close bits");
		CHECK(not_ib, "op codes do not overlap DAT_IB_OP values");
		CHECK(DAT_IW_SSP_CREATE_OP == 0x100 && DAT_IW_SSP_FREE_OP == 0x101 &&
		      DAT_IW_SSP_QUERY_OP == 0x102 &&
		      DAT_IW_SOCKET_CONNECT_OP == 0x103 &&
		      DAT_IW_STATS_QUERY_OP == 0x104,
		      "op codes are 0x100..0x104");
	}

	/* ---- the four calls: compiled above; here run against the registry.
	 * A NULL handle is refused by libdat2 itself before any provider is
	 * involved, so this needs no IA and proves each macro reaches
	 * dat_extension_op. */
	if (never)
		(void)expand_all(DAT_HANDLE_NULL, DAT_HANDLE_NULL,
				 DAT_HANDLE_NULL);
	{
		DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
		DAT_IW_SSP_PARAM param;

		CHECK_RET(dat_iw_ssp_create(DAT_HANDLE_NULL, -1, DAT_HANDLE_NULL,
					    DAT_HANDLE_NULL, NULL, 0, &ssp),
			  DAT_INVALID_HANDLE,
			  "dat_iw_ssp_create(NULL ia) -> DAT_INVALID_HANDLE");
		CHECK_RET(dat_iw_ssp_query(DAT_HANDLE_NULL,
					   DAT_IW_SSP_FIELD_ALL, &param),
			  DAT_INVALID_HANDLE,
			  "dat_iw_ssp_query(NULL) -> DAT_INVALID_HANDLE");
		CHECK_RET(dat_iw_ssp_free(DAT_HANDLE_NULL), DAT_INVALID_HANDLE,
			  "dat_iw_ssp_free(NULL) -> DAT_INVALID_HANDLE");
		CHECK_RET(dat_iw_socket_connect(DAT_HANDLE_NULL, -1, 1000, 0,
						NULL),
			  DAT_INVALID_HANDLE,
			  "dat_iw_socket_connect(NULL ep) -> DAT_INVALID_HANDLE");
	}

	return tap_done();
}
