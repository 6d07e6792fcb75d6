#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The main job on the loopback IA: installs what is missing, builds, and
# shows the provider working through Debian's DAT registry: the IA's
# attributes, an RDMA transfer with data validation over TCP and over UDP,
# and a TCP socket upgraded to RDMA with a Socket Service Point.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
-h | --help)
	cat <<EOF
usage: scripts/demo.sh

Installs the Debian packages the build needs (scripts/deps.sh; as root or
with sudo), builds into build/ (or uses the tree itself when ./configure
was run in it), and runs the provider through Debian's DAT registry on the
loopback IA iw-lo: iwinfo, an RDMA transfer with data validation, the same
over UDP (iw-lo-udp), over a TCP socket upgraded with a Socket Service
Point, and the SSP
examples.  Nothing is installed into the system's library or /etc/dat.conf:
DAT_OVERRIDE points the registry at the build's dat.conf.
EOF
	exit 0 ;;
'') ;;
*) echo "usage: scripts/demo.sh [--help]" >&2; exit 2 ;;
esac
. "$top/scripts/deps.sh"
if [ -f "$top/config.status" ]; then
	# ./configure ran in the source tree itself: build and run there
	# (automake cannot build out of tree next to an in-tree build).
	echo "== building in $top (configured in place)"
	b="$top"
	make -C "$b" -j"$(nproc)" -s >/dev/null
else
	"$top/scripts/build.sh" "$top/build"
	b="$top/build"
fi
export DAT_OVERRIDE="$b/dat.conf"
echo "== dat.conf: $DAT_OVERRIDE"
head -1 "$DAT_OVERRIDE"
echo
echo "== iwinfo: open iw-lo through libdat2 and print dat_ia_query"
"$b/examples/iwinfo" iw-lo
echo
echo "== iwdtest: RDMA write, read, send and ping-pong over iw-lo, data validated"
q=$((50000 + $$ % 10000))
"$b/test/dtest/iwdtest" -s -q "$q" >"$b/demo-server.log" 2>&1 &
srv=$!
"$b/test/dtest/iwdtest" -h 127.0.0.1 -q "$q" -S 64,4K,64K,1M -t 0.5
wait "$srv"
echo
echo "== iwdtest -P iw-lo-udp: the same transfers over UDP datagrams (TRP)"
q=$((q + 1))
"$b/test/dtest/iwdtest" -s -P iw-lo-udp -q "$q" >"$b/demo-server-udp.log" 2>&1 &
srv=$!
"$b/test/dtest/iwdtest" -h 127.0.0.1 -P iw-lo-udp -q "$q" -S 64,4K,64K,1M -t 0.5
wait "$srv"
echo
echo "== iwdtest --ssp: the same transfers over a TCP socket upgraded to RDMA"
q=$((q + 1))
"$b/test/dtest/iwdtest" -s --ssp -q "$q" >"$b/demo-server-ssp.log" 2>&1 &
srv=$!
"$b/test/dtest/iwdtest" -h 127.0.0.1 --ssp -q "$q" -S 64,64K -t 0.5
wait "$srv"
if [ -x "$b/examples/ssp_upgrade" ]; then
	echo
	echo "== ssp_upgrade: a TCP socket negotiates, then becomes an RDMA connection"
	"$b/examples/ssp_upgrade" --self-test
	echo
	echo "== ssp_upgrade -u: the same with a connected UDP socket and iw-lo-udp"
	IWDAPL_IA=iw-lo-udp "$b/examples/ssp_upgrade" -u --self-test
fi
if [ -x "$b/examples/ssp_handoff" ]; then
	echo
	echo "== ssp_handoff: a child process upgrades the socket it inherited"
	"$b/examples/ssp_handoff" --self-test
fi
