# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# report_patterns.awk: the consumer patterns' tables and target lines in
# bench/run.sh's report (bench/patterns.sh measures them).  Runs with
# report.awk, whose helpers it uses (key, med, cell, ratio, fmt, human,
# us, target): awk -F, -f report.awk -f report_patterns.awk, with
# -v pat_sizes=LIST -v rdv_sizes=LIST -v a2a_sizes=LIST (bytes) and -v patterns=PARTS (the
# parts run, comma-separated; empty: none, and nothing is printed).

$4 == "dtest_wa" { wa_have[$5 + 0] = 1 }

# The prefix of a figure's key; pk(...) SUBSEP size is key(...).
function pk(t, c, m, o) { return t SUBSEP c SUBSEP m SUBSEP o }

# Splits a comma-separated list of sizes into a[1..n], ascending.
function sorted_sizes(list, a,    n, i, j, t) {
	n = split(list, a, ",")
	for (i = 2; i <= n; i++) {
		t = a[i] + 0
		for (j = i - 1; j >= 1 && a[j] + 0 > t; j--)
			a[j + 1] = a[j]
		a[j + 1] = t
	}
	return n
}

# One table over the sizes of list: a column per "LABEL|TRANSPORT|CRC|
# MODE|OP" of cols (;-separated), then a ratio per "LABEL|i|j" of ratios
# (column i over column j), a line per "STAT:METRIC" of stats and size.
# Columns 1 and 2 are what the table is about (iwdapl, CRC off and on):
# only their sizes are printed, and no table without them.
function pat_table(title, list, cols, ratios, stats,    nc, nr, nt, ns, c, r, t, i, s, C, R, T, Z, f, lab, pre, rc, any, nany, line) {
	nc = split(cols, C, ";")
	for (c = 1; c <= nc; c++) {
		split(C[c], f, "|")
		lab[c] = f[1]
		pre[c] = pk(f[2], f[3], f[4], f[5])
	}
	nr = split(ratios, R, ";")
	nt = split(stats, T, ";")
	ns = sorted_sizes(list, Z)
	for (i = 1; i <= ns; i++)
		for (c = 1; c <= 2; c++)
			if ((pre[c] SUBSEP Z[i]) in have && !(i in any)) {
				any[i] = 1
				nany++
			}
	if (!nany)
		return
	printf "\n%s: median [min-max] of %d round(s)\n", title, rounds
	line = sprintf("%-8s %-6s", "size", "stat")
	for (c = 1; c <= nc; c++)
		line = line sprintf(" %-20s", lab[c])
	for (r = 1; r <= nr; r++) {
		split(R[r], rc, "|")
		line = line sprintf(" %8s", rc[1])
	}
	print line
	for (i = 1; i <= ns; i++) {
		if (!(i in any))
			continue
		s = Z[i]
		for (t = 1; t <= nt; t++) {
			split(T[t], f, ":")
			line = sprintf("%-8s %-6s", human(s), f[1])
			for (c = 1; c <= nc; c++)
				line = line sprintf(" %-20s", cell(pre[c] SUBSEP s, f[2]))
			for (r = 1; r <= nr; r++) {
				split(R[r], rc, "|")
				line = line sprintf(" %8s", ratio(med(pre[rc[2]] SUBSEP s, f[2]),
								  med(pre[rc[3]] SUBSEP s, f[2])))
			}
			print line
		}
	}
}

# Two ping-pong pairs at once: each configuration's mean over both pairs,
# and each pair's.
function twopair_table(    m, modes, ki, kt) {
	if (!(key("iwdapl", 0, "block", "twopair", 8) in have) &&
	    !(key("tcp", "-", "block", "twopair", 8) in have))
		return
	printf "\nTwo 8 B ping-pong pairs at once (iwdapl CRC off), one way, us (mean): median [min-max] of %d round(s)\n", rounds
	printf "%-8s %-20s %-20s %-20s %-20s %-20s %-20s %9s\n", "mode", "iwdapl, both pairs",
		"iwdapl pair a", "iwdapl pair b", "plain TCP, both", "TCP pair a", "TCP pair b", "iwdapl/TCP"
	split("block poll", modes, " ")
	for (m = 1; m <= 2; m++) {
		ki = pk("iwdapl", 0, modes[m], "twopair")
		kt = pk("tcp", "-", modes[m], "twopair")
		printf "%-8s %-20s %-20s %-20s %-20s %-20s %-20s %9s\n", modes[m],
			cell(ki SUBSEP 8, "lat_mean_us"), cell(ki "_a" SUBSEP 8, "lat_mean_us"),
			cell(ki "_b" SUBSEP 8, "lat_mean_us"), cell(kt SUBSEP 8, "lat_mean_us"),
			cell(kt "_a" SUBSEP 8, "lat_mean_us"), cell(kt "_b" SUBSEP 8, "lat_mean_us"),
			ratio(med(ki SUBSEP 8, "lat_mean_us"), med(kt SUBSEP 8, "lat_mean_us"))
	}
	handoff_lines()
}

# bench/wake_probe, printed under the two pairs: the floor of each way of
# waiting on this machine, with no provider in it.
function handoff_lines(    w, ways, p, k, v) {
	if (!(key("machine", "-", "block", "handoff", 2) in have))
		return
	printf "The same exchange without the provider (bench/wake_probe: threads of one process, each side's socket also\n"
	printf "watched by a parked thread), one way, us: median [min-max] of the rounds; woken: the parked thread, per message (median)\n"
	printf "%-8s %-24s %-10s %-24s %-10s\n", "way", "one pair", "woken", "two pairs", "woken"
	split("block excl own spin bare lowat", ways, " ")
	for (w = 1; w <= 6; w++) {
		if (!(key("machine", "-", ways[w], "handoff", 1) in have))
			continue
		printf "%-8s", ways[w]
		for (p = 1; p <= 2; p++) {
			k = key("machine", "-", ways[w], "handoff", p)
			v = med(k, "msgs_per_s")
			printf " %-24s %-10s", cell(k, "lat_mean_us"), v == "" ? "n/a" : sprintf("%.3f", v)
		}
		printf "\n"
	}
	printf "(block: a recv that sleeps, plain TCP's; excl: epoll_wait served before the parked thread (EPOLLEXCLUSIVE order);\n"
	printf " own: the provider's sleeping wait, two epoll_ctl around a ppoll; spin: its spin, the same two around recv and yield;\n"
	printf " bare: that spin with no parked watch, no epoll_ctl; lowat: the parked watch kept quiet by SO_RCVLOWAT instead)\n"
}

# Debian's dtest -W -a: each size's one-way mean over tcp and udp, and
# each run's wall time and verdict.
function dtest_wa_table(    n, s, i, Z, list, kt, ku, runs) {
	for (s in wa_have)
		list = list (list == "" ? "" : ",") s
	n = sorted_sizes(list, Z)
	kt = key("iwdapl", 0, "poll", "dtest_wa_total", 0)
	ku = key("udp", "-", "poll", "dtest_wa_total", 0)
	if (!n && !(kt in have) && !(ku in have))
		return
	runs = S[kt, "rounds"] + 0 > S[ku, "rounds"] + 0 ? S[kt, "rounds"] : S[ku, "rounds"]
	printf "\nDebian dtest -W -a (RDMA Write ping-pong polling memory, 1000 round trips a size), one way, us (mean): median [min-max] of %d run(s)\n",
		runs
	printf "%-10s %-22s %-22s %8s\n", "size", "tcp (iw-lo)", "udp (iw-lo-udp)", "udp/tcp"
	for (i = 1; i <= n; i++) {
		s = Z[i]
		printf "%-10s %-22s %-22s %8s\n", human(s),
			cell(key("iwdapl", 0, "poll", "dtest_wa", s), "lat_mean_us"),
			cell(key("udp", "-", "poll", "dtest_wa", s), "lat_mean_us"),
			ratio(med(key("udp", "-", "poll", "dtest_wa", s), "lat_mean_us"),
			      med(key("iwdapl", 0, "poll", "dtest_wa", s), "lat_mean_us"))
	}
	printf "%-10s %-22s %-22s\n", "run, s", cell(kt, "seconds"), cell(ku, "seconds")
	printf "%-10s %-22s %-22s\n", "verdict", wa_verdict(kt), wa_verdict(ku)
}

# Debian's dtest -w (RDMA Writes streaming both ways, 4 MiB), waiting
# and polling, on the quiet machine and beside a busy loop per CPU:
# MB/s of both ways, and the busy run's share of the quiet one's.
function dtest_ws_table(    t, tags, labels, m, modes, k, any, line, sz) {
	split("iwdapl udp", tags, " ")
	split("tcp (iw-lo)|udp (iw-lo-udp)", labels, "|")
	split("block poll block_busy poll_busy", modes, " ")
	sz = 4194304
	for (t = 1; t <= 2; t++)
		for (m = 1; m <= 4; m++)
			if (key(tags[t], t == 1 ? 1 : "-", modes[m], "dtest_ws", sz) in have)
				any = 1
	if (!any)
		return
	printf "\nDebian dtest -w (RDMA Writes streaming both ways, 1000 x 4 MiB a side, CRC on: dtest's default), MB/s of both ways; busy: beside a busy loop per CPU at nice 19\n"
	printf "%-16s %-14s %-14s %-14s %-14s %8s %8s\n", "transport", "waiting", "polling",
		"waiting, busy", "polling, busy", "busy/q w", "busy/q p"
	for (t = 1; t <= 2; t++) {
		line = sprintf("%-16s", labels[t])
		for (m = 1; m <= 4; m++) {
			k = key(tags[t], t == 1 ? 1 : "-", modes[m], "dtest_ws", sz)
			line = line sprintf(" %-14s", !(k in have) ? "n/a" :
				S[k, "valid"] == 1 ? fmt(med(k, "MBps")) : "FAILED")
		}
		for (m = 1; m <= 2; m++)
			line = line sprintf(" %8s",
				ratio(med(key(tags[t], t == 1 ? 1 : "-", modes[m] "_busy", "dtest_ws", sz), "MBps"),
				      med(key(tags[t], t == 1 ? 1 : "-", modes[m], "dtest_ws", sz), "MBps")))
		print line
	}
}

# Beside a busy loop per CPU at nice 0: the blocking Send ping-pong, the
# connection cycle and the memory-polling ping-pong (against plain TCP's
# hand-off), iwdapl (CRC off) and plain TCP, and their ratio.
function busy_table(    r, n, rows, f, ki, kt, any, line) {
	# title|iwdapl's op|size|its mode|TCP's op|size|metric
	rows[1] = "Send ping-pong 8 B, one way|pingpong|8|block_busy|pingpong|8|lat_mean_us"
	rows[2] = "Send ping-pong 64 KiB, one way|pingpong|65536|block_busy|pingpong|65536|lat_mean_us"
	rows[3] = "connect-accept-disconnect (PSP)|connect_psp|0|block_busy|connect_tcp|0|lat_mean_us"
	rows[4] = "wpp 8 B / TCP hand-off, one way|wpp|8|poll_busy|handoff|8|lat_mean_us"
	rows[5] = "wpp 64 KiB / TCP hand-off|wpp|65536|poll_busy|handoff|65536|lat_mean_us"
	n = 5
	for (r = 1; r <= n; r++) {
		split(rows[r], f, "|")
		if (key("iwdapl", 0, f[4], f[2], f[3]) in have)
			any = 1
	}
	if (!any)
		return
	printf "\nBeside a busy loop per CPU at nice 0 (a build machine); us, median [min-max] of %d round(s)\n", rounds
	printf "%-34s %-22s %-22s %8s\n", "exchange", "iwdapl CRC off", "TCP", "iw/TCP"
	for (r = 1; r <= n; r++) {
		split(rows[r], f, "|")
		ki = key("iwdapl", 0, f[4], f[2], f[3])
		kt = key("tcp", "-", "block_busy", f[5], f[6])
		line = sprintf("%-34s %-22s %-22s %8s", f[1], cell(ki, f[7]), cell(kt, f[7]),
			ratio(med(ki, f[7]), med(kt, f[7])))
		print line
	}
	print "(Send ping-pong and cycles: blocking waits, TCP blocking in recv; wpp: the consumer spins on memory,"
	print " TCP hand-off: a thread reads the socket while the consumer spins on memory)"
}

function wa_verdict(k) {
	if (!(k in have))
		return "n/a"
	return S[k, "valid"] == 1 ? "PASSED" : "FAILED or timed out"
}

function pattern_tables(    pp, tb, m, modes, rv, bw) {
	pp = "iwdapl CRC off|iwdapl|0|%s|%s;iwdapl CRC on|iwdapl|1|%s|%s;"
	tb = "TCP blocking|tcp|-|block|pingpong_sweep;TCP polling|tcp|-|poll|pingpong_sweep"
	rv = "off/TCPb|1|3;on/TCPb|2|3;off/TCPp|1|4"
	pat_table("RDMA Write ping-pong polling memory (wpp), each 10th Write's completion reaped polling (dat_evd_dequeue); iwdapl's CQ-polling Send ping-pong; TCP hand-off: plain TCP read by a helper thread while the consumer spins on memory (tcp_baseline -m handoff); one way, us",
		pat_sizes, sprintf(pp, "poll", "wpp", "poll", "wpp") \
		"Send pp CRC off|iwdapl|0|poll|pingpong_sweep;Send pp CRC on|iwdapl|1|poll|pingpong_sweep;" tb \
		";TCP hand-off|tcp|-|block|wpp_handoff",
		"off/pp|1|3;on/pp|2|4;off/TCPb|1|5;on/TCPb|2|5;off/hand|1|7", "mean:lat_mean_us;p99:lat_p99_us")
	pat_table("wpp, the completion reaped blocking (dat_evd_wait); one way, us", pat_sizes,
		sprintf(pp, "block", "wpp", "block", "wpp") tb, rv, "mean:lat_mean_us;p99:lat_p99_us")
	split("block poll", modes, " ")
	for (m = 1; m <= 2; m++) {
		pat_table("Read rendezvous ping-pong (rdv: RTS, RDMA Read, FIN), " modes[m] "; one way, us",
			rdv_sizes, sprintf(pp, modes[m], "rdv", modes[m], "rdv") tb, rv, "mean:lat_mean_us")
		pat_table("Write rendezvous ping-pong (rdvw: RTS, CTS, RDMA Write, FIN), " modes[m] "; one way, us",
			rdv_sizes, sprintf(pp, modes[m], "rdvw", modes[m], "rdvw") tb, rv, "mean:lat_mean_us")
	}
	for (m = 1; m <= 2; m++) {
		pat_table("A stream of Read rendezvous (rdvstream), " modes[m] " (window: results.csv); MB/s",
			rdv_sizes, sprintf(pp, modes[m], "rdvstream", modes[m], "rdvstream") \
			"TCP stream|tcp|-|block|stream_sweep", "off/TCP|1|3;on/TCP|2|3", "MB/s:MBps")
		pat_table("Bidirectional RDMA Write bandwidth (bibw), " modes[m] ", both directions summed; MB/s",
			pat_sizes, sprintf(pp, modes[m], "bibw", modes[m], "bibw") \
			"TCP 2 conns|tcp|-|block|bidir;TCP 1 conn|tcp|-|block|bidir1",
			"off/TCP2|1|3;on/TCP2|2|3;off/TCP1|1|4;on/TCP1|2|4;on/off|2|1", "MB/s:MBps")
	}
	printf "(TCP: bench/tcp_baseline, blocking in recv or busy-polling; rendezvous and wpp ratios: iwdapl over TCP blocking;\n"
	printf " bibw's TCP 2 conns: a connection and a thread per direction; TCP 1 conn: both ways on one connection, one thread a side, as a QP)\n"
	twopair_table()
	a2a_table()
	dtest_wa_table()
	dtest_ws_table()
	busy_table()
}

# bench/alltoall's 4 ranks: the all-to-all's round and the pair's one
# way, iwdapl (CRC off) beside plain TCP, blocking and polling.
function a2a_table(    m, modes, o, ops, title) {
	split("block poll", modes, " ")
	split("alltoall pair4", ops, " ")
	title["alltoall"] = "All-to-all of 4 ranks on the 2 CPUs (bench/alltoall), %s; a round, us"
	title["pair4"] = "Ping-pong of ranks 0 and 1 beside their idle connections to ranks 2 and 3 (alltoall --pair), %s; one way, us"
	for (o = 1; o <= 2; o++)
		for (m = 1; m <= 2; m++)
			pat_table(sprintf(title[ops[o]], modes[m]), a2a_sizes,
				sprintf("iwdapl|iwdapl|0|%s|%s;TCP|tcp|-|%s|%s", modes[m], ops[o], modes[m], ops[o]),
				"iw/TCP|1|2", "mean:lat_mean_us;median:lat_median_us")
}

# Over the sizes of list from `from` bytes up with figures on both sides:
# the worst ratio of a's metric to b's (the largest when lower is
# better); wv gets it ("" if none), wmsg where and what.
function worst_ratio(list, a, b, metric, from, lower,    n, i, s, Z, va, vb, r, unit) {
	wv = ""; wmsg = ""
	n = sorted_sizes(list, Z)
	for (i = 1; i <= n; i++) {
		s = Z[i]
		va = med(a SUBSEP s, metric); vb = med(b SUBSEP s, metric)
		if (s < from || va == "" || vb == "" || vb + 0 == 0)
			continue
		r = va / vb
		if (wv == "" || (lower ? r > wv : r < wv)) {
			wv = r
			unit = metric == "MBps"
			wmsg = "worst at " human(s) ": " (unit ? fmt(va) " vs " fmt(vb) " MB/s" : us(va) " vs " us(vb))
		}
	}
	if (wv != "")
		wv = sprintf("%.2f", wv)
}

# The steepest step up the sizes of list: each latency over its
# neighbour's below, divided by that step's allowance -- 2 for a doubling
# (or less) of the size, the size ratio for a larger step (no more than
# doubling per doubling); wv gets the worst (1.00: at the limit).
function worst_step(list, p, metric,    n, i, Z, v, w, lim) {
	wv = ""; wmsg = ""
	n = sorted_sizes(list, Z)
	for (i = 2; i <= n; i++) {
		v = med(p SUBSEP Z[i], metric); w = med(p SUBSEP Z[i - 1], metric)
		if (v == "" || w == "" || w + 0 == 0)
			continue
		lim = Z[i] / Z[i - 1] > 2 ? Z[i] / Z[i - 1] : 2
		if (wv == "" || v / w / lim > wv) {
			wv = v / w / lim
			wmsg = sprintf("worst %s -> %s: x%.2f (limit x%g)", human(Z[i - 1]), human(Z[i]), v / w, lim)
		}
	}
	if (wv != "")
		wv = sprintf("%.2f", wv)
}

function pattern_targets(    c, cs, m, modes, k, ki, kt, t, tags, labels, v) {
	for (c = 0; c <= 1; c++) {
		cs = c ? "CRC on" : "CRC off"
		worst_ratio(pat_sizes, pk("iwdapl", c, "poll", "wpp"), pk("iwdapl", c, "poll", "pingpong_sweep"),
			"lat_mean_us", 0, 1)
		target("wpp polling, " cs ": <= 1.2 x CQ-polling Send ping-pong, all sizes",
			wv, 1.2, 1, wmsg)
		worst_ratio(pat_sizes, pk("iwdapl", c, "poll", "wpp"), pk("tcp", "-", "block", "pingpong_sweep"),
			"lat_mean_us", 0, 1)
		target("wpp polling, " cs ": <= 1.0 x plain TCP blocking, every size", wv, 1.0, 1, wmsg)
		worst_step(pat_sizes, pk("iwdapl", c, "poll", "wpp"), "lat_mean_us")
		target("wpp polling, " cs ": no step up over 2x per doubling of the size", wv, 1.0, 1, wmsg)
	}
	split("iwdapl udp", tags, " ")
	split("tcp (iw-lo)|udp (iw-lo-udp)", labels, "|")
	for (t = 1; t <= 2; t++) {
		k = key(tags[t], t == 1 ? 0 : "-", "poll", "dtest_wa_total", 0)
		v = !(k in have) ? "" : S[k, "valid"] == 1 ? sprintf("%.1f", med(k, "seconds")) : "FAILED"
		target("dtest -W -a over " labels[t] ": PASSED within 30 s (wall time)", v, 30, 1,
			(k in have) ? S[k, "iterations"] " sizes done" : "")
	}
	for (c = 0; c <= 1; c++) {
		worst_ratio(rdv_sizes, pk("iwdapl", c, "block", "rdv"), pk("tcp", "-", "block", "pingpong_sweep"),
			"lat_mean_us", 4096, 1)
		target("rdv blocking, CRC " (c ? "on" : "off") ": <= 1.0 x plain TCP blocking, 4 KiB-4 MiB",
			wv, 1.0, 1, wmsg)
	}
	for (c = 0; c <= 1; c++) {
		worst_ratio(pat_sizes, pk("iwdapl", c, "block", "bibw"), pk("tcp", "-", "block", "bidir"),
			"MBps", 65536, 0)
		target("bibw, CRC " (c ? "on" : "off") ": >= 0.9 x plain TCP bidir, 64 KiB-4 MiB", wv, 0.9, 0, wmsg)
	}
	# Like for like: an iWARP connection is one TCP connection carrying
	# both directions (TCP bidir runs one per direction, a thread each).
	for (c = 0; c <= 1; c++) {
		worst_ratio(pat_sizes, pk("iwdapl", c, "block", "bibw"), pk("tcp", "-", "block", "bidir1"),
			"MBps", 65536, 0)
		target("bibw, CRC " (c ? "on" : "off") ": >= 0.9 x plain TCP both ways on 1 connection", wv, 0.9, 0, wmsg)
	}
	worst_ratio(pat_sizes, pk("iwdapl", 1, "block", "bibw"), pk("iwdapl", 0, "block", "bibw"),
		"MBps", 65536, 0)
	target("bibw, CRC on >= 0.9 x CRC off, 64 KiB-4 MiB", wv, 0.9, 0, wmsg)
	split("block poll", modes, " ")
	for (m = 1; m <= 2; m++) {
		ki = key("iwdapl", 0, modes[m], "twopair", 8)
		kt = key("tcp", "-", modes[m], "twopair", 8)
		target("two 8 B ping-pong pairs at once, " (m == 1 ? "blocking" : "polling") ": iwdapl <= plain TCP",
			ratio(med(ki, "lat_mean_us"), med(kt, "lat_mean_us")), 1.0, 1,
			us(med(ki, "lat_mean_us")) " vs " us(med(kt, "lat_mean_us")))
	}
}
