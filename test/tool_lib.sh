# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# tool_lib.sh: shell helpers for the scripts that run Debian's dapl2-utils
# tools (dtest, dapltest, ...) against the build tree's provider and print
# TAP.  Sourced, not run.  The caller sets $ia (the dat.conf entry) first.
#
# Between two hosts (test/netns_tools.sh: two network namespaces) the
# servers run behind the command prefix IW_TOOL_SERVER_PRE and the clients
# behind IW_TOOL_CLIENT_PRE (e.g. "ip netns exec NS env DAT_OVERRIDE=F",
# each side with its own dat.conf), and the clients reach the server at
# IW_TOOL_HOST; ss runs behind the same prefixes.  Unset: loopback.
srv_pre=$IW_TOOL_SERVER_PRE
cli_pre=$IW_TOOL_CLIENT_PRE
# shellcheck disable=SC2034 # used by the scripts that source this
host=${IW_TOOL_HOST:-127.0.0.1}

# tool_setup [BUILDDIR] LOGNAME: sets builddir, DAT_OVERRIDE (exported),
# logdir (BUILDDIR/test/LOGNAME.d), limit, n and failed.  BUILDDIR defaults
# to the directory of $DAT_OVERRIDE (make check sets it), else the current
# directory.  IW_TOOL_TIMEOUT (seconds, default 120) bounds every run.
tool_setup() {
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
	# Another IA (IW_TOOL_IA) keeps its own logs.
	logdir=$builddir/test/$2${IW_TOOL_IA:+-$IW_TOOL_IA}.d
	mkdir -p "$logdir" || exit 99
	n=0
	failed=0
	[ -r "$DAT_OVERRIDE" ] || { echo "Bail out! no $DAT_OVERRIDE (build first)"; exit 1; }
}

diag() {	# prefix each line of stdin with "#   " (TAP diagnostics);
	# awk ends every line, even a last one without a newline, so the
	# next TAP line starts on a line of its own
	awk '{ print "#   " $0 }'
}

# A sanitizer build of the provider can only be loaded into Debian's
# (uninstrumented) tools if the sanitizer runtimes are preloaded; only the
# tools get them (tool_env), not the helpers of the scripts.  Leak checking
# is off: the tools' own leaks are not ours to judge.  san_kind tells which
# runtime the provider carries: "", "asan" or "tsan".
tool_env=
san_kind=
setup_sanitizers() {
	lib=$(awk '$1 == "'"$ia"'" { print $5; exit }' "$DAT_OVERRIDE")
	[ -n "$lib" ] && [ -e "$lib" ] || return 0
	pre=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ { print $3 }' | paste -s -d:)
	[ -n "$pre" ] || return 0
	case $pre in
	*tsan*)
		san_kind=tsan
		# Reports are judged by the scripts (only races in our
		# library count), not by the exit status.
		tool_env="LD_PRELOAD=$pre TSAN_OPTIONS=exitcode=0:report_signal_unsafe=0"
		;;
	*)
		san_kind=asan
		tool_env="LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0:abort_on_error=0"
		;;
	esac
	echo "# sanitizer build: the tools run with $tool_env"
}

# tsan_ours FILE: the number of ThreadSanitizer reports in FILE with a
# frame in our provider.  Races wholly inside a tool are the tool's.
tsan_ours() {
	awk '/^WARNING: ThreadSanitizer/ { inrep = 1; ours = 0 }
	     inrep && /libdaploiw/ { ours = 1 }
	     inrep && /^SUMMARY: ThreadSanitizer/ { count += ours; inrep = 0 }
	     END { print count + 0 }' "$1"
}

# Waits (up to 10 s) until a process named $1 (pid $2) listens on TCP or
# UDP (the udp transport) and its set of listening sockets has stopped
# changing, i.e. it is ready; with a port $3, until it listens on that
# port (a set that looks stable under load may still be missing the
# socket the client needs first).  ss looks into the server's namespace.
wait_listening() {
	tool=$1 pid=$2 lport=$3 tries=0 last=-1
	if ! command -v ss >/dev/null 2>&1; then
		sleep 2
		return
	fi
	while [ $tries -lt 50 ] && kill -0 "$pid" 2>/dev/null; do
		# shellcheck disable=SC2086 # srv_pre is a word list
		cur=$($srv_pre ss -Hltunp 2>/dev/null | grep "\"$tool\"")
		if [ -n "$lport" ]; then
			echo "$cur" | awk '{ print $5 }' | grep -q ":$lport\$" && return
			cur=0
		else
			cur=$(echo "$cur" | grep -c .)
		fi
		[ "$cur" -gt 0 ] && [ "$cur" -eq "$last" ] && return
		last=$cur
		tries=$((tries + 1))
		sleep 0.2
	done
}

# wait_ports_free PORT...: waits (up to 60 s) until no socket of an earlier
# run, TCP or UDP, holds one of these local ports on the server's or the
# client's side.  TIME_WAIT sockets on them are destroyed (ss -K, as
# root) rather than waited out: one is left after many dtest runs
# (whichever side closes the side channel first), and waiting cost 60 s
# each time, up to several minutes of a CI run.  They are the tools'
# fixed ports, and a TIME_WAIT socket carries no connection.
wait_ports_free() {
	command -v ss >/dev/null 2>&1 || return 0
	filter=""
	for p in "$@"; do
		filter="${filter:+$filter or }sport = :$p"
	done
	# shellcheck disable=SC2086 # the prefixes are word lists
	{
	$srv_pre ss -K -tan state time-wait "( $filter )"
	$cli_pre ss -K -tan state time-wait "( $filter )"
	} >/dev/null 2>&1
	tries=0
	# shellcheck disable=SC2086 # the prefixes are word lists
	while [ $tries -lt 300 ] &&
	      [ -n "$($srv_pre ss -Htuan "( $filter )" 2>/dev/null; $cli_pre ss -Htuan "( $filter )" 2>/dev/null)" ]; do
		tries=$((tries + 1))
		sleep 0.2
	done
}

# reap PID SECONDS LOG: waits up to SECONDS for PID to exit, kills it after
# that (noting it in LOG); its exit status goes to $waited.
reap() {
	pid=$1 tries=0
	while kill -0 "$pid" 2>/dev/null && [ $tries -lt $(($2 * 5)) ]; do
		tries=$((tries + 1))
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "iw-test: still running $2 s after it should have ended; killed" >>"$3"
		kill "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null	# no "Terminated" notice from the shell
	waited=$?
}

# tsan_strip FILE: FILE without ThreadSanitizer's reports (judged apart).
tsan_strip() {
	awk '/^WARNING: ThreadSanitizer/ { skip = 1 }
	     !skip && !/^ThreadSanitizer: reported/ && !/^==================$/
	     /^SUMMARY: ThreadSanitizer/ { skip = 0 }' "$1"
}

# judge FILE STATUS DONE-REGEX ERROR-REGEX: prints why a run failed, if it
# did: a time-out, a signal, a non-zero exit, a line matching ERROR-REGEX,
# no line matching DONE-REGEX, or (ThreadSanitizer builds) a race report
# that involves our library.
judge() {
	f=$1 st=$2 done=$3 bad=$4
	if [ "$st" -eq 124 ] || [ "$st" -eq 137 ]; then
		echo "timed out (${limit} s)"
	elif [ "$st" -gt 128 ] && [ "$st" -lt 160 ]; then
		echo "killed by signal $((st - 128))"
	elif [ "$st" -ne 0 ]; then
		echo "exit status $st"
	elif tsan_strip "$f" | grep -E -q "$bad"; then
		echo "error reported: $(tsan_strip "$f" | grep -E -m1 "$bad")"
	elif [ "$san_kind" = tsan ] && [ "$(tsan_ours "$f")" -gt 0 ]; then
		echo "$(tsan_ours "$f") ThreadSanitizer report(s) in libdaploiw"
	elif [ -n "$done" ] && ! grep -E -q "$done" "$f"; then
		echo "no line matching '$done'"
	fi
}

# tap_result NAME WHY [LOG...]: one TAP line; on failure the reason and the
# last lines of each log as diagnostics.
tap_result() {
	name=$1 why=$2
	shift 2
	n=$((n + 1))
	if [ -z "$why" ]; then
		echo "ok $n - $name"
		return 0
	fi
	echo "not ok $n - $name"
	echo "$why" | diag
	for log in "$@"; do
		echo "# --- $log, last lines:"
		tail -n 8 "$log" | diag
	done
	failed=$((failed + 1))
	return 1
}
