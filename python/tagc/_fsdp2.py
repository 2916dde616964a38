"""FSDP2 (torch.distributed.fsdp.fully_shard): tagc as the units' reduce-scatter.

FSDP2 lets a module replace its reduce-scatter (`FSDPModule.set_custom_reduce_scatter`):
per backward, each FSDP unit hands the comm its flat padded gradient (world x shard
elements, the parameters' dim-0 chunks laid out rank by rank) and wants this rank's
shard. That is tagc's sharded topology. The comm must be set on every FSDPModule:
FSDP calls the one of the unit whose gradients it reduces, never the root's for the others.

One reducer per unit, keyed by the unit's qualified name in the model (and the
gradient's size: a unit whose set of gradients changes, e.g. an unused parameter,
gets a reducer of its own rather than a residual laid out for other parameters).
The key is a name, not an object: FSDP2's lazy init, resharding, and re-wrapping the
same model all leave it unchanged, so the residuals stay with their unit, and a
checkpoint (TagcState.state_dict) finds its reducers in a new process.
"""

import torch
import torch.distributed as dist

from . import _C

_UNIT_PREFIX = "fsdp2:"  # a unit's name in TagcState's checkpoint: fsdp2:<qualified name>:<elements>
_HSDP_PREFIX = "hsdp:"   # the same for apply_hsdp's cross-replica units (one shard each)


def is_unit_name(name):
    return name.startswith(_UNIT_PREFIX) or name.startswith(_HSDP_PREFIX)


def _fsdp_module_class():
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError as e:  # torch < 2.6 has no public FSDP2
        raise RuntimeError("tagc: apply_fsdp2 needs torch.distributed.fsdp.FSDPModule (FSDP2, torch >= 2.6); "
                           "this is torch %s" % torch.__version__) from e
    return FSDPModule


class TagcReduceScatter:
    """The comm FSDP2 calls for one unit: comm(output_tensor, input_tensor, group, op).

    Reduces the unit's flat padded gradient with tagc's sharded topology into this rank's
    shard. FSDP2 waits for the reduction where it needs it (it does not pass async_op),
    so the call blocks; it runs on the state's worker thread, behind any reduction
    already queued there, on the state's own process group.

    Not float32 (MixedPrecisionPolicy(reduce_dtype=bf16)): reduced in float32 and
    rounded into FSDP's buffer; for 16-bit traffic choose values="packed-bf16".
    Not on the CPU: staged through host memory (tagc._C reduces host tensors)."""

    def __init__(self, state, qualified_name):
        self.state, self.qualified_name = state, qualified_name
        self.calls = 0

    def allocate(self, size, *, dtype, device):
        return torch.empty(size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group=None, op=None, async_op=False):
        state = self.state
        n, shard = input_tensor.numel(), output_tensor.numel()
        where = "FSDP2 unit %r (%d elements)" % (self.qualified_name or "<root>", n)
        _check_group(state, group, where)
        scale = _scale_for(op, state.world_size, where)
        key = "%s%s:%d" % (_UNIT_PREFIX, self.qualified_name, n)
        grad = input_tensor.detach().to(device="cpu", dtype=torch.float32).contiguous()
        result = []

        def job():
            unit = state._unit(("fsdp2", key), (key,), [n], n, "sharded", lambda r: r.output_size)
            if unit.reducer.output_size != shard:
                raise RuntimeError("tagc: %s: FSDP's shard has %d elements, tagc's layout gives %d on %d ranks"
                                   % (where, shard, unit.reducer.output_size, state.world_size))
            state._reduce(unit, "reduce_scatter", grad, unit.out)
            result.append(unit.out)

        state._run(job)
        out = result[0] if scale == 1 else result[0] * scale
        output_tensor.copy_(out.view(output_tensor.shape))
        self.calls += 1
        return None


def _check_group(state, group, where):
    """FSDP's reduce-scatter group must be the state's group. The verdict (and its message)
    is the same on every rank of a mesh, so every rank raises it before any collective,
    instead of a collective that hangs."""
    if group is None:
        return
    from .torch import _group_ranks
    theirs = _group_ranks(group) or list(range(dist.get_world_size()))
    mine = _group_ranks(state.process_group) or list(range(dist.get_world_size()))
    if len(theirs) != len(mine):
        raise RuntimeError("tagc: %s: FSDP reduce-scatters over %d ranks, the TagcState's group has %d "
                           "(make the state with process_group=<FSDP's shard group>; for two levels, "
                           "apply_hsdp)" % (where, len(theirs), len(mine)))
    if list(theirs) != list(mine):
        raise RuntimeError("tagc: %s: FSDP reduce-scatters over other ranks than the TagcState's group "
                           "(make the state with process_group=<FSDP's shard group>)" % where)


def _scale_for(op, world, where):
    """tagc delivers the mean; FSDP asks for AVG, or SUM when it divides itself (the
    gradient divide factors around the call)."""
    if op is None or op == dist.ReduceOp.AVG:
        return 1
    if op == dist.ReduceOp.SUM:
        return world
    raise RuntimeError("tagc: %s: FSDP asks for reduce op %s; tagc reduces to the mean (AVG) or sum (SUM)"
                       % (where, op))


def _fsdp_modules(module, caller):
    """Every FSDPModule in `module`, by qualified name; refused when there is none."""
    FSDPModule = _fsdp_module_class()
    found = {name: m for name, m in module.named_modules() if isinstance(m, FSDPModule)}
    if not found:
        raise RuntimeError("tagc: %s found no FSDPModule in %s: call fully_shard on it first"
                           % (caller, type(module).__name__))
    return found


def apply_fsdp2(module, state):
    """Registers tagc's reduce-scatter on every FSDPModule in `module` (fully_shard'ed);
    returns {qualified name: comm}. Call it after fully_shard, before the first backward,
    on every rank alike. Refuses, on every rank, a configuration the world cannot run."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError("tagc: apply_fsdp2 wants the fully_shard'ed nn.Module, got %s" % type(module).__name__)
    if state.config["values"] == "dense":
        raise RuntimeError("tagc: values='dense' is DDP's all-reduce; FSDP2 needs a reduce-scatter")
    _C.can_implement(state.config, state.world_size, state.world_size, state.rank, "sharded")
    comms = {}
    for name, m in _fsdp_modules(module, "apply_fsdp2").items():
        comm = TagcReduceScatter(state, name)
        m.set_custom_reduce_scatter(comm)
        comms[name] = comm
    state.fsdp2_comms = comms
    return comms


class TagcAllReduceHook:
    """FSDPModule.set_all_reduce_hook for two levels (HSDP with tagc across replicas):
    FSDP2, sharded over a 1-D mesh (the shard group), reduce-scatters the unit's gradient
    inside it and hands this hook its shard, which the hook averages in place across the
    replicas (the state's group) through tagc's replicated topology. FSDP2's own 2-D HSDP
    would all-reduce first and call the hook after, so this hook wants the 1-D mesh."""

    def __init__(self, state, qualified_name):
        self.state, self.qualified_name = state, qualified_name
        self.calls = 0

    def __call__(self, reduce_output):
        state = self.state
        n = reduce_output.numel()
        key = "%s%s:%d" % (_HSDP_PREFIX, self.qualified_name, n)
        grad = reduce_output.detach().to(device="cpu", dtype=torch.float32).contiguous()
        result = []

        def job():
            unit = state._unit(("hsdp", key), (key,), [n], n, "replicated", lambda r: r.output_size)
            state._reduce(unit, "all_reduce", grad, unit.out)
            result.append(unit.out)

        state._run(job)
        reduce_output.copy_(result[0].view(reduce_output.shape))
        self.calls += 1


def apply_hsdp(module, state):
    """Two levels: FSDP2 reduce-scatters inside the shard group, tagc averages across replicas.

    `module` is fully_shard'ed on the shard dimension's 1-D mesh (mesh["shard"]); `state`
    is a TagcState over the replica group (mesh["replicate"].get_group()). Registers a
    TagcAllReduceHook on every FSDPModule; returns {qualified name: hook}. Refuses a
    module sharded on a 2-D mesh (FSDP2 would all-reduce across replicas itself)."""
    if state.config["values"] == "dense":
        raise RuntimeError("tagc: values='dense' is for measuring the DDP hook; use a catalogue entry")
    _C.can_implement(state.config, 1, state.world_size, state.rank, "replicated")
    modules = _fsdp_modules(module, "apply_hsdp")
    for name, m in modules.items():  # every module checked before any hook is set
        for p in m.parameters(recurse=False):
            mesh = getattr(p, "device_mesh", None)
            if mesh is not None and mesh.ndim != 1:
                raise RuntimeError("tagc: apply_hsdp: %r is sharded on a %d-D mesh; shard it on the 1-D shard mesh "
                                   "(mesh['shard']): tagc does the cross-replica reduction" % (name or "<root>", mesh.ndim))
    hooks = {}
    for name, m in modules.items():
        hook = TagcAllReduceHook(state, name)
        m.set_all_reduce_hook(hook)
        hooks[name] = hook
    state.hsdp_hooks = hooks
    return hooks
