#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# dapltest_progs_udp.sh [BUILDDIR]: the DAT conformance programs of
# test/dapltest/ over the udp transport (IW_TEST_IA=iw-lo-udp: RDMAP/DDP
# over TRP/UDP on loopback); one TAP stream, each program's points under
# its name.  Where the transports differ by design (a bad STag's
# Terminate is non-fatal over TRP; a killed peer that was sending is
# found by TRP's idle probe), the programs ask the IA which one it is.
# Not run: t_log (it writes its own registry of tcp IAs and asserts
# MPA-over-TCP messages), t_ssp and t_ssp_stress (they upgrade TCP
# sockets, which a udp IA refuses; SSP on UDP sockets: t_cm_trp) and the
# compile-only header checks.
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-.}" && pwd) || exit 1
progs="t_ia t_connect t_mpi t_srq_conn t_handles t_calls t_evd t_cno t_mem
t_ep t_share t_sp t_srq t_ext_dispatch t_faults t_fork t_limits t_cycles
t_stats t_rnr t_placement t_idle t_wait_sleep"
IW_TEST_IA=iw-lo-udp
export IW_TEST_IA
: "${DAT_OVERRIDE:=$build/dat.conf}"
export DAT_OVERRIDE
out=$build/test/dapltest_progs_udp.d
mkdir -p "$out" || exit 1

n=0
for p in $progs; do
	bin=$build/test/dapltest/$p
	log=$out/$p.log
	if [ ! -x "$bin" ]; then
		n=$((n + 1))
		echo "not ok $n - $p: not built ($bin)"
		continue
	fi
	"$bin" >"$log" 2>"$log.err"
	st=$?
	# The program's points renumbered, its comments kept; a bail-out,
	# a crash or a plan it did not reach is one more failed point.
	awk -v p="$p" -v n="$n" -v st="$st" '
		/^ok [0-9]+/ { $2 = ++n; sub(/^ok [0-9]+/, "& " p ":"); print; seen++; next }
		/^not ok [0-9]+/ { $3 = ++n; sub(/^not ok [0-9]+/, "& " p ":"); print; seen++; next }
		/^1\.\.[0-9]+$/ { plan = substr($0, 4) + 0; next }
		/^Bail out!/ { bail = $0; next }
		/^#/ { print }
		END {
			if (bail != "" || plan != seen || (st != 0 && st != 1))
				printf "not ok %d - %s ran to its end (exit %s, %d of %d points) %s\n",
				       ++n, p, st, seen, plan, bail
			print "count " n
		}' "$log" >"$log.tap"
	grep -v '^count ' "$log.tap"
	n=$(sed -n 's/^count //p' "$log.tap")
done
echo "1..$n"
