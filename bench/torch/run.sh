#!/usr/bin/env bash
# The PyTorch side-by-side (issue 13): GPT-2 d2 on 2 DDP ranks over gloo, on
# scripts/slow_net.sh links, for DDP fp32, fp16_compress_hook, PowerSGD (ranks
# 1, 2, 4, one bucket) and tagc's DDP hook (paper configuration, best one), plus
# the tagc hook's own overhead on plain loopback and PyTorch's single-process
# step beside tagc-gpt2's. Configurations alternate within each repeat.
#
# Usage: bench/torch/run.sh [--rates 200mbit,1gbit] [--steps 8] [--repeats 1]
#                           [--configs fp32,fp16,...] [--out docs/results/torch]
#                           [--no-loopback] [--no-anchor]
# Needs root (network namespaces), Debian's PyTorch (scripts/install_deps.sh --torch).
# Writes OUT/runs.jsonl (one line per run), OUT/summary.csv, OUT/table.md, OUT/*.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
rates=200mbit,1gbit steps=8 repeats=1 out=docs/results/torch loopback=1 anchor=1
configs=fp32,fp16,powersgd-1,powersgd-2,powersgd-4,tagc-paper,tagc-best
source scripts/lib/options.sh
parse_options run.sh --rates rates --steps steps --repeats repeats --configs configs --out out \
  --no-loopback loopback=0 --no-anchor anchor=0 -- "$@"
py=/usr/bin/python3  # Debian's torch; a pyenv python3 on PATH would not see it
mkdir -p "$out"
if [[ ! -f build-py/python/tagc/_C*.so || python/tagc/torch.py -nt build-py/python/tagc/torch.py ]]; then
  cmake -S . -B build-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAGC_BUILD_PYTHON=ON \
    -DTAGC_BUILD_EXAMPLES=OFF -DTAGC_BUILD_BENCH=OFF >/dev/null
  cmake --build build-py --target tagc_python -j"$(nproc)"
fi
tok=build-py/bench-tokens
[[ -s $tok/train.bin ]] || $py bench/torch/tokenize_corpus.py data "$tok"
export PYTHONPATH=$PWD/build-py/python OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
runs=$out/runs.jsonl
bench() {  # bench RATE CONFIG
  local rate=$1 cfg=$2 line load
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [[ $rate == loopback ]]; then
    line=$($py bench/torch/ddp_bench.py --config "$cfg" --data "$tok" --steps "$steps" | grep '^{' | tail -1)
  else
    line=$(scripts/slow_net.sh --rate "$rate" -- $py bench/torch/ddp_bench.py --config "$cfg" --data "$tok" \
           --steps "$steps" 2>/dev/null | grep '^{' | tail -1)
  fi
  if [[ -z $line ]]; then echo "run.sh: $rate $cfg produced no result" >&2; return 0; fi
  echo "{\"rate\": \"$rate\", \"load\": $load, ${line#\{}" >> "$runs"
  echo "run.sh: $rate $cfg: $(echo "$line" | $py -c 'import json,sys; d=json.load(sys.stdin); print("%.0f ms/step, val %.3f" % (d["ms_per_step"], d["val_loss"]))')"
}
IFS=, read -r -a rate_list <<< "$rates"
IFS=, read -r -a config_list <<< "$configs"
for ((r = 0; r < repeats; r++)); do
  for rate in "${rate_list[@]}"; do
    # alternate the order between repeats so drift in the machine's load spreads evenly
    if ((r % 2)); then order=($(printf '%s\n' "${config_list[@]}" | tac)); else order=("${config_list[@]}"); fi
    for cfg in "${order[@]}"; do bench "$rate" "$cfg"; done
  done
  if ((loopback)); then  # the hook's own cost: fp32 vs the tagc machinery around the same all-reduce
    for cfg in fp32 tagc-dense fp32 tagc-dense; do bench loopback "$cfg"; done
  fi
done
if ((anchor)); then
  $py bench/torch/step_anchor.py --data "$tok" --out "$out/anchor.json" || echo "run.sh: anchor failed" >&2
fi
$py bench/torch/summarize.py "$out"
echo "run.sh: results in $out"
