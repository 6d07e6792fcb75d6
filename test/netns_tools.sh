#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# netns_tools.sh [BUILDDIR]: Debian's dapl2-utils between two hosts; TAP.
#
# Two network namespaces joined by a veth pair (MTU 1500, netns_lib.sh),
# each with its own dat.conf naming its own address.  For each transport
# (udp, then tcp) test/debian_tools.sh (dtest in all its modes, dtestcm,
# dtestsrq) and test/dapltest_suite.sh (transaction, performance, limit,
# FFT, quit) run with every server in namespace B and every client in
# namespace A, reaching the server at B's address (tool_lib.sh's
# IW_TOOL_SERVER_PRE, IW_TOOL_CLIENT_PRE, IW_TOOL_HOST).  Their TAP is
# renumbered into this script's, each name prefixed with the transport.
#
# The quick run (make check's) shortens the two slowest parts: dtest runs
# with a burst of 50 and 1 MiB buffers (-B 50 -b 1048576: its defaults
# move 2000 x 4 MiB per mode, 100 Send ping-pongs of 4 MiB and 1000
# transfers per size with -a) and dapltest's large mixes do 500
# iterations.  IW_NETNS_LONG=1 runs both as on loopback (dtest's
# defaults, the loopback suites' iteration counts); IW_TOOL_DTEST_ARGS
# and IW_DAPLTEST_ITER override each.
# IW_NETNS_TRANSPORTS overrides the transport list.  Then debian_tools.sh
# and dapltest_suite.sh run once more over udp with IW_NETNS_TOOLS_LOSS %
# (1; 0: not at all) of the UDP packets each namespace receives dropped.
# Needs root, ip and nft: skipped otherwise, and skipped where Debian's
# tools are (IW_SKIP_DEBIAN_TOOLS).  Outputs stay in BUILDDIR/test/netns_tools.d/
# and BUILDDIR/test/*-iw-ns-TRANSPORT.d/ (*-iw-ns-udp-loss.d/ for the
# lossy run).

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "${DAT_OVERRIDE:-./dat.conf}")}
build=$(cd "$build" && pwd) || exit 99
out=$build/test/netns_tools.d
lib=$build/.libs/libdaploiw.so.2
# shellcheck source=test/netns_lib.sh
. "$here/netns_lib.sh"

if [ -n "$IW_SKIP_DEBIAN_TOOLS" ]; then
	netns_skip "Debian tools already run against this build's twin"
fi
[ -e "$lib" ] || netns_skip "no provider in $build (build first)"
mkdir -p "$out" || exit 99
netns_setup
if [ -z "$IW_NETNS_LONG" ]; then
	IW_TOOL_DTEST_ARGS=${IW_TOOL_DTEST_ARGS--B 50 -b 1048576}
	IW_DAPLTEST_ITER=${IW_DAPLTEST_ITER:-500}
else
	# dtest -W -a with its defaults took over 120 s over udp here
	IW_TOOL_TIMEOUT=${IW_TOOL_TIMEOUT:-600}
fi
export IW_TOOL_DTEST_ARGS IW_DAPLTEST_ITER IW_TOOL_TIMEOUT

n=0 failed=0
# run_sub NAME SCRIPT: runs SCRIPT, prints its TAP renumbered, names prefixed
# with NAME; a script that fails with no failed point counts as one.
run_sub() {
	log=$out/$1.$(basename "$2" .sh).tap
	sh "$2" "$build" >"$log" 2>&1
	st=$?
	awk -v pre="$1" -v n="$n" '
		/^1\.\.0/ { sub(/^1\.\.0 *# */, ""); print "ok " ++n " - " pre " # " $0; next }
		/^1\.\.[0-9]+/ { next }
		/^(not )?ok [0-9]+/ {
			res = /^not/ ? "not ok" : "ok"
			sub(/^(not )?ok [0-9]+ *(- )?/, "")
			print res " " ++n " - " pre (/^#/ ? " " : ": ") $0
			next
		}
		{ print }' "$log"
	points=$(grep -c -E '^(not )?ok [0-9]+|^1\.\.0' "$log")
	bad=$(grep -E '^not ok' "$log" | grep -c -v '# TODO')
	n=$((n + points))
	failed=$((failed + bad))
	if [ "$st" -ne 0 ] && [ "$bad" -eq 0 ]; then
		n=$((n + 1))
		failed=$((failed + 1))
		echo "not ok $n - $1: $(basename "$2") exited with status $st (log $log)"
	fi
}

# use_transport TR [IA]: the tools' IA (iw-ns-TR), host and namespace
# prefixes for TR; the IA's name also names the tools' log directories.
use_transport() {
	ia=${2:-iw-ns-$1}
	netns_conf "$out/$ia.a.conf" "$lib" "$ia" "$ADDR_A" "$1"
	netns_conf "$out/$ia.b.conf" "$lib" "$ia" "$ADDR_B" "$1"
	IW_TOOL_IA=$ia IW_TOOL_HOST=$ADDR_B
	IW_TOOL_SERVER_PRE="ip netns exec $NS_B env DAT_OVERRIDE=$out/$ia.b.conf"
	IW_TOOL_CLIENT_PRE="ip netns exec $NS_A env DAT_OVERRIDE=$out/$ia.a.conf"
	export IW_TOOL_IA IW_TOOL_HOST IW_TOOL_SERVER_PRE IW_TOOL_CLIENT_PRE
}

for tr in ${IW_NETNS_TRANSPORTS:-udp tcp}; do
	use_transport "$tr"
	echo "# $tr: servers in $NS_B ($ADDR_B), clients in $NS_A ($ADDR_A)"
	start=$(date +%s)
	run_sub "$tr" "$here/debian_tools.sh"
	run_sub "$tr" "$here/dapltest_suite.sh"
	echo "# $tr: $(($(date +%s) - start)) s"
done

# Debian's tools again over udp with IW_NETNS_TOOLS_LOSS % (default 1; 0: not
# run) of the UDP packets each namespace receives dropped by nftables:
# real clients on a lossy link, which TRP recovers from (doc/trp.md; a
# lost request or answer, a tail, by its probe timeout).
loss=${IW_NETNS_TOOLS_LOSS:-1}
case $loss in
'' | *[!0-9]*) echo "Bail out! IW_NETNS_TOOLS_LOSS: a whole per cent, not '$loss'"; exit 99 ;;
esac
case " ${IW_NETNS_TRANSPORTS:-udp tcp} " in
*" udp "*) ;;
*) loss=0 ;;
esac
if [ "$loss" -gt 0 ]; then
	use_transport udp iw-ns-udp-loss
	netns_loss "$NS_A" "$loss" && netns_loss "$NS_B" "$loss" || exit 99
	start=$(date +%s)
	run_sub "udp, $loss % loss" "$here/debian_tools.sh"
	run_sub "udp, $loss % loss" "$here/dapltest_suite.sh"
	echo "# udp, $loss % loss: $(($(date +%s) - start)) s, $(netns_loss_drops "$NS_A") and $(netns_loss_drops "$NS_B") packets dropped"
	netns_loss "$NS_A" 0
	netns_loss "$NS_B" 0
fi
echo "1..$n"
[ "$failed" -eq 0 ]
