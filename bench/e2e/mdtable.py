#!/usr/bin/env python3
"""bench/e2e/mdtable.py [--beyond] summary.csv... -- the paper's Table 2 layout (plus our columns) as
markdown; --beyond: the issue-6 layout (bits/param, ms/step, speedups vs fp32 / bf16 / the paper's
configuration, final train and val loss, load average)."""
import csv, sys


def beyond(path):
    rows = list(csv.DictReader(open(path)))
    print(f"<!-- {path} -->")
    print("| configuration | bits/param per rank (whole model / compressed part) | ms/step | speedup vs fp32 / bf16 / paper "
          "| codec ms | final train loss | final val loss | load (1 min) before → after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    f = lambda r, k: float(r[k]) if r.get(k, "") not in ("", "nan") else float("nan")
    for r in rows:
        cmp_ = f"{f(r, 'bits_cmp_meas'):.2f}" if r["compress"] != "none" else "-"
        print(f"| {r['label']} | {f(r, 'bits_meas'):.2f} / {cmp_} | {f(r, 'step_ms'):.0f} | "
              f"{f(r, 'speedup_vs_fp32'):.2f} / {f(r, 'speedup_vs_bf16'):.2f} / {f(r, 'speedup_vs_paper'):.2f} | "
              f"{f(r, 'codec_ms'):.0f} | {f(r, 'final_train_loss'):.4f} | {f(r, 'final_val_loss'):.4f} | "
              f"{r.get('load1_start', '')} → {r.get('load1_end', '')} |")
    print()


if sys.argv[1:2] == ["--beyond"]:
    for path in sys.argv[2:]: beyond(path)
    sys.exit(0)

LAYERS = {"none": "-", "non-attention": "non-attn", "all": "all"}
for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    print(f"<!-- {path} -->")
    print("| algorithm | compressed layers | iteration ms | speedup vs fp32 / bf16 | grad exchange ms | ms/MB | "
          "grad MB/rank/step | bits/param (meas / paper) | TAGC codec ms | val loss | gap vs fp32 / bf16 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        c = r["config"]
        if r.get("label"):  # summarize.py names the policies (values, index width and exchange)
            alg = r["label"]
        elif r["compress"] == "none":
            alg = "FSDP-like " + c
        else:
            alg = f"TAGC {r['ratio']}x {r['index_bits']}-bit" + (" adaptive" if r["adaptive"] == "1" else "")
        g = lambda k: r.get(k, "") or "nan"
        print(f"| {alg} | {LAYERS.get(r['compress'], r['compress'])} | {float(g('step_ms')):.0f} | "
              f"{float(g('speedup_vs_fp32')):.2f} / {float(g('speedup_vs_bf16')):.2f} | {float(g('grad_xchg_ms')):.0f} | "
              f"{float(g('ms_per_MB')):.1f} | {float(g('grad_MB_per_rank')):.2f} | {float(g('bits_meas')):.2f} / {float(g('bits_paper_model')):.2f} | "
              f"{float(g('codec_ms')):.0f} | {float(g('final_val_loss')):.3f} | "
              f"{float(g('val_gap_vs_fp32_pct')):+.1f}% / {float(g('val_gap_vs_bf16_pct')):+.1f}% |")
    print()
