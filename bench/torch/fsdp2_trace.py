#!/usr/bin/env python3
"""fsdp2_bench.py with a per-step trace: rank 0 prints each step's loss (the mean over
ranks) and the gradient norm before clipping, the two figures tagc-gpt2's step log
(`--log`) records as `loss` and `grad_norm`, and stops after --trace-steps steps (default
40; the lr and theta schedules stay those of --steps). With export_llmc.py's weights
given to `tagc-gpt2 train --init-from`, the two trainers can be held against each other
step by step. Takes fsdp2_bench.py's arguments, e.g.

  python3 bench/torch/fsdp2_trace.py --trace-steps 40 --config tagc-routed --data DIR \\
      --steps 500 --world 2 --depth 4 --warmup 25
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsdp2_bench  # noqa: E402
from ddp_bench import launch, train_step  # noqa: E402

_stop, _done = [0], [0]  # steps to trace (set in each rank from --trace-steps), steps done


def traced_step(model, opt, x, y, lr=None):
    """ddp_bench.train_step, printing the rank-mean loss and the unclipped norm."""
    norms = []
    loss, t_fwd, t_bwd, t_end = train_step(model, opt, x, y, lr, norms)
    mean = torch.tensor([loss])
    dist.all_reduce(mean)
    _done[0] += 1
    if dist.get_rank() == 0:
        print("trace step %d loss %.6f norm %.6f" % (_done[0], mean.item() / dist.get_world_size(), norms[0]),
              flush=True)
    if _done[0] >= _stop[0]:
        dist.barrier()
        os._exit(0)
    return loss, t_fwd, t_bwd, t_end


# Set at import, so that the spawned ranks (which import this module to find `worker`) trace too.
fsdp2_bench.train_step = traced_step


def worker(rank, a, port):
    _stop[0] = a.trace_steps
    return fsdp2_bench.worker(rank, a, port)


if __name__ == "__main__":
    argv, trace_steps = sys.argv[1:], 40
    if "--trace-steps" in argv:  # ours; the rest are fsdp2_bench.py's
        i = argv.index("--trace-steps")
        trace_steps, sys.argv[1:] = int(argv[i + 1]), argv[:i] + argv[i + 2:]

    def launch_traced(_, a):
        a.trace_steps = trace_steps
        return launch(worker, a)

    fsdp2_bench.launch = launch_traced
    fsdp2_bench.main()
