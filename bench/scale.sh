# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# scale.sh: bench/run.sh's connection scale section (--only scale; not in
# the default run: a round takes minutes).  Sourced by run.sh once its
# options are parsed; uses its helpers (want, log, failed).  Every round
# runs bench/iwscale with BENCH_SCALE_N connections (10000) between two
# processes, IWDAPL_CRC=0, in three settings:
#   psp default   connections to PSPs, EPs with default attributes;
#   psp depth D   the same with small queues: BENCH_SCALE_DEPTH (4) DTOs
#                 each way, 1 IOV, 1 RDMA Read;
#   ssp default   plain TCP connections upgraded by SSPs.
# Each run: plain TCP connect/accept of as many (the baseline), the
# pipelined setup (BENCH_SCALE_INFLIGHT connects in flight, 256), every
# connection used and checked, memory per connected EP (user and
# kernel), one busy connection among the idle ones in turns with a lone one,
# teardown, leak checks (bench/iwscale.c).  Each run within
# BENCH_SCALE_TIMEOUT seconds (3600), on qualifiers and TCP ports from
# BENCH_SCALE_QUAL (64500) up; BENCH_SCALE_ARGS adds iwscale
# options (--no-use: skip the use, which the provider made slow at
# 10,000).  Rows: transport scale_psp or scale_ssp, crc 0, mode default
# or depthD, op iwscale's "what" (with _active, _passive or _kernel for
# the memory and leak rows), window the connects in flight, iterations
# iwscale's count; memory rows carry bytes per connection in rss_per_ep
# (anonymous resident; the kernel's TCP buffers) and heap_per_ep (malloc
# heap, without the provider's per-connection objects, which come from
# iw_slab.c's chunks; the kernel's Slab); setup_tenth rows have the tenth
# as size.

scale_n=${BENCH_SCALE_N:-10000}
scale_depth=${BENCH_SCALE_DEPTH:-4}
scale_k=${BENCH_SCALE_INFLIGHT:-256}
scale_limit=${BENCH_SCALE_TIMEOUT:-3600}
# Qualifiers (and TCP ports) of its own: PSPs from here up, the TCP
# baseline 32 above (iwscale's own default, 64100, stays free for a run
# by hand beside).
scale_qual=${BENCH_SCALE_QUAL:-64500}
iwscale=${IWSCALE:-$build/bench/iwscale}
if want scale && [ ! -x "$iwscale" ]; then
	echo "run.sh: $iwscale missing (make -C $build)" >&2
	exit 1
fi

# scale_rows TRANSPORT MODE < iwscale CSV: raw rows.
scale_rows() {
	awk -F, -v r="$round" -v t="$1" -v m="$2" -v k="$scale_k" '
	NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	NF < 20 { next }
	{
		what = $c["what"]; side = $c["side"]; n = $c["eps"] + 0; size = $c["size"]
		op = what
		per_rss = per_heap = ""
		if (what ~ /^(mem|leak)_/) {
			op = what "_" side
			if (side == "kernel") {
				per_rss = $c["sock_bytes"] / n; per_heap = $c["slab_bytes"] / n
			} else {
				per_rss = $c["anon_bytes"] / n; per_heap = $c["heap_bytes"] / n
			}
		}
		if (what == "setup_tenth")
			size = ++tenth
		printf "%s,%s,0,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d\n", r, t, m, op, size,
			k, $c["count"], $c["seconds"], $c["MBps"], $c["per_s"], $c["lat_mean_us"],
			$c["lat_median_us"], $c["lat_p99_us"], $c["lat_max_us"], per_rss, per_heap,
			$c["valid"] == "OK"
	}' >>"$raw"
}

# scale_run TRANSPORT MODE IWSCALE_ARGS: one iwscale run.
scale_run() {
	l=$(log "iwscale-$1-$2")
	# shellcheck disable=SC2086 # option lists
	IWDAPL_CRC=0 timeout -k 5 "$scale_limit" nice -n 10 "$iwscale" -n "$scale_n" \
		-k "$scale_k" -q "$scale_qual" --csv $3 $BENCH_SCALE_ARGS >"$l" 2>"$l.err" ||
		failed "iwscale $3 (-n $scale_n)" "$l.err"
	scale_rows "$1" "$2" <"$l"
}

# scale_round: this round's scale runs (when --only selected scale).
scale_round() {
	want scale || return 0
	scale_run scale_psp default ""
	scale_run scale_psp "depth$scale_depth" "-d $scale_depth"
	scale_run scale_ssp default "--ssp"
}
