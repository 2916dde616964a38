#!/usr/bin/env python3
"""One configuration of the side-by-side: GPT-2 (gpt2.py) trained by 2 DDP ranks over gloo.

Configurations (--config):
  fp32          DDP's own all-reduce (no hook)
  fp16          torch's fp16_compress_hook
  powersgd-R    torch's PowerSGD hook, rank R, error feedback, warm start, one bucket
                (gloo crashes PowerSGD on several buckets in torch 1.13)
  tagc-paper    tagc.torch.ddp_comm_hook: 10x count sketch, 1-bit index (the paper's)
  tagc-best     tagc.torch.ddp_comm_hook: packed bf16 values, exact index
  tagc-best-sched  the same with theta warmed up from dense over the first 5 calls per
                bucket (the learning-rate warm-up), as the long runs of tagc-gpt2 do
  tagc-dense    the tagc hook's machinery (worker thread, futures, per-parameter
                bookkeeping) around a plain fp32 all-reduce: the hook's own overhead
Prints one JSON line (rank 0): ms per step (each step, after --warmup), bytes on
`lo` per rank per step (inside scripts/slow_net.sh's namespace lo carries only
this job), the train loss per step, the val loss after the last step, and for
tagc the ring-model bytes the reducers counted, the time spent inside them, and that
time split per rank (TagcState(profile=True), the library's stage clock): codec
(compress + decode stages), exchange (index and value collectives: the link) and wait
(the agreement check, the call's first collective, where a rank that reached the
bucket first waits for the other).
"""
import argparse
import ctypes
import functools
import json
import math
import os
import signal
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        assert header[0] == 20240520, path + ": not a token shard"
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint16).astype(np.int64))


def batches(tokens, rank, world, b, t, step):
    """Batch `step` of this rank: consecutive windows, ranks interleaved, wrapping."""
    n = b * t + 1
    per = (tokens.numel() - 1) // (b * t)
    start = ((step * world + rank) % per) * b * t
    w = tokens[start:start + n]
    return w[:-1].view(b, t), w[1:].view(b, t)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr_min + 0.5 * (a.lr - a.lr_min) * (1 + math.cos(math.pi * p))


def train_step(model, opt, x, y, lr=None, norms=None):
    """One training step of the benches: forward, backward, gradients clipped to norm 1,
    the optimizer (at `lr` when given). Returns the loss and time.perf_counter() at
    forward's end, backward's end and the step's end; appends the norm before clipping to
    `norms` when given."""
    if lr is not None:
        for g in opt.param_groups:
            g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss = model(x, y)
    t_fwd = time.perf_counter()
    loss.backward()
    t_bwd = time.perf_counter()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if norms is not None:
        norms.append(norm.full_tensor().item() if hasattr(norm, "full_tensor") else norm.item())  # DTensor under FSDP2
    opt.step()
    loss = loss.item()
    return loss, t_fwd, t_bwd, time.perf_counter()


def val_loss(model, val, rank, a):
    """The val loss over a.val_batches batches, averaged over the ranks."""
    with torch.no_grad():
        vl = [model(*batches(val, rank, a.world, a.B, a.T, i)).item() for i in range(a.val_batches)]
    vt = torch.tensor([sum(vl) / len(vl)])
    dist.all_reduce(vt)
    return vt.item() / a.world


def timed_hook(hook, calls):
    """The DDP comm hook `hook`, noting in `calls` when DDP called it (the exposed time
    per step is measured from the last call of a step to backward's return)."""
    def call(st, bucket):
        calls.append(time.perf_counter())
        return hook(st, bucket)
    return call


def lo_tx_bytes():
    """Bytes sent on lo in this network namespace (/proc/net/dev: scripts/torch_root.sh's root has no /sys)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])
    raise RuntimeError("no lo in /proc/net/dev")


def worker(rank, a, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(a.seed)
    model = gpt2.GPT2(a.depth)
    cfg = a.config
    bucket_mb = 25
    if cfg.startswith("powersgd"):
        # One bucket: PowerSGD over gloo in torch 1.13 crashes with several.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 40
        bucket_mb = 1 << 20
    ddp = DDP(model, bucket_cap_mb=bucket_mb, broadcast_buffers=False)
    state = None
    hook_calls = []  # when DDP called the hook (every bucket, every step)
    timed = functools.partial(timed_hook, calls=hook_calls)
    if cfg == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, timed(default_hooks.fp16_compress_hook))
    elif cfg.startswith("powersgd-"):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
        state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=int(cfg.split("-")[1]),
                                 start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, timed(ps.powerSGD_hook))
    elif cfg.startswith("tagc-"):
        import tagc.torch as tt
        kw = {"paper": dict(values="sketch", ratio=10, index_bits=1),
              "best": dict(values="packed-bf16", index_bits="exact"),
              "best-sched": dict(values="packed-bf16", index_bits="exact", sparsity_warmup=5, sparsity_start=0.0),
              "dense": dict(values="dense")}[cfg[5:]]
        # profile: the reducers' stage times (host: no extra synchronisation, a clock
        # read per stage), so "in reducer" splits into codec, link and waiting.
        state = tt.TagcState(module=model, profile=True, **kw)
        ddp.register_comm_hook(state, timed(tt.ddp_comm_hook))
    elif cfg != "fp32":
        raise SystemExit("unknown config " + cfg)
    opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    train = read_shard(os.path.join(a.data, "train.bin"))
    val = read_shard(os.path.join(a.data, "val.bin"))
    step_ms, losses, exposed_ms = [], [], []
    tx0 = t_reduce0 = bytes0 = None
    for step in range(a.steps):
        if step == a.warmup_steps:
            dist.barrier()
            tx0 = lo_tx_bytes()
            if state is not None and hasattr(state, "reduce_seconds"):
                t_reduce0, bytes0 = state.reduce_seconds, state.bytes_sent
                state.call_log.clear()
            t_all = time.perf_counter()
        t0 = time.perf_counter()
        loss, _, t_bwd, t_end = train_step(ddp, opt, *batches(train, rank, a.world, a.B, a.T, step), lr_at(step, a))
        if hook_calls and step >= a.warmup_steps:
            # exposed: from DDP's call of the step's last hook (the last bucket ready) to
            # backward's return, where DDP waits for every future: the reduction's time
            # that backward did not hide (waiting for the other rank included)
            exposed_ms.append(1e3 * (t_bwd - hook_calls[-1]))
        losses.append(loss)
        step_ms.append(1e3 * (t_end - t0))
    dist.barrier()
    timed = a.steps - a.warmup_steps
    wall = time.perf_counter() - t_all
    tx = (lo_tx_bytes() - tx0) / timed / a.world  # both ranks' traffic crosses lo
    vloss = val_loss(model, val, rank, a)
    out = {"config": cfg, "steps": a.steps, "timed_steps": timed, "ms_per_step": 1e3 * wall / timed,
           "step_ms": step_ms[a.warmup_steps:], "lo_bytes_per_rank_step": tx, "train_loss": losses,
           "val_loss": vloss, "B": a.B, "T": a.T, "depth": a.depth}
    if exposed_ms:
        mine = torch.tensor([sum(exposed_ms) / len(exposed_ms)], dtype=torch.float64)
        every = [torch.zeros_like(mine) for _ in range(a.world)]
        dist.all_gather(every, mine)
        out["exposed_ms_per_step"] = [round(float(e[0]), 2) for e in every]
    if state is not None and hasattr(state, "reduce_seconds"):
        out["tagc_model_bytes_per_step"] = (state.bytes_sent - bytes0) / timed
        out["tagc_reduce_ms_per_step"] = 1e3 * (state.reduce_seconds - t_reduce0) / timed
    if state is not None and getattr(state, "profile", False):
        # Where the time inside the reducers went, per step, each rank (list index = rank):
        # codec = the library's compress + decode stages; exchange = the index and value
        # collectives (the link); wait = the agreement check, the call's first collective,
        # where a rank that reached the bucket first waits for the other.
        sec = lambda c, ks: sum(c["seconds"].get(k, 0.0) for k in ks)
        mine = torch.tensor([sum(sec(c, ("sparsify", "index", "sketch", "residual", "decode")) for c in state.call_log),
                             sum(sec(c, ("index_exchange", "value_exchange")) for c in state.call_log),
                             sum(sec(c, ("check",)) for c in state.call_log)], dtype=torch.float64) * 1e3 / timed
        every = [torch.zeros_like(mine) for _ in range(a.world)]
        dist.all_gather(every, mine)
        for i, k in enumerate(("codec", "exchange", "wait")):
            out["tagc_%s_ms_per_step" % k] = [round(float(e[i]), 2) for e in every]
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.barrier()
    os._exit(0)


def _rank_tied_to_launcher(rank, worker, a, port, launcher):
    """One spawned rank: ends with its launcher, however the launcher ends (SIGKILL too), so a
    stopped benchmark leaves no ranks running beside the next one."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != launcher:  # the launcher ended before the line above
        os._exit(1)
    worker(rank, a, port)


def launch(worker, a):
    """Runs worker(rank, a, port) on a.world spawned processes; the worst exit code."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.start_processes(_rank_tied_to_launcher, args=(worker, a, port, os.getpid()), nprocs=a.world,
                             join=False, start_method="spawn")
    for p in ctx.processes:
        p.join()
    return max(p.exitcode for p in ctx.processes)


def add_run_arguments(ap, warmup_steps_help):
    """The options both side-by-side benches take (data, model, schedule, processes)."""
    ap.add_argument("--data", required=True, help="directory with train.bin / val.bin (tokenize_corpus.py)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=3, help=warmup_steps_help)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-min", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=5, help="learning-rate warm-up steps")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--val-batches", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--world", type=int, default=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    add_run_arguments(ap, "untimed first steps (DDP rebuilds buckets)")
    a = ap.parse_args()
    sys.exit(launch(worker, a))


if __name__ == "__main__":
    main()
