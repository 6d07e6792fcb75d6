#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# dapltest_suite_udp.sh [BUILDDIR]: test/dapltest_suite.sh over the udp
# transport: the build's iw-lo-udp IA, RDMAP/DDP over TRP/UDP on
# loopback; TAP.
here=$(cd "$(dirname "$0")" && pwd)
IW_TOOL_IA=iw-lo-udp
# Over TRP a Send or RDMA Write completes when the peer acknowledges it,
# so a waiting (not polling) consumer sleeps through a round trip of both
# progress threads for each one: dapltest's 4-thread x 8-EP wait mix at
# 10000 iterations took 95 s to over 120 s (the tools' limit) on a loaded
# 2-CPU machine, against 38 s over TCP.  The large mixes run 2000
# iterations here (as in the sanitizer tree); the TCP suite keeps 10000.
IW_DAPLTEST_ITER=${IW_DAPLTEST_ITER:-2000}
export IW_TOOL_IA IW_DAPLTEST_ITER
exec sh "$here/dapltest_suite.sh" "$@"
