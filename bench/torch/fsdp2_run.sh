#!/usr/bin/env bash
# The FSDP2 side by side (issue 29): GPT-2 in PyTorch 2.14 (scripts/torch_root.sh's root) on
# N FSDP2 ranks over gloo, on scripts/slow_net.sh links: FSDP2's reduce-scatter in fp32 and in
# bf16, tagc's paper configuration and its best (bench/torch/fsdp2_bench.py). Configurations
# alternate within each repeat; every run is one line of OUT/runs.jsonl, so an interrupted
# sweep keeps what finished and a rerun with other --nps/--depths adds to it.
#
# Usage: bench/torch/fsdp2_run.sh [--rates 200mbit,1gbit] [--steps 500] [--repeats 1]
#                                 [--nps 2] [--depths 2] [--configs fp32,bf16,tagc-paper,tagc-best[,tagc-routed]]
#                                 [--out docs/results/torch-fsdp2] [--jobs 1] [--compress non-attention]
#                                 [--granularity unit]
# --jobs K runs K configurations at once, each on its own shaped link (namespace): for the
# losses and bytes (deterministic) when the machine has no time for one run after the other;
# their ms/step then share the CPU and are not a timing (runs.jsonl notes "jobs").
# --compress: which parameters the tagc configurations compress (apply_fsdp2's compress=:
# non-attention, matrices, all); the rest go plainly. --granularity: a reducer per unit's
# compressed matrices (unit) or per matrix (parameter; apply_fsdp2's granularity=).
# Needs root (network namespaces, the chroot). Builds the root and the extension on first use.
# Writes OUT/runs.jsonl, OUT/summary.csv, OUT/table.md, OUT/*.png (bench/torch/summarize.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
rates=200mbit,1gbit steps=500 repeats=1 nps=2 depths=2 out=docs/results/torch-fsdp2
configs=fp32,bf16,tagc-paper,tagc-best jobs=1 compress=non-attention granularity=unit
source scripts/lib/options.sh
parse_options fsdp2_run.sh --rates rates --steps steps --repeats repeats --nps nps --depths depths \
  --configs configs --out out --jobs jobs --compress compress --granularity granularity -- "$@"
mkdir -p "$out"
if [[ ! -f build-torch/python/tagc/_C.cpython*.so || python/tagc/torch.py -nt build-torch/python/tagc/torch.py ||
      python/tagc/_fsdp2.py -nt build-torch/python/tagc/_fsdp2.py ]]; then
  bash scripts/build_python.sh
fi
# The corpus: the root sees only this repository (bind-mounted), so the tokenizer reads a copy of data/.
# Enough training tokens that the longest run reads each once (the benchmark's B 4 x T 64 per rank):
# a corpus seen several times makes the validation loss measure memorisation.
most_np=$(tr , '\n' <<< "$nps" | sort -n | tail -1)
train_tokens=$((steps * most_np * 4 * 64 + 1))
tok=build-torch/bench-tokens-spread-$train_tokens
if [[ ! -s $tok/train.bin ]]; then
  mkdir -p build-torch/bench-data
  cp -rL data/gpt2 data/corpus build-torch/bench-data/
  bash scripts/torch_root.sh run python3 bench/torch/tokenize_corpus.py build-torch/bench-data "$tok" \
    --train-tokens "$train_tokens"
fi
in_root=(bash scripts/torch_root.sh run env PYTHONPATH="$PWD/build-torch/python" OMP_NUM_THREADS=1
         OPENBLAS_NUM_THREADS=1 python3)
runs=$out/runs.jsonl
bench() {  # bench RATE NP DEPTH CONFIG
  local rate=$1 np=$2 depth=$3 cfg=$4 line load log
  load=$(cut -d' ' -f1 /proc/loadavg)
  # rank 0's progress every 50 steps; named by the output folder too, so that two sweeps at
  # once never write one file (a truncated shared log lost a run's result)
  log=${TMPDIR:-/tmp}/fsdp2_run.$(basename "$out").$rate.np$np.d$depth.$cfg.log
  scripts/slow_net.sh --rate "$rate" -- "${in_root[@]}" bench/torch/fsdp2_bench.py --config "$cfg" --data "$tok" \
    --steps "$steps" --world "$np" --depth "$depth" --warmup 25 --compress "$compress" --granularity "$granularity" --progress 50 >"$log" 2>&1 || true
  line=$(grep -a '^{' "$log" | tail -1 || true)
  if [[ -z $line ]]; then
    echo "fsdp2_run.sh: $rate np$np d$depth $cfg produced no result; its log:" >&2
    tail -20 "$log" >&2
    return 0
  fi
  # the link label carries the world and the depth: summarize.py groups by it
  echo "{\"rate\": \"$rate-np$np-d$depth\", \"load\": $load, \"jobs\": $jobs, ${line#\{}" >> "$runs"
  echo "fsdp2_run.sh: $rate np$np d$depth $cfg: $(echo "$line" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f ms/step, wire %.2f MB/rank/step, val %.4f" % (d["ms_per_step"], d["lo_bytes_per_rank_step"] / 1e6, d["val_loss"]))')"
}
IFS=, read -r -a rate_list <<< "$rates"
IFS=, read -r -a np_list <<< "$nps"
IFS=, read -r -a depth_list <<< "$depths"
IFS=, read -r -a config_list <<< "$configs"
for ((r = 0; r < repeats; r++)); do
  for np in "${np_list[@]}"; do
    for depth in "${depth_list[@]}"; do
      for rate in "${rate_list[@]}"; do
        # alternate the order between repeats so drift in the machine's load spreads evenly
        if ((r % 2)); then order=($(printf '%s\n' "${config_list[@]}" | tac)); else order=("${config_list[@]}"); fi
        for cfg in "${order[@]}"; do
          bench "$rate" "$np" "$depth" "$cfg" &
          while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
        done
      done
    done
  done
done
wait
python3 bench/torch/summarize.py "$out" --fsdp2
echo "fsdp2_run.sh: results in $out"
