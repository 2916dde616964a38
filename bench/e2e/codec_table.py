#!/usr/bin/env python3
"""bench/e2e/codec_table.py codec.json [codec.csv] -- tagc_bench_codec's JSON as a markdown table (+ CSV)."""
import csv, json, re, sys

rows = []
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    # codec/index1_sketch10x/w2/16777216/1/2/...: values, ranks, elements, OpenMP threads per rank
    m = re.match(r"codec/index(\d+)_(\w+)/w(\d+)/(\d+)/(\d+)/", b["name"])
    if not m or "error_occurred" in b: continue
    n = int(m.group(4))
    rows.append(dict(config=f"{m.group(2)}-i{m.group(1)}", ranks=int(m.group(3)), elements=n, size=f"{n >> 20}M",
                     threads=int(m.group(5)), ms_per_call=round(b["call_ms"], 1), memcpy_GBps=round(b["memcpy_GBps"], 2),
                     **{f"{k}_ms": round(b[f"{k}_ms"], 2) for k in ("compress", "residual", "decode")},
                     **{f"{k}_x_memcpy": round(b[f"{k}/memcpy"], 4) for k in ("compress", "residual", "decode", "call")}))
if len(sys.argv) > 2:
    with open(sys.argv[2], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
print("| config | ranks | elements | threads | call ms | compress x memcpy | (residual) | decode x memcpy (shard) | call x memcpy | memcpy GB/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['config']} | {r['ranks']} | {r['size']} | {r['threads']} | {r['ms_per_call']} | {r['compress_x_memcpy']:.4f} | "
          f"{r['residual_x_memcpy']:.4f} | {r['decode_x_memcpy']:.4f} | {r['call_x_memcpy']:.4f} | {r['memcpy_GBps']:.1f} |")
