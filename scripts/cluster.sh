#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# cluster.sh [options] [SCENARIO...]: a cluster on one machine (root):
# network namespaces on a bridge, each a host with its own dat.conf
# (iwdapl-register, iw-tcp and iw-udp on eth0), running an all-to-all job
# of iwa2a ranks over each transport.  doc/cluster.md tells more.
#
# SCENARIO (default: clean loss kill), each over every transport:
#   clean  every rank moves validated Sends, RDMA Writes and RDMA Reads
#          to and from every other, then the barrier, then disconnects;
#   loss   the same with --loss % of the transport's packets into some
#          hosts dropped by nftables;
#   kill   one rank SIGKILLs itself halfway through its stages (iwa2a
#          --sigkill-halfway): the others must see its connection end
#          within --bound ms, finish with each other and exit 2.
# Prints one line per job, PASS or FAIL, and "N passed, N failed" last;
# exits 0 when every job passed.

usage() {
	cat <<EOF
usage: scripts/cluster.sh [options] [clean|loss|kill ...]
  -b, --build DIR       the build tree (default: build/ of this tree)
  -n, --hosts N         namespaces on the bridge (default 8)
  -p, --ppn P           ranks per namespace (default 1)
  -t, --transports L    transports to run, e.g. "tcp udp" (default)
  -r, --rounds N        each operation and size N times per pair (default 4)
  -S, --sizes LIST      transfer sizes (default 8,1500,4K,65537,1M)
      --loss PCT        the loss scenario's drop rate (default 1)
      --loss-hosts L    hosts whose input loses packets (default: the odd ones)
      --kill-rank R     the kill scenario's victim (default: the middle rank)
      --kill-rounds N   rounds in the kill scenario (default: --rounds)
      --bound MS        the kill scenario's bound on noticing (default 5000)
      --limit S         each rank's time limit in seconds (default 300)
      --free-lost       ranks free a lost peer's EP at once (iwa2a --free-lost)
      --keep DIR        keep the dat.confs, hosts file and logs in DIR
EOF
}

top=$(cd "$(dirname "$0")/.." && pwd)
cl_build=$top/build cl_hosts=8 cl_ppn=1 transports="tcp udp" cl_rounds=4
cl_sizes=8,1500,4K,65537,1M cl_loss_pct=1 cl_loss_hosts='' cl_kill_rank=''
cl_kill_rounds='' cl_bound_ms=5000 cl_limit=300 keep='' cl_tmp='' cl_victim='' cl_a2a_extra=''
while [ $# -gt 0 ]; do
	case $1 in
	-b | --build) cl_build=$2; shift ;;
	-n | --hosts) cl_hosts=$2; shift ;;
	-p | --ppn) cl_ppn=$2; shift ;;
	-t | --transports) transports=$2; shift ;;
	-r | --rounds) cl_rounds=$2; shift ;;
	-S | --sizes) cl_sizes=$2; shift ;;
	--loss) cl_loss_pct=$2; shift ;;
	--loss-hosts) cl_loss_hosts=$2; shift ;;
	--kill-rank) cl_kill_rank=$2; shift ;;
	--kill-rounds) cl_kill_rounds=$2; shift ;;
	--bound) cl_bound_ms=$2; shift ;;
	--limit) cl_limit=$2; shift ;;
	--free-lost) cl_a2a_extra=--free-lost ;;
	--keep) keep=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	-*) usage >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
scenarios=${*:-clean loss kill}
case $cl_hosts$cl_ppn in
*[!0-9]*) usage >&2; exit 2 ;;
esac
[ "$cl_hosts" -ge 2 ] && [ "$cl_hosts" -le 250 ] && [ "$cl_ppn" -ge 1 ] ||
	{ echo "cluster.sh: 2 to 250 hosts, at least 1 rank per host" >&2; exit 2; }
cl_build=$(cd "$cl_build" 2>/dev/null && pwd) || { echo "cluster.sh: no build tree" >&2; exit 2; }

# shellcheck source=test/netns_lib.sh
. "$top/test/netns_lib.sh"
# shellcheck source=test/tool_lib.sh
. "$top/test/tool_lib.sh"
# shellcheck source=test/cluster_lib.sh
. "$top/test/cluster_lib.sh"

why=$(cluster_prereq)
[ -z "$why" ] || { echo "cluster.sh: $why" >&2; exit 1; }
if [ -n "$keep" ]; then
	cl_dir=$keep
else
	cl_tmp=$(mktemp -d "${TMPDIR:-/tmp}/iwcluster.XXXXXX") || exit 1
	cl_dir=$cl_tmp
fi
[ -n "$cl_loss_hosts" ] || cl_loss_hosts=$(seq 1 2 $((cl_hosts - 1)) | tr '\n' ' ')
[ -n "$cl_kill_rank" ] || cl_kill_rank=$((cl_hosts * cl_ppn / 2))
[ -n "$cl_kill_rounds" ] || cl_kill_rounds=$cl_rounds

started=$(date +%s)
cluster_setup || exit 1
echo "cluster.sh: $cl_hosts hosts x $cl_ppn ranks on a bridge; dat.confs and logs in $cl_dir"
[ -n "$keep" ] || echo "cluster.sh: (removed at exit; --keep DIR keeps them)"
passed=0 failed=0
for scen in $scenarios; do
	for tr in $transports; do
		cluster_scenario "$scen" "$tr"
		if [ -z "$cl_why" ]; then
			passed=$((passed + 1))
			echo "PASS $cl_desc"
		else
			failed=$((failed + 1))
			echo "FAIL $cl_desc"
			echo "$cl_why" | sed 's/^/    /'
			cluster_logs_tail | sed 's/^/    /'
		fi
	done
done
echo "cluster.sh: $(($(date +%s) - started)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
