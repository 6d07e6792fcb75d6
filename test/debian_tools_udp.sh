#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# debian_tools_udp.sh [BUILDDIR]: test/debian_tools.sh over the udp
# transport: the build's iw-lo-udp IA, RDMAP/DDP over TRP/UDP on
# loopback; TAP.
here=$(cd "$(dirname "$0")" && pwd)
IW_TOOL_IA=iw-lo-udp
# dtest's memory-polling RDMA Write ping-pong (-W -a: 1000 round trips at
# each of 64 sizes) keeps both CPUs of a 2-CPU machine spinning, so each
# round trip waits for a time slice of the progress thread; over TRP a
# round trip costs more system calls than over TCP and the run took
# 3 minutes under load.  100 round trips per size (-B) keep it within
# the tools' time limit and still cross every size.
IW_TOOL_DTEST_ARGS=${IW_TOOL_DTEST_ARGS--B 100}
export IW_TOOL_IA IW_TOOL_DTEST_ARGS
exec sh "$here/debian_tools.sh" "$@"
