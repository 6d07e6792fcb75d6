#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# examples.sh [BUILDDIR]: the SSP examples' self-tests over both
# transports; TAP.  ssp_upgrade negotiates over a plain socket and
# upgrades it (round 1, RDMA) or keeps streaming (round 2, a client
# without RDMA); ssp_handoff hands each end of a connection to a child
# that upgrades it.  Over tcp with IA iw-lo on TCP sockets, over udp
# (-u) with iw-lo-udp on connected UDP sockets.  Outputs in
# BUILDDIR/test/examples.d/.
build=$(cd "${1:-.}" && pwd) || exit 1
: "${DAT_OVERRIDE:=$build/dat.conf}"
export DAT_OVERRIDE
out=$build/test/examples.d
mkdir -p "$out" || exit 1
n=0

# case NAME IA WANT PROGRAM ARGS...: exit 0 and every WANT line printed
case_() {
	name=$1 ia=$2 want=$3
	shift 3
	n=$((n + 1))
	log=$out/$name.log
	IWDAPL_IA=$ia timeout -k 5 60 "$@" >"$log" 2>&1
	st=$?
	miss=$(printf '%s\n' "$want" | while IFS= read -r w; do
		grep -qF -- "$w" "$log" || echo "$w"
	done)
	if [ "$st" -eq 0 ] && [ -z "$miss" ]; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name (exit $st${miss:+; missing: $miss})"
		tail -n 15 "$log" | sed 's/^/#   /'
	fi
}

up=$build/examples/ssp_upgrade
ho=$build/examples/ssp_handoff
rounds="self-test: RDMA mode, client exit 0 (want RDMA)
self-test: streaming mode, client exit 0 (want streaming)"
case_ ssp_upgrade-tcp iw-lo "$rounds" "$up" --self-test
case_ ssp_upgrade-udp iw-lo-udp "$rounds" "$up" -u --self-test
case_ ssp_handoff-tcp iw-lo "ssp_handoff: passed" "$ho" --self-test
case_ ssp_handoff-udp iw-lo-udp "ssp_handoff: passed" "$ho" -u --self-test
# A TCP socket handed to a udp IA is refused, and the example says so.
n=$((n + 1))
if IWDAPL_IA=iw-lo-udp timeout -k 5 60 "$ho" --self-test >"$out/mismatch.log" 2>&1; then
	echo "not ok $n - a TCP socket on a udp IA is refused (the run passed)"
elif grep -q 'DAT_INVALID_STATE' "$out/mismatch.log"; then
	echo "ok $n - a TCP socket on a udp IA is refused (DAT_INVALID_STATE)"
else
	echo "not ok $n - a TCP socket on a udp IA is refused with DAT_INVALID_STATE"
	tail -n 15 "$out/mismatch.log" | sed 's/^/#   /'
fi
echo "1..$n"
