#!/usr/bin/env python3
"""Summarise bench/parity.sh output: tame vs cyclictest and tame fwq vs oslat, with ratios."""
import glob
import json
import os
import re
import sys

PCTS = [("p50", 0.50), ("p99", 0.99), ("p99.9", 0.999)]


def percentile(sorted_values, q):
    if not sorted_values:
        return 0
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[i]


def cyclictest_ns(path):
    """Latencies from `cyclictest -v -N` lines `thread: loop: latency_ns`."""
    values = []
    pat = re.compile(r"^\s*\d+:\s*\d+:\s*(\d+)\s*$")
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if m:
                values.append(int(m.group(1)))
    return sorted(values)


def tame_summary(path):
    with open(path) as f:
        r = json.load(f)
    return r, r["groups"][0]


def main(out):
    rows = []
    for tame_file in sorted(glob.glob(os.path.join(out, "tame-cycle-*.json"))):
        tag = os.path.basename(tame_file)[len("tame-"):-len(".json")]
        ct = cyclictest_ns(os.path.join(out, f"ct-{tag}.txt"))
        r, g = tame_summary(tame_file)
        metrics = {m["name"]: m["summary"] for m in g["metrics"]}
        # Like for like: one value per actual wakeup, as cyclictest records.
        s = metrics.get("wakeup_latency", metrics["latency"])
        co = metrics["latency"]
        t = {"min": s["min"], "p50": s["p50"], "p99": s["p99"], "p99.9": s["p99_9"], "max": s["max"], "n": s["count"],
             "missed": g["counters"].get("missed_periods", 0), "read": r["calibration"]["clock_read_cost_ns"],
             "co_p99.9": co["p99_9"], "co_n": co["count"]}
        c = {"min": ct[0] if ct else 0, "max": ct[-1] if ct else 0, "n": len(ct)}
        for name, q in PCTS:
            c[name] = percentile(ct, q)
        rows.append((tag, t, c))
    print("## tame bench cycle vs cyclictest (latency, µs; ratio = tame / cyclictest)\n")
    print("tame rows: `wakeup_latency`, one value per actual wakeup like cyclictest; the last column is tame's")
    print("`latency` p99.9 over every intended activation (missed periods recorded: no coordinated omission).\n")
    print("| run | tool | n | min | p50 | p99 | p99.9 | max | missed | p99.9 all activations |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios = {}
    for tag, t, c in rows:
        us = lambda v: f"{v / 1000:.1f}"
        print(f"| {tag} | tame | {t['n']} | {us(t['min'])} | {us(t['p50'])} | {us(t['p99'])} | {us(t['p99.9'])} | {us(t['max'])} | {t['missed']} | {us(t['co_p99.9'])} (n={t['co_n']}) |")
        print(f"| {tag} | cyclictest | {c['n']} | {us(c['min'])} | {us(c['p50'])} | {us(c['p99'])} | {us(c['p99.9'])} | {us(c['max'])} | – | – |")
        key = tag.rsplit("-r", 1)[0]
        for m in ["min", "p50", "p99", "p99.9", "max"]:
            if c[m]:
                ratios.setdefault(key, {}).setdefault(m, []).append(t[m] / c[m])
    print("\n| configuration | min ratio | p50 ratio | p99 ratio | p99.9 ratio | max ratio |")
    print("|---|---|---|---|---|---|")
    for key, ms in sorted(ratios.items()):
        cells = []
        for m in ["min", "p50", "p99", "p99.9", "max"]:
            v = ms.get(m, [])
            cells.append(f"{sum(v) / len(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "–")
        print(f"| {key} | " + " | ".join(cells) + " |")
    reads = sorted({t["read"] for _, t, _ in rows})
    if reads:
        print(f"\ntame clock-read cost (median of back-to-back CLOCK_MONOTONIC reads): {reads[0]}–{reads[-1]} ns; "
              "cyclictest reads the same vDSO clock_gettime(CLOCK_MONOTONIC).")

    fwq_files = sorted(glob.glob(os.path.join(out, "tame-fwq-*.json")))
    if not fwq_files:  # parity.sh --only cycle
        return
    print("\n## tame bench fwq vs oslat (busy-loop noise share = time taken from the loop)\n")
    print("oslat's loop values are whole microseconds, so its stolen time is estimated from its histogram as a")
    print("lower bound: a loop in bucket i µs (i ≥ 2) lost at least i − 1 µs; the last bucket (1024 µs with -b 1024)")
    print("also holds every longer gap. fwq's share is exact: Σ(sample − fastest) / Σ sample.\n")
    print("| run | fwq noise share % | fwq max excess µs | fwq p99 excess % | oslat stolen share % (lower bound) | oslat max µs |")
    print("|---|---|---|---|---|---|")
    for tame_file in fwq_files:
        tag = os.path.basename(tame_file)[len("tame-"):-len(".json")]
        r, g = tame_summary(tame_file)
        d = g["derived"]
        with open(os.path.join(out, f"oslat-{tag}.json")) as f:
            o = list(json.load(f)["thread"].values())[0]
        stolen_us = sum((int(b) - 1) * c for b, c in o["histogram"].items() if int(b) >= 2)
        oslat_share = 100.0 * stolen_us / (o["duration"] * 1e6) if o["duration"] else 0.0
        excess = next(m for m in g["metrics"] if m["name"] == "excess")["summary"]
        print(f"| {tag} | {d.get('noise_share_percent', 0):.3f} | {excess['max'] / 1000:.1f} | "
              f"{d.get('p99_excess_percent', 0):.3f} | {oslat_share:.3f} | {o['max']} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
