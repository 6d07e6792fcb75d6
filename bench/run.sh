#!/bin/sh
# bench/run.sh [BUILDDIR]: the provider against plain TCP, in one run, on
# loopback.  Measures
#   - RDMA write bandwidth at 64 B, 4 KiB, 64 KiB and 1 MiB (iwdtest -m write)
#   - 8-byte ping-pong latency, half a round trip (iwdtest -m pingpong)
# with the MPA CRC off and on (IWDAPL_CRC=0/1 on both sides), and the same
# transfers over plain TCP sockets (tcp_baseline: one send() per message,
# TCP_NODELAY), then prints them side by side with the ratios and the
# targets of issue 3:
#   bandwidth >= 0.8 x TCP with CRC off, >= 0.6 x with CRC on (64 KiB and up)
#   latency   <= 1.5 x TCP
# Builds nothing: uses BUILDDIR (default build/, from scripts/build.sh).
#
# Latency is measured the way a latency-sensitive consumer uses the
# provider: iwdtest -p, spinning on dat_evd_dequeue, which drives the
# receive side of the QPs itself (the DESIGN's polling mode).  Bandwidth
# is measured with blocking dat_evd_wait: on a 2-CPU machine spinning
# consumers would only steal the CPUs the data path needs.
#
# Environment: BENCH_SECONDS (time budget per size, default 0.3),
# BENCH_REPEAT (rounds, default 3; the best round counts, to damp noise from
# other load), BENCH_POLL=lat (default: poll for the latency runs only),
# 1 (poll everywhere) or 0 (never poll),
# BENCH_STRICT=1 (exit 2 when a target is not met), IWDTEST, TCP_BASELINE
# (paths of the two programs).  Exit status 1 if a run fails or a transfer
# does not validate.
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" 2>/dev/null && pwd) || { echo "run.sh: no build dir ${1:-$top/build}" >&2; exit 1; }
iwdtest=${IWDTEST:-$build/test/dtest/iwdtest}
tcpb=${TCP_BASELINE:-$build/bench/tcp_baseline}
secs=${BENCH_SECONDS:-0.3}
rounds=${BENCH_REPEAT:-3}
sizes=64,4096,65536,1048576
pollmode=${BENCH_POLL:-lat}
poll_bw= poll_lat=
[ "$pollmode" = 1 ] && poll_bw=-p
[ "$pollmode" = 1 ] || [ "$pollmode" = lat ] && poll_lat=-p
DAT_OVERRIDE=${DAT_OVERRIDE:-$build/dat.conf}
export DAT_OVERRIDE

for p in "$iwdtest" "$tcpb"; do
	[ -x "$p" ] || { echo "run.sh: $p missing (scripts/build.sh $build first)" >&2; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/iwbench.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
raw=$work/raw.csv
qual=62100	# above the ephemeral port range (32768-60999)
status=0

# iw CRC MODE SIZES: one iwdtest server+client pair; rows go to $raw as
# "iwCRC,mode,size,iters,seconds,MBps,lat_us,valid".
iw() {
	qual=$((qual + 1))
	poll=$poll_bw
	[ "$2" = pingpong ] && poll=$poll_lat
	IWDAPL_CRC=$1 timeout 60 "$iwdtest" -s -q $qual -w 10 $poll --no-verify \
		>"$work/server.out" 2>&1 &
	spid=$!
	if ! IWDAPL_CRC=$1 timeout 60 "$iwdtest" -h 127.0.0.1 -q $qual -w 10 $poll \
		--csv --no-verify -m "$2" -S "$3" -t "$secs" >"$work/client.out" 2>&1; then
		echo "run.sh: iwdtest $2 (CRC $1) failed:" >&2
		status=1
		kill $spid 2>/dev/null	# it may still wait for a client
		wait $spid 2>/dev/null
		sed 's/^/  /' "$work/client.out" "$work/server.out" >&2
	else
		wait $spid || status=1
	fi
	grep -E '^[a-z]+,[0-9]' "$work/client.out" | sed "s/^/iw$1,/" >>"$raw"
}

tcp() {	# tcp MODE SIZES
	if ! timeout 60 "$tcpb" --csv --no-verify -m "$1" -S "$2" -t "$secs" >"$work/tcp.out" 2>&1; then
		echo "run.sh: tcp_baseline $1 failed:" >&2
		sed 's/^/  /' "$work/tcp.out" >&2
		status=1
	fi
	grep -E '^[a-z]+,[0-9]' "$work/tcp.out" | sed 's/^/tcp,/' >>"$raw"
}

echo "== iwdapl vs plain TCP on loopback: ${rounds} round(s), ${secs} s per size, best round counts"
echo "   (iwdapl: $(head -n1 "$DAT_OVERRIDE" | awk '{print $5}'); $(nproc) CPUs)"
echo "   iwdtest waits for completions in dat_evd_wait${poll_bw:+ -- no: it polls (BENCH_POLL=1)}" \
	"for bandwidth, ${poll_lat:+polls dat_evd_dequeue (-p) for latency}${poll_lat:-waits for latency too}"
: >"$raw"
r=0
while [ $r -lt "$rounds" ]; do
	r=$((r + 1))
	for crc in 0 1; do
		iw $crc write $sizes
		iw $crc pingpong 8
	done
	tcp stream $sizes
	tcp pingpong 8
	echo "   round $r done"
done
if grep -q -v ',OK$' "$raw"; then
	echo "run.sh: some transfers did not validate:" >&2
	grep -v ',OK$' "$raw" >&2
	status=1
fi

# Best of the rounds per (source, mode, size): highest MB/s, lowest latency;
# then one line per measurement with its ratio to TCP and its target.
awk -F, -v strict="${BENCH_STRICT:-0}" -v sizes="$sizes" '
function human(s) { return s >= 1048576 ? s / 1048576 " MiB" : s >= 1024 ? s / 1024 " KiB" : s " B" }
{
	src = $1; mode = ($2 == "stream") ? "write" : $2; k = src SUBSEP mode SUBSEP $3
	if ($6 > bw[k]) bw[k] = $6
	if ($7 != "" && (!(k in lat) || $7 < lat[k])) lat[k] = $7
}
function row(what, size, crc, iwv, tcpv, lower, target,   ratio, res) {
	if (tcpv == "" || iwv == "" || tcpv == 0) { res = "no data"; ratio = "-" }
	else {
		ratio = sprintf("%.2f", iwv / tcpv)
		if (target == "") res = "(no target)"
		else if (lower ? iwv / tcpv <= target : iwv / tcpv >= target) { res = "met"; met++ }
		else { res = "NOT MET"; unmet++ }
	}
	printf "%-22s %-8s %-4s %12s %12s %7s  %-8s %s\n", what, human(size), crc, iwv, tcpv, ratio,
		target == "" ? "-" : (lower ? "<= " : ">= ") sprintf("%.1f", target), res
}
END {
	printf "\n%-22s %-8s %-4s %12s %12s %7s  %-8s %s\n", "measurement", "size", "CRC", "iwdapl", "plain TCP", "ratio", "target", "result"
	n = split(sizes, sorted, ",")
	for (c = 0; c <= 1; c++)
		for (i = 1; i <= n; i++) {
			s = sorted[i]
			t = s + 0 >= 65536 ? (c ? 0.6 : 0.8) : ""
			row("write bandwidth MB/s", s, c ? "on" : "off", bw["iw" c, "write", s], bw["tcp", "write", s], 0, t)
		}
	for (c = 0; c <= 1; c++)
		row("ping-pong latency us", 8, c ? "on" : "off", lat["iw" c, "pingpong", 8], lat["tcp", "pingpong", 8], 1, 1.5)
	printf "\ntargets: %d met, %d not met\n", met, unmet
	exit (strict && unmet) ? 2 : 0
}' "$raw" || [ $status -ne 0 ] || status=2
exit $status
