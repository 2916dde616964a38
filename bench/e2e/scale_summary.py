#!/usr/bin/env python3
"""bench/e2e/scale_summary.py -- the scaling study's CSV from bench/e2e/scale.sh's step logs.

Usage: scale_summary.py [--skip S] DIR   (reads DIR/<rate>/<config>-w<world>-n<nodes>.jsonl,
writes the CSV to stdout)

Per run, over the steps after the first S (warm-up):
  bits_per_param_internode  gradient bits per parameter per step that one node sends to
                            other nodes: rank 0's grad_bytes_internode x ranks_per_node x 8 /
                            params: the mean over ranks (grad_bytes_internode_mean) where the
                            log has it, else rank 0's (ranks of a node taken to send alike).
                            Logs without grad_bytes_internode fall back to grad_bytes (all
                            gradient bytes, intra-node included), marked in bytes_source.
  bits_per_param_rank       the same for rank 0 alone
  param_bits_per_param_internode  the parameter all-gather's bits per parameter per step that
                            one node sends to other nodes (param_bytes_internode, the same way;
                            empty for logs from before the trainer counted it)
  val_loss                  the last validation loss; gap_vs_fp32_pct against the fp32 run of
                            the same world, rate and nodes (else of the same world and rate)
  ms_per_step, comm_ms, wait_ms  means of step_ms, comm_ms, wait_ms
  grad_comm_ms, param_comm_ms    means of the worker's time in gradient reductions and in
                            parameter gathers (rank 0's; empty for logs from before the trainer
                            timed them)
"""
import glob, json, os, re, sys

args = sys.argv[1:]
skip = 1
if len(args) >= 2 and args[0] == "--skip":
    skip, args = int(args[1]), args[2:]
if len(args) != 1:
    sys.exit(__doc__)
root = args[0]

def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")

rows = []
for path in sorted(glob.glob(os.path.join(root, "*", "*.jsonl"))):
    rate = os.path.basename(os.path.dirname(path))
    m = re.fullmatch(r"(.+)-w(\d+)-n(\d+)\.jsonl", os.path.basename(path))
    if not m:
        continue
    config, world, nodes = m.group(1), int(m.group(2)), int(m.group(3))
    run, steps, vals = {}, [], []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            kind = j.get("type")
            if kind == "run": run = j
            elif kind == "step": steps.append(j)
            elif kind == "val": vals.append(j)
    if not run or not steps:
        print(f"scale_summary: {path}: no run header or no steps, left out", file=sys.stderr)
        continue
    k = world // nodes
    params = run["params"]
    kept = steps[skip:] or steps
    if all("grad_bytes_internode_mean" in s for s in kept):
        source = key = "grad_bytes_internode_mean"
    elif all("grad_bytes_internode" in s for s in kept):
        source = key = "grad_bytes_internode"
    else:
        source, key = "grad_bytes (all, fallback)", "grad_bytes"
    per_rank = mean(s[key] for s in kept) * 8 / params
    param_bits = (round(mean(s["param_bytes_internode"] for s in kept) * 8 / params * k, 3)
                  if all("param_bytes_internode" in s for s in kept) else "")
    rows.append(dict(config=config, world=world, nodes=nodes, ranks_per_node=k, steps=steps[-1]["step"],
                     bits_per_param_internode=round(per_rank * k, 3), val_loss=round(vals[-1]["val_loss"], 5) if vals else "",
                     gap_vs_fp32_pct="", ms_per_step=round(mean(s["step_ms"] for s in kept), 1), rate=rate,
                     bits_per_param_rank=round(per_rank, 3), bytes_source=source,
                     comm_ms=round(mean(s["comm_ms"] for s in kept), 1), wait_ms=round(mean(s.get("wait_ms", 0) for s in kept), 1),
                     param_bits_per_param_internode=param_bits,
                     **{c: round(mean(s[c] for s in kept), 1) if all(c in s for s in kept) else ""
                        for c in ("grad_comm_ms", "param_comm_ms")}))

for r in rows:
    same = [b for b in rows if b["config"] == "fp32" and b["world"] == r["world"] and b["rate"] == r["rate"] and b["val_loss"] != ""]
    ref = next((b for b in same if b["nodes"] == r["nodes"]), same[0] if same else None)
    if ref and r["val_loss"] != "":
        r["gap_vs_fp32_pct"] = round(100 * (r["val_loss"] / ref["val_loss"] - 1), 2) + 0.0  # no "-0.0"

cols = ["config", "world", "nodes", "ranks_per_node", "steps", "bits_per_param_internode", "val_loss", "gap_vs_fp32_pct",
        "ms_per_step", "rate", "bits_per_param_rank", "bytes_source", "comm_ms", "wait_ms", "param_bits_per_param_internode",
        "grad_comm_ms", "param_comm_ms"]
print(",".join(cols))
for r in sorted(rows, key=lambda r: (r["rate"], r["world"], r["nodes"], r["config"])):
    print(",".join(str(r[c]) for c in cols))
