#!/usr/bin/env python3
"""Per-kernel GPU times of one forward from an ncu CSV (gpu__time_duration.sum).

  ncu_fwd.py KERN.csv
The run's last two forwards launch the same kernel sequence; the shortest
period p with names[-2p:-p] == names[-p:] is one forward. Prints its launch
count, the sum of kernel durations, and the kernels grouped by name."""
import csv, sys, collections

rows = []
with open(sys.argv[1], newline="") as f:
    for r in csv.DictReader(l for l in f if l.startswith('"')):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            rows.append((int(r["ID"]), r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
rows.sort()
names = [n for _, n, _ in rows]
p = next((q for q in range(20, len(names) // 2 + 1) if names[-2 * q:-q] == names[-q:]), None)
if p is None:
    sys.exit("no repeated forward found in %d launches" % len(names))
fwd = rows[-p:]
tot = sum(d for _, _, d in fwd)
print("one forward: %d launches, kernel time %.1f us" % (p, tot / 1e3))
g = collections.defaultdict(lambda: [0, 0.0])
for _, n, d in fwd:
    k = n.split("(")[0].split("<")[0].replace("void ", "")[:60]
    g[k][0] += 1
    g[k][1] += d
for k, (c, d) in sorted(g.items(), key=lambda x: -x[1][1])[:25]:
    print("  %-60s %4d x %7.2f us = %8.1f us (%4.1f %%)" % (k, c, d / c / 1e3, d / 1e3, 100 * d / tot))
