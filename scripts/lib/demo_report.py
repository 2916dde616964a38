#!/usr/bin/env python3
"""scripts/lib/demo_report.py BASELINE.jsonl TAGC.jsonl OUTDIR -- what scripts/demo.sh prints
at the end: the side-by-side table of two tagc-gpt2 logs, the verdict lines (validation loss
gap, gradient traffic, bits per parameter, step time), and two PNGs in OUTDIR:
loss_vs_step.png and loss_vs_time.png (gnuplot, already a dependency of the benchmarks).

Per-rank figures are rank 0's (the log is rank 0's); step 1 (TCP set-up, first allocation)
is left out of the means. Time on the x axis of loss_vs_time is training time: the sum of
step_ms so far, validation excluded, so both runs are charged only for their steps.
"""
import json
import os
import shutil
import subprocess
import sys


def load(path):
    run, steps, vals = {}, [], []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if j["type"] == "run":
                run = j
            elif j["type"] == "step":
                steps.append(j)
            elif j["type"] == "val":
                vals.append((j["step"], j["val_loss"]))
    if not steps:
        sys.exit(f"demo_report: {path} has no step lines (did the run fail? see its .log)")
    return run, steps, vals


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def bits_per_param(run, steps):
    """Gradient bits each rank sends per parameter per step, in the ring model's accounting
    (bytes x 8 / params / ((N-1)/N)): 32 for an fp32 reduce-scatter of every gradient."""
    n, p = run.get("world", 0), run.get("params", 0)
    if n < 2 or p <= 0:
        return float("nan")
    return mean(s["grad_bytes"] for s in steps) * 8 / p / ((n - 1) / n)


def table(runs):
    def col(f):
        out = []
        for run, steps, vals in runs:
            s = steps[1:] if len(steps) > 1 else steps
            out.append(f(run, steps, s, vals))
        return out

    compressed = lambda a: "compression" in a[-1]
    MB = 1e6
    rows = [
        ("final train loss (last step)", col(lambda r, a, s, v: f"{a[-1]['loss']:.4f}")),
        ("train loss, mean of last 10", col(lambda r, a, s, v: f"{mean(x['loss'] for x in a[-10:]):.4f}")),
        ("val loss", col(lambda r, a, s, v: f"{v[-1][1]:.4f}" if v else "-")),
        ("step ms (mean)", col(lambda r, a, s, v: f"{mean(x['step_ms'] for x in s):.1f}")),
        ("  compute ms (not blocked)", col(lambda r, a, s, v: f"{mean(x['compute_ms'] for x in s):.1f}")),
        ("  comm ms (worker busy)", col(lambda r, a, s, v: f"{mean(x['comm_ms'] for x in s):.1f}")),
        ("  wait ms (compute blocked)", col(lambda r, a, s, v: f"{mean(x['wait_ms'] for x in s):.1f}")),
        ("  TAGC codec ms (in comm)", col(lambda r, a, s, v: f"{mean(sum(x['reducer_ms'][k] for k in ('sparsify', 'index', 'sketch', 'decode', 'residual')) for x in s):.1f}" if 'reducer_ms' in a[-1] else "-")),
        ("training time s (sum of steps)", col(lambda r, a, s, v: f"{sum(x['step_ms'] for x in a) / 1e3:.1f}")),
        ("grad reduce MB sent/rank/step", col(lambda r, a, s, v: f"{mean(x['grad_bytes'] for x in s) / MB:.3f}")),
        ("grad bits per parameter", col(lambda r, a, s, v: f"{bits_per_param(r, s):.2f}")),
        ("param all-gather MB/rank/step", col(lambda r, a, s, v: f"{mean(x['bytes'].get('all_gather', 0) for x in s) / MB:.3f}")),
        ("tokens/s", col(lambda r, a, s, v: f"{mean(x['tokens'] / x['step_ms'] * 1e3 for x in s):.0f}")),
        ("sparsity reached (mean)", col(lambda r, a, s, v: f"{mean(x['compression']['sparsity'] for x in s):.4f}" if compressed(a) else "-")),
        ("unresolved entries/step, all", col(lambda r, a, s, v: f"{mean(x['compression_all_ranks']['unresolved'] for x in s):.1f}" if compressed(a) else "-")),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'':{w}}  {'baseline':>12}  {'TAGC':>12}")
    for name, (a, b) in rows:
        print(f"{name:{w}}  {a:>12}  {b:>12}")


def verdict(runs):
    (rb, sb, vb), (rt, st, vt) = runs
    skip = lambda s: s[1:] if len(s) > 1 else s
    print()
    if vb and vt:
        gap = (vt[-1][1] / vb[-1][1] - 1) * 100
        print(f"val loss: TAGC {vt[-1][1]:.4f} against the baseline's {vb[-1][1]:.4f} ({gap:+.2f} %)")
    gb = [mean(x["grad_bytes"] for x in skip(s)) for s in (sb, st)]
    if gb[1] > 0:
        print(f"gradient traffic reduced {gb[0] / gb[1]:.2f}x (bytes each rank sends for gradient reductions)")
    bb, bt = bits_per_param(rb, skip(sb)), bits_per_param(rt, skip(st))
    print(f"bits per parameter: {bt:.2f} against {bb:.2f} (gradient bits each rank sends per parameter per step)")
    ms = [mean(x["step_ms"] for x in skip(s)) for s in (sb, st)]
    print(f"step time: {ms[1]:.0f} ms against {ms[0]:.0f} ms ({ms[0] / ms[1]:.2f}x the baseline's speed; "
          "on a shared machine two runs move 20-40 %)")


def plots(runs, outdir):
    if not shutil.which("gnuplot"):
        print("demo_report: gnuplot not found (scripts/install_deps.sh installs gnuplot-nox); no plots", file=sys.stderr)
        return []
    names = ("baseline", "tagc")
    for (run, steps, vals), n in zip(runs, names):
        t, smooth = 0.0, []
        with open(os.path.join(outdir, f"{n}_steps.dat"), "w") as f:
            for s in steps:
                t += s["step_ms"] / 1e3
                smooth = (smooth + [s["loss"]])[-10:]
                f.write(f"{s['step']} {t:.3f} {s['loss']:.5f} {mean(smooth):.5f}\n")
        time_at = {s["step"]: 0.0 for s in steps}
        t = 0.0
        time_at[0] = 0.0
        for s in steps:
            t += s["step_ms"] / 1e3
            time_at[s["step"]] = t
        with open(os.path.join(outdir, f"{n}_val.dat"), "w") as f:
            for step, loss in vals:
                f.write(f"{step} {time_at.get(step, t):.3f} {loss:.5f}\n")
    (rb, sb, _), (rt, st, _) = runs
    skip = lambda s: s[1:] if len(s) > 1 else s
    bits = bits_per_param(rt, skip(st))
    title = (f"GPT-2 {rb.get('model', '')}, {rb.get('world', '?')} ranks: fp32 reduce-scatter (32 bits/param) "
             f"vs TAGC ({bits:.2f} bits/param)")
    out_step, out_time = (os.path.join(outdir, f) for f in ("loss_vs_step.png", "loss_vs_time.png"))
    d = outdir
    series = lambda x: (
        f"'{d}/baseline_steps.dat' using {x}:4 with lines lw 1.5 lc rgb '#1f77b4' title 'baseline train (mean of 10)', "
        f"'{d}/tagc_steps.dat' using {x}:4 with lines lw 1.5 lc rgb '#d62728' title 'TAGC train (mean of 10)', "
        f"'{d}/baseline_val.dat' using {x - 0}:3 with linespoints pt 7 ps 0.8 lw 2 lc rgb '#1f77b4' dt 2 title 'baseline val', "
        f"'{d}/tagc_val.dat' using {x - 0}:3 with linespoints pt 5 ps 0.8 lw 2 lc rgb '#d62728' dt 2 title 'TAGC val'")
    # the .dat columns: steps = step, time, loss, smoothed loss; val = step, time, val loss
    script = [
        "set terminal pngcairo size 800,480 font ',10'", "set grid", "set key top right", "set ylabel 'loss'",
        # the first steps fall from ~10.9; the curves part where the loss is below ~8
        "set yrange [:8.5]",
        f"set output '{out_step}'", "set xlabel 'step'", f"set title '{title}'",
        "plot " + series(1),
        f"set output '{out_time}'", "set xlabel 'training time, s (sum of step times)'", f"set title '{title}'",
        "plot " + series(2),
    ]
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)
    return [out_step, out_time]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    runs = [load(p) for p in sys.argv[1:3]]
    table(runs)
    verdict(runs)
    pngs = plots(runs, sys.argv[3])
    if pngs:
        print("\nplots: " + "  ".join(pngs))


if __name__ == "__main__":
    main()
