# summarize.awk: bench/run.sh's results.csv (one row per measurement and
# round) -> summary.csv (one row per figure: the median, min and max of its
# rounds).  Run with awk -F, (mawk is enough: no gawk extensions).
#
# A figure is keyed by transport, crc, mode, op and size.  valid is 1 only
# if every round of it validated; lat_max_us is the worst of all rounds.

BEGIN {
	# results.csv column -> summary name, for the columns summarised.
	nm = split("MBps msgs_per_s lat_mean_us lat_median_us lat_p99_us lat_max_us rss_per_ep heap_per_ep seconds", metric, " ")
	OFS = ","
}

NR == 1 {
	for (i = 1; i <= NF; i++)
		col[$i] = i
	next
}

{
	key = $col["transport"] OFS $col["crc"] OFS $col["mode"] OFS $col["op"] OFS $col["size"]
	if (!(key in rounds)) {
		order[++nkeys] = key
		window[key] = $col["window"]
		iters[key] = $col["iterations"]
		valid[key] = 1
	}
	rounds[key]++
	if ($col["valid"] != 1)
		valid[key] = 0
	for (m = 1; m <= nm; m++) {
		v = $col[metric[m]]
		if (v == "")
			continue
		k = key SUBSEP m
		vals[k, ++cnt[k]] = v + 0
	}
}

# Sorts vals[k, 1..n] ascending (insertion sort: a handful of rounds).
function sort_vals(k, n,    i, j, t) {
	for (i = 2; i <= n; i++) {
		t = vals[k, i]
		for (j = i - 1; j >= 1 && vals[k, j] > t; j--)
			vals[k, j + 1] = vals[k, j]
		vals[k, j + 1] = t
	}
}

function stats(k,    n) {
	n = cnt[k]
	if (!n)
		return ",,"
	sort_vals(k, n)
	med = n % 2 ? vals[k, (n + 1) / 2] : (vals[k, n / 2] + vals[k, n / 2 + 1]) / 2
	return sprintf("%.6g,%.6g,%.6g", med, vals[k, 1], vals[k, n])
}

END {
	hdr = "transport,crc,mode,op,size,window,rounds,iterations"
	for (m = 1; m <= nm; m++)
		hdr = hdr "," metric[m] "_med," metric[m] "_min," metric[m] "_max"
	print hdr ",valid"
	for (i = 1; i <= nkeys; i++) {
		key = order[i]
		line = key OFS window[key] OFS rounds[key] OFS iters[key]
		for (m = 1; m <= nm; m++)
			line = line OFS stats(key SUBSEP m)
		print line, valid[key]
	}
}
