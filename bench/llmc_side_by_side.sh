#!/usr/bin/env bash
# llmc_side_by_side.sh: time a GPT-2 training step (forward + backward + AdamW) of llm.c's CPU
# trainer (train_gpt2.c, built elsewhere with its Makefile) and of our gpt2_step_bench (the
# model tagc-gpt2 computes with, DeviceModel<exec::host>) on the
# same checkpoint, data, config and thread count, alternating the two (ABAB...) so that other
# load on the machine hits both alike, and print the ratio. Contains no llm.c code: it runs
# the binary you give it.
#
#   bench/llmc_side_by_side.sh PATH/TO/llm.c/train_gpt2 [options]
#     --bench PATH      our gpt2_step_bench (default: build/examples/gpt2/model/gpt2_step_bench)
#     --model dN        model to time (default d2); llm.c's main() fixes B=4, T=64
#     --threads "2 1"   OMP_NUM_THREADS values to compare at (default "2 1")
#     --rounds N        llm.c/ours pairs per thread count (default 3)
#     --steps N         timed steps per run, after step 0 (default 8; at most 9, see below)
#     --blas-core MODE  env: OpenBLAS kernels as the environment selects (OPENBLAS_CORETYPE);
#                       auto: run ours with OPENBLAS_CORETYPE unset, so OpenBLAS picks the
#                       kernels from the CPU's own cpuid (never a core the CPU lacks);
#                       both: one "ours" run of each per round (the default: llm.c is
#                       built with -march=native, so "auto" is the like-for-like figure;
#                       "env" shows what a pinned environment, such as this project's
#                       sandbox with OPENBLAS_CORETYPE=Haswell on AVX-512 CPUs, costs)
#     --trainer PATH    also time tagc-gpt2 train (the full loop: sharding, comm worker, grad
#                       norm, AdamW) on 1 MPI rank, via scripts/mpirun_local.sh; wall time only
#                       (its step_ms), first step not counted
#     --train PATH --val PATH   llm.c token shards (default data/tokens/corpus_{train,val}.bin)
#     --keep DIR        work directory to keep (default: a temporary one, removed)
#
# llm.c's main() reads fixed paths relative to its working directory: the script makes a
# directory with gpt2_124M.bin -> a checkpoint of --model written by gpt2_step_bench
# (--save-llmc) and dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin -> the shards,
# and runs the unmodified binary there. It prints "step k: ... (took X ms)"; the script reads
# its output line by line, samples the process's CPU time (utime + stime, /proc/PID/stat) at
# every step line, and stops it after step --steps (before step 10, where llm.c runs its
# next validation inside the stretch between two step lines). Step 0 is not counted on either
# side (first touch of gradients and AdamW moments). Both start from the same weights: the
# "val loss" llm.c prints before step 0 (5 unshuffled batches of the val shard) is computed by
# ours too (--val) and the two are printed side by side.
set -euo pipefail

die() { echo "llmc_side_by_side.sh: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: $0 PATH/TO/train_gpt2 [--bench P] [--model dN] [--threads \"2 1\"] [--rounds N] [--steps N] [--blas-core env|auto|both] [--train P] [--val P] [--keep DIR]"
root=$(cd "$(dirname "$0")/.." && pwd)
llmc=$(realpath "$1"); shift
[[ -x $llmc ]] || die "llm.c trainer '$llmc' is not an executable file"
bench=$root/build/examples/gpt2/model/gpt2_step_bench
model=d2 threads="2 1" rounds=3 steps=8 blas=both keep="" trainer=""
train=$root/data/tokens/corpus_train.bin val=$root/data/tokens/corpus_val.bin
source "$root/scripts/lib/options.sh"
parse_options llmc_side_by_side.sh --bench bench --model model --threads threads --rounds rounds --steps steps \
  --blas-core blas --train train --val val --keep keep --trainer trainer -- "$@"
[[ -x $bench ]] || die "gpt2_step_bench '$bench' not found (build it: cmake --build build --target gpt2_step_bench, or pass --bench)"
[[ $steps =~ ^[0-9]+$ && $steps -ge 1 && $steps -le 9 ]] || die "--steps must be 1..9 (llm.c validates again at step 10), got '$steps'"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || die "--rounds must be a positive integer, got '$rounds'"
case $blas in env|auto|both) ;; *) die "--blas-core must be env, auto or both, got '$blas'" ;; esac
for f in "$train" "$val"; do [[ -r $f ]] || die "token shard '$f' not readable (scripts/fetch_data.sh, then tagc-gpt2 prepare)"; done
[[ -z $trainer || -x $trainer ]] || die "--trainer '$trainer' is not an executable (build tagc-gpt2)"
command -v stdbuf >/dev/null || die "stdbuf (coreutils) is needed to read llm.c's output line by line"

if [[ -n $keep ]]; then work=$keep; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work/dev/data/tinyshakespeare"
ln -sf "$(realpath "$train")" "$work/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
ln -sf "$(realpath "$val")" "$work/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
"$bench" --model "$model" --save-llmc "$work/gpt2_124M.bin" >/dev/null
tick=$(getconf CLK_TCK)

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
minmax() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%s..%s", lo, hi}'; }

# run_llmc THREADS -> "wall_median cpu_median val_loss"; per-step figures of steps 1..steps
run_llmc() {
  local t=$1 line pid k walls="" cpus="" prev="" now vloss=nan
  coproc LLMC { cd "$work" && OMP_NUM_THREADS=$t exec stdbuf -oL "$llmc" 2>&1; }
  pid=$LLMC_PID
  while IFS= read -r line <&"${LLMC[0]}"; do
    if [[ $line =~ ^val\ loss\ ([0-9.]+) && $vloss == nan ]]; then vloss=${BASH_REMATCH[1]}; fi
    if [[ $line =~ ^step\ ([0-9]+):\ train\ loss\ [0-9.naif-]+\ \(took\ ([0-9.]+)\ ms ]]; then
      k=${BASH_REMATCH[1]}
      now=$(awk '{print $14 + $15}' "/proc/$pid/stat")
      if (( k >= 1 )); then
        walls+="${BASH_REMATCH[2]}"$'\n'
        cpus+=$(awk -v a="$now" -v b="$prev" -v h="$tick" 'BEGIN {print (a - b) * 1000 / h}')$'\n'
      fi
      prev=$now
      (( k >= steps )) && break
    fi
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [[ -n $walls ]] || die "no step lines from $llmc (is it llm.c's train_gpt2?)"
  echo "$(printf '%s' "$walls" | median) $(printf '%s' "$cpus" | median) $vloss"
}

# run_ours THREADS CORE -> "wall_median cpu_median val_loss core"
run_ours() {
  local t=$1 core=$2 out
  local -a envs=(env OMP_NUM_THREADS="$t")
  [[ $core == auto ]] && envs=(env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$t")
  out=$("${envs[@]}" "$bench" --init-from "$work/gpt2_124M.bin" --model "$model" --data "$train" --val "$val" --steps "$steps")
  awk '/^OpenBLAS: core/ {c=$3} /^val loss/ {v=$3} /^RESULT/ {for (i=1;i<=NF;i++) {split($i,kv,"="); r[kv[1]]=kv[2]}}
       END {print r["wall_median_ms"], r["cpu_median_ms"], v, (c == "" ? "?" : c)}' <<<"$out"
}

# run_trainer THREADS -> "wall_median val_loss": tagc-gpt2 train, 1 rank, llm.c's hyperparameters
run_trainer() {
  local t=$1 log=$work/trainer.jsonl
  rm -f "$log"
  OMP_NUM_THREADS=$t "$root/scripts/mpirun_local.sh" -np 1 "$trainer" train --model "$model" --B 4 --T 64 \
    --steps $((steps + 1)) --init-from "$work/gpt2_124M.bin" --compress none --train-data "$train" \
    --val-data "$val" --val-batches 5 --val-every 0 --lr 1e-4 --schedule constant --clip none --log "$log" \
    >/dev/null 2>&1 || die "tagc-gpt2 train failed (run it by hand to see why)"
  python3 - "$log" <<'PY'
import json, statistics, sys
ms, val = [], float("nan")
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "step_ms" in d and d["step"] > 1: ms.append(d["step_ms"])
    if "val_loss" in d: val = d["val_loss"]
print(f"{statistics.median(ms):.2f} {val:.6f}")
PY
}

cores=()
case $blas in env) cores=(env) ;; auto) cores=(auto) ;; both) cores=(env auto) ;; esac
echo "llm.c: $llmc"
echo "ours:  $bench (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; --blas-core $blas)"
echo "model $model, B=4 T=64, $steps timed steps per run (step 0 not counted), $rounds rounds, alternating"
echo "(val loss: 5 val batches at the shared initial weights, printed by both; they agree to float rounding)"
declare -A W C
for t in $threads; do
  for ((r = 1; r <= rounds; r++)); do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    read -r lw lc lv < <(run_llmc "$t") || true
    [[ -n ${lw:-} ]] || die "no timing from $llmc at $t thread(s)"
    printf 'threads %s round %d  llm.c  wall %8.1f ms  cpu %8.1f ms  val loss %s  (load %s)\n' "$t" "$r" "$lw" "$lc" "$lv" "$load"
    W[llmc,$t]+="$lw"$'\n'; C[llmc,$t]+="$lc"$'\n'
    for core in "${cores[@]}"; do
      load=$(cut -d' ' -f1-3 /proc/loadavg)
      read -r ow oc ov oname < <(run_ours "$t" "$core") || true
      [[ -n ${ow:-} ]] || die "no RESULT line from $bench at $t thread(s)"
      printf 'threads %s round %d  ours   wall %8.1f ms  cpu %8.1f ms  val loss %s  (load %s, OpenBLAS %s)\n' "$t" "$r" "$ow" "$oc" "$ov" "$load" "$oname"
      W[$core,$t]+="$ow"$'\n'; C[$core,$t]+="$oc"$'\n'
      awk -v a="$lv" -v b="$ov" 'BEGIN {d = (a - b) / a; if (d < 0) d = -d;
        if (d > 1e-5) printf "  WARNING: val loss differs by %.1e (relative): not the same computation?\n", d}'
    done
    if [[ -n $trainer ]]; then
      load=$(cut -d' ' -f1-3 /proc/loadavg)
      read -r tw tv < <(run_trainer "$t") || true
      [[ -n ${tw:-} ]] || die "no step times from $trainer at $t thread(s)"
      printf 'threads %s round %d  tagc-gpt2 train (1 rank)  wall %8.1f ms  (load %s; val loss after training %s)\n' "$t" "$r" "$tw" "$load" "$tv"
      W[trainer,$t]+="$tw"$'\n'
    fi
  done
done
echo
echo "summary: medians over rounds of each run's median step (range over rounds)"
for t in $threads; do
  lw=$(printf '%s' "${W[llmc,$t]}" | median); lc=$(printf '%s' "${C[llmc,$t]}" | median)
  printf 'threads %s  llm.c        wall %8.1f ms (%s)  cpu %8.1f ms (%s)\n' "$t" "$lw" "$(printf '%s' "${W[llmc,$t]}" | minmax)" "$lc" "$(printf '%s' "${C[llmc,$t]}" | minmax)"
  for core in "${cores[@]}"; do
    ow=$(printf '%s' "${W[$core,$t]}" | median); oc=$(printf '%s' "${C[$core,$t]}" | median)
    printf 'threads %s  ours (%-4s)  wall %8.1f ms (%s)  cpu %8.1f ms (%s)\n' "$t" "$core" "$ow" "$(printf '%s' "${W[$core,$t]}" | minmax)" "$oc" "$(printf '%s' "${C[$core,$t]}" | minmax)"
    awk -v t="$t" -v c="$core" -v lw="$lw" -v ow="$ow" -v lc="$lc" -v oc="$oc" \
      'BEGIN {printf "threads %s  RATIO llm.c/ours (%s): wall %.2fx, cpu %.2fx\n", t, c, lw / ow, lc / oc}'
  done
  if [[ -n $trainer ]]; then
    tw=$(printf '%s' "${W[trainer,$t]}" | median)
    printf 'threads %s  tagc-gpt2 train, 1 rank (OpenBLAS as the environment selects)  wall %8.1f ms (%s)\n' "$t" "$tw" "$(printf '%s' "${W[trainer,$t]}" | minmax)"
    awk -v t="$t" -v lw="$lw" -v tw="$tw" 'BEGIN {printf "threads %s  RATIO llm.c/tagc-gpt2 train: wall %.2fx\n", t, lw / tw}'
  fi
done
