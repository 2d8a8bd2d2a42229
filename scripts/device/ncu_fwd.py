#!/usr/bin/env python3
"""Per-kernel GPU times of one forward from an ncu CSV (gpu__time_duration.sum,
and dram__bytes_read.sum where it was collected).

  ncu_fwd.py KERN.csv
The run's last two forwards launch the same kernel sequence; the shortest
period p with names[-2p:-p] == names[-p:] is one forward. Prints its launch
count, the sum of kernel durations, and the kernels grouped by name (with
their DRAM read rate when the bytes were collected)."""
import csv, sys, collections

dur, name, rd = {}, {}, {}
with open(sys.argv[1], newline="") as f:
    for r in csv.DictReader(l for l in f if l.startswith('"')):
        i, m = int(r["ID"]), r.get("Metric Name")
        v = float(r["Metric Value"].replace(",", ""))
        if m == "gpu__time_duration.sum":
            dur[i], name[i] = v, r["Kernel Name"]
        elif m == "dram__bytes_read.sum":
            rd[i] = v
ids = sorted(dur)
names = [name[i] for i in ids]
p = next((q for q in range(20, len(names) // 2 + 1) if names[-2 * q:-q] == names[-q:]), None)
if p is None:
    sys.exit("no repeated forward found in %d launches" % len(names))
fwd = ids[-p:]
tot = sum(dur[i] for i in fwd)
byt = sum(rd.get(i, 0.0) for i in fwd)
print("one forward: %d launches, kernel time %.1f us, DRAM read %.1f MB" % (p, tot / 1e3, byt / 1e6))
g = collections.defaultdict(lambda: [0, 0.0, 0.0])
for i in fwd:
    k = name[i].split("(")[0].split("<")[0].replace("void ", "")[:52]
    g[k][0] += 1
    g[k][1] += dur[i]
    g[k][2] += rd.get(i, 0.0)
for k, (c, d, b) in sorted(g.items(), key=lambda x: -x[1][1])[:25]:
    bw = " %6.2f TB/s" % (b / d / 1e3) if b else ""
    print("  %-52s %4d x %7.2f us = %8.1f us (%4.1f %%)%s" % (k, c, d / c / 1e3, d / 1e3, 100 * d / tot, bw))
