#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# poll_yield.sh [BUILDDIR]: pollers that share a CPU yield it (TAP).
# An iwdtest 8-byte polling ping-pong with server and client pinned to
# one CPU, spinning on dat_evd_dequeue (-p) and on dat_evd_wait with a
# timeout of 0 (--poll-wait0): with IWDAPL_POLL_YIELD_US=50 a poller that
# found its EVD empty for 50 us yields, and the one holding the answer
# runs at once; with 0 (never) each spins out its time slice first.  The
# yielding runs must be at least twice as fast as the spinning one (about
# 8x on a 2-CPU VM: 92 us one way against 791) and under 1 ms one way.
# doc/semantics.md describes the knob.  Outputs in
# BUILDDIR/test/poll_yield.d/.
build=$(cd "${1:-.}" && pwd) || exit 1
: "${DAT_OVERRIDE:=$build/dat.conf}"
export DAT_OVERRIDE
out=$build/test/poll_yield.d
mkdir -p "$out" || exit 1
iwd=$build/test/dtest/iwdtest
n=0
echo "1..3"
if [ -n "$IW_SKIP_DEBIAN_TOOLS" ] || ! command -v taskset >/dev/null 2>&1; then
	# The valgrind tree sets it: time slices there are valgrind's.
	for k in 1 2 3; do echo "ok $k # SKIP valgrind tree or no taskset"; done
	exit 0
fi
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')

# pp NAME YIELD_US POLL_FLAG: one pinned ping-pong; prints its mean one-way
# latency in us (empty when it failed; the logs say why).
pp() {
	q=$((20000 + ($$ + n * 7 + $2) % 20000))
	IWDAPL_POLL_YIELD_US=$2 timeout -k 5 60 taskset -c "$cpu" \
		"$iwd" -s "$3" -q "$q" -w 20 >"$out/$1.server.log" 2>&1 &
	pid=$!
	IWDAPL_POLL_YIELD_US=$2 timeout -k 5 60 taskset -c "$cpu" \
		"$iwd" -h 127.0.0.1 "$3" -q "$q" -w 20 -m pingpong -S 8 -n 300 \
		--csv >"$out/$1.client.log" 2>&1
	wait "$pid"
	awk -F, '$1 == "pingpong" && $7 == "OK" { print $6 }' "$out/$1.client.log"
}

# fast Y SPIN: Y under 1000 us and under half of SPIN (decimals)
fast() { awk -v y="$1" -v s="$2" 'BEGIN { exit !(y + 0 < 1000 && 2 * y < s + 0) }'; }

spin=$(pp spin 0 -p)
n=$((n + 1))
if [ -n "$spin" ]; then
	echo "ok $n - pinned ping-pong without yields runs (one way $spin us)"
else
	echo "not ok $n - pinned ping-pong without yields runs"
	tail -n 5 "$out/spin.server.log" "$out/spin.client.log" | sed 's/^/#   /'
fi
for how in -p --poll-wait0; do
	name=yield$how
	y=$(pp "$name" 50 "$how")
	n=$((n + 1))
	if [ -n "$y" ] && [ -n "$spin" ] && fast "$y" "$spin"; then
		echo "ok $n - pollers sharing a CPU yield ($how): one way $y us, $spin without"
	else
		echo "not ok $n - pollers sharing a CPU yield ($how): one way '$y' us, '$spin' without (want under 1000 and half)"
		tail -n 5 "$out/$name.server.log" "$out/$name.client.log" | sed 's/^/#   /'
	fi
done
