#!/usr/bin/env python3
"""bench/e2e/codec_compare.py BEFORE.txt AFTER.txt -- issue 10's before/after table from two
tagc_bench_codec console outputs (--benchmark_counters_tabular=true, the program run twice into
each file, as docs/results/codec_before.txt and codec_after.txt hold): per row, compress / decode /
call as x memcpy, the mean of the runs and their spread (min-max)."""
import re, sys

SUFFIX = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}


def number(tok):
    m = re.fullmatch(r"([-+0-9.eE]+)([numkMG]?)", tok)
    return float(m.group(1)) * SUFFIX.get(m.group(2), 1.0) if m else float("nan")


def load(path):
    rows, header = {}, None
    for line in open(path):
        if line.startswith("Benchmark"):
            header = line.split()
            continue
        if not header or not line.startswith("codec/"):
            continue
        f = line.split()
        # name, Time, unit, CPU, unit, Iterations, counters...
        counters = dict(zip(header[4:], f[6:]))
        name = re.sub(r"/(min_time:[^/]*|iterations:\d+|real_time)", "", f[0])
        rows.setdefault(name, []).append({k: number(v) for k, v in counters.items()})
    return rows


def cell(runs, key):
    v = [r[key] for r in runs if key in r]
    if not v:
        return "-"
    mean = sum(v) / len(v)
    return f"{mean:.3g} ({min(v):.3g}-{max(v):.3g})" if len(v) > 1 else f"{mean:.3g}"


before, after = load(sys.argv[1]), load(sys.argv[2])
keys = ["compress/memcpy", "decode/memcpy", "call/memcpy"]
print("| row (values/ranks/elements/threads) | " + " | ".join(f"{k} before | after" for k in keys) + " |")
print("|---|" + "---:|---:|" * len(keys))
for name in list(dict.fromkeys(list(before) + list(after))):
    b, a = before.get(name, []), after.get(name, [])
    print(f"| {name.replace('codec/', '')} | " + " | ".join(f"{cell(b, k)} | {cell(a, k)}" for k in keys) + " |")
