/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
// Compile and layout test of <dat2/dat_iw_extensions.h> from C++:
// the header must be usable from C++ (extern "C", C-style casts in the
// macros, enum initialisers taken from other enums) without warnings.
#include <cstddef>
#include <cstring>
#include <netinet/in.h> // dat_ib_extensions.h needs struct sockaddr_in6

#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>
#include <dat2/dat_iw_extensions.h>

#include "tap.h"

#if __cplusplus >= 201103L
#include <type_traits>
// Compile-time checks of the parts C++ can see exactly.
static_assert(std::is_same<DAT_IW_SOCKET, int>::value,
	      "DAT_IW_SOCKET is int");
static_assert(std::is_same<DAT_IW_SSP_HANDLE, DAT_HANDLE>::value,
	      "DAT_IW_SSP_HANDLE is DAT_HANDLE");
static_assert(std::is_same<decltype(DAT_IW_SSP_PARAM::ssp_state),
			   DAT_IW_SSP_STATE>::value,
	      "ssp_state is a DAT_IW_SSP_STATE");
static_assert(std::is_standard_layout<DAT_IW_SSP_EVENT_DATA>::value,
	      "event data is plain C data");
#endif

static volatile int never;

// The four macros must expand to valid C++ as well.
static DAT_RETURN expand_all(DAT_IA_HANDLE ia, DAT_EP_HANDLE ep,
			     DAT_EVD_HANDLE evd)
{
	DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
	DAT_IW_SSP_PARAM param;
	char msg[] = "go";
	const char pd[2] = { 1, 2 };
	DAT_RETURN r = DAT_SUCCESS;

	r |= dat_iw_ssp_create(ia, 3, ep, evd, msg, sizeof(msg), &ssp);
	r |= dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_ALL, &param);
	r |= dat_iw_ssp_free(ssp);
	r |= dat_iw_socket_connect(ep, 3, DAT_TIMEOUT_INFINITE,
				   (DAT_COUNT)sizeof(pd), pd);
	return r;
}

int main()
{
	CHECK(DAT_IW_EXTENSION_VERSION == 200 &&
	      std::strcmp(DAT_IW_EXTENSION_VERSION_STR, "200") == 0,
	      "C++: version 200 / \"200\"");
	CHECK(std::strcmp(DAT_IW_ATTR_SSP, "DAT_IW_ATTR_SSP") == 0 &&
	      std::strcmp(DAT_EXTENSION_ATTR, "DAT_EXTENSION_INTERFACE") == 0,
	      "C++: attribute names");
	CHECK((int)DAT_IW_HANDLE_TYPE_SSP == (int)DAT_HANDLE_TYPE_EXTENSION_BASE,
	      "C++: SSP handle type is DAT_HANDLE_TYPE_EXTENSION_BASE");
	CHECK((int)DAT_CONNECTION_EVENT_SOCKET_DOWN ==
		      (int)DAT_IW_EXTENSION_RANGE_BASE,
	      "C++: SOCKET_DOWN is DAT_IW_EXTENSION_RANGE_BASE");
	CHECK(DAT_IW_SSP_FIELD_ALL ==
		      (DAT_IW_SSP_FIELD_IA_HANDLE | DAT_IW_SSP_FIELD_SOCKET_ID |
		       DAT_IW_SSP_FIELD_EVD_HANDLE | DAT_IW_SSP_FIELD_EP_HANDLE |
		       DAT_IW_SSP_FIELD_SSP_STATE) &&
	      DAT_IW_SSP_FIELD_EP_HANDLE == 0x08,
	      "C++: mask values");
	CHECK(offsetof(DAT_IW_SSP_PARAM, ia_handle) <
		      offsetof(DAT_IW_SSP_PARAM, socket_id) &&
	      offsetof(DAT_IW_SSP_PARAM, socket_id) <
		      offsetof(DAT_IW_SSP_PARAM, evd_handle) &&
	      offsetof(DAT_IW_SSP_PARAM, evd_handle) <
		      offsetof(DAT_IW_SSP_PARAM, ep_handle) &&
	      offsetof(DAT_IW_SSP_PARAM, ep_handle) <
		      offsetof(DAT_IW_SSP_PARAM, ssp_state),
	      "C++: DAT_IW_SSP_PARAM field order");
	CHECK(DAT_IW_SSP_CREATE_OP == 0x100 && DAT_IW_SSP_FREE_OP == 0x101 &&
	      DAT_IW_SSP_QUERY_OP == 0x102 && DAT_IW_SOCKET_CONNECT_OP == 0x103,
	      "C++: op codes are 0x100..0x103");
	{
		DAT_EVENT ev;
		int marker = 0;

		std::memset(&ev, 0, sizeof(ev));
		ev.event_number =
			(DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN;
		DAT_IW_SSP_EVENT_DATA_PTR(&ev)->ssp_handle = &marker;
		DAT_IW_SSP_EVENT_DATA_PTR(&ev)->socket_id = 7;
		DAT_EVENT copy = ev;
		CHECK(DAT_IW_EVENT_IS_SOCKET_DOWN(&copy) &&
		      DAT_IW_SSP_EVENT_DATA_PTR(&copy)->ssp_handle == &marker &&
		      DAT_IW_SSP_EVENT_DATA_PTR(&copy)->socket_id == 7,
		      "C++: SOCKET_DOWN event data round trips");
	}

	if (never)
		(void)expand_all(DAT_HANDLE_NULL, DAT_HANDLE_NULL,
				 DAT_HANDLE_NULL);
	CHECK_RET(dat_iw_ssp_free(DAT_HANDLE_NULL), DAT_INVALID_HANDLE,
		  "C++: dat_iw_ssp_free(NULL) -> DAT_INVALID_HANDLE");
	CHECK_RET(dat_iw_socket_connect(DAT_HANDLE_NULL, -1, 1000, 0, NULL),
		  DAT_INVALID_HANDLE,
		  "C++: dat_iw_socket_connect(NULL ep) -> DAT_INVALID_HANDLE");

	return tap_done();
}
