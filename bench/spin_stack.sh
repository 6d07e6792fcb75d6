#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench/spin_stack.sh [--trials N] [BUILDDIR]
#
# How often a memory-polling ping-pong falls into the scheduler's stacked
# mode -- both spinning processes on one CPU, every message waiting for
# that CPU's next tick (1-4 ms) for the rest of the run -- through the
# provider and without it.  N (default 100) short runs of iwdtest -m wpp
# at 8 B (CRC on, 0.1 s each): with the progress thread's default weight
# (nice -10 where the process may), and with IWDAPL_PROGRESS_NICE=0 (what
# a process without CAP_SYS_NICE gets), and with CRC off and the
# completions reaped by polls (-p); the CQ-polling Send ping-pong (-p) at
# 8 B (CRC off), alone and beside a busy loop at nice 19 (a low-priority
# job the kernel once left the two pollers stacked beside; a poller whose
# yields come back late now moves off its CPU, iw_poll_cpu.c); then
# bench/spin_stack's three provider-free kinds of trial (two spinners;
# with a helper thread per process woken at every message; the helpers
# pinned to the last CPU).  A run is stacked when its median one-way time
# is over 100 us.
# Environment: BENCH_SECONDS (per run, default 0.1).
here=$(cd "$(dirname "$0")" && pwd)
trials=100
while [ $# -gt 0 ]; do
	case $1 in
	--trials) trials=$2; shift 2 ;;
	-h | --help) sed -n '3,4p' "$0" | sed 's/^# //'; exit 0 ;;
	-*) echo "spin_stack.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $trials in '' | *[!0-9]*) echo "spin_stack.sh: --trials wants a number" >&2; exit 2 ;; esac
# shellcheck source=bench/bench_lib.sh
. "$here/bench_lib.sh"
bench_setup "$1"
secs=${BENCH_SECONDS:-0.1}
probe=$build/bench/spin_stack
[ -x "$probe" ] || { echo "spin_stack.sh: $probe missing (make -C $build)" >&2; exit 1; }

# trials MODE LABEL CRC POLL [VAR=VALUE...]: the stacked runs of $trials
# iwdtest pairs of MODE (wpp or pingpong) at 8 B, CRC on (1) or off (0),
# reaping by dat_evd_wait (POLL "") or by polling (-p).
trials() {
	mode=$1 label=$2 crc=$3 pf=$4
	shift 4
	stacked=0 done=0 meds=
	t=0
	while [ "$t" -lt "$trials" ]; do
		t=$((t + 1))
		next_qual
		l=$work/wpp.$t
		# shellcheck disable=SC2086
		env "$@" IWDAPL_CRC="$crc" timeout -k 5 "$limit" "$iwdtest" -s -q "$qual" -w 20 \
			$pf >/dev/null 2>"$l.srv" &
		sp=$!
		sleep 0.2
		# shellcheck disable=SC2086
		env "$@" IWDAPL_CRC="$crc" timeout -k 5 "$limit" "$iwdtest" -h 127.0.0.1 -q "$qual" \
			-w 20 $pf --csv -m "$mode" -S 8 -t "$secs" >"$l" 2>"$l.err"
		wait "$sp"
		m=$(awk -F, -v m="$mode" '$1 == m { print $10 }' "$l")
		[ -n "$m" ] || continue
		done=$((done + 1))
		meds="$meds $m"
		awk -v m="$m" 'BEGIN { exit !(m > 100) }' && stacked=$((stacked + 1))
	done
	med=$(echo "$meds" | tr ' ' '\n' | awk 'NF' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) printf "%.3f", v[int((NR + 1) / 2)] }')
	printf '%-32s %4d runs, %3d stacked, median one-way %s us\n' "$label" "$done" \
		"$stacked" "${med:--}"
}

echo "== stacked runs: median one-way over 100 us ($trials runs of ${secs} s each; $(nproc) CPUs)"
trials wpp "iwdapl wpp 8 B, default" 1 "" X_BENCH=1
trials wpp "iwdapl wpp 8 B, nice 0" 1 "" IWDAPL_PROGRESS_NICE=0
# The faster the progress thread's wake-up, the likelier the stack: CRC
# off, reaping by polls (doc/performance.md, "Stacked spinners").
trials wpp "iwdapl wpp 8 B, CRC off, -p" 0 -p X_BENCH=1
trials pingpong "iwdapl Send pp 8 B, -p" 0 -p X_BENCH=1
# A low-priority job beside them, in this shell's autogroup, gone with
# the trials (or at exit, if they are cut short).
nice -n 19 sh -c 'while :; do :; done' &
loop=$!
at_exit="kill $loop 2>/dev/null"
trials pingpong "iwdapl Send pp 8 B, -p, nice 19" 0 -p X_BENCH=1
kill "$loop"
wait "$loop" 2>/dev/null
at_exit=
"$probe" --csv -r "$trials" -t "$secs" | awk -F, 'NR > 1 {
	printf "%-32s %4d runs, %3d stacked, median one-way %s us\n", "no provider, " $1, $2, $3, $4
}'
