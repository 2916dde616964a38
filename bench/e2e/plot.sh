#!/usr/bin/env bash
# bench/e2e/plot.sh DIR -- gnuplot PNGs from the .dat files bench/e2e/summarize.py wrote:
#   val_vs_step.png, val_vs_wall.png   (the paper's Figure 4, and the same against wall time)
#   train_vs_step.png                  (train loss, every step)
#   breakdown.png                      (step-time breakdown per configuration)
#   bits.png                           (bits per parameter per rank: measured vs Figure 2 formula)
set -euo pipefail
d=${1:?usage: plot.sh DIR}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
title=$(sed -n 's/^rate: \(.*\) np: \([0-9]*\) steps: \([0-9]*\).*model: \(.*\)/GPT-2 \4, \2 ranks, loopback tbf \1, \3 steps/p' "$d/meta.txt" 2>/dev/null || true)
mapfile -t cfgs < <(awk 'NR>1 {print $1}' "$d/breakdown.dat")
curves() {  # file-suffix xcol ycol
  local s="" i=1
  for c in "${cfgs[@]}"; do
    [[ -s "$d/$c.$1.dat" ]] || continue
    lw=1.5; [[ $c == fp32 || $c == bf16 ]] && lw=3
    s+="${s:+, }'$d/$c.$1.dat' using $2:$3 with linespoints lw $lw pt $i ps 0.8 title '$c'"
    i=$((i + 1))
  done
  echo "$s"
}
gnuplot <<EOF
set terminal pngcairo size 900,600 font ",10" noenhanced
set grid
set key outside right
set output '$d/val_vs_step.png'
set title 'Validation loss vs step ($title)'
set xlabel 'step'; set ylabel 'val loss'
plot $(curves val 1 3)
set output '$d/val_vs_wall.png'
set title 'Validation loss vs training wall time (sum of step times; $title)'
set xlabel 'wall time, s'
plot $(curves val 2 3)
set output '$d/train_vs_step.png'
set title 'Train loss (mean over ranks) vs step ($title)'
set xlabel 'step'; set ylabel 'train loss'
plot $(curves train 1 3)
set output '$d/breakdown.png'
set terminal pngcairo size 1100,600 font ',10' noenhanced
set title 'Step time breakdown, mean ms per step ($title)'
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -30
set ylabel 'ms'; set xlabel ''
set key inside right top title 'left: step = compute + wait; right: comm thread'
plot newhistogram 'step' lt 1, '$d/breakdown.dat' using 2:xtic(1) title 'compute (not blocked)', '' using 3 title 'wait (compute blocked on comm)', \
     newhistogram 'comm thread busy' lt 3, '' using 4:xtic(1) title 'param all-gather (est.)', '' using 5 title 'plain reduce-scatter', \
     '' using 6 title 'TAGC collectives', '' using 7 title 'TAGC encode+decode'
set output '$d/bits.png'
set title 'Gradient bits / parameter / rank, (N-1)/N x paper accounting ($title)'
set style histogram clustered gap 1
set key inside right top title ''
set yrange [0:*]
set ylabel 'bits / parameter / rank'
plot '$d/bits.dat' using 2:xtic(1) title 'paper Fig. 2: (2b + 32/ratio)(N-1)/N', '' using 3 title 'measured, compressed params only', \
     '' using 4 title 'paper formula, whole model (plain part at 32)', '' using 5 title 'measured, whole model'
EOF
ls "$d"/*.png
