#!/usr/bin/env python3
"""long_report.py -- time to quality (issue 11) from tagc-gpt2 logs (bench/e2e/long.sh).

Reads
  RUNS/<config>.jsonl           long runs on loopback (--runs: one folder or several, comma-
                                separated): val lines (val_loss, val_se,
                                val_batch_losses), step lines (step_ms, tokens, grad_bytes, and
                                bytes: what each collective sent that step)
  TIMING/<rate>/<config>.jsonl  short runs over scripts/slow_net.sh: step_ms and bytes per step
Writes (under --docs)
  long_runs.csv        config,step,tokens,wall_s,val_loss,bits_per_param: one row per validation
                       point; wall_s = training wall time on loopback so far (sum of step_ms,
                       validation excluded); bits_per_param = gradient bits sent per parameter per
                       rank so far, whole model (grad_bytes x 8 / params / ((N-1)/N), mean over steps)
  long_runs_noise.csv  config,step,val_loss,val_se,gap_vs_fp32,gap_se: the standard error of each
                       validation mean (per-batch losses), and of the difference to fp32 at the
                       same step (paired: both runs evaluate the same batches)
  long_runs_meta.csv   config,world,steps,last_step,sparsity_warmup,values: what the time model needs
                       of each run
  (These three are read from --docs and the runs in RUNS merged over them: a configuration's log
  replaces its committed rows unless it stops earlier. After a codec change only the timing runs
  are redone, since the losses do not depend on the codec's speed.)
  step_time.csv        config,rate,step_ms,steps,codec_commit: mean step time at each link rate
  time_to_target.csv   config,rate,target_val_loss,steps_to_target,step_ms,time_to_target_s,
                       vs_fp32,vs_bf16,vs_fp32_g16,vs_bf16_g16,run_steps (step_ms: what its timing
                       run measured, a scheduled run's dense-start one, not the mean it was charged;
                       vs_*: time of that baseline / this config's; *_g16: the bf16-gather
                       baselines, when run; run_steps: the configuration's own run length, its
                       step budget): fp32's final
                       validation loss as the target; steps to
                       target = the first validation point within --tolerance-pct of it (at or
                       below it with 0), searched up to the common horizon (--horizon), or over
                       each configuration's whole run with --own-budget (a run longer than fp32's
                       may reach fp32's final loss after fp32's last step); time = the sum of the
                       step times at that rate ("not reached" when no point gets there);
                       stays_from_step, time_to_stay_s, vs_bf16_g16_stay: the same by the
                       stricter rule, the first validation point from which every later one
                       stays within the tolerance; smoothed_step, time_smoothed_s,
                       vs_bf16_g16_smoothed: where the curve averaged over +-(--smooth-steps)
                       first falls to the target (interpolated, no tolerance)
  val_vs_tokens.png, val_vs_wall-<rate>.png
and prints the markdown tables for docs/results.md ("Time to quality").

Step time at a rate: an unscheduled configuration's steps cost what its timing run measured (mean
of the steps after --skip). A run with a sparsity warm-up (tagc-...-sched[N]) sends fewer bytes
step by step; each of its steps is priced by the bytes it sent in the long run, on the line through
two timing runs: its own (dense start: dense_ms at bytes_dense, means over the averaged steps) and
the unscheduled configuration's (steady, bytes_steady), clipped to [steady, dense_ms]. Without its
own timing run, the timing run of the same configuration with long.sh's default warm-up length
(-sched300 -> -sched) gives that dense point. Without byte counts the warm-up steps cost the
dense-start step time and the later ones the unscheduled step time (an upper bound).
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ORDER = ["fp32", "bf16", "tagc-paper", "tagc-paper-sched", "tagc-packed-bf16", "tagc-packed-bf16-sched"]
# A configuration name ending in -g16 is that configuration with the parameter all-gather in
# bf16 (tagc-gpt2 --gather-dtype bf16; long.sh). Its baselines for "vs_*_g16" are fp32-g16 and
# bf16-g16; vs_fp32 / vs_bf16 stay against the fp32-gather runs.
G16 = "-g16"


def base_config(c):
    """The configuration without its gather suffix, and whether it had one."""
    return (c[:-len(G16)], True) if c.endswith(G16) else (c, False)


def unscheduled(c):
    """tagc-paper-sched -> tagc-paper, tagc-paper-sched-g16 -> tagc-paper-g16, a warm-up of its own
    length too (tagc-packed-bf16-sched300-g16 -> tagc-packed-bf16-g16); None if not scheduled."""
    b, g = base_config(c)
    m = re.search(r"-sched\d*$", b)
    return b[:m.start()] + (G16 if g else "") if m else None


def default_warmup(c):
    """tagc-packed-bf16-sched300-g16 -> tagc-packed-bf16-sched-g16: the same configuration with
    long.sh's default warm-up length; None if c is not a scheduled one with a length of its own."""
    b, g = base_config(c)
    m = re.search(r"-sched\d+$", b)
    return b[:m.start()] + "-sched" + (G16 if g else "") if m else None


def link_bytes(s):
    """Bytes a step line says its collectives sent (per rank), None in a log from before the
    trainer wrote them."""
    b = s.get("bytes")
    return float(sum(b.values())) if isinstance(b, dict) and b else None


def load(path):
    run, steps, vals = None, [], []
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a running writer
            t = j.get("type")
            if t == "run":
                if run is None:
                    run = j
            elif t == "step":
                steps.append(j)
            elif t == "val":
                vals.append(j)
    # a resumed run repeats the steps after its checkpoint (bit-identically): keep the last
    steps = list({s["step"]: s for s in steps}.values())
    vals = sorted({v["step"]: v for v in vals}.values(), key=lambda v: v["step"])
    return run, steps, vals


def order_key(c):
    b, g = base_config(c)
    return (g, ORDER.index(b) if b in ORDER else len(ORDER), c)


def rate_key(r):
    num = float("".join(ch for ch in r if ch.isdigit() or ch == ".") or 0)
    return num * (1000 if r.endswith("gbit") else 1)


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def paired_se(a, b):
    if not a or len(a) != len(b) or len(a) < 2:
        return float("nan")
    d = [x - y for x, y in zip(a, b)]
    m = mean(d)
    return math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))


def run_logs(runs):
    """The *.jsonl logs of --runs: one folder, or several separated by commas (e.g. a 2600-step
    quality run and the fp32 run of another length whose final loss is the target)."""
    return sorted(p for d in runs.split(",") if d for p in glob.glob(os.path.join(d, "*.jsonl")))


def from_logs(logs, fp32_csv_vals):
    """long_runs.csv, long_runs_noise.csv and long_runs_meta.csv rows from the runs' logs, and
    each run's bytes sent per step ({config: {step: bytes}}, for the step-time model).
    The gap to fp32 is taken against fp32's log at the steps it has (its per-batch losses give
    the paired standard error), else against fp32's committed validation losses (no se)."""
    runs = {}
    for p in logs:
        c = os.path.basename(p)[:-6]
        run, steps, vals = load(p)
        if run and vals:
            runs[c] = (run, steps, vals)
    rows, noise, meta, sent = [], [], [], {}
    fp32_vals = {st: {"val_loss": l} for st, l in fp32_csv_vals.items()}
    if "fp32" in runs:
        fp32_vals.update({v["step"]: v for v in runs["fp32"][2]})
    for c in sorted(runs, key=order_key):
        run, steps, vals = runs[c]
        N, P = run["world"], run["params"]
        ring = (N - 1) / N if N > 1 else 1.0
        by_step = {s["step"]: s for s in steps}
        sent[c] = {st: link_bytes(s) for st, s in by_step.items() if link_bytes(s) is not None}
        meta.append((c, N, run["steps"], steps[-1]["step"] if steps else 0, int(run.get("sparsity_warmup", 0) or 0),
                     run.get("values", "sketch")))
        cum_ms = cum_bytes = cum_tokens = 0.0
        cum = {}
        for s in sorted(by_step.values(), key=lambda s: s["step"]):
            cum_ms += s["step_ms"]; cum_bytes += s["grad_bytes"]; cum_tokens += s["tokens"]
            cum[s["step"]] = (cum_tokens, cum_ms / 1e3, cum_bytes * 8 / P / ring / s["step"])
        for v in vals:
            st = v["step"]
            if st not in cum:
                continue
            tok, wall, bits = cum[st]
            rows.append((c, st, int(tok), f"{wall:.1f}", f"{v['val_loss']:.5f}", f"{bits:.3f}"))
            f = fp32_vals.get(st)
            gap = gap_se = float("nan")
            if f is not None:
                gap = (v["val_loss"] - f["val_loss"]) / f["val_loss"] * 100
                gap_se = paired_se(v.get("val_batch_losses", []), f.get("val_batch_losses", [])) / f["val_loss"] * 100
            noise.append((c, st, f"{v['val_loss']:.5f}", f"{v.get('val_se', float('nan')):.5f}", f"{gap:+.3f}",
                          f"{gap_se:.3f}"))
    return rows, noise, meta, sent


def merge(committed, fresh):
    """The runs of `fresh` (rows, noise, meta from logs) over those of `committed` (the CSVs):
    a configuration's logged run replaces its committed one unless the log has fewer
    validation points or stops earlier (a killed re-run, or a log that holds only the steps
    after a resume, must not shorten a complete committed run)."""
    (c_rows, c_noise, c_meta), (f_rows, f_noise, f_meta) = committed, fresh
    last = {m[0]: int(m[3]) for m in c_meta}
    points = lambda rs, c: sum(r[0] == c for r in rs)
    take = {m[0] for m in f_meta
            if int(m[3]) >= last.get(m[0], -1) and points(f_rows, m[0]) >= points(c_rows, m[0])}
    for m in f_meta:
        if m[0] not in take:
            sys.stderr.write(f"long_report.py: {m[0]}'s log has {points(f_rows, m[0])} validation points up to "
                             f"step {m[3]}, its committed run {points(c_rows, m[0])} up to {last[m[0]]}: "
                             f"the committed rows stay\n")
    # A re-run gives the same losses; where its paired se is unknown (fp32's per-batch losses
    # not at hand for that step) the committed one stands.
    known = {(r[0], r[1], r[2]): r[5] for r in c_noise if r[5] != "nan"}
    f_noise = [tuple(r[:5]) + (known.get((r[0], str(r[1]), r[2]), r[5]) if r[5] == "nan" else r[5],)
               for r in f_noise]
    keep = lambda rs, new: sorted([r for r in rs if r[0] not in take] + [r for r in new if r[0] in take],
                                  key=lambda r: (order_key(r[0]), int(r[1])))
    return keep(c_rows, f_rows), keep(c_noise, f_noise), sorted(
        [m for m in c_meta if m[0] not in take] + [m for m in f_meta if m[0] in take], key=lambda m: order_key(m[0]))


def write_csv(path, header, rows):
    with open(path, "w") as fo:
        fo.write(header + "\n")
        for r in rows:
            fo.write(",".join(map(str, r)) + "\n")


def read_csv(path):
    with open(path) as f:
        return [line.rstrip("\n").split(",") for line in f.readlines()[1:] if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="results/long",
                    help="folder(s) of the runs' logs, comma-separated; a configuration in two is an error")
    ap.add_argument("--timing", default="results/long-timing")
    ap.add_argument("--skip", type=int, default=5, help="warm-up steps left out of the timing mean")
    ap.add_argument("--docs", default="docs/results")
    ap.add_argument("--horizon", type=int, default=0,
                    help="compare up to this step (default: the last validation step every run reached)")
    ap.add_argument("--own-budget", action="store_true",
                    help="target: fp32's final validation loss (at --horizon if given); each configuration "
                         "is searched over its whole run, so a run with more steps than fp32's (its own "
                         "schedule) may reach it later than fp32's last step: time to quality with each "
                         "configuration's own step budget (time_to_target.csv's run_steps)")
    ap.add_argument("--target-loss", type=float, default=0.0,
                    help="a fixed target validation loss instead of fp32's final one (e.g. fp32's final loss "
                         "of a shorter run, for runs that all have a longer common budget); every "
                         "configuration is searched over its whole run")
    ap.add_argument("--smooth-steps", type=int, default=100,
                    help="half-width in steps of the centred moving average of the third rule (the "
                         "smoothed curve's interpolated crossing of the target)")
    ap.add_argument("--tolerance-pct", type=float, default=0.1,
                    help="a run reaches the target within this many percent of it: validation means "
                         "differ by noise (paired se of the gaps ~0.01-0.15 %%), a strict <= would call "
                         "a run 0.02 %% above fp32 'not reached'")
    ap.add_argument("--update-doc", default="", help="replace the text between the long_report markers of this file")
    a = ap.parse_args()
    os.makedirs(a.docs, exist_ok=True)

    # The losses do not depend on the codec's speed: after a codec change only the timing
    # runs are redone, and the quality figures come from the committed CSVs; logs of new or
    # re-run configurations are merged over them.
    names = ("long_runs.csv", "long_runs_noise.csv", "long_runs_meta.csv")
    paths = [os.path.join(a.docs, n) for n in names]
    committed = tuple(read_csv(p) if os.path.exists(p) else [] for p in paths)
    rows, noise, meta = committed
    sent = {}  # bytes sent per step, from the logs at hand: the committed CSVs do not keep them
    logs = run_logs(a.runs)
    log_names = [os.path.basename(p) for p in logs]
    if len(set(log_names)) != len(log_names):
        sys.exit(f"long_report.py: --runs {a.runs}: a configuration has a log in more than one folder")
    if logs:
        fp32_csv = {int(r[1]): float(r[4]) for r in committed[0] if r[0] == "fp32"}
        *fresh, sent = from_logs(logs, fp32_csv)
        rows, noise, meta = merge(committed, tuple(fresh))
        headers = ("config,step,tokens,wall_s,val_loss,bits_per_param",
                   "config,step,val_loss,val_se,gap_vs_fp32_pct,gap_se_pct",
                   "config,world,steps,last_step,sparsity_warmup,values")
        for p, h, rs in zip(paths, headers, (rows, noise, meta)):
            write_csv(p, h, rs)
    else:
        sys.stderr.write(f"long_report.py: no logs in {a.runs}; quality figures from {a.docs}/long_runs*.csv\n")
    info = {m[0]: {"steps": int(m[2]), "last_step": int(m[3]), "sparsity_warmup": int(m[4]), "values": m[5]}
            for m in meta}
    if "fp32" not in info:
        sys.exit("long_report.py: no fp32 run with validation points")
    configs = sorted(info, key=order_key)
    curves = {c: [(int(r[1]), float(r[2]), float(r[4])) for r in rows if r[0] == c] for c in configs}
    partial = [f"{c} ({info[c]['last_step']}/{info[c]['steps']} steps)" for c in configs
               if info[c]["last_step"] < info[c]["steps"]]

    # ---- step time per rate ----
    step_ms, commit = {}, ""
    meta = os.path.join(a.timing, "meta.txt")
    if os.path.exists(meta):
        for line in open(meta):
            if line.startswith("codec of commit"):
                commit = line.split()[3].rstrip(";")
    # a rate is a folder named as scripts/slow_net.sh --rate takes it (a folder such as round2/,
    # a repeat of the timing runs kept beside them, is not one)
    rates = sorted((os.path.basename(d) for d in glob.glob(os.path.join(a.timing, "*"))
                    if os.path.isdir(d) and re.fullmatch(r"[0-9.]+[kmg]bit", os.path.basename(d))), key=rate_key)
    grad_bits = {}  # (config, rate): a timing run's gradient bits per parameter per step, as long_runs.csv counts them
    for r in rates:
        for p in glob.glob(os.path.join(a.timing, r, "*.jsonl")):
            c = os.path.basename(p)[:-6]
            run, steps, _ = load(p)
            avg = [s for s in steps if s["step"] > a.skip]
            if avg:
                sent_avg = [link_bytes(s) for s in avg]
                step_ms[(c, r)] = (mean([s["step_ms"] for s in avg]), len(avg),
                                   None if None in sent_avg else mean(sent_avg))
                if run and run.get("params") and all("grad_bytes" in s for s in avg):
                    N = run.get("world", 1)
                    ring = (N - 1) / N if N > 1 else 1.0
                    grad_bits[(c, r)] = mean([s["grad_bytes"] for s in avg]) * 8 / run["params"] / ring
    with open(os.path.join(a.docs, "step_time.csv"), "w") as fo:
        fo.write("config,rate,step_ms,steps,codec_commit\n")
        for (c, r), (m, n, _) in sorted(step_ms.items(), key=lambda x: (rate_key(x[0][1]), order_key(x[0][0]))):
            fo.write(f"{c},{r},{m:.1f},{n},{commit}\n")

    # Wall time of the first `step` steps at rate r.
    def warmup_of(c):
        return info[c]["sparsity_warmup"] if c in info else 0

    def dense_timing(c, r):
        """A scheduled configuration's dense-start timing run: its own, else that of the same
        configuration with the default warm-up length (same codec, theta and gather; only the
        bytes of its first steps differ, and the byte model below prices bytes)."""
        if (c, r) in step_ms:
            return step_ms[(c, r)]
        twin = default_warmup(c)
        return step_ms.get((twin, r)) if twin else None

    def step_prices(c, r):
        """Seconds of each step 1..last of c's run at rate r, priced by the bytes it sent, or None
        when the byte model does not apply (no warm-up, a timing run or byte count missing).
        Communication time is linear in the bytes sent, and the compute and the codec cost about
        the same at any keep fraction, so a step's time is linear in its bytes: the line through
        the dense-start timing run (dense_ms at bytes_dense, the means over the steps it
        averaged) and the unscheduled one (steady at bytes_steady). The warm-up's keep fraction
        decays exponentially, so most warm-up steps send far fewer bytes than the first and
        cost far less than the dense-start step time. Clipped to [steady, dense_ms]: no
        extrapolation beyond the two measured points (the first steps of a warm-up longer than
        the timing run's send a little more than bytes_dense)."""
        base = unscheduled(c)
        dense, steady = dense_timing(c, r), step_ms.get((base, r)) if base else None
        got = sent.get(c, {})
        last = curves[c][-1][0] if curves.get(c) else 0
        if warmup_of(c) <= 0 or not dense or not steady or not last:
            return None
        if any(st not in got for st in range(1, last + 1)):
            return step_prices_from_bits(c, r, dense, steady, last)
        if dense[2] is None or steady[2] is None:
            return None
        d_ms, d_b, s_ms, s_b = dense[0], dense[2], steady[0], steady[2]
        if d_b - s_b <= 0.01 * d_b or d_ms <= s_ms:
            return None  # the same bytes dense and steady (a sketch): no line to price along
        return [min(d_ms, max(s_ms, s_ms + (d_ms - s_ms) * (got[st] - s_b) / (d_b - s_b))) / 1e3
                for st in range(1, last + 1)]

    def step_prices_from_bits(c, r, dense, steady, last):
        """step_prices without the run's log (only the committed CSVs): the same line, in
        gradient bits per parameter (the only bytes that differ between the two timing runs),
        each step charged its validation interval's mean, from the run's cumulative
        bits_per_param at each validation point. Price is linear in bits, so an interval's sum
        is the one per-step bits would give, up to the clip at the ends of the line."""
        twin = (c, r) if (c, r) in step_ms else (default_warmup(c), r)
        d_bits, s_bits = grad_bits.get(twin), grad_bits.get((unscheduled(c), r))
        cum = sorted((int(x[1]), float(x[5])) for x in rows if x[0] == c)
        if d_bits is None or s_bits is None or not cum or cum[-1][0] < last or d_bits - s_bits <= 0.01 * d_bits:
            return None
        d_ms, s_ms = dense[0], steady[0]
        prices, prev_step, prev_total = [], 0, 0.0
        for st, mean_bits in cum:
            if st > last:
                break
            total = mean_bits * st  # bits per parameter over steps 1..st
            bits = (total - prev_total) / (st - prev_step)
            ms = min(d_ms, max(s_ms, s_ms + (d_ms - s_ms) * (bits - s_bits) / (d_bits - s_bits)))
            prices += [ms / 1e3] * (st - prev_step)
            prev_step, prev_total = st, total
        return prices if len(prices) == last else None

    cum_cache = {}

    def time_at(c, r, step):
        if (c, r) not in cum_cache:
            prices, cum = step_prices(c, r), None
            if prices is not None:
                cum = [0.0]  # cum[k]: the first k steps
                for sec in prices:
                    cum.append(cum[-1] + sec)
            cum_cache[(c, r)] = cum
        cum = cum_cache[(c, r)]
        if cum is not None and step < len(cum):
            return cum[step]
        # Without byte counts: the warm-up steps cost what the dense-start timing run measured
        # (its first steps: the densest of the warm-up, so an upper bound); after the warm-up
        # the run sends what the unscheduled configuration sends, so those steps cost that
        # configuration's step time.
        w, base = warmup_of(c), unscheduled(c)
        own_t = dense_timing(c, r) if w > 0 else step_ms.get((c, r))
        if own_t is None:
            # a sketch sends the same cells at any theta: a scheduled sketch run without its own
            # timing run costs what the unscheduled one does
            if base and (base, r) in step_ms and info.get(c, {}).get("values", "sketch").startswith("sketch"):
                return step * step_ms[(base, r)][0] / 1e3
            return None
        own = own_t[0] / 1e3
        if w > 0 and base and (base, r) in step_ms:
            steady = step_ms[(base, r)][0] / 1e3
            return min(step, w) * own + max(0, step - w) * steady
        return step * own

    # Mean step time of the warm-up and of the rest, for the configurations priced by bytes
    # (the markdown says what the byte model charged, and what the dense-start price was).
    priced = {}
    for r in rates:
        for c in configs:
            if time_at(c, r, 1) is None or cum_cache.get((c, r)) is None:
                continue
            cum, w = cum_cache[(c, r)], min(warmup_of(c), len(cum_cache[(c, r)]) - 1)
            after = (cum[-1] - cum[w]) / (len(cum) - 1 - w) if len(cum) - 1 > w else float("nan")
            priced[(c, r)] = (cum[w] / w * 1e3, after * 1e3, dense_timing(c, r)[0], w)

    # ---- time to target ----
    # The horizon: fp32's final step when every run is complete; with partial runs the last
    # validation step all of them reached, so that every configuration had the same chance.
    # With --own-budget the target is fp32's final loss whatever the other runs' lengths, and
    # each configuration is searched over its whole run: a run given more steps than fp32 (its
    # own cosine schedule over them) may get to fp32's final loss after fp32's last step, which
    # is the time-to-quality question when each configuration has its own step budget.
    horizon = a.horizon or min(curves[c][-1][0] for c in configs if curves[c])
    fp32_at = {st: l for st, _, l in curves["fp32"]}
    # --target-loss: a quality target fixed in advance (e.g. what fp32 reaches in a shorter
    # run), the same for every configuration, all with one longer step budget: time to a fixed
    # quality with no configuration's schedule tuned to the target's run length.
    if a.target_loss:
        target_step, target, search_to = None, a.target_loss, math.inf
    else:
        target_step = max(st for st in fp32_at if st <= ((a.horizon or math.inf) if a.own_budget else horizon))
        target = fp32_at[target_step]
        search_to = math.inf if a.own_budget else horizon
    # Two rules: the first validation point within the tolerance (reach), and the first one
    # from which every later point of the run stays within it (stay): a dip that every run
    # shares can carry a run across the target once before it is really there.
    reach, stay = {}, {}
    for c in configs:
        within = [(st, l <= target * (1 + a.tolerance_pct / 100)) for st, _, l in curves[c] if st <= search_to]
        hit = [st for st, ok in within if ok]
        reach[c] = hit[0] if hit else None
        stay[c] = None
        for st, ok in reversed(within):
            if not ok:
                break
            stay[c] = st
    # A third rule, the least sensitive to the validation curve's step-to-step wiggles (the runs
    # share the data order, so they share most of the wiggles): each curve averaged over
    # +-smooth_steps around each point (points with the whole window inside the run), and the
    # step where that average first falls to the target, interpolated between points. No
    # tolerance: the average already absorbs the noise the tolerance is there for.
    smoothed = {}
    for c in configs:
        pts = [(st, l) for st, _, l in curves[c] if st <= search_to]
        avg = [(st, mean([l2 for st2, l2 in pts if abs(st2 - st) <= a.smooth_steps])) for st, _ in pts
               if pts and st - a.smooth_steps >= pts[0][0] and st + a.smooth_steps <= pts[-1][0]]
        smoothed[c] = next((s0 + (s1 - s0) * (l0 - target) / (l0 - l1)
                            for (s0, l0), (s1, l1) in zip(avg, avg[1:]) if l0 > target >= l1), None)
    def time_at_fraction(c, r, step):
        """time_at for a fractional step (the smoothed rule's interpolated crossing)."""
        lo = math.floor(step)
        t0, t1 = time_at(c, r, lo), time_at(c, r, lo + 1)
        return None if t0 is None or t1 is None else t0 + (t1 - t0) * (step - lo)

    ttt, tts, ttm = {}, {}, {}  # time to the target by the three rules
    with open(os.path.join(a.docs, "time_to_target.csv"), "w") as fo:
        fo.write("config,rate,target_val_loss,steps_to_target,step_ms,time_to_target_s,vs_fp32,vs_bf16,"
                 "vs_fp32_g16,vs_bf16_g16,run_steps,stays_from_step,time_to_stay_s,vs_bf16_g16_stay,"
                 "smoothed_step,time_smoothed_s,vs_bf16_g16_smoothed\n")
        for r in rates:
            for c in configs:
                t_all = time_at(c, r, 1)
                if t_all is None:
                    continue
                ttt[(c, r)] = None if reach[c] is None else time_at(c, r, reach[c])
                tts[(c, r)] = None if stay[c] is None else time_at(c, r, stay[c])
                ttm[(c, r)] = None if smoothed[c] is None else time_at_fraction(c, r, smoothed[c])
            for c in configs:
                if (c, r) not in ttt:
                    continue
                t = ttt[(c, r)]
                rel = []
                for base in ("fp32", "bf16", "fp32" + G16, "bf16" + G16):
                    b = ttt.get((base, r))
                    rel.append(f"{b / t:.2f}" if t and b else "")
                ms_c = (dense_timing(c, r) or step_ms.get((unscheduled(c), r)) or (float("nan"),))[0]
                ts, bs = tts[(c, r)], tts.get(("bf16" + G16, r))
                tm, bm = ttm[(c, r)], ttm.get(("bf16" + G16, r))
                fo.write(f"{c},{r},{target:.5f},{reach[c] if reach[c] is not None else 'not reached'},"
                         f"{ms_c:.1f},{f'{t:.0f}' if t is not None else 'not reached'},{','.join(rel)},"
                         f"{info[c]['steps']},{stay[c] if stay[c] is not None else 'not reached'},"
                         f"{f'{ts:.0f}' if ts is not None else 'not reached'},"
                         f"{f'{bs / ts:.2f}' if ts and bs else ''},"
                         f"{f'{smoothed[c]:.0f}' if smoothed[c] is not None else 'not reached'},"
                         f"{f'{tm:.0f}' if tm is not None else 'not reached'},{f'{bm / tm:.2f}' if tm and bm else ''}\n")

    # ---- plots (gnuplot) ----
    target_name = "target (--target-loss)" if a.target_loss else "fp32 final"
    dat = tempfile.mkdtemp(prefix="long_plot")
    for c in configs:
        with open(os.path.join(dat, c + ".dat"), "w") as fo:
            for st, tok, l in curves[c]:
                fo.write(f"{st} {tok} {l} " + " ".join(f"{time_at(c, r, st) or 0:.1f}" for r in rates) + "\n")
    plot = ["set terminal pngcairo size 900,560 font ',10'", "set grid", "set key top right",
            "set ylabel 'validation loss'"]
    # the 16-bit-gather runs dashed, beside their fp32-gather twins
    style = lambda c: " dt 4" if base_config(c)[1] else ""
    lines_tok = ", ".join(f"'{dat}/{c}.dat' using 2:3 with linespoints{style(c)} title '{c}'" for c in configs)
    plot += [f"set output '{a.docs}/val_vs_tokens.png'", "set xlabel 'training tokens (all ranks)'",
             f"set title 'GPT-2 d2, 2 ranks: validation loss vs tokens (target: {target_name} {target:.4f})'",
             f"plot {lines_tok}, {target} with lines dt 2 lc rgb 'gray' title '{target_name}'"]
    for r in rates:
        have = [c for c in configs if time_at(c, r, 1) is not None]
        if not have:
            continue
        col = 4 + rates.index(r)
        lines = ", ".join(f"'{dat}/{c}.dat' using {col}:3 with linespoints{style(c)} title '{c}'" for c in have)
        plot += [f"set output '{a.docs}/val_vs_wall-{r}.png'", "set xlabel 'training wall time, s (sum of the step times measured at this rate)'",
                 f"set title 'validation loss vs wall time at {r} (shared link, 2 ranks; codec of {commit})'",
                 f"plot {lines}, {target} with lines dt 2 lc rgb 'gray' title '{target_name}'"]
    subprocess.run(["gnuplot"], input="\n".join(plot) + "\n", text=True, check=True)

    # ---- markdown ----
    def after_text(ms, fmt):
        """The mean step price after the warm-up, or what a run still inside it has."""
        return fmt.format(ms) if not math.isnan(ms) else " (the run is still in it)"

    md = []
    print = md.append  # noqa: A001 (collected, then printed and spliced)
    print(f"target: a fixed validation loss {target:.4f} (--target-loss), reached within {a.tolerance_pct:g} % "
          f"(<= {target * (1 + a.tolerance_pct / 100):.4f}); each configuration searched over its whole run"
          if a.target_loss else
          f"target: fp32's validation loss at step {target_step} = {target:.4f}, reached within "
          f"{a.tolerance_pct:g} % (<= {target * (1 + a.tolerance_pct / 100):.4f})"
          + (" (its final)" if target_step == curves["fp32"][-1][0] and not partial else
             " (its final; other runs are partial)" if target_step == curves["fp32"][-1][0] and a.own_budget
             and info["fp32"]["last_step"] >= info["fp32"]["steps"] else
             " (--horizon)" if a.horizon else
             f" (the last validation step every run reached; runs are partial)"))
    if a.own_budget or a.target_loss:
        print("each configuration searched over its own run, step budgets: "
              + ", ".join(f"{c} {info[c]['steps']}" for c in configs))
    if partial:
        print("PARTIAL runs: " + ", ".join(partial))
    print("\n| configuration | step | val loss (± se) | gap vs fp32 at that step (± paired se) | "
          "bits/param per rank, run so far | steps to target (first / stays from / smoothed) |")
    print("|---|---:|---:|---:|---:|---:|")
    for c in configs:
        at = [x for x in noise if x[0] == c and int(x[1]) <= horizon]
        if not at:
            continue
        n = at[-1]
        bits = [x for x in rows if x[0] == c and int(x[1]) == int(n[1])][0][5]
        print(f"| {c} | {n[1]} | {float(n[2]):.4f} ± {float(n[3]):.4f} | "
              f"{n[4]} % ± {n[5]} | {bits} | {reach[c] if reach[c] is not None else 'not reached'} / "
              f"{stay[c] if stay[c] is not None else 'not reached'} / "
              f"{f'{smoothed[c]:.0f}' if smoothed[c] is not None else 'not reached'} |")
    if rates:
        print("\n| configuration | " + " | ".join(f"{r}: ms/step, time to target" for r in rates) + " |")
        print("|---|" + "---:|" * len(rates))
        for c in configs:
            cells = []
            for r in rates:
                if time_at(c, r, 1) is None:
                    cells.append("-")
                    continue
                t = ttt.get((c, r))
                pr = priced.get((c, r))
                own = (f"{pr[0]:.0f} ms in the warm-up{after_text(pr[1], ', then {:.0f}')}, by bytes" if pr else
                       f"{step_ms[(c, r)][0]:.0f} ms" if (c, r) in step_ms else
                       f"{dense_timing(c, r)[0]:.0f} ms (timing of {default_warmup(c)})" if dense_timing(c, r) else
                       "as unscheduled")
                cells.append(own + ", " + (f"{t:.0f} s" if t is not None else "not reached"))
            print(f"| {c} | " + " | ".join(cells) + " |")
        for r in rates:
            got = [(t, c) for (c, rr), t in ttt.items() if rr == r and t is not None]
            if not got:
                continue
            got.sort()
            best_t, best = got[0]
            others = ", ".join(f"{c} {t / best_t:.2f}x as long" for t, c in got[1:]) or "no other run reaches it"
            missing = [c + (f" (so far: {info[c]['last_step']}/{info[c]['steps']} steps)"
                            if (a.own_budget or a.target_loss) and info[c]["last_step"] < info[c]["steps"] else "")
                       for (c, rr), t in ttt.items() if rr == r and t is None]
            print(f"\nAt {r}: **{best}** reaches the target first ({best_t:.0f} s); {others}"
                  + (f"; not reached {'within its own run' if a.own_budget or a.target_loss else f'by step {horizon}'}: "
                     f"{', '.join(missing)}" if missing else "") + ".")
            got = sorted((t, c) for (c, rr), t in tts.items() if rr == r and t is not None)
            if got:
                print(f"Counted from where each run stays within the tolerance: **{got[0][1]}** "
                      f"({got[0][0]:.0f} s); " + (", ".join(f"{c} {t / got[0][0]:.2f}x as long" for t, c in got[1:])
                                                  or "no other run stays there") + ".")
            got = sorted((t, c) for (c, rr), t in ttm.items() if rr == r and t is not None)
            if got:
                print(f"By the smoothed curves (+-{a.smooth_steps} steps): **{got[0][1]}** ({got[0][0]:.0f} s); "
                      + (", ".join(f"{c} {t / got[0][0]:.2f}x as long" for t, c in got[1:])
                         or "no other smoothed curve gets there") + ".")
        for (c, r), (w_ms, after_ms, old_ms, n_w) in sorted(priced.items(), key=lambda x: (rate_key(x[0][1]), order_key(x[0][0]))):
            d, st = dense_timing(c, r), step_ms[(unscheduled(c), r)]
            print(f"\nStep price of {c} at {r}, by the bytes each step sent: its {n_w} warm-up steps "
                  f"{w_ms:.0f} ms on average (the dense-start step time for each would be {old_ms:.0f} ms)"
                  f"{after_text(after_ms, ', then {:.0f} ms')}; on the line from {d[0]:.0f} ms at {d[2] / 1e6:.2f} MB/step "
                  f"(dense-start timing run{'' if (c, r) in step_ms else ' of ' + str(default_warmup(c))}) "
                  f"to {st[0]:.0f} ms at {st[2] / 1e6:.2f} MB ({unscheduled(c)}).")

    text = "\n".join(md) + "\n"
    sys.stdout.write(text)
    if a.update_doc:
        doc = open(a.update_doc).read()
        b, e = "<!-- long_report:begin -->\n", "<!-- long_report:end -->"
        if b not in doc or e not in doc:
            sys.exit(f"long_report.py: no {b.strip()} ... {e} markers in {a.update_doc}")
        head, rest = doc.split(b, 1)
        _, after = rest.split(e, 1)
        open(a.update_doc, "w").write(head + b + text + e + after)


if __name__ == "__main__":
    main()
