#!/usr/bin/env python3
"""2-process tests of tagc.torch.fsdp_comm_hook against a real FSDP1 (torch >= 2, CPU, gloo).

Runs in scripts/torch_root.sh's Debian testing root (torch 2.14; ctest tagc_python_fsdp1).
The harness (two_ranks.py) is test_ddp_hook.py's:
both ranks run every case in one spawn, the parent checks what they saw; a case that
raises on a rank fails, as does a rank that does not finish in time (no hang passes).

The model (four_units.py) has four FSDP units (ModuleWrapPolicy on nn.Linear, the embedding
in the root), two of them of equal size: the hook must keep their residuals apart.
Run: PYTHONPATH=<build>/python python3 python/tests/test_fsdp_hook.py
"""
import math
import os
import sys

import torch
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

import tagc.torch as tt
from four_units import EMB, Net, batch
from two_ranks import (WORLD, backward_error_with_nan, check, check_same_error, finish, run_cases, run_resumable,
                       spawn, train_step)

STRATEGIES = {"FULL_SHARD": ShardingStrategy.FULL_SHARD, "SHARD_GRAD_OP": ShardingStrategy.SHARD_GRAD_OP,
              "NO_SHARD": ShardingStrategy.NO_SHARD}


def make(strategy="FULL_SHARD", state=None, seed=0, record=None):
    """An FSDP model (optionally with the tagc hook; `state(fsdp)` makes its TagcState) and its optimizer."""
    torch.manual_seed(seed)
    fsdp = FSDP(Net(), device_id=torch.device("cpu"), sharding_strategy=STRATEGIES[strategy],
                auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    s = None
    if state is not None:
        s = state(fsdp)
        hook = tt.fsdp_comm_hook
        if record is not None:
            def hook(st, grad, output=None):
                tt.fsdp_comm_hook(st, grad, output)
                record.append((grad.numel(), dict(st.last_stats)))
        fsdp.register_comm_hook(s, hook)
    opt = torch.optim.SGD(fsdp.parameters(), lr=0.5, momentum=0.9)
    return fsdp, opt, s


def step(fsdp, opt, rank, i):
    return train_step(fsdp, opt, *batch(rank, i))


def shards(fsdp):
    """This rank's flat parameter shards (what the optimizer updates), as views to write through."""
    return [p.detach() for p in fsdp.parameters()]


def local(fsdp):
    """A copy of this rank's flat parameter shards."""
    return [p.clone() for p in shards(fsdp)]


def packed(fsdp):
    return tt.TagcState(values="packed", index_bits="exact", sparsity=0.0, module=fsdp)


# ---------------------------------------------------------------- cases (per rank)

def case_packed_equals_default(rank, out):
    """values='packed' at theta = 0 delivers exactly what FSDP's own reduce-scatter
    (or NO_SHARD's all-reduce) delivers: same shards after 4 steps, same losses."""
    for name in STRATEGIES:
        ref, ref_opt, _ = make(name)
        hooked, hook_opt, s = make(name, packed)
        ref_loss = [step(ref, ref_opt, rank, i) for i in range(4)]
        hook_loss = [step(hooked, hook_opt, rank, i) for i in range(4)]
        a, b = local(ref), local(hooked)
        out["equal_" + name] = len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
        out["maxdiff_" + name] = max((x - y).abs().max().item() for x, y in zip(a, b))
        out["losses_equal_" + name] = ref_loss == hook_loss
        out["units_" + name] = sorted(k[1:] for k in s._units)


def case_plain_small_units(rank, out):
    """min_compress_numel=20000: the three Linear units (16512, 16512, 1290 elements) go
    through the plain fp32 reducer's reduce-scatter, the embedding compressed (packed at
    theta = 0, exact): together they still equal FSDP's own reduction exactly."""
    ref, ref_opt, _ = make("FULL_SHARD")
    hooked, hook_opt, s = make("FULL_SHARD", lambda m: tt.TagcState(values="packed", index_bits="exact", sparsity=0.0,
                                                                    module=m, min_compress_numel=20000))
    ref_loss = [step(ref, ref_opt, rank, i) for i in range(4)]
    hook_loss = [step(hooked, hook_opt, rank, i) for i in range(4)]
    a, b = local(ref), local(hooked)
    out["plain_equal"] = ref_loss == hook_loss and all(torch.equal(x, y) for x, y in zip(a, b))
    out["plain_calls"] = (s.calls, s.plain_calls)


def case_sketch(rank, out):
    """The paper's configuration: loss falls over a few steps; every call sends the
    bytes the layout formula gives; the process group saw what the reducer reports."""
    record = []
    fsdp, opt, s = make("FULL_SHARD", lambda m: tt.TagcState(module=m), record=record)
    out["sketch_losses"] = [step(fsdp, opt, rank, i % 8) for i in range(30)]
    ref, ref_opt, _ = make("FULL_SHARD")  # FSDP's own reduce-scatter, for the report
    out["fp32_losses"] = [step(ref, ref_opt, rank, i % 8) for i in range(30)]
    out["sketch_calls"] = record[:8]  # the first step's calls (4 units) and the second's
    out["sketch_units"] = len(s._units)
    out["sketch_counted"] = sum(u.reducer.bytes_sent for u in s._units.values())
    out["sketch_reported"] = s.bytes_sent
    out["sketch_reduce_calls"] = s.calls


def resumable(rank, steps, save_after=None, load=None):
    """two_ranks.run_resumable on a fresh FULL_SHARD model with the default TagcState."""
    return run_resumable(*make("FULL_SHARD", lambda m: tt.TagcState(module=m)), shards, step, rank, steps,
                         save_after, load)


def case_save_resume(rank, out, scratch):
    """Sketch configuration (residuals matter): save after 3 steps, resume in a new model
    and a new TagcState, run to 6: equals 6 uninterrupted steps bit for bit."""
    whole, _ = resumable(rank, 6)
    _, ckpt = resumable(rank, 6, save_after=3)
    path = os.path.join(scratch, "fsdp_ckpt%d.pt" % rank)
    torch.save(ckpt, path)
    resumed, _ = resumable(rank, 6, load=torch.load(path, weights_only=False))
    out["resume_equal"] = all(torch.equal(a, b) for a, b in zip(whole, resumed))
    out["resume_maxdiff"] = max((a - b).abs().max().item() for a, b in zip(whole, resumed))
    out["resume_residual_norm"] = sum(v.norm().item() for v in ckpt["tagc"]["residuals"].values())
    # Without the tagc state the resumed run differs: the residuals are what is tested.
    without, _ = resumable(rank, 6, load=dict(ckpt, tagc=None))
    out["resume_without_tagc_differs"] = not all(torch.equal(a, b) for a, b in zip(whole, without))
    # A checkpoint of another model is refused.
    try:
        resumable(rank, 6, load=dict(ckpt, tagc=tt.TagcState(module=nn.Linear(1, 1)).state_dict()))
        out["resume_other_refused"] = ""
    except RuntimeError as e:
        out["resume_other_refused"] = str(e)


def case_nan(rank, out):
    """NaN in rank 0's gradient: both ranks raise the same error from backward; nobody hangs."""
    fsdp, _, _ = make("FULL_SHARD", lambda m: tt.TagcState(module=m))
    out["nan_error"] = backward_error_with_nan(fsdp, rank, *batch(rank, 0))


def worker(rank, port, scratch):
    # The NaN case last: the FSDP it breaks is not reused, but keep it out of the way.
    run_cases(rank, port, scratch, (case_packed_equals_default, case_plain_small_units, case_sketch,
                                    lambda r, o: case_save_resume(r, o, scratch), case_nan))


# ---------------------------------------------------------------- checks (parent)

def sketch_bytes(n, world=WORLD, ratio=10, lanes_max=1024, index_bits=1):
    """tagc's traffic for one sharded call (ring model, bytes per rank), from the layout:
    shard = ceil(n / world); a [blocks x lanes] shard sketched into 3 partitions of
    ceil(ceil(blocks / ratio) / 3) rows (dense when that is not smaller than the shard)."""
    shard = math.ceil(n / world)
    lanes = min(lanes_max, shard)
    blocks = math.ceil(shard / lanes)
    cells = 3 * max(1, math.ceil(math.ceil(blocks / ratio) / 3)) * lanes
    if cells >= shard:
        cells = shard
    f = (world - 1) / world
    return {"value_bytes": f * world * cells * 4,                              # reduce-scatter of the sketches
            "index_bytes": 2 * f * world * math.ceil(shard * index_bits / 8),  # all-reduce of the index
            "control_bytes": f * world * 48}                                   # agreement all-gather


def main():
    outs = spawn(worker, "tagc_fsdp_")
    o = outs[0]

    for name in STRATEGIES:
        for r, oo in enumerate(outs):
            check(oo.get("equal_" + name) is True and oo.get("losses_equal_" + name) is True,
                  "rank %d, %s: packed at theta = 0 equals FSDP's default reduction exactly "
                  "(max |diff| %s; units %s)" % (r, name, oo.get("maxdiff_" + name), oo.get("units_" + name)))
    check(sum(u[0] == 16512 for u in o.get("units_FULL_SHARD", [])) == 2,
          "the two equal-sized units have a reducer each: %s" % o.get("units_FULL_SHARD"))

    check(all(oo.get("plain_equal") is True and oo.get("plain_calls") == (16, 12) for oo in outs),
          "min_compress_numel=20000: the 3 small units plain, the embedding packed; equals FSDP's own "
          "reduction exactly over 4 steps (calls, plain calls: %s)" % [oo.get("plain_calls") for oo in outs])

    for r, oo in enumerate(outs):
        ls = oo.get("sketch_losses")
        if ls:
            # Without learning the loss stays near ln 10 = 2.30. theta = 0.9875 sends 1.25 %
            # of the entries per call (the rest waits in the residual), so it falls slower
            # than FSDP's own reduction; a 15 % fall cannot happen without delivered gradients.
            head, tail = sum(ls[:8]) / 8, sum(ls[-8:]) / 8
            ref = oo.get("fp32_losses", [float("nan")] * 8)
            check(tail < 0.85 * head, "rank %d: sketch (paper config) loss falls %.3f -> %.3f over %d steps "
                  "(FSDP's own reduction: %.3f -> %.3f)" % (r, head, tail, len(ls), sum(ref[:8]) / 8, sum(ref[-8:]) / 8))
    calls = o.get("sketch_calls", [])
    check(len(calls) == 8 and sorted(n for n, _ in calls[:4]) == [1290, 16512, 16512, EMB],
          "the hook saw the 4 units per step: %s" % [n for n, _ in calls])
    for n, st in calls[:4]:
        want = sketch_bytes(n)
        got = {k: st[k] for k in want}
        check(all(abs(got[k] - want[k]) < 1e-6 for k in want),
              "unit of %d: sends %s, the layout formula says %s" % (n, got, want))
    big = [st for n, st in calls if n == EMB]
    if big:
        fp32 = 4.0 * EMB / 2  # FSDP's reduce-scatter of fp32 on 2 ranks, per rank
        check(big[0]["total_bytes"] <= fp32 / 5, "the %d-element unit sends %.0f B <= 1/5 of fp32's %.0f B (%.2fx less)"
              % (EMB, big[0]["total_bytes"], fp32, fp32 / big[0]["total_bytes"]))
    check(abs(o.get("sketch_counted", -1) - o.get("sketch_reported", -2)) < 1e-6 and o.get("sketch_reduce_calls") == 120,
          "bytes counted at the process group (%s) == the reducer's own account (%s), %s calls"
          % (o.get("sketch_counted"), o.get("sketch_reported"), o.get("sketch_reduce_calls")))

    for r, oo in enumerate(outs):
        check(oo.get("resume_equal") is True and oo.get("resume_residual_norm", 0) > 0,
              "rank %d: save at step 3 + resume == 6 uninterrupted steps (max |diff| %s, residual norm saved %s)"
              % (r, oo.get("resume_maxdiff"), oo.get("resume_residual_norm")))
        check(oo.get("resume_without_tagc_differs") is True,
              "rank %d: resuming without tagc's state does not (the residuals carry over)" % r)
        check("other parameters" in oo.get("resume_other_refused", ""),
              "rank %d: a checkpoint of another model is refused: %s" % (r, oo.get("resume_other_refused")))

    check_same_error("NaN on rank 0", [oo.get("nan_error", "") for oo in outs], "not finite")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
