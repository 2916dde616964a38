#!/usr/bin/env python3
"""Where the tagc DDP hook's time goes (issue 13): 2 ranks over gloo on plain loopback.

Two measurements, one JSON line each (rank 0):
  fixed  the hook's reducer called back to back on fixed buckets (the sizes GPT-2 d2's
         DDP buckets have after DDP's rebuild; student-t gradients, new ones per call)
         with no backward beside it: per call, the wall time inside the reducer and the
         library's own stage times (TagcState(profile=True): reduce_stats::seconds).
         codec = sparsify + index + sketch/values + residual + decode; exchange = check +
         index exchange + value exchange (the gloo collectives, both ranks waiting on
         each other); other = the rest (tensor checks, Python, the transport's copies).
  ddp    GPT-2 d2 trained by DDP with the hook (as ddp_bench.py does): per step the same
         split, plus the time calls waited in the worker's queue, the step time, the
         process's CPU time, and the exposed time: from DDP's call of the step's last hook
         to backward's return (what the reduction adds to the step beyond backward).
         --config fp32 / fp16 / powersgd-1 measure the same without tagc (fixed: tagc only).
         --all-ranks: every rank's line; --timeline: per step when each phase and call ran.

  PYTHONPATH=build-py/python OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \\
    /usr/bin/python3 bench/torch/hook_breakdown.py --data build-py/bench-tokens [--mode fixed,ddp]
"""
import argparse
import functools
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_bench import launch  # noqa: E402

CONFIGS = {"paper": dict(values="sketch", ratio=10, index_bits=1),
           "best": dict(values="packed-bf16", index_bits="exact"),
           "best-sched": dict(values="packed-bf16", index_bits="exact", sparsity_warmup=5, sparsity_start=0.0)}
CODEC = ("sparsify", "index", "sketch", "residual", "decode")
EXCHANGE = ("check", "index_exchange", "value_exchange")


def split(log):
    """Sum of a list of call_log entries: reduce, codec, exchange, other, queued (seconds)."""
    out = dict(calls=len(log), reduce=0.0, codec=0.0, exchange=0.0, queued=0.0)
    stages = {k: 0.0 for k in CODEC + EXCHANGE}
    for c in log:
        out["reduce"] += c["reduce"]
        out["queued"] += c["queued"] or 0.0
        for k in stages:
            stages[k] += c["seconds"].get(k, 0.0)
    out["codec"] = sum(stages[k] for k in CODEC)
    out["exchange"] = sum(stages[k] for k in EXCHANGE)
    out["other"] = out["reduce"] - out["codec"] - out["exchange"]
    out["stages"] = stages
    return out


def ms(d, n):
    return {k: (round(1e3 * v / n, 2) if isinstance(v, float) else v) for k, v in d.items() if k != "stages"} | \
        {"stages_ms": {k: round(1e3 * v / n, 2) for k, v in d["stages"].items()}}


def fixed(rank, a, tt):
    sizes = [int(s) for s in a.sizes.split(",")]
    state = tt.TagcState(profile=True, **CONFIGS[a.config])
    gen = torch.Generator().manual_seed(1234 + rank)
    dist_t = torch.distributions.StudentT(3.0)
    grads = [[1e-3 * dist_t.sample((n,)) for n in sizes] for _ in range(4)]
    units = [state._unit(("fixed", i), ("b%d" % i,), [n], n, "replicated", lambda r: r.output_size)
             for i, n in enumerate(sizes)]
    for it in range(a.warmup_calls + a.calls):
        if it == a.warmup_calls:
            state.call_log.clear()
            dist.barrier()
            t0 = time.perf_counter()
        for u, g in zip(units, grads[it % len(grads)]):
            state._reduce(u, "all_reduce", g, u.out)
    wall = time.perf_counter() - t0
    res = ms(split(state.call_log), a.calls)
    res.update(mode="fixed", config=a.config, sizes=sizes, rounds=a.calls, wall_ms_per_round=round(1e3 * wall / a.calls, 2),
               omp_threads=torch.get_num_threads())
    # the same bytes through a plain gloo all-reduce (fp32), for scale
    x = torch.zeros(sum(sizes))
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(3):
        dist.all_reduce(x)
    res["fp32_allreduce_ms"] = round(1e3 * (time.perf_counter() - t0) / 3, 2)
    return res


def ddp(rank, a, tt):
    import gpt2
    from ddp_bench import batches, read_shard, timed_hook, train_step
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(1337)
    model = gpt2.GPT2(2)
    hook_calls = []  # when DDP called the hook (each bucket, each step)
    timed = functools.partial(timed_hook, calls=hook_calls)

    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    if a.config in CONFIGS:
        m = DDP(model, bucket_cap_mb=25, broadcast_buffers=False)
        state = tt.TagcState(module=model, profile=True, **CONFIGS[a.config])
        m.register_comm_hook(state, timed(tt.ddp_comm_hook))
    else:  # without tagc, as ddp_bench runs them: DDP's all-reduce (as its hook), fp16, PowerSGD rank 1 (one bucket)
        state = type("NoTagc", (), {"call_log": []})()
        if a.config == "powersgd-1":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
            dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 40
            m = DDP(model, bucket_cap_mb=1 << 20, broadcast_buffers=False)
            m.register_comm_hook(ps.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                                  use_error_feedback=True, warm_start=True), timed(ps.powerSGD_hook))
        else:
            m = DDP(model, bucket_cap_mb=25, broadcast_buffers=False)
            m.register_comm_hook(None, timed(default_hooks.fp16_compress_hook if a.config == "fp16"
                                             else default_hooks.allreduce_hook))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    train = read_shard(os.path.join(a.data, "train.bin"))
    steps = []
    for step in range(a.steps):
        if step == a.warmup_steps:
            state.call_log.clear()
        n0 = len(state.call_log)
        t0 = time.perf_counter()
        c0 = time.process_time()
        _, t1, t2, t3 = train_step(m, opt, *batches(train, rank, 2, 4, 64, step))
        if step >= a.warmup_steps:
            # exposed: from DDP's call of the step's last hook (the last bucket ready) to backward's return
            # (DDP waits there for every future): the communication and codec time backward could not hide
            steps.append(dict(step_ms=1e3 * (t3 - t0), cpu_ms=1e3 * (time.process_time() - c0), calls=state.call_log[n0:],
                              exposed_ms=1e3 * (t2 - hook_calls[-1]),
                              # a timeline (ms from the step's start; CLOCK_MONOTONIC, so comparable across ranks
                              # with --timeline): forward end, backward end, then per call queued..start..end
                              timeline=dict(t0=t0, fwd=1e3 * (t1 - t0), bwd=1e3 * (t2 - t0), end=1e3 * (t3 - t0),
                                            calls=[(c["length"], round(1e3 * (c["start"] - t0), 1),
                                                    round(1e3 * c["seconds"].get("check", 0), 1),
                                                    round(1e3 * c["reduce"], 1)) for c in state.call_log[n0:]])))
    timed = len(steps)
    res = ms(split(state.call_log), timed)
    res.update(mode="ddp", config=a.config, steps=timed,
               step_ms=[round(s["step_ms"], 1) for s in steps],
               cpu_ms=[round(s["cpu_ms"], 1) for s in steps],  # this process's CPU time (all its threads) per step
               exposed_ms=[round(s["exposed_ms"], 1) for s in steps],
               reduce_ms_per_step=[round(1e3 * sum(c["reduce"] for c in s["calls"]), 1) for s in steps],
               codec_ms_per_step=[round(1e3 * split(s["calls"])["codec"], 1) for s in steps],
               bucket_sizes=sorted({c["length"] for c in state.call_log}, reverse=True))
    if a.timeline:
        res["timeline"] = [s["timeline"] for s in steps]
    return res


def worker(rank, a, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    import tagc.torch as tt
    for mode in a.mode.split(","):
        res = {"fixed": fixed, "ddp": ddp}[mode](rank, a, tt)
        res["load"] = float(open("/proc/loadavg").read().split()[0])
        res["rank"] = rank
        every = [None, None]
        dist.all_gather_object(every, res)  # rank 0 prints, so lines never interleave
        if rank == 0:
            for r in (every if a.all_ranks else every[:1]):
                print(json.dumps(r), flush=True)
        dist.barrier()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="fixed,ddp")
    ap.add_argument("--config", default="best", choices=sorted(CONFIGS) + ["fp32", "fp16", "powersgd-1"])
    ap.add_argument("--data", default="build-py/bench-tokens")
    ap.add_argument("--sizes", default="6572288,396032", help="fixed mode: bucket lengths")
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--warmup-calls", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeline", action="store_true", help="ddp: per step, when forward/backward ended and each call ran")
    ap.add_argument("--all-ranks", action="store_true", help="print every rank's line, not rank 0's only")
    a = ap.parse_args()
    a.world = 2  # the buckets, batches and all_gather_object below are for 2 ranks
    sys.exit(launch(worker, a))


if __name__ == "__main__":
    main()
