#!/usr/bin/env bash
# bench/e2e/overhead.sh CODEC_JSON [ELEMENTS] [WORLD] > overhead.csv
# Compression overhead as a fraction of the communication time it saves, per TAGC
# configuration and link bandwidth: compress/decode GB/s from tagc_bench_codec's JSON
# (--benchmark_out=X --benchmark_out_format=json; the 2-rank 16M-element rows, 1 OpenMP
# thread per rank; decode GB/s is of the shard's bytes), bits per
# parameter from the paper's Figure 2 (2b + 32/ratio), tagc::estimate_reduce_scatter
# (bench/e2e/overhead.cpp, compiled here with the system g++; header-only).
set -euo pipefail
cd "$(dirname "$0")/../.."
json=${1:?usage: overhead.sh CODEC_JSON [ELEMENTS] [WORLD]}
n=${2:-16777216} world=${3:-2}
bin=${TMPDIR:-/tmp}/tagc_e2e_overhead
if [[ ! -x $bin || bench/e2e/overhead.cpp -nt $bin ]]; then
  g++ -std=c++20 -O2 -Iinclude -o "$bin" bench/e2e/overhead.cpp
fi
echo "config,elements,world,bits_per_param,link_mbit_per_rank,dense_ms,tagc_comm_ms,codec_ms,saved_ms,overhead_over_saved,speedup,pays"
python3 - "$json" <<'PY' | while read -r name bits c d; do "$bin" "$name" "$n" "$world" "$bits" "$c" "$d"; done
import json, re, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    m = re.match(r"codec/index(\d+)_sketch(\d+)x/w2/(\d+)/1/", b["name"])
    if not m or int(m.group(3)) != 1 << 24: continue
    bits, ratio = int(m.group(1)), int(m.group(2))
    print(f"r{ratio}i{bits}", 2 * bits + 32 / ratio, b["compress_GBps"], b["decode_GBps"])
PY
