#!/usr/bin/env python3
"""Sum an `ncu --csv --print-units base` metrics log per kernel name:
   ncu_sum.py LOG STEPS  -> per kernel: launches, us per step, DRAM GB/s."""
import csv, sys, collections, os

by_grid = os.environ.get("NCU_BY_GRID") == "1"  # one line per kernel and grid size

rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
per = collections.defaultdict(lambda: {"n": 0, "ns": 0.0, "bytes": 0.0})
launches = {}
for r in csv.DictReader(rows):
    k = r.get("Kernel Name", "?")
    for c in ("(int)", "(bool)", "(unsigned int)", "(long)", "void "):
        k = k.replace(c, "")
    k = k.split("(")[0][:90]
    if by_grid:
        k = f"{k} grid {r.get('Grid Size', '?')}"
    key = (r.get("ID"), k)
    if key not in launches:
        launches[key] = True
        per[k]["n"] += 1
    v = float(r.get("Metric Value", "0").replace(",", "") or 0)
    if r.get("Metric Name") == "gpu__time_duration.sum":
        per[k]["ns"] += v
    elif r.get("Metric Name") == "dram__bytes_read.sum":
        per[k]["bytes"] += v
tot = sum(p["ns"] for p in per.values())
print(f"kernels: {sum(p['n'] for p in per.values())} launches, {tot / 1e3 / steps:.1f} us of kernel time per step ({steps:g} steps)")
print(f"{'us/step':>9} {'n/step':>7} {'us/launch':>9} {'GB/s':>7}  kernel")
for k, p in sorted(per.items(), key=lambda kv: -kv[1]["ns"]):
    gbs = p["bytes"] / p["ns"] if p["ns"] else 0
    print(f"{p['ns'] / 1e3 / steps:9.1f} {p['n'] / steps:7.1f} {p['ns'] / 1e3 / max(p['n'], 1):9.2f} {gbs:7.0f}  {k}")
