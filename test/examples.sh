#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# examples.sh [BUILDDIR]: the SSP examples' self-tests over both
# transports; TAP.  ssp_upgrade negotiates over a plain socket and
# upgrades it (round 1, RDMA) or keeps streaming (round 2, a client
# without RDMA); ssp_handoff hands each end of a connection to a child
# that upgrades it.  Over tcp with IA iw-lo on TCP sockets, over udp
# (-u) with iw-lo-udp on connected UDP sockets.  Outputs in
# BUILDDIR/test/examples.d/.  Last, iwdtest --ssp upgrades a TCP and a
# UDP socket the same way.
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

# iwdtest --ssp: negotiate over a plain socket on the qualifier's port,
# then upgrade it and run validated transfers.  Over udp the client starts
# first too: its hellos are refused until the server binds, and repeated.
iwd=$build/test/dtest/iwdtest
# iwd_ssp NAME IA QUAL CLIENT_FIRST
iwd_ssp() {
	n=$((n + 1))
	srv="$iwd -s --ssp -P $2 -q $3 -w 30"
	cli="$iwd -h 127.0.0.1 --ssp -P $2 -q $3 -w 30 -S 8,64K -m write,read,send -t 0.1"
	if [ "$4" = 1 ]; then
		timeout -k 5 60 $cli >"$out/$1.client.log" 2>&1 &
		pid=$!
		sleep 1
		timeout -k 5 60 $srv >"$out/$1.server.log" 2>&1
		sst=$?
		wait "$pid"
		cst=$?
	else
		timeout -k 5 60 $srv >"$out/$1.server.log" 2>&1 &
		pid=$!
		timeout -k 5 60 $cli >"$out/$1.client.log" 2>&1
		cst=$?
		wait "$pid"
		sst=$?
	fi
	oks=$(grep -c ' OK ' "$out/$1.client.log")
	if [ "$sst" -eq 0 ] && [ "$cst" -eq 0 ] && [ "$oks" -eq 6 ] &&
	   ! grep -q FAIL "$out/$1.client.log"; then
		echo "ok $n - $1 (6 validated tests over an upgraded socket)"
	else
		echo "not ok $n - $1 (server $sst, client $cst, $oks of 6 validated)"
		tail -n 8 "$out/$1.server.log" "$out/$1.client.log" | sed 's/^/#   /'
	fi
}
q=$((20000 + $$ % 20000))
iwd_ssp iwdtest-ssp-tcp iw-lo "$q" 0
iwd_ssp iwdtest-ssp-udp iw-lo-udp "$((q + 1))" 0
iwd_ssp iwdtest-ssp-udp-client-first iw-lo-udp "$((q + 2))" 1
echo "1..$n"
