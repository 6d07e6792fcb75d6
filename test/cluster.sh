#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# cluster.sh [BUILDDIR]: a cluster on one machine, the short run; TAP.
#
# cluster_lib.sh's cluster, 4 hosts: network namespaces on a bridge, each
# with its own dat.conf written by iwdapl-register (iw-tcp and iw-udp on
# eth0), running an all-to-all job of iwa2a ranks (test/dtest/iwa2a.h),
# one per host, over tcp and over udp:
#   - clean: every rank exits 0 having checked (ranks - 1) x steps
#     transfers (Sends, RDMA Writes, RDMA Reads of 8 B to 1 MiB, every
#     byte), with nothing flushed and no peer lost;
#   - loss: the same with 1 % of the transport's packets into hosts 1 and
#     3 dropped by an nftables input rule, which must have dropped some;
#   - kill: rank 2 SIGKILLs itself halfway through its stages (iwa2a
#     --sigkill-halfway: mid-run with requests in flight, however fast or
#     loaded the machine), 4 rounds: it dies by the signal; every other
#     rank sees its connection end (BROKEN or DISCONNECTED, its receives
#     flushed) within 5 s of the kill -- a dead process is noticed through
#     its kernel (TCP reset, ICMP port unreachable), at once or at TRP's
#     next idle probe (1 s), so 5 s is generous yet below the peer timeout
#     (10 s) that would mean it was missed (doc/semantics.md, "A peer that
#     dies") -- finishes with every other peer and exits 2, naming rank 2
#     alone as lost;
#   - two ranks per host (8 ranks), clean, over tcp and udp.
# Needs root, ip and nft: skipped otherwise, and where IW_SKIP_DEBIAN_TOOLS
# skips the namespace tests.  Outputs in BUILDDIR/test/cluster.d/.

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "${DAT_OVERRIDE:-./dat.conf}")}
build=$(cd "$build" && pwd) || exit 99
# shellcheck source=test/netns_lib.sh
. "$here/netns_lib.sh"
# shellcheck source=test/tool_lib.sh
. "$here/tool_lib.sh"
# shellcheck source=test/cluster_lib.sh
. "$here/cluster_lib.sh"

if [ -n "$IW_SKIP_DEBIAN_TOOLS" ]; then
	netns_skip "the namespace tests ran in the developer's tree"
fi
cl_build=$build cl_dir=$build/test/cluster.d cl_hosts=4 cl_ppn=1 cl_tmp=''
why=$(cluster_prereq)
[ -z "$why" ] && [ -e "$cl_build/test/dtest/iwa2a" ] || netns_skip "${why:-no iwa2a}"
rm -rf "$cl_dir"
cl_sizes=8,1500,4K,65537,1M cl_rounds=2 cl_kill_rounds=4 cl_limit=120
cl_loss_pct=1 cl_loss_hosts="1 3" cl_kill_rank=2 cl_bound_ms=5000 cl_victim='' cl_a2a_extra=''
cluster_setup || { echo "Bail out! cannot set up the cluster (see above)"; exit 1; }
n=0 failed=0
began=$(date +%s)

scenario() {	# SCENARIO TRANSPORT: one TAP line
	cluster_scenario "$1" "$2"
	tap_result "$cl_desc" "$cl_why" || cluster_logs_tail | diag
}

for scen in clean loss kill; do
	for tr in tcp udp; do
		scenario "$scen" "$tr"
	done
done
cl_ppn=2
cluster_hosts_file
for tr in tcp udp; do
	scenario clean "$tr"
done
echo "# $(($(date +%s) - began)) s"
echo "1..$n"
[ "$failed" -eq 0 ]
