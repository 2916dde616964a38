#!/usr/bin/env python3
"""One configuration of the FSDP2 side by side: GPT-2 (gpt2.py) trained by N FSDP2 ranks over gloo.

Needs torch >= 2.6 (FSDP2); bench/torch/fsdp2_run.sh runs it in scripts/torch_root.sh's
root (torch 2.14) inside scripts/slow_net.sh's shaped namespace.

Sharding: fully_shard on every transformer block and on the root (embeddings, tied LM
head, final LayerNorm), FSDP2's defaults otherwise (blocks reshard after forward, the
root does not). Every configuration shards the same way; only the gradient reduction differs.

Configurations (--config):
  fp32        FSDP2's own reduce-scatter in fp32 (no MixedPrecisionPolicy)
  bf16        FSDP2's reduce-scatter in bf16 (MixedPrecisionPolicy(reduce_dtype=bf16)). gloo
              refuses bf16 collectives ("Invalid scalar type", torch 2.14), so the bf16 chunks
              travel as bytes (Bf16ReduceScatter): the bytes of a bf16 ring reduce-scatter
  tagc-paper  tagc.torch.apply_fsdp2: 10x count sketch, 1-bit index, theta 0.9875 (the paper's)
  tagc-best   tagc.torch.apply_fsdp2: packed bf16 values over the exact index, theta 0.9875
              reached by an exponential warm-up from dense over the first --sparsity-warmup
              steps (docs/results.md's recommended configuration; default a third of the steps)
  tagc-routed tagc-best's selection and warm-up with the routed index: each rank's own picks
              sent to their shards' owners (all_to_all_v), no index; bytes independent of the ranks

The tagc configurations compress the parameters --compress names (apply_fsdp2's compress=:
non-attention, the default, matrices or all), a unit's matrices in one reducer (--granularity
unit, the default) or each its own (parameter); the others are reduced plainly in the
values' precision (bf16 for the packed-bf16 configurations, fp32 for the paper's).

FSDP2's parameter all-gather is not compressed by any configuration: it moves fp32
parameters in every one (forward, and again in backward for the blocks).

Prints one JSON line (rank 0): ms per step (after --warmup-steps), every timed step's ms,
bytes on the namespace's lo per rank per step (all ranks' traffic crosses that one lo;
payload + TCP/IP headers + gloo's own messages), the ring-model bytes per rank per step
of the gradient reduction (FSDP2's reduce-scatter: (n-1)/n of its input; tagc: what its
reducers counted) and of the parameter all-gather ((n-1)/n of its output), the train
loss per step and the val loss after the last step.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402
from ddp_bench import add_run_arguments, batches, launch, lr_at, lo_tx_bytes, read_shard, train_step, val_loss  # noqa: E402  (shared with the DDP bench)

CONFIGS = ("fp32", "bf16", "tagc-paper", "tagc-best", "tagc-routed")


class CountingAllGather(DefaultAllGather):
    """FSDP2's own all-gather, counting the ring-model bytes this rank sends."""

    def __init__(self, world):
        super().__init__()
        self.world, self.bytes = world, 0

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        self.bytes += output_tensor.numel() * output_tensor.element_size() * (self.world - 1) // self.world
        return super().__call__(output_tensor, input_tensor, group, async_op)


class CountingReduceScatter(DefaultReduceScatter):
    """FSDP2's own reduce-scatter, counting the ring-model bytes this rank sends."""

    def __init__(self, world):
        super().__init__()
        self.world, self.bytes = world, 0

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        self.bytes += input_tensor.numel() * input_tensor.element_size() * (self.world - 1) // self.world
        return super().__call__(output_tensor, input_tensor, group, op, async_op)


class Bf16ReduceScatter(CountingReduceScatter):
    """The bf16 reduce-scatter FSDP2 would run on NCCL, for gloo, which has no bf16: each
    rank's bf16 chunks go to their owners as bytes (all_to_all_single on uint8: (n-1)/n of
    the input per rank, as a ring reduce-scatter sends); the owner sums the n chunks in
    fp32 and rounds to bf16 once (a ring in bf16 rounds at every hop; the same at 2 ranks)."""

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        if input_tensor.dtype != torch.bfloat16:
            raise RuntimeError("Bf16ReduceScatter: FSDP handed %s, not bf16" % input_tensor.dtype)
        self.bytes += input_tensor.numel() * 2 * (self.world - 1) // self.world
        recv = torch.empty(input_tensor.numel() * 2, dtype=torch.uint8)
        dist.all_to_all_single(recv, input_tensor.contiguous().view(torch.uint8), group=group)
        total = recv.view(torch.bfloat16).view(self.world, -1).float().sum(0)
        if op is None or op == dist.ReduceOp.AVG:
            total /= self.world
        elif op != dist.ReduceOp.SUM:
            raise RuntimeError("Bf16ReduceScatter: reduce op %s (AVG or SUM expected)" % op)
        output_tensor.copy_(total.view(output_tensor.shape))
        return None


def shard(model, mesh, cfg):
    mp_policy = MixedPrecisionPolicy(reduce_dtype=torch.bfloat16) if cfg == "bf16" else MixedPrecisionPolicy()
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def worker(rank, a, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    mesh = init_device_mesh("cpu", (a.world,))
    torch.manual_seed(a.seed)
    model = gpt2.GPT2(a.depth)
    cfg = a.config
    units = shard(model, mesh, cfg)
    gathers = [CountingAllGather(a.world) for _ in units]
    for m, g in zip(units, gathers):
        m.set_custom_all_gather(g)
    state, scatters = None, []
    if cfg.startswith("tagc-"):
        import tagc.torch as tt
        kw = {"tagc-paper": dict(values="sketch", ratio=10, index_bits=1),
              "tagc-best": dict(values="packed-bf16", index_bits="exact", sparsity=0.9875,
                                sparsity_warmup=a.sparsity_warmup, sparsity_schedule="exp", sparsity_start=0.0),
              "tagc-routed": dict(values="packed-bf16", index_bits="routed", sparsity=0.9875,
                                  sparsity_warmup=a.sparsity_warmup, sparsity_schedule="exp", sparsity_start=0.0)}[cfg]
        state = tt.TagcState(module=model, **kw)
        tt.apply_fsdp2(model, state, compress=a.compress, granularity=a.granularity)
    else:
        scatters = [(Bf16ReduceScatter if cfg == "bf16" else CountingReduceScatter)(a.world) for _ in units]
        for m, s in zip(units, scatters):
            m.set_custom_reduce_scatter(s)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    train = read_shard(os.path.join(a.data, "train.bin"))
    val = read_shard(os.path.join(a.data, "val.bin"))
    grad_bytes = lambda: state.bytes_sent if state is not None else sum(s.bytes for s in scatters)
    gather_bytes = lambda: sum(g.bytes for g in gathers)
    step_ms, losses, phase_ms = [], [], [0.0, 0.0, 0.0]
    for step in range(a.steps):
        if step == a.warmup_steps:
            dist.barrier()
            tx0, grad0, gather0 = lo_tx_bytes(), grad_bytes(), gather_bytes()
            t_all = time.perf_counter()
        t0 = time.perf_counter()
        loss, t1, t2, t3 = train_step(model, opt, *batches(train, rank, a.world, a.B, a.T, step), lr_at(step, a))
        losses.append(loss)
        step_ms.append(1e3 * (t3 - t0))
        if step >= a.warmup_steps:  # forward (with its all-gathers), backward (reduce-scatters), clip + AdamW
            for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2)):
                phase_ms[i] += 1e3 * d
        if rank == 0 and a.progress and (step + 1) % a.progress == 0:
            print("fsdp2_bench: step %d loss %.4f %.0f ms" % (step + 1, losses[-1], step_ms[-1]), file=sys.stderr, flush=True)
    dist.barrier()
    timed = a.steps - a.warmup_steps
    wall = time.perf_counter() - t_all
    tx = (lo_tx_bytes() - tx0) / timed / a.world  # every rank's traffic crosses the one lo
    # mean over ranks of the ring-model counts (tagc's index unions differ per rank a little)
    counts = torch.tensor([(grad_bytes() - grad0) / timed, (gather_bytes() - gather0) / timed], dtype=torch.float64)
    dist.all_reduce(counts)
    counts /= a.world
    vloss = val_loss(model, val, rank, a)
    out = {"config": cfg, "world": a.world, "depth": a.depth, "steps": a.steps, "timed_steps": timed,
           "ms_per_step": 1e3 * wall / timed, "step_ms": [round(s, 1) for s in step_ms[a.warmup_steps:]],
           "lo_bytes_per_rank_step": tx,
           **{"%s_ms_per_step" % k: phase_ms[i] / timed for i, k in enumerate(("forward", "backward", "optimizer"))}, "grad_bytes_per_rank_step": float(counts[0]),
           "allgather_bytes_per_rank_step": float(counts[1]), "train_loss": [round(l, 4) for l in losses],
           "val_loss": vloss, "epochs": a.steps * a.world * a.B * a.T / (train.numel() - 1), "B": a.B, "T": a.T, "params": sum(p.numel() for p in model.parameters()),
           "torch": torch.__version__}
    if state is not None:
        out["compress"], out["granularity"] = a.compress, a.granularity
        out["sparsity_warmup"] = a.sparsity_warmup if cfg in ("tagc-best", "tagc-routed") else 0
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, choices=CONFIGS)
    add_run_arguments(ap, "untimed first steps (FSDP2's lazy init)")
    ap.add_argument("--sparsity-warmup", type=int, default=None, help="tagc-best's theta warm-up (default steps / 3)")
    ap.add_argument("--compress", default="non-attention", choices=("non-attention", "matrices", "all"),
                    help="tagc configurations: which parameters go through tagc (apply_fsdp2's compress=)")
    ap.add_argument("--granularity", default="unit", choices=("unit", "parameter"),
                    help="tagc configurations: a reducer per compressed matrix or per unit (apply_fsdp2's granularity=)")
    ap.add_argument("--progress", type=int, default=0, help="rank 0 prints every N steps to stderr (0: never)")
    a = ap.parse_args()
    if a.steps <= a.warmup_steps:
        ap.error("--steps %d must exceed --warmup-steps %d" % (a.steps, a.warmup_steps))
    if a.sparsity_warmup is None:
        a.sparsity_warmup = a.steps // 3
    sys.exit(launch(worker, a))


if __name__ == "__main__":
    main()
