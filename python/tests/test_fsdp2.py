#!/usr/bin/env python3
"""2-process tests of tagc.torch.apply_fsdp2 against a real FSDP2 (fully_shard; CPU, gloo).

Runs in scripts/torch_root.sh's root (torch 2.14; ctest tagc_python_fsdp2). The harness is
two_ranks.py: both ranks run every case in one spawn, the parent checks what they saw;
a case that raises on a rank fails, as does a rank that does not finish in time.

The model (four_units.py): an embedding in the root unit, two linears of equal size and a
head, each linear fully_shard'ed on its own (four FSDP units, two of equal size).
Run: PYTHONPATH=<build>/python USE_LIBUV=0 python3 python/tests/test_fsdp2.py
"""
import os
import sys

import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import tagc.torch as tt
from tagc import _fsdp2
from four_units import EMB, Net, batch
from two_ranks import (WORLD, backward_error_with_nan, check, check_same_error, finish, run_cases, run_resumable,
                       spawn)

UNITS = ["", "body1", "body2", "head"]  # the FSDPModules' qualified names ("" is the root)
# compress="all", granularity="unit": a reducer per unit, keyed by its name and flat gradient's size
WHOLE = sorted("fsdp2:%s:%d" % (u, n) for u, n in zip(UNITS, (EMB, 16512, 16512, 1290)))
# compress="non-attention", granularity="unit" (the defaults): the unit's matrices in one
# reducer, keyed by the unit's name; each linear's bias plain, a reducer per unit
PLAIN = ["fsdp2:%s:%d:plain" % (u, n) for u, n in (("body1", 128), ("body2", 128), ("head", 10))]
PARTS = sorted(["fsdp2::%d" % EMB] + ["fsdp2:%s:%d" % (u, n) for u, n in (("body1", 16384), ("body2", 16384),
                                                                          ("head", 1280))] + PLAIN)
# granularity="parameter": a reducer per matrix, keyed by its name
PARAM_PARTS = sorted(["fsdp2:%s:%d" % (p, n) for p, n in (("emb.weight", EMB), ("body1.weight", 16384),
                                                          ("body2.weight", 16384), ("head.weight", 1280))] + PLAIN)


def make(state=None, seed=0, compress="non-attention", granularity="unit"):
    """A fully_shard'ed Net (with tagc when `state(model)` makes a TagcState, its parameters
    chosen by apply_fsdp2's `compress` and `granularity`) and its optimizer."""
    torch.manual_seed(seed)
    model = Net()
    mesh = init_device_mesh("cpu", (WORLD,))
    for m in (model.body1, model.body2, model.head):
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    s = None
    if state is not None:
        s = state(model)
        tt.apply_fsdp2(model, s, compress=compress, granularity=granularity)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    return model, opt, s


def step(model, opt, rank, i, micro=1):
    """One optimizer step over `micro` micro-batches; the gradient is synchronised only on
    the last (set_requires_gradient_sync(False) before the others). The last loss."""
    opt.zero_grad()
    for j in range(micro):
        model.set_requires_gradient_sync(j == micro - 1)
        x, y = batch(rank, 100 * i + j)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    opt.step()
    return loss.item()


def shards(model):
    """This rank's parameter shards (what the optimizer updates), as views to write through."""
    return [p.to_local().detach() for p in model.parameters()]


def local(model):
    """A copy of this rank's parameter shards."""
    return [p.clone() for p in shards(model)]


def packed(model):
    return tt.TagcState(values="packed", index_bits="exact", sparsity=0.0, module=model)


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def maxdiff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


# ---------------------------------------------------------------- cases (per rank)

def case_packed_equals_default(rank, out):
    """values='packed' at theta = 0 delivers exactly what FSDP2's own reduce-scatter does:
    same shards and losses after 4 steps; every unit's comm called once per backward."""
    out["equal"], out["maxdiff"], s = against_own(rank, packed)
    out["comm_calls"] = {k: c.calls for k, c in s.fsdp2_comms.items()}
    out["units"] = sorted(k[1] for k in s._units)


def case_accumulation(rank, out):
    """set_requires_gradient_sync(False) on 2 of 3 micro-batches: FSDP2 reduces once per
    step, the accumulated gradient; packed at theta = 0 equals FSDP2's own reduction."""
    ref, ref_opt, _ = make()
    model, opt, s = make(packed)
    ref_loss = [step(ref, ref_opt, rank, i, micro=3) for i in range(3)]
    loss = [step(model, opt, rank, i, micro=3) for i in range(3)]
    out["accum_equal"] = same(local(ref), local(model)) and ref_loss == loss
    out["accum_maxdiff"] = maxdiff(local(ref), local(model))
    out["accum_calls"] = s.calls
    # Without the sync switch each micro-batch would be reduced: the comms saw 3 steps x 4 units.


def grads(model):
    """This rank's gradient shards after a backward, by parameter name."""
    return {n: p.grad.to_local().clone() for n, p in model.named_parameters()}


def case_split(rank, out):
    """compress= splits a unit by parameter. Default (non-attention: matrices): the biases go
    plain, their fp32 mean equal to FSDP2's own bit for bit, while the weights go through a
    sparse tagc (theta 0.9) and differ; the plain part travels in bf16 beside bf16 values;
    granularity="parameter" gives every matrix a reducer; compress="all" keeps whole units; a predicate that compresses nothing equals FSDP2's own over 4 steps even at theta 0.9."""
    sparse = lambda values: (lambda m: tt.TagcState(values=values, index_bits="exact", sparsity=0.9, module=m,
                                                    profile=True))
    ref, _, _ = make()
    model, _, s = make(sparse("packed"))
    for m in (ref, model):
        x, y = batch(rank, 0)
        nn.functional.cross_entropy(m(x), y).backward()
    g_ref, g = grads(ref), grads(model)
    out["split_bias_equal"] = all(torch.equal(g_ref[n], g[n]) for n in g if n.endswith("bias"))
    out["split_weight_zeros"] = {n: (g[n] == 0).float().mean().item() - (g_ref[n] == 0).float().mean().item()
                                 for n in g if n.endswith("weight") and n != "emb.weight"}
    out["split_units"] = sorted(k[1] for k in s._units)
    plain_bytes = {}
    for values in ("packed", "packed-bf16"):
        model, _, s = make(sparse(values))
        x, y = batch(rank, 0)
        nn.functional.cross_entropy(model(x), y).backward()
        plain_bytes[values] = sum(c["total_bytes"] for c in s.call_log if c["plain"])
    out["split_plain_bytes"] = plain_bytes
    for name, how in (("param", dict(granularity="parameter")), ("all", dict(compress="all"))):
        model, _, s = make(sparse("packed"), **how)
        x, y = batch(rank, 0)
        nn.functional.cross_entropy(model(x), y).backward()
        out["split_%s_units" % name] = sorted(k[1] for k in s._units)
    out["split_none_equal"], out["split_none_maxdiff"], _ = against_own(
        rank, sparse("packed"), compress=lambda name, p: False)


def case_sketch(rank, out):
    """The paper's configuration: the loss falls; the embedding's unit sends <= 1/5 of
    fp32's reduce-scatter bytes; the bytes counted at the process group equal the account."""
    model, opt, s = make(lambda m: tt.TagcState(module=m, profile=True))
    out["sketch_losses"] = [step(model, opt, rank, i % 8) for i in range(30)]
    out["sketch_emb_bytes"] = [c["total_bytes"] for c in s.call_log if c["length"] == EMB][:1]
    out["sketch_counted"] = sum(u.reducer.bytes_sent for u in s._units.values())
    out["sketch_reported"] = s.bytes_sent


def resumable(rank, steps, save_after=None, load=None, state=lambda m: tt.TagcState(module=m)):
    """two_ranks.run_resumable on a fresh model with a TagcState made by `state` (the default one)."""
    return run_resumable(*make(state), shards, step, rank, steps, save_after, load)


def against_own(rank, state, steps=4, compress="non-attention"):
    """`steps` steps of FSDP2's own reduce-scatter and of tagc (state) from the same start:
    (equal shards and losses, max |diff| of the shards, the TagcState)."""
    ref, ref_opt, _ = make()
    model, opt, s = make(state, compress=compress)
    ref_loss = [step(ref, ref_opt, rank, i) for i in range(steps)]
    loss = [step(model, opt, rank, i) for i in range(steps)]
    return same(local(ref), local(model)) and ref_loss == loss, maxdiff(local(ref), local(model)), s


def case_save_resume(rank, out, scratch):
    """Sketch configuration (the residuals matter): save after 3 steps; a new model,
    fully_shard'ed again, and a new TagcState load it and run to 6: equal to 6
    uninterrupted steps bit for bit, and not equal without tagc's state."""
    whole, _ = resumable(rank, 6)
    _, ckpt = resumable(rank, 6, save_after=3)
    path = os.path.join(scratch, "fsdp2_ckpt%d.pt" % rank)
    torch.save(ckpt, path)
    resumed, _ = resumable(rank, 6, load=torch.load(path, weights_only=False))
    out["resume_equal"] = same(whole, resumed)
    out["resume_maxdiff"] = maxdiff(whole, resumed)
    out["resume_units"] = sorted(k for k in ckpt["tagc"]["residuals"])
    out["resume_residual_norm"] = sum(v.norm().item() for v in ckpt["tagc"]["residuals"].values())
    without, _ = resumable(rank, 6, load=dict(ckpt, tagc=None))
    out["resume_without_tagc_differs"] = not same(whole, without)


def run_dcp(rank, steps, path, save_after=None, load=False):
    """run_resumable through torch.distributed.checkpoint, as FSDP2 jobs checkpoint: the
    model's and optimizer's sharded state from get_state_dict, tagc's as a Stateful."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    model, opt, s = make(lambda m: tt.TagcState(module=m))

    def checkpoint(step_done):
        msd, osd = get_state_dict(model, opt)
        return {"model": msd, "optim": osd, "tagc": tt.dcp_state(s), "meta": {"step": step_done}}

    first = 0
    if load:
        sd = checkpoint(-1)
        dcp.load(sd, checkpoint_id=path)
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        first = sd["meta"]["step"]
    for i in range(first, steps):
        step(model, opt, rank, i)
        if save_after is not None and i + 1 == save_after:
            dcp.save(checkpoint(i + 1), checkpoint_id=path)
            return local(model)
    return local(model)


def case_dcp_resume(rank, out, scratch):
    """torch.distributed.checkpoint: save after 3 steps (tagc's state through tt.dcp_state),
    load into a new, re-wrapped model and state, run to 6: equal to 6 uninterrupted steps
    bit for bit. A damaged tagc entry on one rank: both ranks refuse, nobody hangs."""
    path = os.path.join(scratch, "dcp_ckpt")
    whole, _ = resumable(rank, 6)
    run_dcp(rank, 6, path, save_after=3)
    resumed = run_dcp(rank, 6, path, load=True)
    out["dcp_equal"] = same(whole, resumed)
    out["dcp_maxdiff"] = maxdiff(whole, resumed)
    model, opt, s = make(lambda m: tt.TagcState(module=m))
    try:
        good = tt.dcp_state(s).state_dict()  # rank 0 loads a sound state, rank 1 a damaged one
        tt.dcp_state(s).load_state_dict({"rank1": b"not a state"} if rank == 1 else good)
        out["dcp_damaged"] = ""
    except RuntimeError as e:
        out["dcp_damaged"] = str(e)


def case_other_layout(rank, out):
    """A checkpoint saved with granularity="parameter" loaded where apply_fsdp2 splits per
    unit: its residuals would never be applied, so both ranks refuse at the first backward,
    naming the keys; with the saved granularity it resumes."""
    per_param = lambda: make(lambda m: tt.TagcState(module=m), granularity="parameter")
    _, ckpt = run_resumable(*per_param(), shards, step, rank, 4, save_after=2)
    try:
        resumable(rank, 4, load=ckpt)
        out["other_layout"] = ""
    except RuntimeError as e:
        out["other_layout"] = str(e)
    out["same_layout_resumes"] = run_resumable(*per_param(), shards, step, rank, 4, load=ckpt)[0] is not None


def case_foreign_state(rank, out):
    """A state from another run on one rank, or of another configuration on one rank: every
    rank raises (never one rank alone, which would leave the other waiting)."""
    _, a = resumable(rank, 2, save_after=1)
    _, b = resumable(rank, 2, save_after=1)  # a second run: another run id
    for what, mine in (("run", a["tagc"] if rank == 0 else b["tagc"]),
                       ("config", a["tagc"] if rank == 0 else dict(b["tagc"], config=dict(b["tagc"]["config"], ratio=4)))):
        model, opt, s = make(lambda m: tt.TagcState(module=m))
        try:
            s.load_state_dict(mine)
            out["foreign_" + what] = ""
        except RuntimeError as e:
            out["foreign_" + what] = str(e)
    model, opt, s = make(lambda m: tt.TagcState(module=m))
    s.load_state_dict(a["tagc"])  # the same run's states on every rank: accepted, its run id adopted
    out["same_run_adopted"] = s.run_id == a["tagc"]["run_id"]


def shared(values, theta, index="shared"):
    """A TagcState with a shared selection (index_bits "shared": a rotating leader's; "pooled":
    every rank's share)."""
    return lambda m: tt.TagcState(values=values, index_bits=index, sparsity=theta, module=m)


POOLED_AND_ROUTED = {"pooled": "pooled selection", "routed": "routed index"}


def case_shared(rank, out):
    """The shared selection: at theta = 0 (fp32 values) it equals FSDP2's own reduce-scatter bit
    for bit; sparse (packed-bf16, theta 0.9) the loss falls, the process group carries the bytes
    the reducers account for, and a save after 3 steps resumes bit for bit (its state: the residual and the call count that
    names each call's leader)."""
    out["shared_equal"], out["shared_maxdiff"], _ = against_own(rank, shared("packed", 0.0))
    sparse = shared("packed-bf16", 0.9)
    model, opt, s = make(sparse)
    out["shared_losses"] = [step(model, opt, rank, i % 8) for i in range(30)]
    out["shared_bytes"] = s.bytes_sent
    out["shared_counted"] = sum(u.reducer.bytes_sent for u in s._units.values())
    whole, _ = resumable(rank, 6, state=sparse)
    _, ckpt = resumable(rank, 6, save_after=3, state=sparse)
    resumed, _ = resumable(rank, 6, load=ckpt, state=sparse)
    without, _ = resumable(rank, 6, load=dict(ckpt, tagc=None), state=sparse)
    out["shared_resume_equal"] = same(whole, resumed)
    out["shared_resume_maxdiff"] = maxdiff(whole, resumed)
    out["shared_without_state_differs"] = not same(whole, without)
    # the pooled selection and the routed index (every rank's own top-k to the shards' owners,
    # all_to_all_v through the process group): the same contract
    for index in POOLED_AND_ROUTED:
        out[index + "_equal"], out[index + "_maxdiff"], _ = against_own(rank, shared("packed", 0.0, index))
        model, opt, s = make(shared("packed-bf16", 0.9, index))
        out[index + "_losses"] = [step(model, opt, rank, i % 8) for i in range(30)]
        out[index + "_bytes"] = s.bytes_sent
        out[index + "_counted"] = sum(u.reducer.bytes_sent for u in s._units.values())


def case_refusals(rank, out):
    """apply_fsdp2 on a module with no FSDPModule is refused, and so is values='dense'."""
    for what, fn in (("plain", lambda: tt.apply_fsdp2(nn.Linear(2, 2), tt.TagcState())),
                     ("compress", lambda: make(lambda m: tt.TagcState(module=m), compress="weights")),
                     ("granularity", lambda: make(lambda m: tt.TagcState(module=m), granularity="layer")),
                     ("dense", lambda: make(lambda m: tt.TagcState(values="dense", module=m)))):
        try:
            fn()
            out["refused_" + what] = ""
        except (RuntimeError, ValueError) as e:
            out["refused_" + what] = str(e)


def case_nan(rank, out):
    """NaN in rank 0's gradient: both ranks raise the same error from backward; nobody hangs."""
    model, _, _ = make(lambda m: tt.TagcState(module=m))
    out["nan_error"] = backward_error_with_nan(model, rank, *batch(rank, 0))


def worker(rank, port, scratch):
    run_cases(rank, port, scratch, (case_packed_equals_default, case_accumulation, case_split, case_sketch,
                                    lambda r, o: case_save_resume(r, o, scratch),
                                    lambda r, o: case_dcp_resume(r, o, scratch), case_other_layout, case_foreign_state,
                                    case_shared,
                                    case_refusals, case_nan))


# ---------------------------------------------------------------- checks (parent)

def main():
    outs = spawn(worker, "tagc_fsdp2_")
    o = outs[0]
    for r, oo in enumerate(outs):
        check(oo.get("equal") is True, "rank %d: packed at theta = 0 equals FSDP2's own reduce-scatter exactly over "
              "4 steps (max |diff| %s)" % (r, oo.get("maxdiff")))
        check(oo.get("comm_calls") == {u: 4 for u in UNITS},
              "rank %d: every FSDPModule's comm ran once per backward: %s" % (r, oo.get("comm_calls")))
        check(oo.get("accum_equal") is True and oo.get("accum_calls") == 3 * len(PARTS),
              "rank %d: 3 micro-batches, sync on the last: equals FSDP2's own, %s reductions (want %d; max |diff| %s)"
              % (r, oo.get("accum_calls"), 3 * len(PARTS), oo.get("accum_maxdiff")))
    check(o.get("units") == PARTS, "one reducer per unit and part, keyed by its qualified name: %s" % o.get("units"))

    for r, oo in enumerate(outs):
        check(oo.get("split_bias_equal") is True, "rank %d: compress=non-attention: the biases go plain, equal to "
              "FSDP2's own fp32 mean bit for bit" % r)
        zeros = oo.get("split_weight_zeros") or {}
        check(len(zeros) == 3 and all(z > 0.3 for z in zeros.values()),
              "rank %d: the weights go through tagc at theta 0.9: their gradients gain zeros (share more than "
              "FSDP2's own: %s)" % (r, zeros))
        pb = oo.get("split_plain_bytes") or {}
        check(pb.get("packed", 0) > 0 and pb.get("packed-bf16") == pb.get("packed") / 2,
              "rank %d: the plain part travels in fp32 beside fp32 values, in bf16 beside bf16 values: %s" % (r, pb))
        check(oo.get("split_none_equal") is True, "rank %d: a predicate that compresses nothing equals FSDP2's own "
              "reduce-scatter over 4 steps at theta 0.9 (max |diff| %s)" % (r, oo.get("split_none_maxdiff")))
    attention = {n: tt.is_attention_input(n) for n in ("blocks.0.qkv.weight", "h.3.attn.c_attn.weight",
                                                        "layers.1.self_attn.in_proj_weight", "model.q_proj.weight",
                                                        "blocks.0.fc.weight", "blocks.0.attn_proj.weight", "wte.weight")}
    check(list(attention.values()) == [True] * 4 + [False] * 3,
          "attention's input projections are named as such, the output projection and the rest not: %s" % attention)
    position = {n: tt.is_position_embedding(n) for n in ("wpe.weight", "transformer.wpe.weight",
                                                         "embeddings.position_embeddings.weight",
                                                         "decoder.embed_positions.weight", "wte.weight",
                                                         "embeddings.word_embeddings.weight", "blocks.0.fc.weight")}
    check(list(position.values()) == [True] * 4 + [False] * 3,
          "position embeddings are named as such, token embeddings and the rest not: %s" % position)
    chosen = _fsdp2.compress_predicate("non-attention")
    matrix = torch.zeros(4, 4)
    picked = {n: chosen(n, matrix) for n in ("wte.weight", "blocks.0.fc.weight", "wpe.weight", "blocks.0.qkv.weight")}
    check(list(picked.values()) == [True, True, False, False] and not chosen("blocks.0.fc.bias", torch.zeros(4)),
          "compress='non-attention' takes the token embedding and the linear layers, not the position embedding, "
          "QKV or a bias: %s" % picked)
    check(o.get("split_units") == PARTS, "a reducer for a unit's matrices, one for its plain parameters: %s"
          % o.get("split_units"))
    check(o.get("split_param_units") == PARAM_PARTS, "granularity='parameter': one reducer per matrix: %s"
          % o.get("split_param_units"))
    check(o.get("split_all_units") == WHOLE, "compress='all': one reducer per whole unit: %s" % o.get("split_all_units"))

    for r, oo in enumerate(outs):
        ls = oo.get("sketch_losses")
        if ls:
            head, tail = sum(ls[:8]) / 8, sum(ls[-8:]) / 8
            check(tail < 0.85 * head, "rank %d: sketch (paper config) loss falls %.3f -> %.3f over %d steps"
                  % (r, head, tail, len(ls)))
    emb = o.get("sketch_emb_bytes") or [float("inf")]
    fp32 = 4.0 * EMB / 2  # FSDP2's fp32 reduce-scatter on 2 ranks, per rank
    check(emb[0] <= fp32 / 5, "the %d-element unit sends %.0f B <= 1/5 of fp32's %.0f B" % (EMB, emb[0], fp32))
    check(abs(o.get("sketch_counted", -1) - o.get("sketch_reported", -2)) < 1e-6,
          "bytes counted at the process group (%s) == the reducer's account (%s)"
          % (o.get("sketch_counted"), o.get("sketch_reported")))

    for r, oo in enumerate(outs):
        check(oo.get("resume_equal") is True and oo.get("resume_residual_norm", 0) > 0,
              "rank %d: save at step 3 + resume in a re-wrapped model == 6 uninterrupted steps (max |diff| %s, "
              "residual norm saved %s)" % (r, oo.get("resume_maxdiff"), oo.get("resume_residual_norm")))
        check(oo.get("resume_without_tagc_differs") is True,
              "rank %d: resuming without tagc's state does not (the residuals carry over)" % r)
    for r, oo in enumerate(outs):
        check(oo.get("dcp_equal") is True, "rank %d: torch.distributed.checkpoint save at step 3 + load in a "
              "re-wrapped model == 6 uninterrupted steps (max |diff| %s)" % (r, oo.get("dcp_maxdiff")))
    check("other rank(s) refused" in o.get("dcp_damaged", "") and "does not decode" in outs[1].get("dcp_damaged", ""),
          "a damaged DCP tagc entry on rank 1: both refuse, rank 1 says why: %r" % [oo.get("dcp_damaged") for oo in outs])
    check(o.get("resume_units") == PARTS, "the checkpoint names its units: %s" % o.get("resume_units"))
    check("no FSDPModule" in o.get("refused_plain", ""), "a module without fully_shard is refused: %r"
          % o.get("refused_plain"))
    check("dense" in o.get("refused_dense", ""), "values='dense' is refused: %r" % o.get("refused_dense"))
    check("compress='weights'" in o.get("refused_compress", ""), "an unknown compress= is refused, naming it: %r"
          % o.get("refused_compress"))
    check("granularity='layer'" in o.get("refused_granularity", ""), "an unknown granularity= is refused, naming "
          "it: %r" % o.get("refused_granularity"))

    for r, oo in enumerate(outs):
        check(oo.get("shared_equal") is True, "rank %d: shared selection at theta = 0 equals FSDP2's own "
              "reduce-scatter exactly over 4 steps (max |diff| %s)" % (r, oo.get("shared_maxdiff")))
        ls = oo.get("shared_losses") or [0.0]
        head, tail = sum(ls[:8]) / 8, sum(ls[-8:]) / 8
        check(tail < 0.85 * head, "rank %d: shared selection (packed-bf16, theta 0.9) loss falls %.3f -> %.3f"
              % (r, head, tail))
        check(oo.get("shared_resume_equal") is True and oo.get("shared_without_state_differs") is True,
              "rank %d: shared selection, save at 3 + resume == 6 uninterrupted steps (max |diff| %s), and not "
              "without its state" % (r, oo.get("shared_resume_maxdiff")))
    for r, oo in enumerate(outs):
        check(oo.get("shared_bytes", 0) > 0 and abs(oo.get("shared_counted", -1) - oo["shared_bytes"]) < 1e-6,
              "rank %d: shared selection, bytes counted at the process group (%s) == the reducer's account (%s)"
              % (r, oo.get("shared_counted"), oo.get("shared_bytes")))
        for index, what in POOLED_AND_ROUTED.items():
            check(oo.get(index + "_equal") is True, "rank %d: %s at theta = 0 equals FSDP2's own reduce-scatter "
                  "exactly over 4 steps (max |diff| %s)" % (r, what, oo.get(index + "_maxdiff")))
            ls = oo.get(index + "_losses") or [0.0]
            head, tail = sum(ls[:8]) / 8, sum(ls[-8:]) / 8
            check(tail < 0.85 * head, "rank %d: %s (packed-bf16, theta 0.9) loss falls %.3f -> %.3f"
                  % (r, what, head, tail))
            bytes_sent, counted = oo.get(index + "_bytes", 0), oo.get(index + "_counted", -1)
            check(bytes_sent > 0 and abs(counted - bytes_sent) < 1e-6, "rank %d: %s, bytes counted at the process "
                  "group (%s) == the reducer's account (%s)" % (r, what, counted, bytes_sent))

    check_same_error("NaN on rank 0", [oo.get("nan_error", "") for oo in outs], "not finite")
    check(all("different runs" in oo.get("foreign_run", "") for oo in outs),
          "states of two runs on the two ranks: both refuse: %r" % [oo.get("foreign_run") for oo in outs])
    check(all(oo.get("foreign_config") for oo in outs) and "config" in outs[1].get("foreign_config", ""),
          "another configuration on rank 1: both refuse, rank 1 names it: %r" % [oo.get("foreign_config") for oo in outs])
    check(all(oo.get("same_run_adopted") is True for oo in outs), "the same run's states load and keep its run id")
    check(all("holds fsdp2:head.weight:1280" in oo.get("other_layout", "") and "other apply_fsdp2" in oo.get("other_layout", "")
              for oo in outs) and all(oo.get("same_layout_resumes") is True for oo in outs),
          "a checkpoint of granularity='parameter' loaded per unit: both ranks refuse, naming the key; the same "
          "granularity resumes: %r" % [oo.get("other_layout") for oo in outs])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
