# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# report_scale.awk: the connection scale section's table and target lines
# in bench/run.sh's report (bench/scale.sh measures them with
# bench/iwscale).  Runs with report.awk, whose helpers it uses (key, med,
# cell, cell_div, ratio, fmt, us, target): awk -F, -f report.awk
# -f report_patterns.awk -f report_scale.awk, with -v scale=N (the
# connections of a run; empty: the section did not run, nothing is
# printed) and -v scale_depth=D (the small queues' depth).
#
# Three columns: PSP with default EP attributes, PSP with small queues,
# SSP with default attributes.  The targets are the issue's ("Ten
# thousand peers"), judged on the PSP default column where one is meant.

function scale_cols() {
	ncol = split("scale_psp|default;scale_psp|depth" scale_depth ";scale_ssp|default", SC, ";")
	split("PSP, default EPs;PSP, depth " scale_depth " EPs;SSP, default EPs", SL, ";")
}

# The key of op (at size) in column c.
function sk(c, op, size,    f) {
	split(SC[c], f, "|")
	return key(f[1], 0, f[2], op, size)
}

# One table line: label, then metric of op (at size, divided by div) in
# every column.
function scale_line(label, op, size, metric, div,    c, line) {
	line = sprintf("%-46s", label)
	for (c = 1; c <= ncol; c++)
		line = line sprintf(" %-24s", cell_div(sk(c, op, size), metric, div))
	print line
}

# The ratio of two ops' medians in every column.
function scale_ratio_line(label, op_a, size_a, op_b, size_b, metric,    c, line) {
	line = sprintf("%-46s", label)
	for (c = 1; c <= ncol; c++)
		line = line sprintf(" %-24s", ratio(med(sk(c, op_a, size_a), metric),
						    med(sk(c, op_b, size_b), metric)))
	print line
}

# Whether every row of op validated in every round, per column.
function scale_flat_line(label, op,    c, line, k, ka, kp) {
	line = sprintf("%-46s", label)
	for (c = 1; c <= ncol; c++) {
		ka = sk(c, op "_active", 0); kp = sk(c, op "_passive", 0)
		k = !(ka in have) || !(kp in have) ? "n/a" : \
		    S[ka, "valid"] == 1 && S[kp, "valid"] == 1 ? "flat" : "NOT FLAT"
		line = line sprintf(" %-24s", k)
	}
	print line
}

function scale_tables(    c, line, n) {
	scale_cols()
	n = scale + 0
	printf "\nConnection scale: %d connections between two processes (bench/iwscale, IWDAPL_CRC=0): median [min-max] of %d round(s)\n",
		n, rounds
	line = sprintf("%-46s", "")
	for (c = 1; c <= ncol; c++)
		line = line sprintf(" %-24s", SL[c])
	print line
	scale_line("plain TCP connect/accept, per s", "tcp_setup", 0, "msgs_per_s", 1)
	scale_line("setup (connects in flight), per s", "setup", 0, "msgs_per_s", 1)
	scale_ratio_line("  setup / plain TCP", "setup", 0, "tcp_setup", 0, "msgs_per_s")
	scale_line("  connect -> ESTABLISHED, median, ms", "setup", 0, "lat_median_us", 1000)
	scale_line("  first tenth of the setup, per s", "setup_tenth", 1, "msgs_per_s", 1)
	scale_line("  last tenth of the setup, per s", "setup_tenth", 10, "msgs_per_s", 1)
	scale_line("use (Write, Read back, Sends; checked), per s", "use", 128, "msgs_per_s", 1)
	print "memory per connected EP, KiB (anonymous resident; malloc heap, which the provider's per-connection objects are not in; kernel: machine-wide)"
	scale_line("  idle after use, active: resident", "mem_idle_active", 0, "rss_per_ep", 1024)
	scale_line("  idle after use, active: heap", "mem_idle_active", 0, "heap_per_ep", 1024)
	scale_line("  idle after use, passive: resident", "mem_idle_passive", 0, "rss_per_ep", 1024)
	scale_line("  idle after use, passive: heap", "mem_idle_passive", 0, "heap_per_ep", 1024)
	scale_line("  never used, active: resident", "mem_connected_active", 0, "rss_per_ep", 1024)
	scale_line("  never used, passive: resident", "mem_connected_passive", 0, "rss_per_ep", 1024)
	scale_line("  kernel, both sockets: TCP buffers", "mem_idle_kernel", 0, "rss_per_ep", 1024)
	scale_line("  kernel, both sockets: Slab", "mem_idle_kernel", 0, "heap_per_ep", 1024)
	print "connection 0 alone first; then, in turns, a lone connection (an IA of its own) and connection 0 busy among the idle others"
	scale_line("  8 B ping-pong polling, first, median us", "pingpong_first", 8, "lat_median_us", 1)
	scale_line("  64 KiB RDMA Write, first, MB/s", "write_first", 65536, "MBps", 1)
	scale_line("  empty poll of the receive EVD, lone, us", "poll_lone", 0, "lat_mean_us", 1)
	scale_line("  empty poll, among the idle, us", "poll_busy", 0, "lat_mean_us", 1)
	scale_line("  8 B ping-pong polling, lone, median us", "pingpong_lone", 8, "lat_median_us", 1)
	scale_line("  8 B ping-pong, among the idle, median us", "pingpong_busy", 8, "lat_median_us", 1)
	scale_line("  8 B ping-pong, lone, mean us", "pingpong_lone", 8, "lat_mean_us", 1)
	scale_line("  8 B ping-pong, among the idle, mean us", "pingpong_busy", 8, "lat_mean_us", 1)
	scale_line("  64 KiB RDMA Write, lone, MB/s", "write_lone", 65536, "MBps", 1)
	scale_line("  64 KiB RDMA Write, among the idle, MB/s", "write_busy", 65536, "MBps", 1)
	scale_line("teardown of all, s", "teardown", 0, "seconds", 1)
	scale_flat_line("descriptors, threads, heap after teardown", "leak_freed")
	scale_flat_line("  ... and after the IA closed", "leak_closed")
	scale_line("resident left after teardown, active, B/conn", "leak_freed_active", 0, "rss_per_ep", 1)
	scale_line("  passive, B/conn", "leak_freed_passive", 0, "rss_per_ep", 1)
	printf "(a cell n/a: not measured -- see results.csv and the iwscale logs; first: connection 0 before the others connected; lone: a connection on a second IA, measured in turns with the busy one)\n"
}

# 1 when every scale row of column c validated (and the run got to its
# leak check); "" when the column did not run.
function scale_all_valid(c,    k, f, ok, any, kk) {
	split(SC[c], f, "|")
	ok = 1
	for (k in have) {
		split(k, kk, SUBSEP)
		if (kk[1] != f[1] || kk[3] != f[2])
			continue
		any = 1
		if (S[k, "valid"] != 1)
			ok = 0
	}
	if (!any)
		return ""
	return ok && (sk(c, "leak_closed_active", 0) in have) ? "1" : "FAILED"
}

function scale_targets(    c, n, v, va, vp, ka, kp, kk, ks, kt, lim) {
	scale_cols()
	n = scale + 0
	for (c = 1; c <= ncol; c++) {
		ka = sk(c, "leak_freed_active", 0); kp = sk(c, "leak_freed_passive", 0)
		target(sprintf("%d connected EPs (%s): used, checked, freed, nothing leaked", n, SL[c]),
			scale_all_valid(c), 1, 0, !(ka in have) ? "" : \
			sprintf("heap left with the IA open: %.0f, %.0f B/conn", med(ka, "heap_per_ep"),
				med(kp, "heap_per_ep")))
	}
	# The target is the connected idle EP's (never used); one used and
	# then quiet is reported beside it (its queues and buffers given
	# back: heap; the resident set keeps what the allocator keeps).
	ka = sk(1, "mem_connected_active", 0); kp = sk(1, "mem_connected_passive", 0)
	ua = sk(1, "mem_idle_active", 0); up = sk(1, "mem_idle_passive", 0)
	kk = sk(1, "mem_idle_kernel", 0)
	va = med(ka, "rss_per_ep"); vp = med(kp, "rss_per_ep")
	v = va == "" || vp == "" ? "" : sprintf("%.1f", (va > vp ? va : vp) / 1024)
	ha = med(ua, "heap_per_ep"); hp = med(up, "heap_per_ep")
	target("memory per connected idle EP <= 16 KiB (default EPs, the larger side, KiB)", v, 16, 1,
		((ua in have) ? sprintf("used then quiet: heap %.1f / %.1f KiB; ", ha / 1024, hp / 1024) : "") \
		((kk in have) ? sprintf("kernel: TCP buffers %.1f, Slab %.1f KiB per connection",
				       med(kk, "rss_per_ep") / 1024, med(kk, "heap_per_ep") / 1024) : ""))
	for (c = 1; c <= ncol; c += 2) {
		ks = sk(c, "setup", 0); kt = sk(c, "tcp_setup", 0)
		target(sprintf("setup of %d connections (%s) >= plain TCP connect/accept", n, SL[c]),
			ratio(med(ks, "msgs_per_s"), med(kt, "msgs_per_s")), 1, 0,
			fmt(med(ks, "msgs_per_s")) "/s vs " fmt(med(kt, "msgs_per_s")) "/s")
	}
	v = med(sk(1, "teardown", 0), "seconds")
	target(sprintf("teardown of %d connections < 2 s (PSP, s)", n), v == "" ? "" : sprintf("%.2f", v),
		2, 1, "")
	ka = sk(1, "pingpong_busy", 8); kp = sk(1, "pingpong_lone", 8)
	target(sprintf("one busy among %d idle: 8 B polling ping-pong <= 1.1 x lone (median)", n - 1),
		ratio(med(ka, "lat_median_us"), med(kp, "lat_median_us")), 1.1, 1,
		us(med(ka, "lat_median_us")) " vs " us(med(kp, "lat_median_us")) "; means " \
		us(med(ka, "lat_mean_us")) " vs " us(med(kp, "lat_mean_us")))
	ka = sk(1, "write_busy", 65536); kp = sk(1, "write_lone", 65536)
	target(sprintf("one busy among %d idle: 64 KiB Write bandwidth >= 0.9 x lone", n - 1),
		ratio(med(ka, "MBps"), med(kp, "MBps")), 0.9, 0,
		fmt(med(ka, "MBps")) " vs " fmt(med(kp, "MBps")) " MB/s")
	# Resident memory back after teardown: within 4 MiB and 64 B a
	# connection of its level before (in KiB).
	va = med(sk(1, "leak_freed_active", 0), "rss_per_ep")
	vp = med(sk(1, "leak_freed_passive", 0), "rss_per_ep")
	lim = 4096 + n * 64 / 1024
	v = va == "" || vp == "" ? "" : sprintf("%.0f", (va > vp ? va : vp) * n / 1024)
	target(sprintf("resident memory flat after teardown (KiB left, <= %.0f)", lim), v, lim, 1,
		va == "" ? "" : sprintf("active %.0f, passive %.0f B per connection", va, vp))
}
