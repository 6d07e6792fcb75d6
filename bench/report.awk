# report.awk: bench/run.sh's summary.csv -> the comparison tables and the
# target lines.  Run with awk -F, -f report.awk -f report_patterns.awk
# (the consumer patterns' tables and targets) and -v sizes=LIST
# -v lat_sizes=LIST (bytes, comma-separated), -v udp_sizes=LIST (the udp
# transport's Write sizes), -v rounds=N, -v base=0 (the base section did
# not run: none of its tables and targets), report_patterns.awk's
# variables, -v scale=N (the connection scale section ran, N connections;
# report_scale.awk's tables and targets), -v strict=1 to exit 2 when a
# target is missed.
#
# Every cell is "median [min-max]" over the rounds; a ratio divides the
# medians.  Latencies are one way (half a round trip), in microseconds.
# Large numbers are shortened: k = x 1000, M = x 10^6.

NR == 1 {
	for (i = 1; i <= NF; i++)
		name[i] = $i
	ncols = NF
	next
}

{
	k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
	for (i = 1; i <= ncols; i++)
		S[k, name[i]] = $i
	have[k] = 1
}

function key(t, c, m, o, s) { return t SUBSEP c SUBSEP m SUBSEP o SUBSEP s }

# The median of figure k's metric ("" when not measured).
function med(k, metric) { return (k in have) ? S[k, metric "_med"] : "" }

function fmt(v) {
	if (v == "")
		return "n/a"
	v += 0
	if (v >= 1e6) return sprintf("%.3gM", v / 1e6)
	if (v >= 1e4) return sprintf("%.0fk", v / 1e3)
	if (v >= 100) return sprintf("%.0f", v)
	if (v >= 10) return sprintf("%.1f", v)
	return sprintf("%.2f", v)
}

function cell(k, metric) { return cell_div(k, metric, 1) }

# The cell of metric divided by div (1024: bytes as KiB).
function cell_div(k, metric, div) {
	if (!(k in have) || S[k, metric "_med"] == "")
		return "n/a"
	return fmt(S[k, metric "_med"] / div) " [" fmt(S[k, metric "_min"] / div) "-" \
		fmt(S[k, metric "_max"] / div) "]"
}

function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "n/a" : sprintf("%.2f", a / b) }

function human(s) {
	s += 0
	if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MiB"
	if (s >= 1024 && s % 1024 == 0) return s / 1024 " KiB"
	return s " B"
}

# One table of metric for op over the size sweep, iwdapl next to TCP.
function xfer_table(op, label, mode, metric, unit,    i, s, k0, k1, kt) {
	if (!((key("iwdapl", 0, mode, op, sz[1])) in have))
		return
	printf "\n%s, %s (%s): median [min-max] of %d round(s)\n", label, unit,
		mode == "block" ? "blocking" : "polling", rounds
	printf "%-8s %4s  %-22s %-22s %-22s %-14s %7s %7s\n", "size", "win", "iwdapl CRC off",
		"iwdapl CRC on", "plain TCP", "libfabric TCP", "off/TCP", "on/TCP"
	for (i = 1; i <= nsz; i++) {
		s = sz[i]
		k0 = key("iwdapl", 0, mode, op, s); k1 = key("iwdapl", 1, mode, op, s)
		kt = key("tcp", "-", mode, "stream", s)
		printf "%-8s %4s  %-22s %-22s %-22s %-14s %7s %7s\n", human(s), S[k0, "window"],
			cell(k0, metric), cell(k1, metric), cell(kt, metric), "n/a",
			ratio(med(k0, metric), med(kt, metric)), ratio(med(k1, metric), med(kt, metric))
	}
}

function lat_row(s, mode, tmode, metric, label,    k0, k1, kt, kf) {
	k0 = key("iwdapl", 0, mode, "pingpong", s); k1 = key("iwdapl", 1, mode, "pingpong", s)
	kt = key("tcp", "-", tmode, "pingpong", s); kf = key("fi_tcp", "-", "poll", "pingpong", s)
	if (!(k0 in have) && !(k1 in have))
		return
	printf "%-8s %-11s %-7s %-20s %-20s %-20s %-20s %7s %7s %7s\n", human(s), mode, label,
		cell(k0, metric), cell(k1, metric), cell(kt, metric),
		tmode == "poll" ? cell(kf, metric) : "-",
		ratio(med(k0, metric), med(kt, metric)), ratio(med(k1, metric), med(kt, metric)),
		tmode == "poll" ? ratio(med(k0, metric), med(kf, metric)) : "-"
}

function lat_table(    i, s, m, nm, modes, tm, gs, ngs) {
	printf "\nPing-pong latency, one way (half a round trip), us (k = x1000): median [min-max] of %d round(s)\n", rounds
	printf "(libfabric: fi_pingpong -p tcp, which reports only a mean; polling modes are\n"
	printf " compared with busy-polling TCP, blocking with blocking TCP)\n"
	printf "%-8s %-11s %-7s %-20s %-20s %-20s %-20s %7s %7s %7s\n", "size", "mode", "stat",
		"iwdapl CRC off", "iwdapl CRC on", "plain TCP", "libfabric TCP", "off/TCP", "on/TCP", "off/fi"
	nm = split("block block_sleep poll poll_wait0", modes, " ")
	for (i = 1; i <= nlat; i++) {
		s = lat[i]
		for (m = 1; m <= nm; m++) {
			tm = modes[m] ~ /^block/ ? "block" : "poll"
			lat_row(s, modes[m], tm, "lat_mean_us", "mean")
			lat_row(s, modes[m], tm, "lat_median_us", "median")
			lat_row(s, modes[m], tm, "lat_p99_us", "p99")
			lat_row(s, modes[m], tm, "lat_max_us", "max")
		}
	}
	ngs = split(gap_sizes, gs, ",")
	for (i = 1; i <= ngs; i++) {
		lat_row(gs[i], "block_gap", "block_gap", "lat_median_us", "median")
		lat_row(gs[i], "block_gap", "block_gap", "lat_p99_us", "p99")
	}
	if (ngs && (key("iwdapl", 0, "block_gap", "pingpong", gs[1])) in have)
		printf "(block_gap: blocking, the client pausing 2 ms after each round trip -- requests now and then; TCP the same)\n"
}

function cm_table(    k) {
	printf "\nConnection setup on loopback (IWDAPL_CRC=0): median [min-max] of %d round(s)\n", rounds
	printf "%-46s %-24s %-20s %-20s %-20s\n", "what", "per second", "median us", "p99 us", "max us"
	cm_row(cm_key("connect_psp"), "PSP connect-accept-disconnect cycle", 1)
	cm_row(cm_key("connect_ssp"), "SSP (TCP connect + upgrade) cycle", 1)
	cm_row(key("tcp", "-", "block", "connect_tcp", 0), "plain TCP connect-accept-close cycle", 1)
	cm_row(cm_key("ssp_upgrade"), "SSP upgrade: first call -> both ESTABLISHED", 0)
	cm_row(cm_key("ssp_upgrade_active"), "  dat_iw_socket_connect -> ESTABLISHED", 0)
	cm_row(cm_key("ssp_upgrade_passive"), "  dat_iw_ssp_create -> ESTABLISHED", 0)
}

# The key of the provider's connection figure op (bench/iwcm, CRC off).
function cm_key(op) { return key("iwdapl", 0, "block", op, 0) }

function cm_row(k, label, rate) {
	printf "%-46s %-24s %-20s %-20s %-20s\n", label, rate ? cell(k, "msgs_per_s") : "-",
		cell(k, "lat_median_us"), cell(k, "lat_p99_us"), cell(k, "lat_max_us")
}

# The udp transport next to the tcp one (CRC off): Write bandwidth and
# 8 B ping-pong, at the loopback MTU, at 1500 against tcp at the
# loopback's 65536, and (when run.sh could make one) both at 1500 in a
# network namespace whose loopback MTU is 1500.
function udp_table(    i, s, kt, ku, kv, kn, ko, m, modes, gap, acks) {
	if (!((key("udp", "-", "block", "write", usz[1])) in have))
		return
	printf "\nThe udp transport (TRP over UDP) next to tcp (iwdapl CRC off): median [min-max] of %d round(s)\n", rounds
	printf "(lo: the host's loopback, MTU 65536; ns: a namespace whose loopback MTU is 1500)\n"
	printf "%-20s %-20s %-20s %-20s %-20s %-20s %6s %6s %6s\n", "RDMA Write, MB/s", "tcp, lo",
		"udp, lo", "udp mtu=1500, lo", "tcp, ns 1500", "udp, ns 1500", "lo", "1500/lo", "ns"
	for (i = 1; i <= nusz; i++) {
		s = usz[i]
		udp_row(human(s), "block", "write", s, "MBps")
	}
	split("block poll", modes, " ")
	for (m = 1; m <= 2; m++)
		udp_row("8 B ping-pong " modes[m] ", us", modes[m], "pingpong", 8, "lat_mean_us")
	acks = (key("udp", "-", "block", "acks", 8)) in have
	if (acks)
		udp_row("  pure acks a round", "block", "acks", 8, "lat_mean_us")
	gap = (key("udp", "-", "block_gap", "pingpong", 8)) in have
	if (gap)
		udp_row("  2 ms apart, median", "block_gap", "pingpong", 8, "lat_median_us")
	if (gap && acks)
		udp_row("  2 ms apart, acks", "block_gap", "acks", 8, "lat_mean_us")
	if ((key("udp", "-", "poll", "dtest_w", 8)) in have) {
		udp_row("8 B dtest -W, us", "poll", "dtest_w", 8, "lat_mean_us")
		printf "(dtest -W: Debian dtest's RDMA Write ping-pong, polling the Write's completion, then spinning on memory)\n"
	}
	if (gap)
		printf "(2 ms apart: blocking, the client pausing 2 ms after each round trip, as an RPC now and then; the median one way)\n"
	if (acks)
		printf "(acks: the pure acks both sides sent, per round trip; an answer carries the ack of what it answers)\n"
	printf "(ratios: udp/tcp of medians; lo: both at 65536; 1500/lo: udp at 1500, tcp at 65536; ns: both at 1500)\n"
}

function udp_row(label, mode, op, s, col,    kt, ku, kv, kn, ko) {
	kt = key("iwdapl", 0, mode, op, s)
	ku = key("udp", "-", mode, op, s); kv = key("udp1500", "-", mode, op, s)
	kn = key("tcp_ns1500", "-", mode, op, s); ko = key("udp_ns1500", "-", mode, op, s)
	printf "%-20s %-20s %-20s %-20s %-20s %-20s %6s %6s %6s\n", label, cell(kt, col), cell(ku, col),
		cell(kv, col), cell(kn, col), cell(ko, col), ratio(med(ku, col), med(kt, col)),
		ratio(med(kv, col), med(kt, col)), ratio(med(ko, col), med(kn, col))
}

# The MTU 1500 rows a udp target compares: both transports at 1500 in
# the namespace (ns), else udp at 1500 against tcp at the loopback's
# 65536, which is stricter than the target.
function udp1500_key(ns, mode, op, s) {
	return key(ns ? "udp_ns1500" : "udp1500", "-", mode, op, s)
}

function tcp1500_key(ns, mode, op, s) {
	return ns ? key("tcp_ns1500", "-", mode, op, s) : key("iwdapl", 0, mode, op, s)
}

function udp_targets(    s, i, k, kt, ns, what, m, modes) {
	ns = (key("udp_ns1500", "-", "block", "write", 65536)) in have
	if (!((udp1500_key(ns, "block", "write", 65536)) in have))
		return
	for (i = 1; i <= 2; i++) {
		s = i == 1 ? 65536 : 1048576
		k = udp1500_key(ns, "block", "write", s)
		kt = tcp1500_key(ns, "block", "write", s)
		what = ns ? "tcp, both at MTU 1500" : "tcp (MTU 65536)"
		target("udp, MTU 1500: RDMA Write " human(s) " >= 0.8 x " what,
			ratio(med(k, "MBps"), med(kt, "MBps")), 0.8, 0,
			fmt(med(k, "MBps")) " vs " fmt(med(kt, "MBps")) " MB/s")
	}
	split("poll block", modes, " ")
	for (m = 1; m <= 2; m++) {
		k = udp1500_key(ns, modes[m], "pingpong", 8)
		kt = tcp1500_key(ns, modes[m], "pingpong", 8)
		target("udp, MTU 1500: 8 B ping-pong (" modes[m] ", mean) <= the tcp transport's",
			ratio(med(k, "lat_mean_us"), med(kt, "lat_mean_us")), 1, 1,
			us(med(k, "lat_mean_us")) " vs " us(med(kt, "lat_mean_us")))
	}
}

function mem_table() {
	printf "\nMemory per endpoint, KiB: median [min-max] of %d round(s)\n", rounds
	printf "(RSS: resident pages the EPs made the process touch; heap: malloc'ed bytes, not counting\n the provider's per-connection objects, which come from chunks of their own: iw_slab.c)\n"
	printf "%-40s %6s %-24s %-24s\n", "what", "EPs", "RSS per EP", "heap per EP"
	mem_row("mem_ep_idle", "idle EP (created, never connected)")
	mem_row("mem_ep_connected_active", "connected idle EP, active side")
	mem_row("mem_ep_connected_passive", "connected idle EP, passive side")
}

function mem_row(op, label,    k) {
	k = key("iwdapl", 0, "block", op, 0)
	printf "%-40s %6s %-24s %-24s\n", label, (k in have) ? S[k, "iterations"] : "n/a",
		cell_div(k, "rss_per_ep", 1024), cell_div(k, "heap_per_ep", 1024)
}

# The paired bandwidth runs (run.sh's paired()): MB/s of each, and the
# ratios to the TCP run between them, median [min-max] over all trios
# (BENCH_PAIR_REPS a round).
function pair_table(    i, s, k0, k1, kt, r0, r1) {
	if (!(key("ratio", 0, "pair", "write", 65536) in have))
		return
	printf "\nRDMA Write bandwidth, paired (iwdapl CRC off, plain TCP, iwdapl CRC on back to back), MB/s: median [min-max] of %d trio(s)\n",
		S[key("ratio", 0, "pair", "write", 65536), "rounds"]
	printf "%-8s %-22s %-22s %-22s %-18s %-18s\n", "size", "iwdapl CRC off", "plain TCP", "iwdapl CRC on", "off/TCP", "on/TCP"
	for (i = 1; i <= 2; i++) {
		s = i == 1 ? 65536 : 1048576
		k0 = key("iwdapl", 0, "pair", "write", s)
		k1 = key("iwdapl", 1, "pair", "write", s)
		kt = key("tcp", "-", "pair", "stream", s)
		r0 = key("ratio", 0, "pair", "write", s)
		r1 = key("ratio", 1, "pair", "write", s)
		printf "%-8s %-22s %-22s %-22s %-18s %-18s\n", human(s), cell(k0, "MBps"), cell(kt, "MBps"),
			cell(k1, "MBps"), cell(r0, "MBps"), cell(r1, "MBps")
	}
	printf "(ratios: each trio's iwdapl run over the TCP run between them; the targets take their median)\n"
}

# bench/stall_probe: a thread spinning on each CPU, once a round.
function stall_table(    k) {
	k = key("machine", "-", "spin", "stall", 0)
	if (!(k in have))
		return
	printf "\nMachine stalls: a thread spinning on each CPU (%d), %s s a round: median [min-max] of %d round(s)\n",
		S[k, "window"], S[k, "iterations"], rounds
	printf "(time a CPU was taken from a thread that never sleeps: interrupts, kernel threads, a VM's host)\n"
	printf "%-40s %s\n", "stalls over 1 ms, per second", cell(k, "msgs_per_s")
	printf "%-40s %s\n", "stalls over 100 us, per second", cell(k, "MBps")
	printf "%-40s %s\n", "longest stall, us", cell(k, "lat_max_us")
}

# target TEXT VALUE LIMIT LOWER_IS_BETTER MEASURED: one target line; a
# VALUE that is a word (FAILED) misses.
function target(text, v, limit, lower, measured,    verdict) {
	if (v == "" || v == "n/a") {
		verdict = "n/a"; nna++
	} else if (v !~ /^[0-9.]+$/) {
		verdict = "MISS"; nmiss++
	} else if (lower ? v + 0 <= limit : v + 0 >= limit) {
		verdict = "PASS"; npass++
	} else {
		verdict = "MISS"; nmiss++
	}
	printf "%-4s  %-68s %-16s %s\n", verdict, text,
		v == "" || v == "n/a" ? "n/a" : v !~ /^[0-9.]+$/ ? v : sprintf("%s %s %s", v, lower ? "<=" : ">=", limit),
		measured
}

function us(v) { return v == "" ? "n/a" : v >= 10000 ? sprintf("%.1f ms", v / 1000) : fmt(v) " us" }

function targets(    c, cs, k, kf, kt, r, s, i, v, vt, kp, ks) {
	for (c = 0; c <= 1; c++) {
		cs = c ? "CRC on" : "CRC off"
		k = key("iwdapl", c, "poll", "pingpong", 8)
		kf = key("fi_tcp", "-", "poll", "pingpong", 8)
		target("8 B ping-pong, polling, " cs ": mean <= fi_pingpong -p tcp",
			ratio(med(k, "lat_mean_us"), med(kf, "lat_mean_us")), 1, 1,
			us(med(k, "lat_mean_us")) " vs " us(med(kf, "lat_mean_us")))
		target("8 B ping-pong, polling, " cs ": p99 within 2x of the median",
			ratio(med(k, "lat_p99_us"), med(k, "lat_median_us")), 2, 1,
			us(med(k, "lat_p99_us")) " vs " us(med(k, "lat_median_us")))
		# The issue's "no run over 1 ms": a run's latency (its mean),
		# in the worst round; then the stricter single round trip.
		v = (k in have) ? S[k, "lat_mean_us_max"] : ""
		target("8 B ping-pong, polling, " cs ": worst round's mean < 1 ms (in ms)",
			v == "" ? "" : sprintf("%.3f", v / 1000), 1, 1, "mean " us(v))
		v = (k in have) ? S[k, "lat_max_us_max"] : ""
		# Plain TCP's own worst one-way time beside it, and the
		# machine's longest stall of a thread that never sleeps: such
		# a stall (a VM's vCPU descheduled) hits every ping-pong.
		kt = key("tcp", "-", "poll", "pingpong", 8)
		ks = key("machine", "-", "spin", "stall", 0)
		target("8 B ping-pong, polling, " cs ": max one-way time < 1 ms (in ms)",
			v == "" ? "" : sprintf("%.3f", v / 1000), 1, 1, "max " us(v) \
			((kt in have) ? " (plain TCP: " us(S[kt, "lat_max_us_max"]) ")" : "") \
			((ks in have) ? " (machine stall: " us(S[ks, "lat_max_us_max"]) ")" : ""))
	}
	for (c = 0; c <= 1; c++) {
		cs = c ? "CRC on" : "CRC off"
		k = key("iwdapl", c, "block", "pingpong", 8)
		kt = key("tcp", "-", "block", "pingpong", 8)
		target("8 B ping-pong, blocking, " cs ": median <= 1.1 x plain TCP blocking",
			ratio(med(k, "lat_median_us"), med(kt, "lat_median_us")), 1.1, 1,
			us(med(k, "lat_median_us")) " vs " us(med(kt, "lat_median_us")))
	}
	for (c = 0; c <= 1; c++) {
		cs = c ? "CRC on" : "CRC off"
		k = key("iwdapl", c, "block", "write", 64)
		kt = key("tcp", "-", "block", "stream", 64)
		target("64 B RDMA Write rate, " cs ", window " S[k, "window"] ": >= 1.0 x TCP send()s",
			ratio(med(k, "msgs_per_s"), med(kt, "msgs_per_s")), 1.0, 0,
			fmt(med(k, "msgs_per_s")) "/s vs " fmt(med(kt, "msgs_per_s")) "/s")
		v = med(k, "msgs_per_s")
		target("64 B RDMA Write rate, " cs ": >= 400,000 /s (in 1000/s)",
			v == "" ? "" : sprintf("%.1f", v / 1000), 400, 0, fmt(v) "/s")
	}
	# Bandwidth: the median of the trios' paired ratios (pair_table);
	# without them, the ratio of the sweeps' medians.
	for (i = 1; i <= 2; i++) {
		s = i == 1 ? 65536 : 1048576
		for (c = 0; c <= 1; c++) {
			k = key("iwdapl", c, "block", "write", s)
			kt = key("tcp", "-", "block", "stream", s)
			kr = key("ratio", c, "pair", "write", s)
			if (kr in have)
				target("RDMA Write bandwidth " human(s) ", CRC " (c ? "on: >= 0.85" : "off: >= 0.95") " x plain TCP, paired",
					sprintf("%.2f", med(kr, "MBps")), c ? 0.85 : 0.95, 0,
					"trios " fmt(S[kr, "MBps_min"]) "-" fmt(S[kr, "MBps_max"]) "; sweeps " \
					ratio(med(k, "MBps"), med(kt, "MBps")))
			else
				target("RDMA Write bandwidth " human(s) ", CRC " (c ? "on: >= 0.85" : "off: >= 0.95") " x plain TCP",
					ratio(med(k, "MBps"), med(kt, "MBps")), c ? 0.85 : 0.95, 0,
					fmt(med(k, "MBps")) " vs " fmt(med(kt, "MBps")) " MB/s")
		}
	}
	kp = cm_key("connect_psp")
	v = med(kp, "msgs_per_s")
	vt = med(key("tcp", "-", "block", "connect_tcp", 0), "msgs_per_s")
	target("connection setups per second (PSP, loopback) >= 10,000 (in 1000/s)",
		v == "" ? "" : sprintf("%.2f", v / 1000), 10, 0,
		fmt(v) "/s" (vt == "" ? "" : " (plain TCP: " fmt(vt) "/s)"))
	ks = cm_key("ssp_upgrade")
	target("SSP upgrade (median, first call -> both ESTABLISHED) < 100 us",
		med(ks, "lat_median_us") == "" ? "" : sprintf("%.1f", med(ks, "lat_median_us")), 100, 1,
		"p99 " us(med(ks, "lat_p99_us")))
	mem_target("mem_ep_idle", "idle EP")
	mem_target("mem_ep_connected_active", "connected idle EP, active side")
	mem_target("mem_ep_connected_passive", "connected idle EP, passive side")
	udp_targets()
}

function mem_target(op, label,    k, v) {
	k = key("iwdapl", 0, "block", op, 0)
	v = med(k, "rss_per_ep")
	target("memory per " label " < 64 KiB (RSS, KiB)", v == "" ? "" : sprintf("%.1f", v / 1024),
		64, 1, v == "" ? "" : sprintf("heap %.1f KiB", med(k, "heap_per_ep") / 1024))
}

END {
	base = base == "" ? 1 : base + 0
	nsz = split(sizes, sz, ",")
	nlat = split(lat_sizes, lat, ",")
	split("write read send", ops, " ")
	split("RDMA Write|RDMA Read|Send", labels, "|")
	for (m = 1; m <= 2 && base; m++)	# poll: with BENCH_BW_POLL=1 only
		for (i = 1; i <= 3; i++) {
			xfer_table(ops[i], labels[i] " bandwidth", m == 1 ? "block" : "poll", "MBps", "MB/s")
			xfer_table(ops[i], labels[i] " message rate", m == 1 ? "block" : "poll",
				"msgs_per_s", "messages/s")
		}
	nusz = split(udp_sizes, usz, ",")
	if (base) {
		lat_table()
		udp_table()
		cm_table()
		mem_table()
		pair_table()
		stall_table()
	}
	if (patterns != "")
		pattern_tables()
	if (scale != "")
		scale_tables()
	printf "\nTargets (ratios of medians over the rounds of this run)\n"
	if (base)
		targets()
	if (patterns != "")
		pattern_targets()
	if (scale != "")
		scale_targets()
	printf "\ntargets: %d passed, %d missed, %d n/a\n", npass, nmiss, nna
	exit (strict && nmiss) ? 2 : 0
}
