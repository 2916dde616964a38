#!/usr/bin/env python3
"""runs.jsonl (bench/torch/run.sh) -> summary.csv, table.md and gnuplot PNGs in the same folder.

"exposed ms": per step, from DDP's call of the last hook to backward's return (hook
configurations only; mean over ranks and runs): the reduction's time backward did not
hide, waiting for the other rank included.

Per (link, configuration): ms per step (mean over runs, and the spread: min..max of
the runs' means, and the median and 10-90 % range of every timed step), bytes on
lo per rank per step (wire: payload + TCP/IP headers + gloo's own messages), the
ring-model bytes tagc's reducers counted, and the val / last train loss.

--fsdp2 (bench/torch/fsdp2_run.sh's runs): the table adds the ring-model bytes of the
gradient reduction and of FSDP2's parameter all-gather, and compares with bf16 reduce
(the baseline the issue names) as well as fp32; a train-loss plot per link."""
import csv
import json
import os
import statistics as st
import subprocess
import sys

ORDER = ["fp32", "bf16", "fp16", "powersgd-1", "powersgd-2", "powersgd-4", "tagc-paper", "tagc-best", "tagc-routed", "tagc-best-sched", "tagc-dense"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def fmt(v, spec):
    """A table cell: v formatted, or a dash where the runs did not measure it."""
    return spec % v if isinstance(v, (int, float)) else "–"


def step_cells(r):
    """The cells both tables open with: link, config, ms/step (runs: min–max), step median (p10–p90)."""
    return [r["link"], r["config"],
            "%s (%s–%s)" % (fmt(r["ms_per_step"], "%.0f"), fmt(r["ms_min_run"], "%.0f"), fmt(r["ms_max_run"], "%.0f")),
            "%s (%s–%s)" % (fmt(r["ms_step_median"], "%.0f"), fmt(r["ms_step_p10"], "%.0f"),
                            fmt(r["ms_step_p90"], "%.0f"))]


def table_row(cells):
    return "| " + " | ".join(cells) + " |"


def write_table(folder, lines):
    with open(os.path.join(folder, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


# gnuplot: a bar per configuration (ms per step, mean of runs) with the runs' min-max,
# from a .dat file of rows `index "config" mean min max ...`.
MS_BARS = """set style fill solid 0.6
set boxwidth 0.6
set ylabel 'ms / step'
set yrange [0:*]
set xtics rotate by -30
plot '{dat}' using 1:3:xtic(2) with boxes notitle, '' using 1:3:4:5 with yerrorbars lc rgb 'black' notitle
"""


def write_ms_bars(folder, rate, rows, extra=()):
    """ms_<rate>.dat, what MS_BARS plots: a line per row, `index "config" mean min max`
    (ms per step), then the columns `extra` names as (key, format) pairs. Its path."""
    dat = os.path.join(folder, "ms_%s.dat" % rate)
    with open(dat, "w") as f:
        for i, r in enumerate(rows):
            cells = ['%d "%s" %.1f %.1f %.1f' % (i, r["config"], r["ms_per_step"], r["ms_min_run"], r["ms_max_run"])]
            f.write(" ".join(cells + [spec % r[k] for k, spec in extra]) + "\n")
    return dat


def gnuplot(script):
    """Runs gnuplot on script; a missing or failing gnuplot costs the PNG, not the tables."""
    try:
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("summarize: gnuplot failed (%s); PNG not written" % e, file=sys.stderr)


def main(folder, fsdp2=False):
    runs = [json.loads(l) for l in open(os.path.join(folder, "runs.jsonl")) if l.strip()]
    for r in runs:  # tagc runs that name their split (fsdp2_bench --granularity) are told apart by it
        if "granularity" in r:
            r["config"] = "%s-%s" % (r["config"], r["granularity"])
    groups = {}
    for r in runs:
        groups.setdefault((r["rate"], r["config"]), []).append(r)
    rows = []
    for (rate, cfg), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], ORDER.index(kv[0][1]) if kv[0][1] in ORDER else 99)):
        means = [r["ms_per_step"] for r in rs]
        steps = [s for r in rs for s in r["step_ms"]]
        fp32 = groups.get((rate, "fp32"))
        row = {
            "link": rate, "config": cfg, "runs": len(rs), "steps": rs[0]["steps"], "timed_steps": rs[0]["timed_steps"],
            "ms_per_step": st.mean(means), "ms_min_run": min(means), "ms_max_run": max(means),
            "ms_step_median": st.median(steps), "ms_step_p10": pct(steps, 0.1), "ms_step_p90": pct(steps, 0.9),
            "wire_MB_per_rank_step": st.mean(r["lo_bytes_per_rank_step"] for r in rs) / 1e6,
            "tagc_ring_MB_per_step": (st.mean(r["tagc_model_bytes_per_step"] for r in rs) / 1e6
                                      if "tagc_model_bytes_per_step" in rs[0] else ""),
            "tagc_reduce_ms_per_step": (st.mean(r["tagc_reduce_ms_per_step"] for r in rs)
                                        if "tagc_reduce_ms_per_step" in rs[0] else ""),
            # split of "in reducer" (runs from before the split lack it): mean over runs and ranks
            **{"tagc_%s_ms_per_step" % k: (st.mean(st.mean(r["tagc_%s_ms_per_step" % k]) for r in rs)
                                           if "tagc_%s_ms_per_step" % k in rs[0] else "")
               for k in ("codec", "exchange", "wait")},
            "exposed_ms_per_step": (st.mean(st.mean(r["exposed_ms_per_step"]) for r in rs)
                                    if "exposed_ms_per_step" in rs[0] else ""),
            "val_loss": st.mean(r["val_loss"] for r in rs),
            "train_loss_last3": st.mean(st.mean(r["train_loss"][-3:]) for r in rs),
            "load_avg": st.mean(r["load"] for r in rs),
        }
        for k in ("grad", "allgather"):  # FSDP2 runs: ring-model bytes of each collective
            if "%s_bytes_per_rank_step" % k in rs[0]:
                row["%s_MB_per_rank_step" % k] = st.mean(r["%s_bytes_per_rank_step" % k] for r in rs) / 1e6
        for k in ("forward", "backward", "optimizer"):  # FSDP2 runs: rank 0's step in phases
            if "%s_ms_per_step" % k in rs[0]:
                row["%s_ms_per_step" % k] = st.mean(r["%s_ms_per_step" % k] for r in rs)
        if fp32:
            f = st.mean(r["ms_per_step"] for r in fp32)
            row["speedup_vs_fp32"] = f / row["ms_per_step"]
            fw = st.mean(r["lo_bytes_per_rank_step"] for r in fp32)
            row["wire_bytes_vs_fp32"] = row["wire_MB_per_rank_step"] * 1e6 / fw
        bf16 = groups.get((rate, "bf16"))
        if bf16 and "grad_MB_per_rank_step" in row:
            row["speedup_vs_bf16"] = st.mean(r["ms_per_step"] for r in bf16) / row["ms_per_step"]
            row["grad_bytes_vs_bf16"] = row["grad_MB_per_rank_step"] * 1e6 / st.mean(
                r["grad_bytes_per_rank_step"] for r in bf16)
            row["val_loss_vs_bf16"] = row["val_loss"] / st.mean(r["val_loss"] for r in bf16) - 1
        rows.append(row)
    keys = [k for r in rows for k in r]
    keys = list(dict.fromkeys(keys))
    with open(os.path.join(folder, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    if fsdp2:
        fsdp2_report(folder, rows, runs)
        return

    lines = ["| link | config | ms/step (runs: min–max) | step median (p10–p90) | speedup vs fp32 | wire MB/rank/step | "
             "vs fp32 | tagc ring MB | in reducer ms | codec / link / wait ms | exposed ms | val loss | train loss (last 3) | load |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        split = ("%.0f / %.0f / %.0f" % (r["tagc_codec_ms_per_step"], r["tagc_exchange_ms_per_step"],
                                          r["tagc_wait_ms_per_step"]) if r["tagc_codec_ms_per_step"] != "" else "–")
        lines.append(table_row(step_cells(r) + [
            fmt(r.get("speedup_vs_fp32"), "%.2fx"),
            fmt(r["wire_MB_per_rank_step"], "%.2f"), fmt(r.get("wire_bytes_vs_fp32"), "%.3f"),
            fmt(r["tagc_ring_MB_per_step"], "%.2f"), fmt(r["tagc_reduce_ms_per_step"], "%.0f"), split, fmt(r["exposed_ms_per_step"], "%.0f"),
            fmt(r["val_loss"], "%.3f"), fmt(r["train_loss_last3"], "%.3f"), fmt(r["load_avg"], "%.1f")]))
    anchor = os.path.join(folder, "anchor.json")
    if os.path.exists(anchor):
        a = json.load(open(anchor))
        lines += ["", "Single-process step (forward + backward + AdamW), GPT-2 d2, B=%d T=%d, %d thread(s):" % (a["B"], a["T"], a["threads"]), ""]
        for name, v in a["results"].items():
            lines.append("- %s: median %.0f ms (runs: %s)" % (name, st.median(v), ", ".join("%.0f" % x for x in v)))
    write_table(folder, lines)

    # Plots (gnuplot): ms/step per configuration for each link, and val loss vs wire bytes.
    for rate in sorted({r["link"] for r in rows}):
        sel = [r for r in rows if r["link"] == rate]
        dat = write_ms_bars(folder, rate, sel, extra=(("val_loss", "%.4f"), ("wire_MB_per_rank_step", "%.3f")))
        png = os.path.join(folder, "ms_per_step_%s.png" % rate)
        script = f"""set terminal pngcairo size 900,420
set output '{png}'
set title 'GPT-2 d2, 2 DDP ranks over gloo, link {rate}: ms per step (bars: min-max of runs)'
""" + MS_BARS.format(dat=dat)
        gnuplot(script)


def fsdp2_report(folder, rows, runs):
    """table.md and the plots for the FSDP2 side by side (fsdp2_run.sh)."""
    lines = ["| link | config | ms/step (runs: min–max) | step median (p10–p90) | fwd / bwd / opt ms | speedup vs fp32 / bf16 | "
             "wire MB/rank/step | gradient MB (ring) | vs bf16 | all-gather MB (ring) | val loss | vs bf16 | "
             "train loss (last 3) | load |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        phases = " / ".join(fmt(r.get("%s_ms_per_step" % k), "%.0f") for k in ("forward", "backward", "optimizer"))
        lines.append(table_row(step_cells(r) + [
            phases, fmt(r.get("speedup_vs_fp32"), "%.2fx") + " / " + fmt(r.get("speedup_vs_bf16"), "%.2fx"),
            fmt(r["wire_MB_per_rank_step"], "%.2f"), fmt(r.get("grad_MB_per_rank_step"), "%.2f"),
            fmt(r.get("grad_bytes_vs_bf16"), "%.3f"), fmt(r.get("allgather_MB_per_rank_step"), "%.2f"),
            fmt(r["val_loss"], "%.4f"), fmt(100 * r["val_loss_vs_bf16"] if "val_loss_vs_bf16" in r else None, "%+.2f %%"),
            fmt(r["train_loss_last3"], "%.3f"), fmt(r["load_avg"], "%.1f")]))
    write_table(folder, lines)
    # One figure per link: ms per step (bars) and the train loss, 25-step moving mean, per step.
    for rate in sorted({r["link"] for r in rows}):
        sel = [r for r in rows if r["link"] == rate]
        bars = write_ms_bars(folder, rate, sel)
        curves = []
        for r in sel:
            run = next(x for x in runs if x["rate"] == rate and x["config"] == r["config"])
            dat = os.path.join(folder, "loss_%s_%s.dat" % (rate, r["config"]))
            tl = run["train_loss"]
            with open(dat, "w") as f:
                for i in range(len(tl)):
                    w = tl[max(0, i - 24):i + 1]
                    f.write("%d %.4f\n" % (i + 1, sum(w) / len(w)))
            curves.append("'%s' using 1:2 with lines lw 2 title '%s (val %.3f)'" % (dat, r["config"], r["val_loss"]))
        png = os.path.join(folder, "fsdp2_%s.png" % rate)
        script = f"""set terminal pngcairo size 1200,440
set output '{png}'
set multiplot layout 1,2 title 'GPT-2 on FSDP2 over gloo, {rate}'
""" + MS_BARS.format(dat=bars) + f"""set xtics norotate
set yrange [*:*]
set xlabel 'step'
set ylabel 'train loss (25-step mean)'
plot {", ".join(curves)}
unset multiplot
"""
        gnuplot(script)


if __name__ == "__main__":
    main(sys.argv[1], fsdp2="--fsdp2" in sys.argv[2:])
