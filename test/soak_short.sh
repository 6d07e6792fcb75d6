#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# soak_short.sh [BUILDDIR]: a short soak in make check, TAP: bench/soak.sh
# with IW_SOAK_CYCLES (default 1000) connect/transfer/disconnect cycles
# and IW_SOAK_MINUTES (default 1) of dapltest traffic, sampling every
# second; every run must be clean and the provider processes' resident
# set, descriptors and threads flat (doc/testing.md, "Soak").  Outputs
# in BUILDDIR/test/soak_short.d/.  IW_SKIP_DEBIAN_TOOLS (set for the
# valgrind tree, whose twin ran this) or IW_SKIP_SOAK skip it.
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "$IW_SKIP_DEBIAN_TOOLS" ] || [ -n "$IW_SKIP_SOAK" ]; then
	echo "1..0 # SKIP the soak already ran against this build's twin"
	exit 0
fi
ia=iw-lo
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"
tool_setup "$1" soak_short
rm -rf "$logdir"
# Short dapltest runs, so a minute holds many of them (and the warm-up).
SOAK_DT_ITER=${SOAK_DT_ITER:-500}
export SOAK_DT_ITER
exec sh "$here/../bench/soak.sh" --cycles "${IW_SOAK_CYCLES:-1000}" \
	--minutes "${IW_SOAK_MINUTES:-1}" --interval 1 --out "$logdir" "$builddir"
