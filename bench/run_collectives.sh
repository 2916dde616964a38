#!/usr/bin/env bash
# run_collectives.sh — baseline reduce-scatter (fp32, bf16) against every TAGC
# configuration on the throttled loopback, 2 and 4 MPI ranks, at two bandwidths.
# Writes results/collectives/<rate>_np<N>.{csv,txt} (results/ is gitignored);
# docs/collectives.md keeps a summary.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/run_collectives.sh [options] [-- extra tagc_bench_collectives flags]

Options:
  --build DIR      build directory (default: build); configured and built if the
                   benchmark is missing (cmake -G Ninja, Release, -j2)
  --rates LIST     tc rates, comma separated (default: 100mbit,1gbit)
  --np LIST        rank counts, comma separated (default: 2,4)
  --sizes LIST     gradient sizes (default: 1M,4M,16M,64M)
  --iters N        timed calls per configuration at most (default: 3)
  --warmup N       untimed calls first (default: 1)
  --max-seconds S  cut the timed calls of one configuration to ~S seconds (default: 20)
  --configs LIST   default: fp32,bf16,r2i1,r2i4,r4i1,r4i4,r10i1,r10i4
  --out DIR        default: results/collectives
  -h, --help       this text

Every job runs as
  scripts/slow_net.sh --rate RATE -- scripts/mpirun_local.sh -np N \
      --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_reduce_scatter_block_algorithm 4 \
      -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE build/bench/tagc_bench_collectives ...
(butterfly reduce-scatter: (N-1)/N x S per rank on the link, the ring model; one
OpenMP thread per rank, since the ranks already share the machine's cores).
Needs root (network namespace + tc); see scripts/slow_net.sh --help.
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$here/build" rates="100mbit,1gbit" nps="2,4" sizes="1M,4M,16M,64M" iters=3 warmup=1 maxs=20
configs="fp32,bf16,r2i1,r2i4,r4i1,r4i4,r10i1,r10i4" out="$here/results/collectives"
source "$here/scripts/lib/options.sh"
parse_options run_collectives.sh --build build --rates rates --np nps --sizes sizes --iters iters \
  --warmup warmup --max-seconds maxs --configs configs --out out -- "$@"

bench="$build/bench/tagc_bench_collectives"
if [[ ! -x $bench ]]; then
  echo "run_collectives.sh: building $bench"
  [[ -f $build/CMakeCache.txt ]] || cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" -j2 --target tagc_bench_collectives
fi
mkdir -p "$out"

IFS=, read -ra rate_list <<<"$rates"
IFS=, read -ra np_list <<<"$nps"
for rate in "${rate_list[@]}"; do
  for np in "${np_list[@]}"; do
    tag="${rate}_np${np}"
    echo "== $tag: sizes $sizes, iters $iters, warmup $warmup, ~${maxs} s per config"
    "$here/scripts/slow_net.sh" --rate "$rate" -- \
      "$here/scripts/mpirun_local.sh" -np "$np" \
      --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_reduce_scatter_block_algorithm 4 \
      -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
      "$bench" --sizes "$sizes" --iters "$iters" --warmup "$warmup" --max-seconds-per-config "$maxs" \
      --configs "$configs" --label "$rate" --csv "$out/$tag.csv" "${options_rest[@]}" 2>&1 | tee "$out/$tag.txt"
  done
done
echo "run_collectives.sh: results in $out"
