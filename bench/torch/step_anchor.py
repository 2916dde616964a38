#!/usr/bin/env python3
"""PyTorch's CPU GPT-2 step beside tagc-gpt2's, same shape (d2, B=4, T=64), one process.

A step is forward + backward + AdamW on one rank, no communication; runs of the
two alternate (the machine is shared), each reports its per-step median after 2
warm-up steps. tagc-gpt2 runs as `mpirun -np 1 tagc-gpt2 train --compress none`
on the same token shard and reads step_ms from its JSONL log.
Usage: step_anchor.py --data DIR --out anchor.json [--tagc-gpt2 PATH] [--repeats 2] [--steps 8]
"""
import argparse
import json
import os
import statistics as st
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402
from ddp_bench import read_shard  # noqa: E402


def torch_steps(data, steps, b, t, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    model = gpt2.GPT2(2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    tokens = read_shard(os.path.join(data, "train.bin"))
    ms = []
    for i in range(steps):
        w = tokens[i * b * t: i * b * t + b * t + 1]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(w[:-1].view(b, t), w[1:].view(b, t)).backward()
        opt.step()
        ms.append(1e3 * (time.perf_counter() - t0))
    return st.median(ms[2:])


def tagc_steps(exe, data, steps, b, t, threads):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
        subprocess.run([os.path.join(root, "scripts/mpirun_local.sh"), "-np", "1", "-x", "OMP_NUM_THREADS",
                        "-x", "OPENBLAS_NUM_THREADS", exe, "train", "--model", "d2", "--B", str(b), "--T", str(t),
                        "--steps", str(steps), "--compress", "none", "--baseline-dtype", "fp32",
                        "--train-data", os.path.join(data, "train.bin"), "--val-data", os.path.join(data, "val.bin"),
                        "--val-every", "0", "--log", log], check=True, env=env, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in open(log) if '"step_ms"' in l]
        return st.median([r["step_ms"] for r in rows][2:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tagc-gpt2", default="build-gpt2/examples/gpt2/train/tagc-gpt2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    res = {"pytorch %s (CPU, Debian)" % torch.__version__: []}
    have_tagc = os.path.exists(a.tagc_gpt2)
    if have_tagc:
        res["tagc-gpt2"] = []
    else:
        print("step_anchor: %s not built; PyTorch only" % a.tagc_gpt2, file=sys.stderr)
    for _ in range(a.repeats):
        res["pytorch %s (CPU, Debian)" % torch.__version__].append(torch_steps(a.data, a.steps, 4, 64, a.threads))
        if have_tagc:
            res["tagc-gpt2"].append(tagc_steps(a.tagc_gpt2, a.data, a.steps, 4, 64, a.threads))
    out = {"B": 4, "T": 64, "threads": a.threads, "steps": a.steps, "results": res,
           "load": open("/proc/loadavg").read().split()[0]}
    json.dump(out, open(a.out, "w"), indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
