#!/usr/bin/env python3
"""llmc_losses.py: the losses of llm.c's CPU trainer (train_gpt2.c's stdout) against those of
`tagc-gpt2 train --log` on the same run, step by step.

    python3 bench/llmc_losses.py LLMC_STDOUT TAGC_LOG_JSONL [--tol 1e-4]

The two number steps differently: llm.c's "step k: train loss" is the loss before its (k+1)-th
update, ours is logged after it, so llm.c's step k is our step k + 1; a val loss is at the same
step number in both (both follow k updates). The run that makes the two comparable
(examples/gpt2/train/README.md, "Same run as llm.c"):

    tagc-gpt2 train --init-from gpt2_124M.bin --B 4 --T 64 --steps 41 --lr 1e-4 \\
        --schedule constant --clip none --compress none --val-every 10 --val-batches 5 \\
        --train-data TRAIN.bin --val-data VAL.bin --log ours.jsonl

against llm.c's train_gpt2 run in a directory holding gpt2_124M.bin and
dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin (the same files). llm.c's train_gpt2.c
shuffles its training batches (dataloader_init(..., should_shuffle=1)) and ours reads them in
file order, so only the step-0 val loss agrees unless llm.c is built with that flag 0.
Exits 1 when a difference exceeds --tol (absolute), 2 on unreadable input.
"""
import argparse
import json
import re
import sys


def read_llmc(path):
    train, val, pending = {}, {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"val loss ([-0-9.naif]+)", line)
        if m:
            pending = float(m.group(1))
            continue
        m = re.match(r"step (\d+): train loss ([-0-9.naif]+)", line)
        if m:
            k = int(m.group(1))
            train[k] = float(m.group(2))
            if pending is not None:  # llm.c validates just before the step line it precedes
                val[k], pending = pending, None
    return train, val


def read_ours(path):
    train, val = {}, {}
    for line in open(path):
        d = json.loads(line)
        if d.get("type") == "step":
            train[d["step"]] = d["loss"]
        elif d.get("type") == "val":
            val[d["step"]] = d["val_loss"]
    return train, val


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("llmc_stdout")
    ap.add_argument("tagc_log")
    ap.add_argument("--tol", type=float, default=1e-4, help="largest absolute difference accepted (1e-4)")
    a = ap.parse_args()
    try:
        lt, lv = read_llmc(a.llmc_stdout)
        ot, ov = read_ours(a.tagc_log)
    except (OSError, ValueError) as e:
        print(f"llmc_losses.py: {e}", file=sys.stderr)
        return 2
    rows = [("train", k, lt[k], ot[k + 1]) for k in sorted(lt) if k + 1 in ot]
    rows += [("val", k, lv[k], ov[k]) for k in sorted(lv) if k in ov]
    if not rows:
        print("llmc_losses.py: no step in common (is the first file llm.c's stdout, the second a --log?)",
              file=sys.stderr)
        return 2
    for kind, k, x, y in rows:
        print(f"{kind:5s} llm.c step {k:3d}  llm.c {x:.6f}  tagc {y:.6f}  |diff| {abs(x - y):.1e}")
    worst = 0.0
    for kind in ("train", "val"):
        d = [abs(x - y) for t, _, x, y in rows if t == kind]
        if d:
            worst = max(worst, max(d))
            print(f"{kind}: {len(d)} steps, max |diff| {max(d):.1e}")
    return 0 if worst <= a.tol else 1


if __name__ == "__main__":
    sys.exit(main())
