#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# build.sh DIR [configure options...]: configure and build out of tree in DIR,
# the library, the tools and the test programs (IW_CHECK_PROGRAMS, when
# set, names the only test programs to build).
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/build.sh DIR [configure options...]"
case ${1:-} in
'') echo "$usage" >&2; exit 2 ;;
-h | --help) echo "$usage"; exit 0 ;;
esac
dir=$1; shift
if [ -f "$top/config.status" ] && [ "$(mkdir -p "$dir" && cd "$dir" && pwd)" != "$top" ]; then
	echo "build.sh: $top was configured in place (./configure ran there), and an" >&2
	echo "out-of-tree build in $dir cannot share the tree with it.  Run" >&2
	echo "  make -C $top distclean" >&2
	echo "then run this again (scripts/demo.sh alone also works in the configured tree)." >&2
	exit 1
fi
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null)
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$top/configure" -q --enable-werror "$@"
make -j"$(nproc)" -s >/dev/null
make -j"$(nproc)" -s check TESTS= \
	${IW_CHECK_PROGRAMS:+check_PROGRAMS="$IW_CHECK_PROGRAMS"} >/dev/null
