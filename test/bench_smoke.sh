#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench_smoke.sh [BUILDDIR]: a smoke test of the benchmark (TAP).  Runs
# bench/run.sh --quick into a scratch directory and checks that it ran end
# to end: every expected row is in results.csv with valid=1 (the quick run
# checks every transferred byte), the consumer patterns' rows among them
# (a small and a large size of each), the figures are plausible (positive
# rates, median <= p99 <= max), the summary, the report with its target
# lines and the plots exist, the table of system costs per message (or,
# without perf, the line that says why not); and that a corrupted
# transfer does show as
# invalid (iwdtest --corrupt, a classic mode and a pattern), and that
# bench/spin_stack.sh runs (one run of each kind).  Some 30 s
# on an idle 2-CPU machine.
#
# BUILDDIR defaults to the directory of $DAT_OVERRIDE (make check sets it).
# The run's directory is kept in BUILDDIR/test/bench_smoke.d/ for diagnosis.
# IW_SKIP_BENCH=1 (or IW_SKIP_DEBIAN_TOOLS=1, as in scripts/test.sh's
# valgrind tree) skips it.

here=$(cd "$(dirname "$0")" && pwd)
ia=iw-lo
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"
tool_setup "$1" bench_smoke

echo "1..12"
# Not in the valgrind tree: nothing runs under valgrind here, and the same
# code ran in the plain tree.
if [ -n "$IW_SKIP_BENCH$IW_SKIP_DEBIAN_TOOLS" ]; then
	for k in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "ok $k # SKIP IW_SKIP_BENCH or IW_SKIP_DEBIAN_TOOLS set"; done
	exit 0
fi
res=$logdir/run
rm -rf "$res"
timeout -k 5 300 sh "$here/../bench/run.sh" --quick --out "$res" "$builddir" \
	>"$logdir/run.out" 2>&1
st=$?
why=
[ $st -eq 0 ] || why="bench/run.sh --quick exit status $st"
tap_result "bench/run.sh --quick runs end to end" "$why" "$logdir/run.out"

csv=$res/results.csv
hdr=round,transport,crc,mode,op,size,window,iterations,seconds,MBps,msgs_per_s,lat_mean_us,lat_median_us,lat_p99_us,lat_max_us,rss_per_ep,heap_per_ep,valid
why=
[ "$(head -n1 "$csv" 2>/dev/null)" = "$hdr" ] || why="results.csv header is: $(head -n1 "$csv" 2>/dev/null)"
tap_result "results.csv has the documented columns" "$why"

# Every row the quick run must produce: transport,crc,mode,op,size.
expected() {
	for crc in 0 1; do
		for op in write read send; do
			for s in 64 65536 1048576; do echo "iwdapl,$crc,block,$op,$s"; done
		done
		for m in block poll poll_wait0; do echo "iwdapl,$crc,$m,pingpong,8"; done
	done
	for s in 64 65536 1048576; do echo "tcp,-,block,stream,$s"; done
	echo "tcp,-,block,pingpong,8"
	echo "tcp,-,poll,pingpong,8"
	echo "tcp,-,block,connect_tcp,0"
	# Requests now and then (2 ms apart), both sides.
	for t in iwdapl,0 tcp,-; do
		for s in 8 65536; do echo "$t,block_gap,pingpong,$s"; done
	done
	for op in connect_psp connect_ssp ssp_upgrade ssp_upgrade_active ssp_upgrade_passive \
		mem_ep_idle mem_ep_connected_active mem_ep_connected_passive; do
		echo "iwdapl,0,block,$op,0"
	done
	# The udp transport (the build's dat.conf has iw-lo-udp); both
	# transports at MTU 1500 in a namespace when root.
	udp_tags="udp udp1500"
	[ "$(id -u)" = 0 ] && udp_tags="$udp_tags tcp_ns1500 udp_ns1500"
	for t in $udp_tags; do
		for s in 64 4096 65536 1048576; do echo "$t,-,block,write,$s"; done
		for m in block poll; do echo "$t,-,$m,pingpong,8"; done
	done
	# The consumer patterns (bench/patterns.sh) at --quick's sizes.
	for crc in 0 1; do
		for s in 8 1048576; do
			for m in block poll; do echo "iwdapl,$crc,$m,wpp,$s"; done
			echo "iwdapl,$crc,poll,pingpong_sweep,$s"
			echo "iwdapl,$crc,block,bibw,$s"
		done
		for s in 4096 1048576; do
			for m in block poll; do
				echo "iwdapl,$crc,$m,rdv,$s"
				echo "iwdapl,$crc,$m,rdvw,$s"
			done
			echo "iwdapl,$crc,block,rdvstream,$s"
		done
	done
	for s in 8 4096 1048576; do
		for m in block poll; do echo "tcp,-,$m,pingpong_sweep,$s"; done
	done
	for s in 4096 1048576; do echo "tcp,-,block,stream_sweep,$s"; done
	for s in 8 1048576; do echo "tcp,-,block,bidir,$s"; echo "tcp,-,block,bidir1,$s"; done
	for s in 8 1048576; do echo "tcp,-,block,wpp_handoff,$s"; done
	for t in iwdapl,0 tcp,-; do
		for m in block poll; do
			for op in twopair twopair_a twopair_b; do echo "$t,$m,$op,8"; done
			for s in 8 4096; do
				echo "$t,$m,alltoall,$s"
				echo "$t,$m,pair4,$s"
			done
		done
	done
	# bench/wake_probe beside the two pairs: each way, one pair and two.
	for w in block excl own spin; do
		for p in 1 2; do echo "machine,-,$w,handoff,$p"; done
	done
}
missing=$(expected | while read -r k; do
	awk -F, -v k="$k" 'NR > 1 && $2 "," $3 "," $4 "," $5 "," $6 == k { f = 1 } END { exit !f }' "$csv" ||
		echo "$k"
done)
why=
[ -z "$missing" ] || why="missing rows: $(echo "$missing" | paste -s -d' ')"
tap_result "results.csv has every expected measurement" "$why"

bad=$(awk -F, 'NR > 1 && $18 != 1' "$csv" 2>/dev/null)
why=
[ -n "$bad" ] && why="rows with valid != 1:
$bad"
[ -s "$csv" ] || why="no results.csv"
tap_result "every measurement validated (valid=1)" "$why"

# Plausible: rates positive where measured, median <= p99 <= max, memory
# positive; prints the offending rows.
implausible=$(awk -F, 'NR > 1 {
	bad = 0
	if ($2 == "ratio") {
		# a paired ratio: iwdapl over plain TCP, in MBps
		if (!($4 == "pair" && $10 > 0 && $10 < 100)) bad = 1
		nratio++
	} else if ($5 ~ /^(write|read|send|stream|stream_sweep|rdvstream|bibw|bidir)$/ &&
		   !($10 > 0 && $11 > 0 && $7 >= 1)) bad = 1
	# bidir1 has no window of its own (0): the TCP window is its limit
	if ($5 == "bidir1" && !($10 > 0 && $11 > 0 && $7 == 0)) bad = 1
	# one-way latencies: positive means
	if ($5 ~ /^(pingpong|pingpong_sweep|wpp|rdv|rdvw|twopair.*|alltoall|pair4)$/ && !($12 > 0)) bad = 1
	if ($13 != "" && !($13 > 0 && $13 <= $14 && $14 <= $15)) bad = 1
	if ($5 ~ /^connect_/ && !($11 > 0)) bad = 1
	if ($5 ~ /^mem_/ && !($16 > 0 && $8 > 0)) bad = 1
	# the machine stall probe: CPUs, seconds, rates and the longest gap
	if ($5 == "stall" && !($7 >= 1 && $8 > 0 && $10 >= $11 && $15 > 0)) bad = 1
	# the hand-off probe: pairs, runs, a one-way time up to the largest,
	# wake-ups per message (none at all for a blocking recv: no watcher)
	if ($5 == "handoff" && !($6 >= 1 && $6 <= 2 && $8 >= 1 && $12 > 0 && $12 <= $15 &&
				$11 >= 0 && ($4 != "block" || $11 == 0))) bad = 1
	if (bad) print
}
END { if (nratio != 4) print "paired ratio rows: " nratio + 0 ", expected 4 (CRC off/on x 64 KiB, 1 MiB)" }' "$csv" 2>/dev/null)
why=
[ -z "$implausible" ] || why="implausible rows:
$implausible"
tap_result "figures are plausible" "$why"

why=
[ "$(awk 'END { print NR }' "$res/summary.csv" 2>/dev/null)" -gt 30 ] || why="summary.csv missing or short"
tap_result "summary.csv summarises the rounds" "$why"

why=
nt=$(grep -c -E '^(PASS|MISS|n/a) ' "$res/report.txt" 2>/dev/null)
# 23 of the tcp transport, 4 of the udp one (the build's dat.conf has
# iw-lo-udp), 17 of the patterns (dtest -W -a's n/a in --quick).
[ "${nt:-0}" -eq 44 ] || why="report.txt has ${nt:-0} target lines, expected 44"
grep -q '^.... *udp, MTU 1500: RDMA Write 64 KiB' "$res/report.txt" 2>/dev/null ||
	why="${why:+$why; }no udp target line"
grep -q '^targets: ' "$res/report.txt" 2>/dev/null || why="${why:+$why; }no targets summary line"
grep -q '^Machine stalls: ' "$res/report.txt" 2>/dev/null ||
	why="${why:+$why; }no machine stall table"
grep -q '^.... *wpp polling, CRC off: ' "$res/report.txt" 2>/dev/null ||
	why="${why:+$why; }no wpp target line"
grep -q '^RDMA Write ping-pong polling memory (wpp)' "$res/report.txt" 2>/dev/null ||
	why="${why:+$why; }no wpp table"
tap_result "the report prints every target with PASS/MISS" "$why" "$logdir/run.out"

# The costs (bench/cost.sh): eight rows, each with its three figures for
# iwdapl and three for plain TCP (numbers, whatever their size: on a busy
# machine a difference of two runs can come out at 0); or the one line
# saying perf cannot count here.
why=
if grep -q '^System cost per message: n/a' "$res/report.txt" 2>/dev/null; then
	command -v perf >/dev/null 2>&1 &&
		perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1 &&
		why="perf counts system calls here, yet the cost table says n/a"
else
	rows=$(sed -n '/^System cost per message (perf stat/,/^(calls: /p' "$res/report.txt" 2>/dev/null |
		awk 'NF >= 8 { ok = 1; for (i = NF - 6; i < NF; i++) if ($i !~ /^[0-9]+\.[0-9]+$/) ok = 0
			k += ok } END { print k + 0 }')
	[ "$rows" = 8 ] || why="$rows of 8 cost rows with every figure"
fi
tap_result "the report gives the system cost per message" "$why" "$res/report.txt"

if command -v gnuplot >/dev/null 2>&1; then
	why=
	for p in bandwidth msgrate latency patterns; do
		[ -s "$res/$p.png" ] || why="${why:+$why, }no $p.png"
	done
	tap_result "gnuplot drew the plots" "$why" "$logdir/run.out"
else
	n=$((n + 1))
	echo "ok $n # SKIP gnuplot not installed"
fi

# The valid column can fail: a corrupted source byte must be reported.
iw=$builddir/test/dtest/iwdtest
# corrupted MODE SIZE QUAL: iwdtest --corrupt must exit non-zero with a
# FAIL row.
corrupted() {
	out=$logdir/corrupt-$1
	timeout -k 5 60 "$iw" -s -q "$3" -w 10 >"$out.server" 2>&1 &
	spid=$!
	timeout -k 5 60 "$iw" -h 127.0.0.1 -q "$3" -w 10 --csv --corrupt -m "$1" -S "$2" -n 20 \
		>"$out.client" 2>&1
	cst=$?
	wait $spid
	why=
	[ $cst -ne 0 ] || why="iwdtest --corrupt exited 0"
	grep -q "^$1,$2,.*,FAIL," "$out.client" || why="${why:+$why; }no FAIL row"
	tap_result "a corrupted transfer shows as invalid ($1, $2 B)" "$why" "$out.client"
}
corrupted write 4096 63090
corrupted wpp 4096 63091

# bench/spin_stack.sh, once each way: eight rows, each of one run with a
# median (an iwdtest pair that gave no row counts no run).
ss=$logdir/spin_stack.out
BENCH_SECONDS=0.05 BENCH_QUAL=63080 timeout -k 5 120 sh "$here/../bench/spin_stack.sh" \
	--trials 1 "$builddir" >"$ss" 2>&1
st=$?
why=
[ $st -eq 0 ] || why="bench/spin_stack.sh exit status $st"
rows=$(grep -c '    1 runs, *[01] stacked, median one-way [0-9.]* us$' "$ss")
[ "$rows" = 8 ] || why="${why:+$why; }$rows of 8 rows with one run and its median"
tap_result "bench/spin_stack.sh reports one run of each kind" "$why" "$ss"
[ $failed -eq 0 ]
