#!/usr/bin/env python3
"""Rewrite the measured blocks of docs/reproductions.md from bench/reproduce.sh's results.

    bench/reproductions.py OUT_DIR DOC [quick|full]

Each experiment's block sits between `<!-- tame:ID -->` and `<!-- /tame:ID -->` in DOC and is
replaced by a table of this machine's numbers (shared vs partitioned and their ratio), the
commands that produced them, the date, kernel and load. Everything around the blocks (the
papers' setups and numbers, why the figures differ) is written by hand and kept as it is.
An experiment whose results are missing keeps its block and gets a note saying so.
Only the standard library: this runs wherever bench/reproduce.sh does.
"""

import json
import os
import re
import shutil
import sys
import time


def load(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def us(ns):
    """ns as µs (or ms above 10 ms), for tables."""
    if ns is None:
        return "—"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 10_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns / 1e3:.2f} µs"


def ratio(a, b):
    """b / a, written as a factor."""
    if not a or b is None:
        return "—"
    return f"{b / a:.3g}×"


def metric(group, name):
    for m in group.get("metrics", []):
        if m["name"] == name:
            return m["summary"]
    return None


def command(result):
    """The command line, its output and journal paths (temporary) written as placeholders."""
    argv = list(result.get("command_line") or [])
    if not argv:
        return "(the result does not record its command line)"
    for flag, placeholder in (("--json", "FILE"), ("--journal-dir", "DIR"), ("--md", "FILE")):
        if flag in argv[:-1]:
            argv[argv.index(flag) + 1] = placeholder
    argv[0] = "tame"
    return " ".join(argv)


def environment(result):
    env = result.get("environment", {})
    when = time.strftime("%Y-%m-%d", time.gmtime(result.get("started_unix_ns", 0) / 1e9))
    return (
        f"{when}, kernel {env.get('kernel_release', '?')} ({env.get('preemption_model', '?')}), "
        f"{len_cpus(env.get('online_cpus', ''))} CPUs, hypervisor {env.get('hypervisor') or 'none'}"
    )


def len_cpus(text):
    n = 0
    for part in str(text).split(","):
        if "-" in part:
            a, b = part.split("-")
            n += int(b) - int(a) + 1
        elif part.strip():
            n += 1
    return n


def commands(*results):
    lines = [f"    {command(r)}" for r in results if r]
    return "Measured " + environment(next(r for r in results if r)) + ", with:\n\n" + "\n".join(lines) + "\n"


def summary_table(shared, partitioned, name, label):
    """p50 … max of one metric of the merged groups, shared vs partitioned, and their ratio."""
    rows = [
        "| " + label + " | count | min | p50 | p99 | p99.9 | p99.99 | max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sums = []
    for config, r in (("shared, under load", shared), ("partitioned, load outside", partitioned)):
        s = metric(r["merged"], name) if r else None
        sums.append(s)
        if s is None:
            rows.append(f"| {config} | (not measured) | | | | | | |")
            continue
        rows.append(
            f"| {config} | {s['count']} | {us(s['min'])} | {us(s['p50'])} | {us(s['p99'])} | "
            f"{us(s['p99_9'])} | {us(s['p99_99'])} | {us(s['max'])} |"
        )
    a, b = sums
    if a and b:
        rows.append(
            "| partitioned / shared | | "
            + " | ".join(ratio(a[k], b[k]) for k in ("min", "p50", "p99", "p99_9", "p99_99", "max"))
            + " |"
        )
    return "\n".join(rows) + "\n"


def pair(out, exp):
    return load(out, f"{exp}-shared.json"), load(out, f"{exp}-partitioned.json")


def block_timed(out, exp, name, label, extra=None):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    text = summary_table(shared, part, name, label)
    if extra:
        text += "\n" + extra(shared, part)
    return text + "\n" + commands(shared, part)


def cycle_extra(shared, part):
    rows = []
    for config, r in (("shared", shared), ("partitioned", part)):
        if r:
            c = r["merged"]["counters"]
            rows.append(f"{config}: {c.get('missed_periods', 0)} missed periods")
    return "; ".join(rows) + ".\n"


def fwq_extra(shared, part):
    rows = ["| | mean excess | p99 excess | max excess (the FWQ deviation) | noise share |", "|---|---|---|---|---|"]
    for config, r in (("shared", shared), ("partitioned", part)):
        if not r:
            continue
        d = r["merged"]["derived"]
        rows.append(
            f"| {config} | {d.get('mean_excess_percent', 0):.3f} % | {d.get('p99_excess_percent', 0):.3f} % | "
            f"{d.get('max_excess_percent', 0):.3f} % | {d.get('noise_share_percent', 0):.3f} % |"
        )
    return "\n".join(rows) + "\n"


def noise_extra(shared, part):
    rows = ["| | noise share of the CPU | gaps | longest gap |", "|---|---|---|---|"]
    for config, r in (("shared", shared), ("partitioned", part)):
        if not r:
            continue
        m = r["merged"]
        gap = metric(m, "gap")
        rows.append(
            f"| {config} | {m['derived'].get('noise_share_percent', 0):.3f} % | "
            f"{m['counters'].get('gaps', 0)} | {us(gap['max']) if gap else '—'} |"
        )
    top = []
    for config, r in (("shared", shared), ("partitioned", part)):
        sources = []
        for cpu in (r or {}).get("noise", {}).get("cpus", []):
            for s in cpu.get("sources", [])[:3]:
                sources.append(f"{s.get('class', '?')} {s.get('source', '?')}")
        if sources:
            top.append(f"{config}: {', '.join(sources[:3])}")
    text = "\n".join(rows) + "\n"
    if top:
        text += "\nTop sources — " + "; ".join(top) + ".\n"
    return text


def block_ipc(out, exp):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    rows = ["| transport/size | one-way p50 shared | partitioned | p99.9 shared | partitioned |", "|---|---|---|---|---|"]
    labels = [g["label"] for g in (shared or part)["groups"]]
    for label in labels:
        cells = []
        for key in ("p50", "p99_9"):
            for r in (shared, part):
                g = next((g for g in (r or {}).get("groups", []) if g["label"] == label), None)
                s = metric(g, "one_way_latency") if g else None
                cells.append(f"{s[key]} ns" if s else "—")
        rows.append(f"| {label} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |")
    return "\n".join(rows) + "\n\n" + commands(shared, part)


def block_tasks(out, exp):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    rows = [
        "| tasks | p99 shared | p99 partitioned | max shared | max partitioned | p99 partitioned / shared |",
        "|---|---|---|---|---|---|",
    ]
    def steps(doc):
        return {r["settings"]["tasks"]: metric(r["merged"], "jitter") for r in (doc or {}).get("results", [])}
    a, b = steps(shared), steps(part)
    for n in sorted(set(a) | set(b)):
        sa, sb = a.get(n), b.get(n)
        rows.append(
            f"| {n} | {us(sa and sa['p99'])} | {us(sb and sb['p99'])} | {us(sa and sa['max'])} | "
            f"{us(sb and sb['max'])} | {ratio(sa and sa['p99'], sb and sb['p99'])} |"
        )
    first = (shared or part)["results"][0]
    return "\n".join(rows) + "\n\n" + commands(shared, part).replace(
        "Measured " + environment(shared or part), "Measured " + environment(first)
    )


def block_reserve(out, exp):
    r = load(out, f"{exp}.json")
    if not r:
        return None
    study = r["reserve"]
    rows = ["| backend | O_I over the shares | S unloaded | S computational load | S disk-I/O load |", "|---|---|---|---|---|"]
    backends = []
    for row in study["overhead"] + study["stability"]:
        if row["backend"] not in backends:
            backends.append(row["backend"])
    for b in backends:
        o = [x["o_i"] for x in study["overhead"] if x["backend"] == b]
        s = {x["load"]: x["cv"] for x in study["stability"] if x["backend"] == b}
        oi = f"{min(o):+.3f} … {max(o):+.3f} ({len(o)} shares)" if o else "—"
        rows.append(
            f"| {b} | {oi} | " + " | ".join(f"{s[k]:.4f}" if k in s else "—" for k in ("none", "cpu", "io")) + " |"
        )
    text = "\n".join(rows) + f"\n\nFloor (the kernel alone at SCHED_FIFO 1): S = {study['floor_cv']:.4f}.\n"
    if study.get("periodic"):
        text += "\n| periodic client (frame every 100 ms) | background | frame distance min / avg / max |\n|---|---|---|\n"
        for p in study["periodic"]:
            text += f"| {p['config']} | {p['background']} | {p['min_ms']:.1f} / {p['avg_ms']:.1f} / {p['max_ms']:.1f} ms |\n"
    for s in study.get("skipped", []):
        text += f"\nNot measured: {s}\n"
    return text + "\n" + commands(r)


def block_cost(out, exp):
    r = load(out, f"{exp}.json")
    if not r:
        return None
    groups = {g["label"]: g for g in r["groups"]}
    cost = r["merged"]["derived"]
    rows = [
        "| workload | shared: throughput (per CPU) | partitioned: throughput (per CPU) | cost in total | cost per remaining CPU |",
        "|---|---|---|---|---|",
    ]
    for w in r["settings"]["workloads"]:
        cells = []
        for config in ("shared", "partitioned"):
            g = groups.get(f"{config}/{w}")
            d = g["derived"] if g else {}
            cells.append(
                f"{d['throughput']:.4g} ({d['throughput_per_cpu']:.4g})" if "throughput" in d else "—"
            )
        total, per_cpu = cost.get(f"cost_percent_{w}"), cost.get(f"cost_per_cpu_percent_{w}")
        rows.append(
            f"| {w} | {cells[0]} | {cells[1]} | "
            + (f"{total:.1f} %" if total is not None else "—")
            + " | "
            + (f"{per_cpu:+.1f} %" if per_cpu is not None else "—")
            + " |"
        )
    text = "\n".join(rows) + "\n"
    if "cost_percent_geomean" in cost:
        text += f"\nGeometric mean of the total cost over the workloads: {cost['cost_percent_geomean']:.1f} %.\n"
    text += "\nThroughput: bogo-ops/s as stress-ng reports them; build: files/s.\n"
    return text + "\n" + commands(r)


def ns_of_ps(ps):
    return "—" if ps is None else f"{ps / 1000:.2f} ns"


def block_mem(out, exp):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    rows = [
        "| buffer | chase p50 shared | partitioned | chase p99.9 shared | partitioned | ratio | stream p50 shared | partitioned |",
        "|---|---|---|---|---|---|---|---|",
    ]
    def groups(r):
        return {g["label"]: metric(g, "access") for g in (r or {}).get("groups", [])}
    a, b = groups(shared), groups(part)
    sizes = [g["label"].split(" ", 1)[1] for g in (shared or part)["groups"] if g["label"].startswith("chase ")]
    for size in sizes:
        ca, cb = a.get(f"chase {size}"), b.get(f"chase {size}")
        sa, sb = a.get(f"stream {size}"), b.get(f"stream {size}")
        rows.append(
            f"| {size} | {ns_of_ps(ca and ca['p50'])} | {ns_of_ps(cb and cb['p50'])} | "
            f"{ns_of_ps(ca and ca['p99_9'])} | {ns_of_ps(cb and cb['p99_9'])} | "
            f"{ratio(ca and ca['p99_9'], cb and cb['p99_9'])} | {ns_of_ps(sa and sa['p50'])} | {ns_of_ps(sb and sb['p50'])} |"
        )
    text = "\n".join(rows) + "\n\nTime per access (one 64-byte line): chase = dependent loads over a random cycle, stream = in order.\n"
    return text + "\n" + commands(shared, part)


def block_cache(out, exp):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    rows = [
        "| | alone p50 | with competitor p50 | slowdown p50 | slowdown p99.9 | slowdown max |",
        "|---|---|---|---|---|---|",
    ]
    for config, r in (("shared", shared), ("partitioned", part)):
        if not r:
            continue
        g = {x["label"]: metric(x, "iteration") for x in r["groups"]}
        d = r["merged"]["derived"]
        alone, comp = g.get("alone"), g.get("with competitor")
        rows.append(
            f"| {config} | {us(alone and alone['p50'])} | {us(comp and comp['p50'])} | "
            + " | ".join(f"{d[k]:.3f}" if k in d else "—" for k in ("slowdown_p50", "slowdown_p99_9", "slowdown_max"))
            + " |"
        )
    text = "\n".join(rows) + "\n"
    ways = (part or shared)["settings"].get("cache_ways", {})
    if ways.get("note"):
        text += f"\nCache ways: {ways['note']}.\n"
    return text + "\n" + commands(shared, part)


BLOCKS = {
    "summary": lambda out: block_summary(out),
    "drops-cache": lambda out: block_cache(out, "drops-cache"),
    "baremetal-mem": lambda out: block_mem(out, "baremetal-mem"),
    "drops-cost": lambda out: block_cost(out, "drops-cost"),
    "drops-cycle": lambda out: block_timed(out, "drops-cycle", "latency", "wakeup latency", cycle_extra),
    "detach-loop": lambda out: block_timed(out, "detach-loop", "period_deviation", "period deviation (from 1 ms)", cycle_extra),
    "detach-fwq": lambda out: block_timed(out, "detach-fwq", "excess", "excess over the fastest quantum", fwq_extra),
    "detach-noise": lambda out: block_timed(out, "detach-noise", "gap", "gap", noise_extra),
    "baremetal-ipc": lambda out: block_ipc(out, "baremetal-ipc"),
    "rtrf-sleep": lambda out: block_timed(out, "rtrf-sleep", "jitter", "nanosleep jitter"),
    "rtrf-tasks": lambda out: block_tasks(out, "rtrf-tasks"),
    "sonic-reserve": lambda out: block_reserve(out, "sonic-reserve"),
}


def merged_stat(r, name, key):
    s = metric(r["merged"], name) if r else None
    return s and s[key]


def arrow(out, exp, name, key, label, fmt=us):
    shared, part = pair(out, exp)
    a, b = merged_stat(shared, name, key), merged_stat(part, name, key)
    if a is None and b is None:
        return None
    return f"{label} {fmt(a) if a is not None else '—'} → {fmt(b) if b is not None else '—'}"


def headline_cycle(out, exp):
    text = arrow(out, exp, "latency", "p99_9", "p99.9 latency")
    shared, part = pair(out, exp)
    if text and shared and part:
        text += (
            f"; missed periods {shared['merged']['counters'].get('missed_periods', 0)} → "
            f"{part['merged']['counters'].get('missed_periods', 0)}"
        )
    return text


def headline_derived(out, exp, key, label, suffix=" %"):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    v = [r["merged"]["derived"].get(key) if r else None for r in (shared, part)]
    def fmt(x):
        if x is None:
            return "—"
        return f"{x:.0f}{suffix}" if abs(x) >= 100 else f"{x:.3g}{suffix}"
    return f"{label} " + " → ".join(fmt(x) for x in v)


def headline_cache(out, exp):
    shared, part = pair(out, exp)
    if not shared and not part:
        return None
    v = [r["merged"]["derived"].get("slowdown_p50") if r else None for r in (shared, part)]
    return "slowdown p50 " + " → ".join("—" if x is None else f"{x:.3f}×" for x in v)


def headline_cost(out, exp):
    r = load(out, f"{exp}.json")
    if not r:
        return None
    d = r["merged"]["derived"]
    parts = []
    if "cost_percent_geomean" in d:
        parts.append(f"total {d['cost_percent_geomean']:.0f} % (geometric mean)")
    per_cpu = [v for k, v in d.items() if k.startswith("cost_per_cpu_percent_")]
    if per_cpu:
        parts.append(f"per remaining CPU {min(per_cpu):+.0f} … {max(per_cpu):+.0f} %")
    build = d.get("cost_per_cpu_percent_build")
    if build is not None:
        parts.append(f"build per CPU {build:+.0f} %")
    return "; ".join(parts) or None


def headline_mem(out, exp):
    shared, part = pair(out, exp)
    if not shared or not part:
        return None
    def chase(r, key):
        g = next((g for g in r["groups"] if g["label"].startswith("chase ")), None)
        s = metric(g, "access") if g else None
        return g and g["label"], s and s[key]
    label, a = chase(shared, "p99_9")
    _, b = chase(part, "p99_9")
    return f"{label} p99.9 {ns_of_ps(a)} → {ns_of_ps(b)}; DRAM-sized buffers alike"


def headline_ipc(out, exp):
    shared, part = pair(out, exp)
    if not shared or not part:
        return None
    def p50(r, label):
        g = next((g for g in r["groups"] if g["label"] == label), None)
        s = metric(g, "one_way_latency") if g else None
        return s and s["p50"]
    a, b = p50(shared, "tame-ring/8B"), p50(part, "tame-ring/8B")
    pipe = p50(part, "pipe/8B")
    return f"tame-ring 8 B p50 {a} → {b} ns (pipe {pipe} ns)"


def headline_tasks(out, exp):
    shared, part = pair(out, exp)
    if not shared or not part:
        return None
    def p99(doc, i):
        s = metric(doc["results"][i]["merged"], "jitter")
        return s and s["p99"]
    return (
        f"p99 at 1 / {part['values'][-1]} tasks: shared {us(p99(shared, 0))} / {us(p99(shared, -1))}, "
        f"partitioned {us(p99(part, 0))} / {us(p99(part, -1))}"
    )


def headline_reserve(out, exp):
    r = load(out, f"{exp}.json")
    if not r:
        return None
    study = r["reserve"]
    o = [x["o_i"] for x in study["overhead"] if x["backend"] == "server"]
    s = [x["cv"] for x in study["stability"] if x["backend"] == "server"]
    text = []
    if o:
        text.append(f"server O_I {min(o):+.3f} … {max(o):+.3f}")
    if s:
        text.append(f"S {min(s):.3f}–{max(s):.3f} (floor {study['floor_cv']:.3f})")
    loaded = [p for p in study.get("periodic", []) if p["background"] == 10]
    if loaded:
        text.append("frames with 10 background: " + ", ".join(f"{p['config']} avg {p['avg_ms']:.0f} ms" for p in loaded))
    return "; ".join(text) or None


# (id, paper, experiment, the paper's headline, this machine's headline)
SUMMARY = [
    ("drops-cycle", "DROPS", "100 µs periodic task", "tamed: ≤ 24 µs deviation (stand-alone 1–7 µs)",
     lambda out: headline_cycle(out, "drops-cycle")),
    ("drops-cache", "DROPS", "cache interference", "slowdown reduced by 74 % with L2 partitioned",
     lambda out: headline_cache(out, "drops-cache")),
    ("drops-cost", "DROPS; RT vs fast", "cost to the time-sharing side", "AIM VII: tamed 3.9 % slower; -rt kernel build 16.78 % slower",
     lambda out: headline_cost(out, "drops-cost")),
    ("detach-fwq", "Detaching", "fixed work quantum", "max deviation 18 % → 0.027 %",
     lambda out: headline_derived(out, "detach-fwq", "max_excess_percent", "max deviation")),
    ("detach-loop", "Detaching", "1 ms control loop", "±167 µs / 430 µs → 0.6 / 1.6 µs",
     lambda out: arrow(out, "detach-loop", "period_deviation", "p99_9", "p99.9 period deviation")),
    ("detach-noise", "Detaching", "noise and its causes", "(the deviation's cause)",
     lambda out: headline_derived(out, "detach-noise", "noise_share_percent", "noise share")),
    ("baremetal-mem", "Bare-metal", "memory-access time", "independent of the load on the other node",
     lambda out: headline_mem(out, "baremetal-mem")),
    ("baremetal-ipc", "Bare-metal", "channels to ordinary processes", "wait-free queues (no numbers)",
     lambda out: headline_ipc(out, "baremetal-ipc")),
    ("rtrf-sleep", "RT vs fast", "nanosleep jitter", "-rt ≤ 20 µs (p99.999 13 µs); stock up to 3 ms",
     lambda out: arrow(out, "rtrf-sleep", "jitter", "p99_9", "p99.9 jitter")),
    ("rtrf-tasks", "RT vs fast", "jitter against 1…12 tasks", "p99.999 and max grow > 3× from 1 to 12",
     lambda out: headline_tasks(out, "rtrf-tasks")),
    ("sonic-reserve", "SONiC", "overhead, stability, periodic client", "O_I 0.16–0.28; S 0.002–0.005; frames avg 100 ms reserved",
     lambda out: headline_reserve(out, "sonic-reserve")),
]


def block_summary(out):
    rows = [
        "| paper | experiment | the paper's headline | tame here, shared → partitioned |",
        "|---|---|---|---|",
    ]
    any_result = False
    for exp, paper, name, theirs, ours in SUMMARY:
        text = ours(out)
        any_result = any_result or text is not None
        rows.append(f"| {paper} | [{name}](#{exp}) | {theirs} | {text or '(not measured)'} |")
    return "\n".join(rows) + "\n" if any_result else None


# The figure of each experiment's `tame report` page shown beside its block.
FIGURES = {
    "drops-cycle": "cycle-tail.svg",
    "drops-cache": "cache-tail.svg",
    "drops-cost": "cost-ratios.svg",
    "detach-fwq": "fwq-tail.svg",
    "detach-loop": "cycle-tail.svg",
    "detach-noise": "noise-attribution.svg",
    "baremetal-mem": "mem-sweep.svg",
    "baremetal-ipc": "ipc-8b-tail.svg",
    "rtrf-sleep": "sleep-tail.svg",
    "rtrf-tasks": "sleep-tasks.svg",
    "sonic-reserve": "reserve-shares-over-time.svg",
}


def figure(out, exp, doc):
    """Copy the experiment's figure next to DOC (reproductions/ID.svg) and link it."""
    name = FIGURES.get(exp)
    source = name and os.path.join(out, f"{exp}-report", name)
    if not source or not os.path.exists(source):
        return ""
    folder = os.path.join(os.path.dirname(os.path.abspath(doc)), "reproductions")
    os.makedirs(folder, exist_ok=True)
    shutil.copyfile(source, os.path.join(folder, f"{exp}.svg"))
    return (
        f"\n![{exp}: {name[:-4]}](reproductions/{exp}.svg)\n\n"
        f"(One figure of the page `tame report` drew from these results: `{exp}-report/index.html` in the results directory.)\n"
    )


def run_mode(out, exp, default):
    """quick or full: as bench/reproduce.sh recorded it for the experiment (ID.mode)."""
    path = os.path.join(out, f"{exp}.mode")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip() or default
    if exp == "summary":
        modes = {run_mode(out, e, default) for e, *_ in SUMMARY if os.path.exists(os.path.join(out, f"{e}.mode"))}
        if len(modes) > 1:
            return "quick and full"
    return default


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: bench/reproductions.py OUT_DIR DOC [quick|full]")
    out, doc = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "full"
    with open(doc) as f:
        text = f.read()
    for exp, render in BLOCKS.items():
        pattern = re.compile(rf"(<!-- tame:{re.escape(exp)} -->\n).*?(<!-- /tame:{re.escape(exp)} -->)", re.S)
        if not pattern.search(text):
            print(f"{doc} has no block for {exp}: add <!-- tame:{exp} --> … <!-- /tame:{exp} -->", file=sys.stderr)
            continue
        body = render(out)
        if body is None:
            print(f"{exp}: no results in {out}; its block is kept", file=sys.stderr)
            continue
        body = f"*This machine ({run_mode(out, exp, mode)} run):*\n\n" + body + figure(out, exp, doc)
        text = pattern.sub(lambda m: m.group(1) + body + m.group(2), text)
    with open(doc, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
