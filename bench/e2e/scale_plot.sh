#!/usr/bin/env bash
# bench/e2e/scale_plot.sh -- the scaling study's picture: gradient bits per parameter that
# a node sends to other nodes, and the validation-loss gap to fp32, against the world size,
# one line per configuration and layout (flat: every rank its own node; 2l: two levels).
#
# Usage: bench/e2e/scale_plot.sh CSV PNG   (CSV from bench/e2e/scale_summary.py)
set -euo pipefail
csv=$1 png=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One data file per (config, layout): world bits gap
python3 - "$csv" "$tmp" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
series = collections.defaultdict(list)
for r in rows:
    layout = "flat" if r["ranks_per_node"] == "1" else "2l"
    series[f'{r["config"]} {layout}'].append((int(r["world"]), r["bits_per_param_internode"], r["gap_vs_fp32_pct"] or "NaN"))
with open(f"{sys.argv[2]}/series.txt", "w") as index:
    for i, (name, pts) in enumerate(sorted(series.items())):
        with open(f"{sys.argv[2]}/s{i}.dat", "w") as f:
            for w, b, g in sorted(pts):
                f.write(f"{w} {b} {g}\n")
        index.write(f"{i}\t{name}\n")
PY
plot_bits="" plot_gap=""
while IFS=$'\t' read -r i name; do
  plot_bits+="${plot_bits:+, }'$tmp/s$i.dat' using 1:2 with linespoints title '$name'"
  plot_gap+="${plot_gap:+, }'$tmp/s$i.dat' using 1:3 with linespoints title '$name'"
done <"$tmp/series.txt"
gnuplot <<GP
set terminal pngcairo size 1100,450 font ",10"
set output '$png'
set multiplot layout 1,2
set logscale x 2
set xlabel 'ranks'
set key top left font ",8"
set grid
set title 'gradient bits per parameter a node sends to other nodes'
set ylabel 'bits / parameter / node'
plot $plot_bits
set title 'validation loss against fp32 (same world)'
set ylabel 'gap, %'
plot $plot_gap
unset multiplot
GP
echo "scale_plot: $png"
