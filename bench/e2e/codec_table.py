#!/usr/bin/env python3
"""bench/e2e/codec_table.py codec.json [codec.csv] -- tagc_bench_codec's JSON as a markdown table (+ CSV)."""
import csv, json, re, sys

rows = []
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    m = re.match(r"codec/index(\d+)/sketch(\d+)x/(\d+)", b["name"])
    if not m: continue
    n = int(m.group(3))
    rows.append(dict(config=f"r{m.group(2)}i{m.group(1)}", elements=n, size=f"{n >> 20}M", ms_per_call=round(b["real_time"], 1),
                     memcpy_GBps=round(b["memcpy_GBps"], 2),
                     **{f"{k}_GBps": round(b[f"{k}_GBps"], 4) for k in ("sparsify", "index", "sketch", "compress", "decode")},
                     **{f"{k}_x_memcpy": round(b[f"{k}/memcpy"], 4) for k in ("sparsify", "index", "sketch", "compress", "decode")}))
if len(sys.argv) > 2:
    with open(sys.argv[2], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
print("| config | elements | sparsify GB/s | index GB/s | sketch GB/s | decode GB/s | compress GB/s (x memcpy) | decode x memcpy | memcpy GB/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['config']} | {r['size']} | {r['sparsify_GBps']:.3f} | {r['index_GBps']:.3f} | {r['sketch_GBps']:.3f} | {r['decode_GBps']:.3f} | "
          f"{r['compress_GBps']:.3f} ({r['compress_x_memcpy']:.3f}) | {r['decode_x_memcpy']:.4f} | {r['memcpy_GBps']:.1f} |")
