#!/usr/bin/env bash
# C++ trainer d4 on the FSDP2 bench's corpus: does the data explain FSDP2's d4 gap?
cd /work/main
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
T=build-torch/bench-tokens-spread-256001
common=(train --model d4 --B 4 --T 64 --lr 1e-3 --warmup 25 --schedule cosine --lr-min 1e-4 --clip 1.0 --seed 1337
        --val-batches 8 --steps 500 --val-every 250 --print-every 50 --train-data $T/train.bin --val-data $T/val.bin)
scripts/mpirun_local.sh -np 2 /work/runs/diag/tagc-gpt2 "${common[@]}" --compress none --baseline-dtype bf16 --log /work/runs/diag/bf16.jsonl > /work/runs/diag/bf16.out 2>&1
scripts/mpirun_local.sh -np 2 /work/runs/diag/tagc-gpt2 "${common[@]}" --compress non-attention --values packed-bf16 --index-bits routed --sparsity 0.9875 --sparsity-warmup 166 --sparsity-start 0 --log /work/runs/diag/routed.jsonl > /work/runs/diag/routed.out 2>&1
echo done > /work/runs/diag/DONE
