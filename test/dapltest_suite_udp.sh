#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# dapltest_suite_udp.sh [BUILDDIR]: test/dapltest_suite.sh over the udp
# transport: the build's iw-lo-udp IA, RDMAP/DDP over TRP/UDP on
# loopback; TAP.
here=$(cd "$(dirname "$0")" && pwd)
IW_TOOL_IA=iw-lo-udp
export IW_TOOL_IA
exec sh "$here/dapltest_suite.sh" "$@"
