#!/usr/bin/env bash
# bench/e2e/run.sh -- the paper's experiment (TAGC, arXiv 2504.05638, Table 2 / Figure 4)
# end to end on this machine: the sharded GPT-2 trainer (tagc-gpt2) on N MPI ranks over a
# rate-limited loopback (scripts/slow_net.sh), the same seed / data / schedule for every
# configuration, then a CSV summary, a table and gnuplot PNGs.
#
# Usage: bench/e2e/run.sh [--quick | --beyond] [--rate RATE] [--np N] [--steps S] [--val-every K]
#                         [--configs a,b,...] [--out DIR] [--model d2]
#        bench/e2e/run.sh --sweep [--rates 50mbit,100mbit,...] [--np N] [--steps S]
#        bench/e2e/run.sh --long [quality|timing|report|all] [...]
#   --long        issue 11, time to quality: bench/e2e/long.sh (default `all`: 1000-step runs on
#                 loopback, step times at 200 Mbit/s, 1 and 10 Gbit/s, docs/results CSVs + plots)
#   --quick       baseline fp32 vs TAGC 10x 1-bit adaptive, 12 steps, at 200mbit unless
#                 --rate is given (~2 minutes)
#   --beyond      issue 6: fp32, bf16, the paper's 10x 1-bit, and the beyond-paper policies
#                 (exact reduce-scattered index, bf16 sketch cells, packed fp32/bf16 values,
#                 adaptive theta), 40 steps at 200mbit unless --rate is given (~25 minutes)
#   --rate RATE   tc tbf rate of the shared loopback link (default 1gbit: fp32 spends ~55-60% of its step communicating; see docs/results.md)
#   --configs     subset of: fp32 bf16 r2i1 r2i4 r4i1 r4i4 r10i1 r10i4 r10i1-all r10i1-adaptive
#                 r4i1-adaptive; beyond the paper: r10x-rs r10x-rs-adaptive r4x-rs-adaptive
#                 r10i1-bf16 r10x-rs-bf16 r10x-rs-bf16-adaptive packed packed-bf16
#                 (--beyond: the issue-6 table, see docs/results.md)
#   --sweep       only time the fp32 baseline at several rates (pick the rate where it
#                 spends about half its step communicating); writes sweep.csv
# Environment: BUILD_DIR (default build), DATA_DIR (default data).
# Output: results/e2e-<date>[-quick]/ : <config>.jsonl (--log), <config>.log (stderr),
#         summary.csv, table.txt, *.png.  Needs root (network namespace) and gnuplot.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ "${1:-}" == --long ]]; then
  shift
  [[ $# -gt 0 ]] || set -- all
  exec bench/e2e/long.sh "$@"
fi

QUICK=0 BEYOND=0 SWEEP=0 RATE="" NP=2 STEPS="" VAL_EVERY="" CONFIGS="" OUTDIR="" MODEL=d2
RATES=50mbit,100mbit,200mbit,500mbit,1gbit
source scripts/lib/options.sh
parse_options run.sh --quick QUICK=1 --beyond BEYOND=1 --sweep SWEEP=1 --rate RATE --rates RATES --np NP \
  --steps STEPS --val-every VAL_EVERY --configs CONFIGS --out OUTDIR --model MODEL -- "$@"

BUILD_DIR="${BUILD_DIR:-build}"
DATA_DIR="${DATA_DIR:-data}"
EXE="$BUILD_DIR/examples/gpt2/train/tagc-gpt2"
source scripts/lib/gpt2_ready.sh
gpt2_build "$BUILD_DIR"
gpt2_tokens "$EXE" "$DATA_DIR" "$DATA_DIR/tokens"

if [[ $SWEEP -eq 1 ]]; then
  : "${STEPS:=6}" "${VAL_EVERY:=0}"
  : "${OUTDIR:=results/e2e-$(date +%Y%m%d)-sweep}"
elif [[ $BEYOND -eq 1 ]]; then
  # issue 6: the beyond-paper policies against the paper's configuration and both baselines
  : "${RATE:=200mbit}" "${STEPS:=40}" "${VAL_EVERY:=10}"
  : "${CONFIGS:=fp32,bf16,r10i1,r10i1-adaptive,r10x-rs,r10i1-bf16,r10x-rs-bf16,r10x-rs-bf16-adaptive,packed,packed-bf16}"
  : "${OUTDIR:=results/e2e-$(date +%Y%m%d)-beyond}"
elif [[ $QUICK -eq 1 ]]; then
  : "${RATE:=200mbit}"  # the regime where the CPU codec pays (docs/results.md)
  : "${STEPS:=12}" "${VAL_EVERY:=4}" "${CONFIGS:=fp32,r10i1-adaptive}"
  : "${OUTDIR:=results/e2e-$(date +%Y%m%d)-quick}"
else
  : "${STEPS:=40}" "${VAL_EVERY:=10}" "${CONFIGS:=fp32,bf16,r2i1,r2i4,r4i1,r4i4,r10i1,r10i4,r10i1-all,r10i1-adaptive}"
  : "${OUTDIR:=results/e2e-$(date +%Y%m%d)}"
fi
: "${RATE:=1gbit}"
mkdir -p "$OUTDIR"

# One OpenMP thread per rank (the ranks share 2 cores); Open MPI's bandwidth-optimal
# (butterfly) reduce-scatter, so fp32 puts (N-1)/N x S per rank on the link (ring model),
# as in docs/collectives.md. The tagc Reducer's collectives get the same settings.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm=4

flags_of() {
  case "$1" in
    fp32) echo "--compress none --baseline-dtype fp32" ;;
    bf16) echo "--compress none --baseline-dtype bf16" ;;
    r2i1) echo "--compress non-attention --ratio 2 --index-bits 1" ;;
    r2i4) echo "--compress non-attention --ratio 2 --index-bits 4" ;;
    r4i1) echo "--compress non-attention --ratio 4 --index-bits 1" ;;
    r4i4) echo "--compress non-attention --ratio 4 --index-bits 4" ;;
    r10i1) echo "--compress non-attention --ratio 10 --index-bits 1" ;;
    r10i4) echo "--compress non-attention --ratio 10 --index-bits 4" ;;
    r10i1-all) echo "--compress all --ratio 10 --index-bits 1" ;;
    r10i1-adaptive) echo "--compress non-attention --ratio 10 --index-bits 1 --adaptive" ;;
    r4i1-adaptive) echo "--compress non-attention --ratio 4 --index-bits 1 --adaptive" ;;
    # beyond the paper (issue 6): exact index reduce-scattered (half the index bytes),
    # packed exact values at the union positions (fp32 / bf16)
    r10x-rs) echo "--compress non-attention --ratio 10 --index-bits exact --index-exchange reduce-scatter" ;;
    r10x-rs-adaptive) echo "--compress non-attention --ratio 10 --index-bits exact --index-exchange reduce-scatter --adaptive" ;;
    r4x-rs-adaptive) echo "--compress non-attention --ratio 4 --index-bits exact --index-exchange reduce-scatter --adaptive" ;;
    r10i1-bf16) echo "--compress non-attention --values sketch-bf16 --ratio 10 --index-bits 1" ;;
    r10x-rs-bf16) echo "--compress non-attention --values sketch-bf16 --ratio 10 --index-bits exact --index-exchange reduce-scatter" ;;
    r10x-rs-bf16-adaptive) echo "--compress non-attention --values sketch-bf16 --ratio 10 --index-bits exact --index-exchange reduce-scatter --adaptive" ;;
    packed) echo "--compress non-attention --values packed --index-bits exact" ;;
    packed-bf16) echo "--compress non-attention --values packed-bf16 --index-bits exact" ;;
    *) echo "run.sh: unknown config $1" >&2; return 2 ;;
  esac
}

common=(train --model "$MODEL" --B 4 --T 64 --lr 1e-3 --warmup 5 --schedule cosine --lr-min 1e-4
        --clip 1.0 --seed 1337 --val-batches 8 --print-every 5
        --train-data "$DATA_DIR/tokens/corpus_train.bin" --val-data "$DATA_DIR/tokens/corpus_val.bin")

run_one() {  # rate name steps val_every extra-flags...
  local rate=$1 name=$2 steps=$3 ve=$4; shift 4
  local load0; load0=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "== $name  (rate $rate, $NP ranks, $steps steps; load: $load0)"
  local t0=$SECONDS
  scripts/slow_net.sh --rate "$rate" -- scripts/mpirun_local.sh -np "$NP" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
    "$EXE" "${common[@]}" --steps "$steps" --val-every "$ve" "$@" --log "$OUTDIR/$name.jsonl" \
    >"$OUTDIR/$name.log" 2>&1 || { echo "run.sh: $name failed, see $OUTDIR/$name.log" >&2; tail -5 "$OUTDIR/$name.log" >&2; return 1; }
  echo "   $((SECONDS - t0)) s wall; $(grep -E '^step [0-9]+/' "$OUTDIR/$name.log" | tail -1)"
  # load average (1, 5, 15 min) before and after: the machine is shared, the figures noisy
  echo "$name $load0 $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUTDIR/load.txt"
}

{ echo "date: $(date -u +%FT%TZ)"; echo "host: $(nproc --all) cpus; $(uptime)"; echo "git: $(git rev-parse --short HEAD)";
  echo "rate: $([[ $SWEEP -eq 1 ]] && echo "$RATES" || echo "$RATE") np: $NP steps: $STEPS val_every: $VAL_EVERY model: $MODEL"; } >"$OUTDIR/meta.txt"

if [[ $SWEEP -eq 1 ]]; then
  for r in ${RATES//,/ }; do
    run_one "$r" "fp32-$r" "$STEPS" 0 $(flags_of fp32) --val-batches 0
  done
  python3 bench/e2e/summarize.py --sweep "$OUTDIR"
  exit 0
fi

for c in ${CONFIGS//,/ }; do
  run_one "$RATE" "$c" "$STEPS" "$VAL_EVERY" $(flags_of "$c")
done
python3 bench/e2e/summarize.py --np "$NP" --rate "$RATE" "$OUTDIR"
bench/e2e/plot.sh "$OUTDIR"
echo "== results in $OUTDIR"
