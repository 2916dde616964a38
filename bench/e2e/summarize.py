#!/usr/bin/env python3
"""bench/e2e/summarize.py -- summary CSV, table and gnuplot data of a bench/e2e/run.sh folder.

  summarize.py [--np N] [--rate R] DIR     -> DIR/summary.csv, DIR/table.txt, DIR/*.dat
  summarize.py --sweep DIR                 -> DIR/sweep.csv (fp32 step time vs rate)

Means leave out step 1 (first-touch, TCP connection set-up). Per-rank figures are rank 0's
(the trainer logs rank 0; shards are equal-sized). Definitions:
  codec_ms          TAGC encode + decode on the comm thread (reducer_ms sparsify+index+sketch+decode)
  tagc_xchg_ms      TAGC collectives (reducer_ms check+index_exchange+value_exchange)
  ag_ms_est         parameter all-gathers, not logged separately by the trainer: from the TAGC
                    runs, comm_ms - sum(reducer_ms) split by bytes between the all-gathers and the
                    plain suffix reduce-scatter; the same figure for every run of the folder
  grad_xchg_ms      comm_ms - ag_ms_est: everything the comm thread spent on gradients
                    (plain reduce-scatters, TAGC collectives and TAGC codec)
  ms_per_MB         grad_xchg_ms / fp32 gradient MB (params x 4 / 1e6), the paper's Table 2 unit
  bits_meas         grad_bytes x 8 / params / ((N-1)/N): whole model, the paper's accounting
  bits_cmp_meas     the same for the compressed parameters only (the plain part, 32 bits, taken out)
  bits_paper        Figure 2: 2b + 32/ratio for compressed parameters (32 for fp32, 16 for bf16);
                    b (not 2b) for a reduce-scattered index, 16/ratio for bf16/fp16 sketch cells;
                    nan for packed values (their bytes follow the union size, not a formula)
  speedup_vs_paper  against the paper's TAGC configuration (config r10i1: 10x, 1-bit, non-attention)
  load1_start/end   1-minute load average before / after the run (run.sh's load.txt)
  best at budget    (table.txt) the fastest configuration whose final val loss is <= the paper
                    configuration's
  bits_paper_model  f x bits_paper + (1-f) x 32, f = compressed fraction of the parameters
"""
import csv, json, os, re, sys, glob

args = sys.argv[1:]
sweep = "--sweep" in args
np_ = 2
rate = ""
if "--np" in args: np_ = int(args[args.index("--np") + 1])
if "--rate" in args: rate = args[args.index("--rate") + 1]
d = args[-1]


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def load(path):
    run, steps, vals = None, [], []
    for line in open(path):
        j = json.loads(line)
        t = j.get("type")
        if t == "run": run = j
        elif t == "step": steps.append(j)
        elif t == "val": vals.append(j)
    return run, steps, vals


def nbytes(s):
    return sum(s.get("bytes", {}).values())


if sweep:
    rows = []
    for p in sorted(glob.glob(os.path.join(d, "fp32-*.jsonl"))):
        run, steps, _ = load(p)
        s = steps[1:] or steps
        r = re.sub(r"^fp32-|\.jsonl$", "", os.path.basename(p))
        st, cm, co = mean(x["step_ms"] for x in s), mean(x["comm_ms"] for x in s), mean(x["compute_ms"] for x in s)
        wt = mean(x["wait_ms"] for x in s)
        rows.append(dict(rate=r, steps=len(steps), step_ms=round(st, 1), compute_ms=round(co, 1), comm_ms=round(cm, 1),
                         wait_ms=round(wt, 1), exposed_comm_frac=round(wt / st, 3), comm_busy_frac=round(cm / st, 3),
                         MB_per_rank_step=round(mean(nbytes(x) for x in s) / 1e6, 2)))
    rows.sort(key=lambda r: float(re.match(r"[\d.]+", r["rate"]).group()) * (1000 if "gbit" in r["rate"] else 1))
    with open(os.path.join(d, "sweep.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
    for r in rows: print(r)
    sys.exit(0)

order = ["fp32", "bf16", "r2i1", "r2i4", "r4i1", "r4i4", "r10i1", "r10i4", "r10i1-all", "r10i1-adaptive", "r4i1-adaptive",
         "r10x-rs", "r10x-rs-adaptive", "r4x-rs-adaptive", "r10i1-bf16", "r10x-rs-bf16", "r10x-rs-bf16-adaptive",
         "packed", "packed-bf16"]
PAPER = "r10i1"  # the paper's TAGC configuration: 10x sketch, 1-bit all-reduced index, non-attention


def index_width(b, world):
    """Counter width of --index-bits (the log has 1, 4, "1", "4" or "exact")."""
    if str(b) == "exact":
        return 1 if world <= 2 else 2 if world <= 3 else 4 if world <= 15 else 8
    return int(b)


def label(run):
    comp = run.get("compress", "none")
    if comp == "none": return "FSDP-like " + run.get("baseline_dtype", "")
    values = run.get("values", "sketch")
    b = run.get("index_bits", 0)
    idx = ("exact" if str(b) == "exact" else f"{b}-bit") + " index" + \
          (", reduce-scattered" if run.get("index_exchange", "all-reduce") == "reduce-scatter" else "")
    v = f"{run.get('ratio')}x sketch" if values == "sketch" else \
        f"{run.get('ratio')}x bf16 sketch" if values == "sketch-bf16" else \
        f"{run.get('ratio')}x fp16 sketch" if values == "sketch-fp16" else values + " values"
    return f"TAGC {v}, {idx}" + (", adaptive" if run.get("adaptive") else "")


loads = {}
if os.path.exists(os.path.join(d, "load.txt")):
    for line in open(os.path.join(d, "load.txt")):
        f_ = line.split()
        if len(f_) >= 7: loads[f_[0]] = (f_[1], f_[4])   # name, start 1/5/15, end 1/5/15
        elif len(f_) >= 2: loads[f_[0]] = ("", f_[1])    # older run.sh: the end only
paths = {os.path.basename(p)[:-6]: p for p in glob.glob(os.path.join(d, "*.jsonl"))}
names = [n for n in order if n in paths] + sorted(n for n in paths if n not in order)
data = {n: load(paths[n]) for n in names}
data = {n: v for n, v in data.items() if v[0] is not None and v[1]}
names = [n for n in names if n in data]

ring = (np_ - 1) / np_
# Parameter all-gather time (the trainer does not time collectives one by one). In a TAGC
# run the comm thread's time outside the Reducer (comm_ms - sum of reducer_ms) is the
# all-gathers plus the small plain reduce-scatter of the uncompressed suffix; split it by
# bytes. The all-gather bytes are the same in every run, so the mean over the TAGC runs
# is used for all. Without a TAGC run: fp32 throughput (bytes logged / comm_ms).
def ncomp_of(run):
    comp = run.get("compress", "none")
    if comp == "none": return 0
    if comp == "all": return run["params"]
    return 50304 * run["C"] + run["L"] * 9 * run["C"] ** 2  # wte + attprojw + fcw + fcprojw (gpt2 layout.cpp)
ag_est = []
for n, (run, steps, vals) in data.items():
    if run.get("compress", "none") == "none": continue
    s = steps[1:] or steps
    outside = mean(x["comm_ms"] - sum(x.get("reducer_ms", {}).values()) for x in s)
    agb = mean(x["bytes"].get("all_gather", 0.0) for x in s)
    plain = ring * 4 * (run["params"] - ncomp_of(run))
    ag_est.append(outside * agb / (agb + plain))
AG_MS = mean(ag_est) if ag_est else None
thr = None
if "fp32" in data:
    s = data["fp32"][1][1:] or data["fp32"][1]
    thr = mean(nbytes(x) for x in s) / mean(x["comm_ms"] for x in s)

rows = []
for n in names:
    run, steps, vals = data[n]
    s = steps[1:] or steps
    P = run["params"]; C = run["C"]; L = run["L"]; Vp = 50304
    comp = run.get("compress", "none")
    ratio = run.get("ratio", 0); b = run.get("index_bits", 0)
    values = run.get("values", "sketch"); exchange = run.get("index_exchange", "all-reduce")
    if comp == "none":
        ncomp = 0
    elif comp == "all":
        ncomp = P
    else:
        ncomp = Vp * C + L * 9 * C * C  # wte + attprojw + fcw + fcprojw (examples/gpt2/model/src/layout.cpp)
    f = ncomp / P
    red = lambda x, ks: sum(x.get("reducer_ms", {}).get(k, 0.0) for k in ks)
    codec = mean(red(x, ("sparsify", "index", "sketch", "decode")) for x in s)
    txchg = mean(red(x, ("check", "index_exchange", "value_exchange")) for x in s)
    step = mean(x["step_ms"] for x in s)
    comm = mean(x["comm_ms"] for x in s)
    agb = mean(x["bytes"].get("all_gather", 0.0) for x in s)
    gb = mean(x["grad_bytes"] for x in s)
    ag_ms = AG_MS if AG_MS is not None else (agb / thr if thr else float("nan"))
    gx = comm - ag_ms
    bits_meas = gb * 8 / P / ring
    if comp == "none":
        paper = 16.0 if "bf16" in n else 32.0
        bits_cmp = float("nan"); paper_model = paper
    else:
        width = index_width(b, run["world"])
        index_bits = (1 if exchange == "reduce-scatter" else 2) * width
        paper = index_bits + (32 / ratio if values == "sketch" else 16 / ratio if values.startswith("sketch-")
                              else float("nan"))
        plain_bytes = ring * 4 * (P - ncomp)
        bits_cmp = (gb - plain_bytes) * 8 / ncomp / ring if ncomp else float("nan")
        paper_model = f * paper + (1 - f) * 32
    # wall time at each val point = sum of step_ms up to that step
    cum, t = {0: 0.0}, 0.0  # --val-every also validates at step 0, before any step
    for x in steps:
        t += x["step_ms"]; cum[x["step"]] = t
    with open(os.path.join(d, n + ".val.dat"), "w") as fo:
        fo.write("# step wall_s val_loss\n")
        for v in vals: fo.write(f"{v['step']} {cum.get(v['step'], t) / 1e3:.3f} {v['val_loss']:.5f}\n")
    with open(os.path.join(d, n + ".train.dat"), "w") as fo:
        fo.write("# step wall_s loss\n")
        for x in steps: fo.write(f"{x['step']} {cum[x['step']] / 1e3:.3f} {x['loss']:.5f}\n")
    cs = [x.get("compression_all_ranks") for x in s if x.get("compression_all_ranks")]
    rows.append(dict(
        config=n, label=label(run) if comp != "none" else "FSDP-like " + n, compress=comp,
        values=values if comp != "none" else "", index_exchange=exchange if comp != "none" else "",
        ratio=ratio if comp != "none" and values.startswith("sketch") else "", index_bits=b if comp != "none" else "",
        adaptive=int(bool(run.get("adaptive"))) if comp != "none" else "", world=run["world"], params=P,
        compressed_frac=round(f, 4), steps=len(steps),
        step_ms=round(step, 1), compute_ms=round(mean(x["compute_ms"] for x in s), 1), comm_ms=round(comm, 1),
        wait_ms=round(mean(x["wait_ms"] for x in s), 1), codec_ms=round(codec, 1), tagc_xchg_ms=round(txchg, 1),
        ag_ms_est=round(ag_ms, 1), grad_xchg_ms=round(gx, 1), ms_per_MB=round(gx / (P * 4 / 1e6), 2),
        grad_MB_per_rank=round(gb / 1e6, 3), ag_MB_per_rank=round(agb / 1e6, 3),
        bits_meas=round(bits_meas, 2), bits_cmp_meas=round(bits_cmp, 2), bits_paper=round(paper, 2),
        bits_paper_model=round(paper_model, 2),
        unresolved_per_step=round(mean(c["unresolved"] for c in cs), 1) if cs else "",
        load=round(mean(c["load"] for c in cs), 3) if cs else "",
        final_train_loss=round(mean(x["loss"] for x in steps[-5:]), 4),
        final_val_loss=round(vals[-1]["val_loss"], 4) if vals else "",
        wall_s=round(t / 1e3, 1),
        load1_start=loads.get(n, ("", ""))[0], load1_end=loads.get(n, ("", ""))[1]))

base = {r["config"]: r for r in rows if r["config"] in ("fp32", "bf16", PAPER)}
for r in rows:
    for k in ("fp32", "bf16", "paper"):
        bref = base.get(PAPER if k == "paper" else k)
        r["speedup_vs_" + k] = round(bref["step_ms"] / r["step_ms"], 3) if bref else ""
        ok = bref and r["final_val_loss"] != "" and bref["final_val_loss"] != ""
        r["val_gap_vs_" + k + "_pct"] = round(100 * (r["final_val_loss"] / bref["final_val_loss"] - 1), 2) if ok else ""

with open(os.path.join(d, "summary.csv"), "w", newline="") as fo:
    w = csv.DictWriter(fo, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)

# step-time breakdown (gnuplot histogram rows): compute, exposed wait, and the comm thread's split
with open(os.path.join(d, "breakdown.dat"), "w") as fo:
    fo.write("config compute_ms wait_ms ag_ms_est plain_rs_ms tagc_xchg_ms codec_ms\n")
    for r in rows:
        plain = max(r["comm_ms"] - r["ag_ms_est"] - r["tagc_xchg_ms"] - r["codec_ms"], 0.0)
        fo.write(f"{r['config']} {r['compute_ms']} {r['wait_ms']} {r['ag_ms_est']} {plain:.1f} {r['tagc_xchg_ms']} {r['codec_ms']}\n")
with open(os.path.join(d, "bits.dat"), "w") as fo:
    fo.write("config bits_paper bits_cmp_meas bits_paper_model bits_meas\n")
    for r in rows:
        cm = r["bits_cmp_meas"] if r["bits_cmp_meas"] == r["bits_cmp_meas"] else r["bits_meas"]
        fo.write(f"{r['config']} {r['bits_paper'] * ring:.3f} {cm * ring:.3f} {r['bits_paper_model'] * ring:.3f} {r['bits_meas'] * ring:.3f}\n")

hdr = ["config", "step_ms", "compute_ms", "comm_ms", "wait_ms", "codec_ms", "grad_xchg_ms", "ms_per_MB", "grad_MB_per_rank",
       "bits_meas", "bits_paper_model", "final_train_loss", "final_val_loss", "speedup_vs_fp32", "speedup_vs_bf16",
       "speedup_vs_paper", "val_gap_vs_fp32_pct", "val_gap_vs_bf16_pct", "val_gap_vs_paper_pct", "unresolved_per_step",
       "load1_start", "load1_end"]
lines = [f"# {d}: {np_} ranks, link {rate}; means over steps 2..N; val = last val point"]
wd = {h: max(len(h), *(len(str(r[h])) for r in rows)) for h in hdr}
lines.append("  ".join(h.rjust(wd[h]) for h in hdr))
for r in rows: lines.append("  ".join(str(r[h]).rjust(wd[h]) for h in hdr))
# The best combination at the paper configuration's validation-loss budget: the fastest
# run whose final val loss is no worse than the paper configuration's.
if PAPER in base and base[PAPER]["final_val_loss"] != "":
    budget = base[PAPER]["final_val_loss"]
    ok = [r for r in rows if r["final_val_loss"] != "" and r["final_val_loss"] <= budget]
    best = min(ok, key=lambda r: r["step_ms"])
    lines.append(f"best at the paper config's val-loss budget ({budget}): {best['config']} ({best['label']}), "
                 f"{best['step_ms']} ms/step, {best['bits_meas']} bits/param, speedup {best['speedup_vs_paper']} vs "
                 f"{PAPER}, {best['speedup_vs_fp32']} vs fp32, {best['speedup_vs_bf16']} vs bf16")
txt = "\n".join(lines)
open(os.path.join(d, "table.txt"), "w").write(txt + "\n")
print(txt)
