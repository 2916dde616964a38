#!/usr/bin/env python3
"""2-process DDP tests of tagc.torch.ddp_comm_hook (gloo over loopback, torch.multiprocessing).

The harness (two_ranks.py, shared with test_fsdp_hook.py): both ranks run every case in
one spawn (importing torch costs seconds) and write what they saw to a scratch directory;
the parent checks it. A case that raises on a rank is a failure, as is a rank that does
not finish in time (no hang passes).
Run: PYTHONPATH=<build>/python /usr/bin/python3 python/tests/test_ddp_hook.py
"""
import inspect
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tagc.torch as tt
from tagc import _C
from two_ranks import (WORLD, backward_error_with_nan, check, check_same_error, finish, run_cases, spawn,
                       train_step)


class Sequential(nn.Module):
    """Registered in the order of use: DDP's rebuilt buckets equal its first ones."""

    def __init__(self, vocab=1000, dim=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.body = nn.Linear(dim, 64)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(torch.tanh(self.body(self.emb(x).mean(1))))


class Reversed(Sequential):
    """Registered against the order of use: DDP re-forms its buckets after step 1."""

    def __init__(self, vocab=1000, dim=256):
        nn.Module.__init__(self)
        self.head = nn.Linear(64, 10)
        self.emb = nn.Embedding(vocab, dim)
        self.body = nn.Linear(dim, 64)


def batch(rank, step, vocab=1000):
    g = torch.Generator().manual_seed(1000 * step + 17 * rank + 3)
    x = torch.randint(0, vocab, (32, 8), generator=g)
    y = (x[:, 0] % 10)  # learnable: the class is a function of the first token
    return x, y


def make(model_cls, hook_state=None, bucket_cap_mb=25, seed=0):
    torch.manual_seed(seed)
    model = model_cls()
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    if hook_state is not None:
        ddp.register_comm_hook(hook_state(model), tt.ddp_comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.5, momentum=0.9)
    return model, ddp, opt


def step(ddp, opt, rank, i):
    return train_step(ddp, opt, *batch(rank, i))


def params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# ---------------------------------------------------------------- cases (per rank)

def case_packed_equals_default(rank, out):
    """values='packed' at theta = 0 delivers exactly the default all-reduce's mean."""
    ref_model, ref, ref_opt = make(Sequential)
    hook_model, hooked, hook_opt = make(
        Sequential, lambda m: tt.TagcState(values="packed", index_bits="exact", sparsity=0.0, module=m))
    for i in range(4):
        step(ref, ref_opt, rank, i)
        step(hooked, hook_opt, rank, i)
    a, b = params(ref_model), params(hook_model)
    out["packed_equal"] = all(torch.equal(a[k], b[k]) for k in a)
    out["packed_maxdiff"] = max((a[k] - b[k]).abs().max().item() for k in a)
    # The same configuration in the library's description language.
    words = tt.TagcState(values="packed-bf16", index_bits="exact", sparsity=0.9875, sparsity_warmup=300,
                         sparsity_schedule="linear", sparsity_start=0.5)
    text = tt.TagcState(reducer="values=packed-bf16 index=exact theta=0.9875 warmup=300 warmup-shape=linear "
                                "warmup-start=0.5")
    out["reducer_text_config"] = (words.config == text.config, text.config)


def case_sketch_bytes(rank, out):
    """The paper's configuration sends what the layout formula says, and <= 1/5 of fp32."""
    dist.barrier()
    state_holder = {}

    def mk(m):
        state_holder["s"] = tt.TagcState(module=m)
        return state_holder["s"]

    model, ddp, opt = make(Sequential, mk, bucket_cap_mb=100)  # one bucket
    step(ddp, opt, rank, 0)
    s = state_holder["s"]
    s.wait()
    out["sketch_stats"] = dict(s.last_stats)
    out["sketch_bytes_counted"] = s.bytes_sent
    out["sketch_calls"] = s.calls
    out["sketch_n"] = sum(p.numel() for p in model.parameters())


def case_loss_down(rank, out):
    """Training with the paper's configuration learns (loss falls) like the uncompressed run."""
    losses = {}
    for name, hs in (("fp32", None), ("tagc", lambda m: tt.TagcState(module=m))):
        model, ddp, opt = make(Sequential, hs)
        losses[name] = [step(ddp, opt, rank, i % 8) for i in range(40)]
    out["losses"] = losses


# The sparsity warm-up through the hook: packed values (exact at any theta), dense first call,
# theta 0.9 from call 4 on.
SCHEDULE = dict(values="packed", index_bits="exact", sparsity=0.9, sparsity_warmup=4, sparsity_start=0.0)


def run_resumable(rank, steps, save_after=None, load=None, **config):
    states = {}

    def mk(m):
        states["s"] = tt.TagcState(module=m, **config)
        return states["s"]

    model, ddp, opt = make(Sequential, mk)
    s = states["s"]
    first = 0
    if load is not None:
        model.load_state_dict(load["model"])
        opt.load_state_dict(load["opt"])
        s.load_state_dict(load["tagc"])
        first = load["step"]
    ckpt = None
    for i in range(first, steps):
        step(ddp, opt, rank, i)
        if save_after is not None and i + 1 == save_after:
            ckpt = {"model": {k: v.clone() for k, v in model.state_dict().items()},
                    "opt": opt.state_dict(), "tagc": s.state_dict(), "step": i + 1}
            return params(model), ckpt
    return params(model), s


def case_save_resume(rank, out, scratch):
    whole, _ = run_resumable(rank, 6)
    _, ckpt = run_resumable(rank, 6, save_after=3)
    path = os.path.join(scratch, "ckpt%d.pt" % rank)
    torch.save(ckpt, path)
    resumed, _ = run_resumable(rank, 6, load=torch.load(path))
    out["resume_equal"] = all(torch.equal(whole[k], resumed[k]) for k in whole)
    out["resume_maxdiff"] = max((whole[k] - resumed[k]).abs().max().item() for k in whole)
    # A checkpoint for another model is refused with a clear message.
    torch.manual_seed(0)
    other = nn.Linear(3, 3)
    s = tt.TagcState(module=other)
    try:
        s.load_state_dict(ckpt["tagc"])
        out["resume_refused"] = ""
    except RuntimeError as e:
        out["resume_refused"] = str(e)


def case_schedule(rank, out):
    """theta per call under the warm-up, and a resume in the middle of it continuing the ramp."""
    states = {}

    def mk(m):
        states["s"] = tt.TagcState(module=m, **SCHEDULE)
        return states["s"]

    model, ddp, opt = make(Sequential, mk, bucket_cap_mb=100)  # one bucket: one reducer, one call per step
    thetas, kept = [], []
    for i in range(6):
        step(ddp, opt, rank, i)
        states["s"].wait()
        st = states["s"].last_stats
        thetas.append(st["theta"])
        kept.append(st["kept"] / st["elements"])
    out["schedule_thetas"], out["schedule_kept"] = thetas, kept
    whole, _ = run_resumable(rank, 7, **SCHEDULE)
    _, ckpt = run_resumable(rank, 7, save_after=2, **SCHEDULE)
    resumed, _ = run_resumable(rank, 7, load=ckpt, **SCHEDULE)
    out["schedule_resume_equal"] = all(torch.equal(whole[k], resumed[k]) for k in whole)
    # The schedule is part of the configuration a checkpoint must match.
    try:
        run_resumable(rank, 7, load=ckpt, **dict(SCHEDULE, sparsity_warmup=5))
        out["schedule_refused"] = ""
    except RuntimeError as e:
        out["schedule_refused"] = str(e)


def case_rebuild(rank, out):
    """DDP re-forms its buckets after step 1 (Reversed); residuals move with their parameters:
    sum over ranks and steps of inputs == world x sum of delivered means + sum of residuals."""
    torch.manual_seed(0)
    model = Reversed()
    names = {id(p): n for n, p in model.named_parameters()}
    sent = {n: torch.zeros(p.numel(), dtype=torch.float64) for n, p in model.named_parameters()}
    delivered = {n: torch.zeros(p.numel(), dtype=torch.float64) for n, p in model.named_parameters()}
    keys = []

    def recording_hook(state, bucket) -> torch.futures.Future[torch.Tensor]:
        ps = list(bucket.parameters())
        keys.append(tuple(names[id(p)] for p in ps))
        for p, g in zip(ps, torch.split(bucket.buffer().clone(), [p.numel() for p in ps])):
            sent[names[id(p)]] += g.double()
        return tt.ddp_comm_hook(state, bucket)

    s = tt.TagcState(module=model)
    # Small buckets from the start and after the rebuild, so that re-forming them in
    # gradient-ready order changes which parameters go together. Torch 2.14's DDP puts
    # every parameter in one first bucket unless per-bucket caps are given (then both
    # bucketings use them); torch 1.13 needs its first bucket (1 MiB by default) shrunk.
    first, dist._DEFAULT_FIRST_BUCKET_BYTES = dist._DEFAULT_FIRST_BUCKET_BYTES, 64 * 1024
    try:
        if "bucket_cap_mb_list" in inspect.signature(DDP.__init__).parameters:
            ddp = DDP(model, bucket_cap_mb_list=[0.1] * 8)
        else:
            ddp = DDP(model, bucket_cap_mb=0.1)
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES = first
    ddp.register_comm_hook(s, recording_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for i in range(4):
        x, y = batch(rank, i)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        for n, p in model.named_parameters():
            delivered[n] += p.grad.reshape(-1).double()
        opt.step()
    out["rebuild_keys_changed"] = len(set(keys)) > len(set(keys[: len(keys) // 4]))
    out["rebuilds"] = s.rebuilds
    out["rebuild_sent"] = sent
    out["rebuild_delivered"] = delivered
    out["rebuild_residual"] = {k: v.double() for k, v in s.residuals().items()}


class FakeBucket:
    """What the hook reads from a dist.GradBucket."""

    def __init__(self, params):
        self.params = params
        self.buf = torch.cat([p.grad.reshape(-1) for p in params])

    def buffer(self):
        return self.buf

    def parameters(self):
        return self.params


def case_overlap(rank, out):
    """The hook returns before the reduction runs: the future completes on the worker."""
    torch.manual_seed(0)
    ps = [nn.Parameter(torch.randn(1000)), nn.Parameter(torch.randn(24))]
    for p in ps:
        p.grad = torch.full_like(p, float(rank + 1))
    s = tt.TagcState(values="packed", index_bits="exact", sparsity=0.0)
    import threading
    gate = threading.Event()
    s._submit(gate.wait)  # hold the worker
    fut = tt.ddp_comm_hook(s, FakeBucket(ps))
    out["overlap_pending"] = not fut.done()
    gate.set()
    value = fut.wait()
    out["overlap_value"] = bool(torch.all(value == 1.5).item())  # mean of 1 and 2


def case_plain_units(rank, out):
    """min_compress_numel: a unit below it goes through the plain fp32 reducer. Call 1
    reduces two parameters as one compressed unit (packed, theta 0.9: most entries held
    back); call 2 reduces the first alone, below the minimum: its residual moves into the
    plain unit and is sent with that call. Over both: inputs == world x delivered + residuals.
    Then NaN on rank 0 in a plain unit: the same error on every rank."""
    ps = [nn.Parameter(torch.zeros(3000)), nn.Parameter(torch.zeros(1000))]
    s = tt.TagcState(values="packed", index_bits="exact", sparsity=0.9, min_compress_numel=3500)
    g = torch.Generator().manual_seed(11 + rank)
    sent = [torch.zeros(p.numel(), dtype=torch.float64) for p in ps]
    delivered = [torch.zeros(p.numel(), dtype=torch.float64) for p in ps]
    for p, t in zip(ps, sent):
        p.grad = torch.randn(p.numel(), generator=g)
        t += p.grad.double()
    whole = tt.ddp_comm_hook(s, FakeBucket(ps)).wait()
    delivered[0] += whole[:3000].double()
    delivered[1] += whole[3000:].double()
    ps[0].grad = torch.randn(3000, generator=g)
    sent[0] += ps[0].grad.double()
    delivered[0] += tt.ddp_comm_hook(s, FakeBucket([ps[0]])).wait().double()
    res = s.residuals()
    out["plain_calls"] = (s.calls, s.plain_calls)
    out["plain_sent"] = sent
    out["plain_delivered"] = delivered
    out["plain_residual"] = [res["param0"].double(), res["param1"].double()]

    s2 = tt.TagcState(values="packed", index_bits="exact", sparsity=0.9, min_compress_numel=3500)
    ps[1].grad = torch.full((1000,), float("nan") if rank == 0 else 1.0)
    try:
        tt.ddp_comm_hook(s2, FakeBucket([ps[1]])).wait()
        out["plain_nan_error"] = ""
    except Exception as e:
        out["plain_nan_error"] = "%s: %s" % (type(e).__name__, e)


def case_profile(rank, out):
    """TagcState(profile=True): every call is logged with the library's stage seconds,
    and profiling changes nothing that is delivered (same values as without it)."""
    delivered = {}
    for profile in (False, True):
        torch.manual_seed(5)
        ps = [nn.Parameter(torch.zeros(3000)), nn.Parameter(torch.zeros(1000))]
        s = tt.TagcState(values="packed-bf16", index_bits="exact", sparsity=0.9, profile=profile)
        g = torch.Generator().manual_seed(23 + rank)
        got = []
        for _ in range(3):
            for p in ps:
                p.grad = torch.randn(p.numel(), generator=g)
            got.append(tt.ddp_comm_hook(s, FakeBucket(ps)).wait().clone())
        delivered[profile] = got
        if profile:
            out["profile_log"] = [dict(c) for c in s.call_log]
            out["profile_reduce_seconds"] = s.reduce_seconds
        else:
            out["profile_off_log"] = len(s.call_log)
    out["profile_same"] = all(torch.equal(a, b) for a, b in zip(delivered[False], delivered[True]))


def case_sharded_and_bf16(rank, out):
    """fsdp_comm_hook's reduce-scatter (gloo has none: all-to-all + owner's sum) on a flat
    padded gradient gives this rank's shard of the mean; packed-bf16 (bf16 sums emulated
    by all-gather) is the mean to bf16 rounding. No FSDP here (torch 1.13's needs CUDA)."""
    g = torch.Generator().manual_seed(7 + rank)
    n = 4 * 1000  # divisible by the world, as FSDP pads it
    grad = torch.randn(n, generator=g)
    every = [torch.randn(n, generator=torch.Generator().manual_seed(7 + r)) for r in range(WORLD)]
    mean = (every[0] + every[1]) / WORLD
    shard = n // WORLD
    model = nn.Linear(2, 2)
    s = tt.TagcState(values="packed", index_bits="exact", sparsity=0.0, module=model)
    output = torch.empty(shard)
    tt.fsdp_comm_hook(s, grad, output)
    out["fsdp_shard_equal"] = torch.equal(output, mean[rank * shard:(rank + 1) * shard])
    s16 = tt.TagcState(values="packed-bf16", index_bits="exact", sparsity=0.0, module=model)
    whole = grad.clone()
    tt.fsdp_comm_hook(s16, whole)  # NO_SHARD form: all-reduce in place
    err = (whole - mean).abs().max().item()
    out["bf16_err"] = err
    out["bf16_ok"] = err <= 2 ** -7 * mean.abs().max().item() * 2


def case_errors(rank, out):
    """NaN on one rank: every rank raises the same error from backward, nobody hangs."""
    _, ddp, _ = make(Sequential, lambda m: tt.TagcState(module=m))
    out["nan_error"] = backward_error_with_nan(ddp, rank, *batch(rank, 0))


def worker(rank, port, scratch):
    run_cases(rank, port, scratch, (case_packed_equals_default, case_sketch_bytes, case_loss_down,
                                    lambda r, o: case_save_resume(r, o, scratch), case_rebuild, case_overlap,
                                    case_sharded_and_bf16, case_plain_units, case_schedule, case_profile,
                                    case_errors))


# ---------------------------------------------------------------- checks (parent)

# A whole TagcState.config, as _C takes it (the paper's configuration, no warm-up).
BASE_CONFIG = dict(values="sketch", ratio=10, index="1", sparsity=-1.0, adaptive=False, check_inputs=True,
                   sparsity_warmup=0, sparsity_schedule="exp", sparsity_start=0.75)

def main():
    # Refusals that need no process group.
    try:
        _C.can_implement(dict(BASE_CONFIG, values="packed-bf16", index="exact"), 1000, 300, 0, "replicated")
        check(False, "a world of 300 ranks is refused by the exact index")
    except RuntimeError as e:
        check("300" in str(e) and "255" in str(e), "a world of 300 ranks is refused: " + str(e))
    try:  # the shared selection has no union, so no index to overflow: any world
        _C.can_implement(dict(BASE_CONFIG, values="packed-bf16", index="shared"), 1000, 300, 0, "replicated")
        check(True, "the shared selection accepts a world of 300 ranks")
    except RuntimeError as e:
        check(False, "the shared selection accepts a world of 300 ranks: %s" % e)
    try:
        _C.can_implement(dict(BASE_CONFIG, ratio=7), 1000, 2, 0, "replicated")
        check(False, "a configuration outside the catalogue is refused")
    except RuntimeError as e:
        check("catalogue" in str(e) and "packed-bf16" in str(e), "outside the catalogue is refused, listing it")
    # The builder's catalogue (csrc/catalogue.cpp) beyond the three configurations the
    # workers train with: each is built and accepts a world of 2.
    for more in (dict(ratio=4), dict(index="4"), dict(values="sketch-bf16"), dict(values="packed-fp16", index="exact")):
        try:
            _C.can_implement(dict(BASE_CONFIG, **more), 1000, 2, 0, "replicated")
            check(True, "catalogue entry %s builds" % more)
        except RuntimeError as e:
            check(False, "catalogue entry %s builds: %s" % (more, e))
    for bad, words in ((dict(sparsity_warmup=10, sparsity_start=0.995), "above the target"),
                       (dict(sparsity_warmup=10, sparsity_schedule="cosine"), "cosine")):
        try:
            _C.can_implement(dict(BASE_CONFIG, **bad), 1000, 2, 0, "replicated")
            check(False, "a bad sparsity schedule %s is refused" % bad)
        except (RuntimeError, ValueError) as e:
            check(words in str(e), "a bad sparsity schedule %s is refused: %s" % (bad, e))

    # TagcState(reducer=TEXT): the description language's keys, each naming one keyword.
    check(tt._reducer_keywords("values=sketch,ratio=4 index=4 theta=0.9") ==
          dict(values="sketch", ratio="4", index_bits="4", sparsity="0.9"),
          "a description text sets the keywords its keys name (space- or comma-separated)")
    for bad, words in (("decoder=peel", "'decoder' is not one TagcState takes"), ("theta", "not key=value"),
                       ("theta=0.9 theta=0.8", "given twice")):
        try:
            tt._reducer_keywords(bad)
            check(False, "reducer=%r is refused" % bad)
        except ValueError as e:
            check(words in str(e), "reducer=%r is refused: %s" % (bad, e))

    outs = spawn(worker, "tagc_ddp_")
    o = outs[0]

    check(o.get("packed_equal") is True,
          "packed, theta = 0 equals the default hook exactly (max |diff| %s)" % o.get("packed_maxdiff"))
    same, config = o.get("reducer_text_config", (False, None))
    check(same is True, "TagcState(reducer=TEXT) makes the configuration its keywords make: %s" % config)

    st, n = o.get("sketch_stats", {}), o.get("sketch_n", 0)
    if st:
        shard_blocks = math.ceil(n / 1024)
        cells = 3 * max(1, math.ceil(math.ceil(shard_blocks / 10) / 3)) * 1024
        # 2 ranks, ring model: an all-reduce of B bytes sends B per rank.
        check(st["value_bytes"] == 4 * cells, "sketch values: %d bytes, formula 4 x %d cells" % (st["value_bytes"], cells))
        check(st["index_bytes"] == math.ceil(n / 8), "1-bit index: %d bytes, formula n/8 = %d" % (st["index_bytes"], math.ceil(n / 8)))
        check(st["retransmit_bytes"] == 0 or st["unresolved"] > 0, "no retransmission without unresolved entries")
        check(abs(o["sketch_bytes_counted"] - st["total_bytes"]) < 1e-6 and o["sketch_calls"] == 1,
              "bytes counted at the process group (%.0f) == the reducer's own account" % o["sketch_bytes_counted"])
        fp32 = 4.0 * n
        check(st["total_bytes"] <= fp32 / 5, "paper config sends %.0f B <= 1/5 of fp32's %.0f B (%.2fx less)"
              % (st["total_bytes"], fp32, fp32 / st["total_bytes"]))

    for r, oo in enumerate(outs):
        ls = oo.get("losses")
        if ls:
            head, tail = sum(ls["tagc"][:8]) / 8, sum(ls["tagc"][-8:]) / 8
            ref = sum(ls["fp32"][-8:]) / 8
            check(tail < 0.5 * head, "rank %d: tagc loss falls %.3f -> %.3f (fp32 run ends at %.3f)" % (r, head, tail, ref))

    for r, oo in enumerate(outs):
        check(oo.get("resume_equal") is True,
              "rank %d: save at step 3 + resume == 6 uninterrupted steps (max |diff| %s)" % (r, oo.get("resume_maxdiff")))
        check("other parameters" in oo.get("resume_refused", ""),
              "rank %d: a checkpoint for another model is refused: %s" % (r, oo.get("resume_refused")))

    if "rebuild_sent" in o:
        check(o["rebuild_keys_changed"] and o["rebuilds"] >= 1,
              "DDP re-formed its buckets (units re-formed: %d)" % o["rebuilds"])
        worst = 0.0
        for name in o["rebuild_sent"]:
            inp = sum(oo["rebuild_sent"][name] for oo in outs)
            got = WORLD * o["rebuild_delivered"][name] + sum(oo["rebuild_residual"][name] for oo in outs)
            worst = max(worst, ((inp - got).abs().max() / (inp.abs().max() + 1e-12)).item())
        check(worst < 1e-5, "residuals survive the rebuild: inputs == delivered + residuals (worst rel. err %.2e)" % worst)

    check(all(oo.get("overlap_pending") is True for oo in outs),
          "the hook returns a pending future while the worker is busy (completed on the worker)")
    check(all(oo.get("overlap_value") is True for oo in outs), "that future then holds the mean")

    check(all(oo.get("fsdp_shard_equal") is True for oo in outs),
          "fsdp_comm_hook (packed, theta = 0): each rank's shard equals the mean's exactly")
    check(all(oo.get("bf16_ok") is True for oo in outs),
          "packed-bf16, theta = 0: the mean to bf16 rounding (max err %s)" % [oo.get("bf16_err") for oo in outs])

    if "plain_sent" in o:
        check(all(oo.get("plain_calls") == (2, 1) for oo in outs),
              "min_compress_numel: 2 calls, the second (3000 < 3500 elements) plain: %s"
              % [oo.get("plain_calls") for oo in outs])
        worst = 0.0
        for i in range(2):
            inp = sum(oo["plain_sent"][i] for oo in outs)
            got = WORLD * o["plain_delivered"][i] + sum(oo["plain_residual"][i] for oo in outs)
            worst = max(worst, ((inp - got).abs().max() / (inp.abs().max() + 1e-12)).item())
        check(worst < 1e-5, "residual carried into a plain unit is sent, nothing dropped: inputs == delivered + "
              "residuals (worst rel. err %.2e)" % worst)
        check(all(bool((oo["plain_residual"][0] == 0).all()) and bool((oo["plain_residual"][1] != 0).any())
                  for oo in outs),
              "after the plain call the first parameter owes nothing; the second still holds its residual")
    check_same_error("NaN on rank 0 in a plain unit", [oo.get("plain_nan_error", "") for oo in outs], "not finite")

    for r, oo in enumerate(outs):
        th, kept = oo.get("schedule_thetas", []), oo.get("schedule_kept", [])
        check(len(th) == 6 and th[0] == 0.0 and kept[0] > kept[5] and all(a < b for a, b in zip(th[:4], th[1:5]))
              and th[4] == th[5] == 0.9 and all(k <= 1.0 - t + 1e-6 for k, t in zip(kept, th)),
              "rank %d: theta warms up 0 -> 0.9 over 4 calls, kept <= 1 - theta: %s, kept %s"
              % (r, ["%.4f" % t for t in th], ["%.4f" % k for k in kept]))
        check(oo.get("schedule_resume_equal") is True, "rank %d: a resume at call 2 of the warm-up == no resume" % r)
        check("sparsity_warmup" in oo.get("schedule_refused", ""),
              "rank %d: a checkpoint with another warm-up is refused: %s" % (r, oo.get("schedule_refused")))

    for r, oo in enumerate(outs):
        log = oo.get("profile_log", [])
        stages = ("check", "sparsify", "index", "index_exchange", "sketch", "value_exchange", "decode", "residual")
        ok = len(log) == 3 and oo.get("profile_off_log") == 0 and all(
            c["length"] == 4000 and c["queued"] is not None and c["queued"] >= 0 and set(stages) <= set(c["seconds"])
            and all(c["seconds"][k] >= 0 for k in stages)
            and c["seconds"]["sparsify"] + c["seconds"]["decode"] > 0
            and c["seconds"]["index_exchange"] + c["seconds"]["value_exchange"] > 0
            and sum(c["seconds"][k] for k in stages) <= c["reduce"] + 1e-6 for c in log)
        check(ok, "rank %d: profile=True logs 3 calls with stage seconds that add up to at most the time in the "
              "reducer (%s); without it nothing is logged" % (r, [round(1e3 * c["reduce"], 2) for c in log]))
        check(oo.get("profile_same") is True, "rank %d: profiling delivers the same values as no profiling" % r)

    check_same_error("NaN on rank 0", [oo.get("nan_error", "") for oo in outs], "not finite")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
