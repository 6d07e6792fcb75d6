#!/bin/sh
# debian_tools.sh [BUILDDIR]: runs Debian's dapl2-utils (dtest, dtestcm,
# dtestsrq) against the build tree's provider over loopback and prints TAP,
# one test point per server+client pair, plus a Wireshark check of the wire
# when tshark is installed.
#
# The tools print PASSED/FAILED (or nothing) and exit 0 either way, so a
# case passes only if both sides exit 0 within the time limit, print their
# completion line, and print no error line.  Every run's output is kept in
# BUILDDIR/test/debian_tools.d/ for diagnosis.
#
# BUILDDIR defaults to the directory of $DAT_OVERRIDE (make check sets it),
# else the current directory.  DAT_OVERRIDE is set to BUILDDIR/dat.conf.
# IW_TOOL_TIMEOUT (seconds, default 120) bounds every single run.

if [ -n "$1" ]; then
	builddir=$1
elif [ -n "$DAT_OVERRIDE" ]; then
	builddir=$(dirname "$DAT_OVERRIDE")
else
	builddir=$(pwd)
fi
builddir=$(cd "$builddir" && pwd) || exit 99
DAT_OVERRIDE=$builddir/dat.conf
export DAT_OVERRIDE
limit=${IW_TOOL_TIMEOUT:-120}
logdir=$builddir/test/debian_tools.d
mkdir -p "$logdir" || exit 99
ia=iw-lo
host=127.0.0.1
n=0
failed=0

# The tools use fixed qualifiers; 45248 is dtest's, the one tshark watches.
DTEST_PORT=45248

diag() {	# prefix each line of stdin with "# " (TAP diagnostics)
	sed 's/^/#   /'
}

# A sanitizer build of the provider can only be loaded into Debian's
# (uninstrumented) tools if the sanitizer runtimes are preloaded; only the
# tools get them (tool_env), not the helpers of this script.  Leak checking
# is off: the tools' own leaks are not ours to judge.
tool_env=
setup_sanitizers() {
	lib=$(awk '$1 == "'"$ia"'" { print $5; exit }' "$DAT_OVERRIDE")
	[ -n "$lib" ] && [ -e "$lib" ] || return 0
	pre=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|ubsan)\.so/ { print $3 }' | paste -s -d:)
	[ -n "$pre" ] || return 0
	tool_env="LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0:abort_on_error=0"
	echo "# sanitizer build: the tools run with $tool_env"
}

# Waits (up to 10 s) until a process named $1 listens on TCP and its set of
# listening sockets has stopped changing, i.e. the server is ready.
wait_listening() {
	tool=$1 pid=$2 tries=0 last=-1
	if ! command -v ss >/dev/null 2>&1; then
		sleep 2
		return
	fi
	while [ $tries -lt 50 ] && kill -0 "$pid" 2>/dev/null; do
		cur=$(ss -Hltnp 2>/dev/null | grep -c "\"$tool\"")
		[ "$cur" -gt 0 ] && [ "$cur" -eq "$last" ] && return
		last=$cur
		tries=$((tries + 1))
		sleep 0.2
	done
}

# Waits up to $2 seconds for pid $1 to exit, kills it after that; the exit
# status (124 or a signal's when it had to be killed) goes to $waited.
reap() {
	pid=$1 tries=0
	while kill -0 "$pid" 2>/dev/null && [ $tries -lt $(($2 * 5)) ]; do
		tries=$((tries + 1))
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "iw-test: server still running $2 s after the client ended; killed" >>"$3"
		kill "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null	# no "Terminated" notice from the shell
	waited=$?
}

# judge FILE STATUS DONE-REGEX: prints the reason for a failure, if any.
judge() {
	f=$1 st=$2 done=$3
	if [ "$st" -eq 124 ] || [ "$st" -eq 137 ]; then
		echo "timed out (${limit} s)"
	elif [ "$st" -gt 128 ] && [ "$st" -lt 160 ]; then
		echo "killed by signal $((st - 128))"
	elif [ "$st" -ne 0 ]; then
		echo "exit status $st"
	elif grep -E -q 'FAILED|[Ee]rror|ERR|[Ss]egmentation|[Aa]bort|Sanitizer|runtime error' "$f"; then
		echo "error reported: $(grep -E -m1 'FAILED|[Ee]rror|ERR|[Ss]egmentation|[Aa]bort|Sanitizer|runtime error' "$f")"
	elif ! grep -E -q "$done" "$f"; then
		echo "no line matching '$done'"
	fi
}

# The tools listen on fixed ports (the dtest qualifier, and 15828 for the
# side channel that tells the client the server's address): wait (up to
# 60 s) until no socket of an earlier run, in TIME_WAIT or not, holds them.
wait_ports_free() {
	command -v ss >/dev/null 2>&1 || return 0
	tries=0
	while [ $tries -lt 300 ] &&
	      [ -n "$(ss -Htan "( sport = :$DTEST_PORT or sport = :15828 )" 2>/dev/null)" ]; do
		tries=$((tries + 1))
		sleep 0.2
	done
}

# pair NAME TOOL DONE-REGEX "SERVER ARGS" "CLIENT ARGS": one test point.
pair() {
	name=$1 tool=$2 done=$3 sargs=$4 cargs=$5
	out=$logdir/$name
	n=$((n + 1))
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "not ok $n - $name # $tool not installed (Debian dapl2-utils)"
		failed=$((failed + 1))
		return 1
	fi
	wait_ports_free
	# shellcheck disable=SC2086 # tool_env and the arguments are word lists
	timeout -k 5 "$limit" env $tool_env "$tool" $sargs >"$out.server.out" 2>&1 &
	spid=$!
	wait_listening "$tool" "$spid"
	# shellcheck disable=SC2086
	timeout -k 5 "$limit" env $tool_env "$tool" $cargs >"$out.client.out" 2>&1
	cst=$?
	reap "$spid" 15 "$out.server.out"
	why=$(judge "$out.client.out" "$cst" "$done")
	[ -z "$why" ] || why="client: $why"
	swhy=$(judge "$out.server.out" "$waited" "$done")
	[ -z "$swhy" ] || why="${why:+$why; }server: $swhy"
	if [ -z "$why" ]; then
		echo "ok $n - $name"
		return 0
	fi
	echo "not ok $n - $name"
	echo "$why" | diag
	for side in server client; do
		echo "# --- $side ($out.$side.out), last lines:"
		tail -n 8 "$out.$side.out" | diag
	done
	failed=$((failed + 1))
	return 1
}

dtest_pair() {	# NAME FLAGS...: dtest with the same flags on both sides
	name=$1
	shift
	pair "$name" dtest 'DAPL Test Complete\. PASSED' \
		"-P $ia -s $*" "-P $ia -h $host $*"
}

# The wire as Wireshark reads it: capture a dtest run with MPA revision 1
# (Wireshark 4.0 does not know revision 2) and CRC on, then decode.
tshark_case() {
	n=$((n + 1))
	if ! command -v tshark >/dev/null 2>&1; then
		echo "ok $n # SKIP tshark not installed"
		return 0
	fi
	cap=$logdir/dtest-mpa1-crc.pcapng
	rm -f "$cap"
	# SIGTERM stops it (background jobs of sh ignore SIGINT); timeout is a
	# safety net should it not.
	# A large capture buffer: the kernel must not drop loopback frames, or
	# Wireshark loses the FPDU framing and reports damage that is not ours.
	timeout $((limit + 30)) tshark -i lo -B 64 -f "tcp port $DTEST_PORT" -w "$cap" \
		>"$logdir/tshark.capture.out" 2>&1 &
	tpid=$!
	tries=0
	while ! grep -q 'Capturing on' "$logdir/tshark.capture.out" && [ $tries -lt 50 ]; do
		tries=$((tries + 1))
		sleep 0.2
	done
	n=$((n - 1))	# pair() counts the dtest run; it is part of this case
	IWDAPL_MPA_REV=1 IWDAPL_CRC=1
	export IWDAPL_MPA_REV IWDAPL_CRC
	dtest_failed=0 keep=$failed
	# Small RDMA write ping-pongs with data checks: every FPDU of the run
	# is captured and decoded.
	dtest_pair dtest-for-tshark -W -D -b 256 -B 20 >"$logdir/tshark.dtest.tap" || dtest_failed=1
	failed=$keep
	unset IWDAPL_MPA_REV IWDAPL_CRC
	sleep 0.5
	kill "$tpid" 2>/dev/null
	wait "$tpid" 2>/dev/null
	opts="-o tcp.try_heuristic_first:TRUE --disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp"
	# shellcheck disable=SC2086
	tshark -r "$cap" $opts -V >"$logdir/tshark.decode.txt" 2>&1
	# shellcheck disable=SC2086
	mpa=$(tshark -r "$cap" $opts -Y iwarp_mpa 2>/dev/null | wc -l)
	# shellcheck disable=SC2086
	ddp=$(tshark -r "$cap" $opts -Y iwarp_ddp_rdmap 2>/dev/null | wc -l)
	bad=$(grep -c -E 'Bad CRC32|Malformed' "$logdir/tshark.decode.txt")
	if [ "$dtest_failed" -eq 0 ] && [ "$mpa" -gt 0 ] && [ "$ddp" -gt 0 ] && [ "$bad" -eq 0 ]; then
		echo "ok $n - tshark decodes MPA rev 1 + CRC ($mpa MPA, $ddp DDP/RDMAP frames)"
		return 0
	fi
	echo "not ok $n - tshark decodes MPA rev 1 + CRC"
	{
		[ "$dtest_failed" -eq 0 ] || { echo "the dtest run failed:"; cat "$logdir/tshark.dtest.tap"; }
		echo "$mpa frames as iwarp_mpa, $ddp as iwarp_ddp_rdmap, $bad bad CRC/malformed"
		grep -E -m5 'Bad CRC32|Malformed' "$logdir/tshark.decode.txt"
		echo "decode: $logdir/tshark.decode.txt"
	} | diag
	failed=$((failed + 1))
	return 1
}

[ -r "$DAT_OVERRIDE" ] || { echo "Bail out! no $DAT_OVERRIDE (build first)"; exit 1; }
# The valgrind pass of scripts/test.sh runs the same binaries again.
if [ -n "$IW_SKIP_DEBIAN_TOOLS" ]; then
	echo "1..0 # SKIP Debian tools already run against this build's twin"
	exit 0
fi
echo "# provider: $(head -n1 "$DAT_OVERRIDE")"
echo "# outputs: $logdir"
setup_sanitizers

dtest_pair dtest
dtest_pair dtest-poll -p
dtest_pair dtest-cno -c
dtest_pair dtest-write-pingpong-check -W -D
# dtest accepts -a (all sizes) only together with -W
dtest_pair dtest-all-sizes -W -a
dtest_pair dtest-unidirectional -u
pair dtestcm dtestcm 'DAPL Connection Test Complete' "-P $ia -s" "-P $ia -h $host"
pair dtestsrq dtestsrq 'DAPL RC SRQ Test Complete' "-P $ia -s" "-P $ia -h $host"
tshark_case

echo "1..$n"
[ "$failed" -eq 0 ]
