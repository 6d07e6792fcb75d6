#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench/profile.sh [--out DIR] [--crc 0|1] [--seconds S] [--top N] CASE [BUILDDIR]
#
# Runs one benchmark case with both sides under `perf record` and prints
# the top entries of `perf report --stdio --no-children` for each side,
# for before/after profiles of the provider.  CASE is one of
#   write-rate   64 B RDMA Writes, window 32 (message rate), blocking
#   read-rate    64 B RDMA Reads, window 32, blocking
#   send-rate    64 B Sends, window 32, blocking
#   write-64k    64 KiB RDMA Writes (bandwidth), blocking
#   write-1m     1 MiB RDMA Writes (bandwidth), blocking
#   pp-poll      8 B ping-pong, polling (spinning dat_evd_dequeue)
#   pp-block     8 B ping-pong, blocking (dat_evd_wait)
#   connect-psp  connect-accept-disconnect cycles over a PSP (bench/iwcm)
#   connect-ssp  the same over SSP upgrades
# The iwdtest cases run for S seconds (default 5); the ping-pong and
# connection cases for a fixed count sized to take about as long.  The
# connection cases profile the client and its forked server in one file.
#
# DIR (default bench/profile-CASE-YYYYmmdd-HHMMSS/) keeps server.perf.data,
# client.perf.data (or both.perf.data), the reports and the tools' output;
# open one with `perf report -i DIR/client.perf.data`.
# Environment: PERF_EVENT (default: cycles when the CPU exposes them, else
# cpu-clock, as in virtual machines), PERF_CALLGRAPH (perf record's
# --call-graph, default fp; "dwarf" unwinds code built without frame
# pointers, at a much larger data file), PERF_FREQ (samples/s, 2999).
usage() {
	sed -n '3,3p;6,15p' "$0" | sed 's/^# //' >&2
	exit 2
}

out= crc=0 secs=5 ntop=25
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--crc) crc=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--top) ntop=$2; shift 2 ;;
	-h|--help) usage ;;
	-*) echo "profile.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case=$1
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench_lib.sh
. "$here/bench_lib.sh"
bench_setup "$2"
command -v perf >/dev/null 2>&1 || { echo "profile.sh: perf not installed (Debian linux-perf)" >&2; exit 1; }

if [ -z "$PERF_EVENT" ]; then
	PERF_EVENT=cpu-clock
	perf stat -x, -e cycles true 2>&1 | grep -q '^[0-9]' && PERF_EVENT=cycles
fi
out=${out:-$top/bench/profile-$case-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
rec="perf record -q -e $PERF_EVENT -F ${PERF_FREQ:-2999} --call-graph ${PERF_CALLGRAPH:-fp}"

iw_case() {	# iw_case "SERVER ARGS" "CLIENT ARGS"
	srv_pre="$rec -o $out/server.perf.data --"
	cli_pre="$rec -o $out/client.perf.data --"
	pair_env="IWDAPL_CRC=$crc"
	iw_pair "$1 -w 30" "$2 -w 30" "$out/iwdtest.out"
}

cm_case() {	# cm_case MODE CYCLES
	next_qual
	IWDAPL_CRC=$crc timeout -k 5 "$limit" $rec -o "$out/both.perf.data" -- \
		"$iwcm" -m "$1" -n "$2" -q "$qual" >"$out/iwcm.out" 2>&1
}

rate="-S 64 -t $secs --window 32 --no-verify"
case $case in
# The server checks every transfer unless told not to (as in bench/run.sh).
write-rate) iw_case --no-verify "-m write $rate" ;;
read-rate) iw_case --no-verify "-m read $rate" ;;
send-rate) iw_case --no-verify "-m send $rate" ;;
write-64k) iw_case --no-verify "-m write -S 64K -t $secs --no-verify" ;;
write-1m) iw_case --no-verify "-m write -S 1M -t $secs --no-verify" ;;
pp-poll) iw_case "-p" "-p -m pingpong -S 8 -n $(awk -v s="$secs" 'BEGIN { print int(s * 50000) }')" ;;
pp-block) iw_case "" "-m pingpong -S 8 -n $(awk -v s="$secs" 'BEGIN { print int(s * 20000) }')" ;;
connect-psp) cm_case psp "$(awk -v s="$secs" 'BEGIN { print int(s * 2000) }')" ;;
connect-ssp) cm_case ssp "$(awk -v s="$secs" 'BEGIN { print int(s * 1500) }')" ;;
*) echo "profile.sh: unknown case $case" >&2; usage ;;
esac
st=$?
for f in "$out"/iwdtest.out "$out"/iwcm.out; do
	[ -r "$f" ] && { echo "== $(basename "$f") (case $case, IWDAPL_CRC=$crc)"; cat "$f"; }
done
[ $st -eq 0 ] || { echo "profile.sh: the run failed" >&2; cat "$out"/*.err 2>/dev/null >&2; }

for side in server client both; do
	data=$out/$side.perf.data
	[ -r "$data" ] || continue
	perf report -i "$data" --stdio --no-children -g none --percent-limit 0.3 \
		--sort comm,dso,symbol >"$out/$side.report.txt" 2>"$out/$side.report.err"
	echo
	echo "== $side: top $ntop of perf report --no-children ($PERF_EVENT; full: $out/$side.report.txt)"
	grep -v '^#' "$out/$side.report.txt" | grep -v '^[[:space:]]*$' |
		sed 's/[[:space:]-]*$//' | head -n "$ntop"
done
exit $st
