# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# cluster_lib.sh: a cluster on one machine, for scripts/cluster.sh and
# test/cluster.sh.  Sourced, not run (after netns_lib.sh and tool_lib.sh).
#
# cl_hosts network namespaces ("hosts") each hold one end of a veth pair
# named eth0 (MTU 1500, address 169.254.78.<k+1>/24); the other ends are
# ports of a bridge in a namespace of its own (the switch), so nothing is
# added to the machine's own namespace.  Each host has its own dat.conf,
# written by iwdapl-register as on a real host (iw-tcp and iw-udp, both
# --where eth0), and its processes get DAT_OVERRIDE pointing at it.  A job
# runs cl_ppn iwa2a ranks per host (rank r on host r / cl_ppn), all
# reading one hosts file.  Everything -- the processes in the namespaces,
# the namespaces (the bridge and the veth pairs with them) and cl_tmp, if
# set -- goes when the sourcing script exits, however it exits.
#
# Set before cluster_setup: cl_build (the build tree), cl_dir (confs,
# hosts file and logs), cl_hosts, cl_ppn; optionally cl_tmp (a directory
# to remove at exit) and cl_a2a_extra (more iwa2a options for every rank).

cl_runs=0 cl_made=''

cl_ns() {	# K: host K's namespace; "s": the switch's
	echo "iwc$$$1"
}

# Ends the processes still in our namespaces (ranks of a job cut short)
# and waits (up to 10 s) until they are gone, then removes the
# namespaces, with them the bridge and the veth pairs.
cluster_cleanup() {
	tries=0
	while [ -n "$(for ns in $cl_made; do ip netns pids "$ns" 2>/dev/null; done)" ] &&
	      [ "$tries" -lt 100 ]; do
		for ns in $cl_made; do
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				kill -9 "$pid" 2>/dev/null
			done
		done
		tries=$((tries + 1))
		sleep 0.1
	done
	for ns in $cl_made; do
		ip netns del "$ns" 2>/dev/null
	done
	[ -z "$cl_tmp" ] || rm -rf "$cl_tmp"
}

cl_add_ns() {
	ip netns add "$1" || return 1
	cl_made="$cl_made $1"
}

cl_paths() {	# the build tree's programs and provider
	cl_iwa2a=$cl_build/test/dtest/iwa2a
	cl_lib=$cl_build/.libs/libdaploiw.so.2
	cl_register=$cl_build/tools/iwdapl-register
}

# cluster_prereq: why this machine cannot hold the cluster, or nothing.
cluster_prereq() {
	cl_paths
	if [ "$(id -u)" != 0 ]; then
		echo "needs root (network namespaces, nftables)"
	elif ! command -v ip >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1; then
		echo "needs ip (iproute2) and nft (nftables)"
	elif [ ! -x "$cl_iwa2a" ] || [ ! -e "$cl_lib" ] || [ ! -x "$cl_register" ]; then
		echo "no iwa2a, provider or iwdapl-register in $cl_build (build first)"
	fi
}

# cluster_setup: the switch, the hosts, their dat.confs and the hosts file;
# non-zero (with the reason on stderr) if any step failed.
cluster_setup() {
	cl_paths
	trap cluster_cleanup EXIT
	trap 'exit 1' INT TERM HUP
	sw=$(cl_ns s)
	mkdir -p "$cl_dir" || return 1
	cl_add_ns "$sw" &&
		ip -n "$sw" link add br0 type bridge &&
		ip -n "$sw" link set br0 up || { echo "cannot make the switch" >&2; return 1; }
	k=0
	while [ "$k" -lt "$cl_hosts" ]; do
		ns=$(cl_ns "h$k")
		cl_add_ns "$ns" &&
			ip -n "$sw" link add "h$k" type veth peer name "p$k" &&
			ip -n "$sw" link set "h$k" netns "$ns" &&
			ip -n "$ns" link set "h$k" name eth0 &&
			ip -n "$ns" addr add "169.254.78.$((k + 1))/24" dev eth0 &&
			ip -n "$ns" link set eth0 mtu 1500 up &&
			ip -n "$ns" link set lo up &&
			ip -n "$sw" link set "p$k" master br0 up ||
			{ echo "cannot make host $k" >&2; return 1; }
		mkdir -p "$cl_dir/host$k" && rm -f "$cl_dir/host$k/dat.conf" || return 1
		for tr in tcp udp; do
			"$cl_register" --add --quiet --conf "$cl_dir/host$k/dat.conf" --name "iw-$tr" \
				--where eth0 --transport "$tr" --lib "$cl_lib" ||
				{ echo "iwdapl-register failed on host $k" >&2; return 1; }
		done
		k=$((k + 1))
	done
	cluster_hosts_file && cluster_forwarding
}

# cluster_hosts_file: the job's hosts file for cl_ppn ranks per host (a
# script may change cl_ppn between jobs and call this again).
cluster_hosts_file() {
	cl_ranks=$((cl_hosts * cl_ppn)) r=0
	while [ "$r" -lt "$cl_ranks" ]; do
		k=$((r / cl_ppn))
		echo "169.254.78.$((k + 1))	# rank $r, host $k"
		r=$((r + 1))
	done >"$cl_dir/hosts"
}

# Every port of the bridge forwards before a job starts (at once with
# STP off, as here; a port still learning would drop the first packets).
cluster_forwarding() {
	tries=0
	while ip -n "$(cl_ns s)" -d link show master br0 | grep -q 'bridge_slave state [^f]'; do
		tries=$((tries + 1))
		[ "$tries" -lt 50 ] || { echo "a bridge port does not forward" >&2; return 1; }
		sleep 0.1
	done
}

# cluster_loss PCT PROTO HOST...: PCT % of the PROTO packets each HOST
# receives dropped (netns_loss); 0 removes the rules.
cluster_loss() {
	pct=$1 proto=$2
	shift 2
	for k in "$@"; do
		netns_loss "$(cl_ns "h$k")" "$pct" "$proto" || return 1
	done
}

cluster_drops() {	# HOST...: the packets the loss rules dropped
	total=0
	for k in "$@"; do
		total=$((total + $(netns_loss_drops "$(cl_ns "h$k")")))
	done
	echo "$total"
}

# cluster_run NAME IA [IWA2A-ARGS...]: one job, every rank of it; with
# cl_victim set, that rank SIGKILLs itself halfway through its stages
# (iwa2a --sigkill-halfway; cl_kill_ns: when, CLOCK_REALTIME, from its
# KILLED line).  Logs in cl_dir/NAME.rR.log, exit statuses in
# cl_dir/NAME.status, the job's seconds in cl_secs.  The ranks bound
# themselves (-t cl_limit); what outlives that by 30 s is killed.
cluster_run() {
	name=$1 ia=$2
	shift 2
	cl_runs=$((cl_runs + 1))
	base=$((61100 + 128 * (cl_runs % 30)))	# a fresh qualifier range per job
	cl_start_ns=$(date +%s%N)
	pids='' r=0
	while [ "$r" -lt "$cl_ranks" ]; do
		k=$((r / cl_ppn)) victim=''
		[ "$r" != "$cl_victim" ] || victim=--sigkill-halfway
		# A shell in between exits normally with the rank's status, so
		# that this one prints no "Killed" notice for the victim.
		# shellcheck disable=SC2016,SC2086 # $@ is sh -c's; word lists
		sh -c '"$@"; exit $?' rank ip netns exec "$(cl_ns "h$k")" \
			env DAT_OVERRIDE="$cl_dir/host$k/dat.conf" \
			"$cl_iwa2a" -r "$r" -f "$cl_dir/hosts" -P "$ia" -q "$base" \
			-t "$cl_limit" $cl_a2a_extra $victim "$@" >"$cl_dir/$name.r$r.log" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	deadline=$(($(date +%s) + cl_limit + 30))
	: >"$cl_dir/$name.status"
	r=0
	for pid in $pids; do
		left=$((deadline - $(date +%s)))
		reap "$pid" $((left > 1 ? left : 1)) "$cl_dir/$name.r$r.log"
		echo "$r $waited" >>"$cl_dir/$name.status"
		r=$((r + 1))
	done
	cl_secs=$(echo "$cl_start_ns $(date +%s%N)" | awk '{ printf "%.1f", ($2 - $1) / 1e9 }')
	cl_kill_ns=''
	[ -z "$cl_victim" ] ||
		cl_kill_ns=$(cl_kv "$(grep '^KILLED ' "$cl_dir/$name.r$cl_victim.log")" at_ns)
}

cl_status() {	# NAME RANK: its exit status
	awk -v r="$2" '$1 == r { print $2 }' "$cl_dir/$1.status"
}

cl_kv() {	# LINE KEY: KEY's value in a line of key=value words
	echo " $1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"
}

cl_field() {	# NAME RANK KEY: KEY's value in the rank's RESULT line
	cl_kv "$(grep '^RESULT ' "$cl_dir/$1.r$2.log")" "$3"
}

# cluster_totals NAME: "N transfers checked, M MB" over every rank.
cluster_totals() {
	cat "$cl_dir/$1".r*.log | awk '/^RESULT / {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		n += f["checked"]; b += f["bytes"] }
		END { printf "%d transfers checked, %.0f MB", n, b / 1e6 }'
}

# cluster_verdict_clean NAME STEPS: why the job failed (nothing if every
# rank exited 0 having checked (ranks - 1) * STEPS transfers, with nothing
# flushed and no peer lost).
cluster_verdict_clean() {
	r=0 want=$(($2 * (cl_ranks - 1)))
	while [ "$r" -lt "$cl_ranks" ]; do
		st=$(cl_status "$1" "$r")
		checked=$(cl_field "$1" "$r" checked)
		if [ "$st" != 0 ]; then
			echo "rank $r: exit status $st ($(cl_field "$1" "$r" status))"
		elif [ "$checked" != "$want" ] || [ "$(cl_field "$1" "$r" flushed)" != 0 ] ||
		     [ "$(cl_field "$1" "$r" lost)" != 0 ]; then
			echo "rank $r: checked ${checked:-none} of $want, flushed $(cl_field "$1" "$r" flushed)"
		fi
		r=$((r + 1))
	done
}

# cluster_detect_ms NAME: the longest time, in ms, from the kill to a
# survivor seeing the victim's connection end (its LOST line).
cluster_detect_ms() {
	cat "$cl_dir/$1".r*.log | sed -n "s/^LOST .* peer=$cl_victim .* at_ns=\([0-9]*\) .*/\1/p" |
		awk -v k="$cl_kill_ns" '{ ms = ($1 - k) / 1e6; if (ms > m) m = ms } END { printf "%d", m }'
}

# cluster_verdict_kill NAME STEPS BOUND_MS: why the kill run failed.  The
# victim died by its SIGKILL, halfway; every other rank exited 2
# ("finished, a peer lost") naming the victim alone, finished with every
# other peer ((ranks - 2) * STEPS transfers checked at least), saw the
# victim's connection end (BROKEN or DISCONNECTED) within BOUND_MS of the
# kill and had its posted receives flushed.
cluster_verdict_kill() {
	r=0
	while [ "$r" -lt "$cl_ranks" ]; do
		log=$cl_dir/$1.r$r.log st=$(cl_status "$1" "$r")
		if [ "$r" = "$cl_victim" ]; then
			[ "$st" = 137 ] && [ -n "$cl_kill_ns" ] ||
				echo "rank $r (the victim): exit status $st, no KILLED line"
			r=$((r + 1))
			continue
		fi
		lost=$(grep "^LOST .* peer=$cl_victim " "$log")
		ev=$(cl_kv "$lost" event) at=$(cl_kv "$lost" at_ns) flushed=$(cl_kv "$lost" flushed)
		ms=$(( (${at:-0} - ${cl_kill_ns:-0}) / 1000000 ))
		checked=$(cl_field "$1" "$r" checked) finished=$(cl_field "$1" "$r" finished)
		lost_ranks=$(cl_field "$1" "$r" lost_ranks)
		if [ "$st" != 2 ] || [ "$lost_ranks" != "$cl_victim" ] ||
		   [ "$finished" != $((cl_ranks - 2)) ] ||
		   [ "${checked:-0}" -lt $(($2 * (cl_ranks - 2))) ]; then
			echo "rank $r: exit status $st, lost ranks $lost_ranks, finished with $finished peers"
		elif [ -z "$lost" ]; then
			echo "rank $r: no LOST line for rank $cl_victim"
		elif [ "$ms" -gt "$3" ] || [ "$ms" -lt 0 ]; then
			echo "rank $r: saw $ev $ms ms after the kill (bound $3 ms)"
		elif [ "$flushed" -lt 1 ]; then
			echo "rank $r: $ev but nothing flushed"
		fi
		r=$((r + 1))
	done
}

# cluster_scenario SCENARIO TRANSPORT: one job of SCENARIO over the
# transport's IA (iw-tcp, iw-udp), named cl_run (its logs' prefix);
# cl_desc says what ran and what came of it, cl_why why it failed (empty:
# passed).
#   clean  every rank finishes with every peer (cluster_verdict_clean);
#   loss   the same with cl_loss_pct % of the transport's packets into
#          the hosts cl_loss_hosts dropped (and some must have been);
#   kill   rank cl_kill_rank SIGKILLs itself halfway through
#          cl_kill_rounds rounds (cluster_verdict_kill, bound cl_bound_ms).
# Set: cl_sizes, cl_rounds, cl_limit and the parameters above.
cluster_scenario() {
	scen=$1 tr=$2 run=$1-$2-${cl_hosts}x$cl_ppn
	cl_run=$run
	nsizes=$(echo "$cl_sizes" | tr , '\n' | grep -c .)
	rounds=$cl_rounds rule=0
	# shellcheck disable=SC2086 # cl_loss_hosts: a list of host numbers
	case $scen in
	clean) ;;
	loss) cluster_loss "$cl_loss_pct" "$tr" $cl_loss_hosts || rule=$? ;;
	kill) cl_victim=$cl_kill_rank rounds=$cl_kill_rounds ;;
	*) cl_why="no scenario $scen (clean, loss, kill)" cl_desc=$scen; return ;;
	esac
	steps=$((3 * nsizes * rounds))
	cluster_run "$run" "iw-$tr" -S "$cl_sizes" -n "$rounds"
	job="$(cluster_totals "$run"), $cl_secs s"
	shape="$tr, $cl_hosts hosts x $cl_ppn rank$([ "$cl_ppn" = 1 ] || echo s)"
	case $scen in
	clean)
		cl_why=$(cluster_verdict_clean "$run" "$steps")
		cl_desc="$shape, clean: every rank finished with every peer ($job)"
		;;
	loss)
		# shellcheck disable=SC2086 # a list of host numbers
		drops=$(cluster_drops $cl_loss_hosts)
		# shellcheck disable=SC2086
		cluster_loss 0 "$tr" $cl_loss_hosts
		cl_why=$(cluster_verdict_clean "$run" "$steps"
			[ "$rule" = 0 ] || echo "the nftables loss rule could not be set"
			[ "$drops" -gt 0 ] || echo "nftables dropped nothing: the job ran without loss")
		cl_desc="$shape, $cl_loss_pct % of $tr packets into hosts $(echo $cl_loss_hosts | tr ' ' ,)"
		cl_desc="$cl_desc lost: every rank finished with every peer ($drops packets dropped, $job)"
		;;
	kill)
		cl_why=$(cluster_verdict_kill "$run" "$steps" "$cl_bound_ms")
		cl_desc="$shape, rank $cl_victim SIGKILLed halfway: the $((cl_ranks - 1)) others saw"
		cl_desc="$cl_desc its connection end within $(cluster_detect_ms "$run") ms (bound"
		cl_desc="$cl_desc $cl_bound_ms), finished with each other and exited 2 ($job)"
		cl_victim=''
		;;
	esac
}

# cluster_logs_tail: the last lines of the logs of cl_run's ranks that
# did not end as they should (0; 2 or the victim's kill after a kill).
cluster_logs_tail() {
	for f in "$cl_dir/$cl_run".r*.log; do
		r=${f##*.r} r=${r%.log}
		st=$(cl_status "$cl_run" "$r")
		case $cl_run:$st in
		*:0 | kill-*:2) continue ;;
		kill-*:137) [ "$r" != "$cl_kill_rank" ] || continue ;;
		esac
		echo "--- rank $r (exit status $st), $f:"
		tail -n 6 "$f"
	done
}
