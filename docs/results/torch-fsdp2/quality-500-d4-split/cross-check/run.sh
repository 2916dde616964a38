#!/usr/bin/env bash
# The d4 cross-check (docs/results.md, "What the d4 gap is"): tagc-gpt2 on the FSDP2 bench's
# corpus from PyTorch's initial weights and from its own seeds; train_losses.csv holds the
# step logs' mean losses (the .out files print every 10th/50th/100th step).
set -euo pipefail
cd "$(dirname "$0")/../../../../.."
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
bin=build/examples/gpt2/train/tagc-gpt2 out=${OUT:-/tmp/d4-cross-check}
mkdir -p "$out"
bash scripts/torch_root.sh run python3 bench/torch/export_llmc.py build-torch/pt-d4.bin --depth 4
routed=(--compress non-attention --values packed-bf16 --index-bits routed --sparsity 0.9875 --sparsity-start 0)
for steps in 500 1000; do
  T=build-torch/bench-tokens-spread-$((steps * 512 + 1))   # fsdp2_run.sh tokenizes these (one epoch)
  for init in pt 1337 1 2; do
    if [[ $init == pt ]]; then src=(--init-from build-torch/pt-d4.bin --seed 1337); else src=(--model d4 --seed "$init"); fi
    common=(train "${src[@]}" --B 4 --T 64 --lr 1e-3 --warmup 25 --schedule cosine --lr-min 1e-4 --clip 1.0
            --val-batches 8 --steps "$steps" --val-every 250 --train-data "$T/train.bin" --val-data "$T/val.bin")
    scripts/mpirun_local.sh -np 2 "$bin" "${common[@]}" --compress none --baseline-dtype bf16 \
      --log "$out/$steps-$init-bf16.jsonl" > "$out/$steps-$init-bf16.out" 2>&1
    scripts/mpirun_local.sh -np 2 "$bin" "${common[@]}" "${routed[@]}" --sparsity-warmup $((steps / 3)) \
      --log "$out/$steps-$init-routed.jsonl" > "$out/$steps-$init-routed.out" 2>&1
  done
done
# The per-step trace against FSDP2 (trace-compare.csv): 40 steps of
#   tagc-gpt2 train --init-from build-torch/pt-d4.bin ... "${routed[@]}" --sparsity-warmup 166 --baseline-dtype bf16 --log L
# and
#   bash scripts/torch_root.sh run env PYTHONPATH=$PWD/build-torch/python USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo \
#     python3 bench/torch/fsdp2_trace.py --trace-steps 40 --config tagc-routed \
#     --data build-torch/bench-tokens-spread-256001 --steps 500 --world 2 --depth 4 --warmup 25
