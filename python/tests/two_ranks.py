"""The harness the multi-process hook tests share (test_ddp_hook.py, test_fsdp_hook.py, test_fsdp2.py, test_hsdp.py).

Both ranks run every case in one spawn (importing torch costs seconds) and write what
they saw to a scratch directory; the parent checks it with PASS/FAIL lines. A case
that raises on a rank is a failure, as is a rank that does not finish in time (no
hang passes).
"""
import os
import socket
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

WORLD = 2
failures = []


def check(cond, what):
    print(("PASS  " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def finish():
    """Prints the failure count; the exit status for sys.exit."""
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


def train_step(model, opt, x, y):
    """One SGD step of the tests' classification task; the loss."""
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def run_resumable(model, opt, state, shards, step, rank, steps, save_after=None, load=None):
    """Steps first..steps-1 of a run that can stop and resume, step(model, opt, rank, i) each:
    first is 0, or load["step"] after this rank's parameter shards (shards(model): the
    tensors the optimizer updates, written in place), the optimizer and the tagc state
    (left as made where load["tagc"] is None) are restored from `load`. Returns copies of the
    shards and None, or with save_after, the copies and the checkpoint after that step."""
    first = 0
    if load is not None:
        for p, saved in zip(shards(model), load["model"]):
            p.copy_(saved)
        opt.load_state_dict(load["opt"])
        if load["tagc"] is not None:
            state.load_state_dict(load["tagc"])
        first = load["step"]
    copies = lambda: [p.clone() for p in shards(model)]
    for i in range(first, steps):
        step(model, opt, rank, i)
        if save_after is not None and i + 1 == save_after:
            return copies(), {"model": copies(), "opt": opt.state_dict(), "tagc": state.state_dict(), "step": i + 1}
    return copies(), None


def backward_error_with_nan(model, rank, x, y):
    """A backward with NaN in rank 0's loss (so in its gradients): the error it raised,
    as "Type: message" ("" if none). The hooks must raise the same one on every rank."""
    loss = nn.functional.cross_entropy(model(x), y)
    if rank == 0:
        loss = loss * float("nan")
    try:
        loss.backward()
        return ""
    except Exception as e:  # the type is autograd's business; the message is ours
        return "%s: %s" % (type(e).__name__, e)


def check_same_error(what, errs, expect):
    """Every rank raised a RuntimeError carrying the same tagc message, which contains
    `expect`. torch 1.13's DDP wraps a hook's error ("Got the following error when running
    the callback: ...", then a traceback that differs per rank): the first line of the
    tagc message is what must agree."""
    msgs = [e.split("tagc: ", 1)[1].split("\n", 1)[0] if "tagc: " in e else "" for e in errs]
    check(all(e.startswith("RuntimeError: ") for e in errs) and all(expect in m for m in msgs)
          and len(set(msgs)) == 1, "%s: every rank raises the same RuntimeError: tagc: %r" % (what, msgs))


def run_cases(rank, port, scratch, cases, world=WORLD):
    """In a rank: joins the gloo group, runs cases(rank, out) in order, saves `out`, exits."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    out = {"torch": torch.__version__}
    for case in cases:
        try:
            case(rank, out)
        except Exception:
            out.setdefault("crashed", []).append(traceback.format_exc())
    torch.save(out, os.path.join(scratch, "rank%d.pt" % rank))
    os._exit(0)  # the states' daemon workers need no orderly shutdown


def spawn(worker, prefix, timeout=600, world=WORLD):
    """Runs worker(rank, port, scratch) on `world` processes; returns each rank's `out`,
    after checking that every rank finished and ran every case without an exception."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    scratch = tempfile.mkdtemp(prefix=prefix)
    ctx = mp.start_processes(worker, args=(port, scratch), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout  # for all ranks together (ctest's limit is 900 s)
    for p in ctx.processes:
        p.join(max(0.0, deadline - time.monotonic()))
    codes = [p.exitcode for p in ctx.processes]
    check(all(c == 0 for c in codes), "both ranks finished (exit codes %s)" % codes)
    for p in ctx.processes:
        if p.exitcode is None:
            p.kill()  # a hung rank: the test has failed, do not leave it behind
    outs = []
    for r in range(world):
        path = os.path.join(scratch, "rank%d.pt" % r)
        outs.append(torch.load(path, weights_only=False) if os.path.exists(path) else {"crashed": ["no output"]})
    print("torch %s" % outs[0].get("torch"))
    for r, o in enumerate(outs):
        for tb in o.get("crashed", []):
            print("rank %d crashed:\n%s" % (r, tb))
        check(not o.get("crashed"), "rank %d ran every case without an exception" % r)
    return outs
