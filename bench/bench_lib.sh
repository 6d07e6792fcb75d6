# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# bench_lib.sh: shell helpers shared by bench/run.sh and bench/profile.sh.
# Sourced, not run.

# bench_setup [BUILDDIR]: sets top, build, the tool paths (iwdtest, tcpb,
# iwcm, iwmem, a2a; IWDTEST, TCP_BASELINE, IWCM, IWMEM, ALLTOALL override
# them), exports
# DAT_OVERRIDE (default BUILDDIR/dat.conf) and makes the scratch directory
# $work, removed at exit (after the command in $at_exit, if the caller set
# one).  BUILDDIR defaults to build/ of the checkout.
bench_setup() {
	top=$(cd "$(dirname "$0")/.." && pwd)
	build=$(cd "${1:-$top/build}" 2>/dev/null && pwd) || {
		echo "bench: no build dir ${1:-$top/build} (scripts/build.sh DIR first)" >&2
		exit 1
	}
	iwdtest=${IWDTEST:-$build/test/dtest/iwdtest}
	tcpb=${TCP_BASELINE:-$build/bench/tcp_baseline}
	iwcm=${IWCM:-$build/bench/iwcm}
	iwmem=${IWMEM:-$build/bench/iwmem}
	a2a=${ALLTOALL:-$build/bench/alltoall}
	stallp=${STALL_PROBE:-$build/bench/stall_probe}
	wakep=${WAKE_PROBE:-$build/bench/wake_probe}
	for p in "$iwdtest" "$tcpb" "$iwcm" "$iwmem" "$a2a"; do
		[ -x "$p" ] || { echo "bench: $p missing (make -C $build)" >&2; exit 1; }
	done
	DAT_OVERRIDE=${DAT_OVERRIDE:-$build/dat.conf}
	export DAT_OVERRIDE
	work=$(mktemp -d "${TMPDIR:-/tmp}/iwbench.XXXXXX") || exit 1
	at_exit=
	trap 'eval "$at_exit"; rm -rf "$work"' EXIT
	trap 'exit 130' INT TERM
	limit=${BENCH_TIMEOUT:-120}
	qual=${BENCH_QUAL:-63100}
	srv_pre= cli_pre= pair_env=
}

# next_qual: a fresh connection qualifier (a TCP port above the ephemeral
# range) for every server, so that no run waits for an old one to go.
next_qual() {
	qual=$((qual + 1))
	[ "$qual" -le 63899 ] || qual=63100
}

# wait_listen PORT [PREFIX...]: until something listens on TCP PORT or
# has UDP PORT bound (a udp IA's PSP), 5 s at most; PREFIX runs ss (ip
# netns exec NS: in that namespace).
wait_listen() {
	port=$1
	shift
	i=0
	while [ $i -lt 100 ]; do
		"$@" ss -Hlntu "sport = :$port" 2>/dev/null | grep -q . && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# iw_pair "SERVER ARGS" "CLIENT ARGS" OUT: one iwdtest server and client
# on a fresh qualifier; the client's stdout goes to OUT, both sides'
# stderr to OUT.err.  $pair_env (VAR=value words) is the environment of
# both, $srv_pre / $cli_pre prefix their commands (perf record ...).
# Returns non-zero if either side failed.
iw_pair() {
	next_qual
	# shellcheck disable=SC2086 # word lists
	env $pair_env timeout -k 5 "$limit" $srv_pre "$iwdtest" -s -q "$qual" $1 \
		>"$3.server" 2>&1 &
	spid=$!
	# shellcheck disable=SC2086
	env $pair_env timeout -k 5 "$limit" $cli_pre "$iwdtest" -h 127.0.0.1 -q "$qual" $2 \
		>"$3" 2>"$3.err"
	cst=$?
	[ $cst -eq 0 ] || kill "$spid" 2>/dev/null	# it may still wait for us
	wait "$spid"
	sst=$?
	cat "$3.server" >>"$3.err"
	[ $cst -eq 0 ] && [ $sst -eq 0 ]
}
