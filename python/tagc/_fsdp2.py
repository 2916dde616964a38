"""FSDP2 (torch.distributed.fsdp.fully_shard): tagc as the units' reduce-scatter.

FSDP2 lets a module replace its reduce-scatter (`FSDPModule.set_custom_reduce_scatter`):
per backward, each FSDP unit hands the comm its flat padded gradient (world x shard
elements, the parameters' dim-0 chunks laid out rank by rank) and wants this rank's
shard. That is tagc's sharded topology. The comm must be set on every FSDPModule:
FSDP calls the one of the unit whose gradients it reduces, never the root's for the others.

Not every parameter need be compressed (apply_fsdp2's `compress`; by default the
non-attention matrices, as the paper and tagc-gpt2 choose), and each compressed matrix
keeps its own top share (`granularity`): a unit is split by parameter into parts, each a
reducer of its own over the same ranks.

One reducer per part, keyed by its qualified name in the model (and the part's size: a
unit whose set of gradients changes, e.g. an unused parameter, gets reducers of its own
rather than residuals laid out for other parameters).
The key is a name, not an object: FSDP2's lazy init, resharding, and re-wrapping the
same model all leave it unchanged, so the residuals stay with their unit, and a
checkpoint (TagcState.state_dict) finds its reducers in a new process.
"""

import math
import warnings

import torch
import torch.distributed as dist

from . import _C

_UNIT_PREFIX = "fsdp2:"  # a unit's name in TagcState's checkpoint: fsdp2:<qualified name>:<elements>
_HSDP_PREFIX = "hsdp:"   # the same for apply_hsdp's cross-replica units (one shard each)


def is_unit_name(name):
    return name.startswith(_UNIT_PREFIX) or name.startswith(_HSDP_PREFIX)


# The names attention's input projection goes by (GPT-2's c_attn, torch's MultiheadAttention
# in_proj_weight, q/k/v projections of Llama-style models, BERT's query/key/value, fused Wqkv):
# compress="non-attention" sends these plainly, as the paper and tagc-gpt2's default do.
_ATTENTION_INPUTS = frozenset(("qkv", "wqkv", "c_attn", "in_proj", "in_proj_weight", "q_proj", "k_proj",
                               "v_proj", "query", "key", "value", "query_key_value"))

# The names a learned position embedding goes by (GPT-2's wpe, BERT's position_embeddings,
# OPT's embed_positions, ViT's pos_embed, ...): not among the paper's non-attention linear
# layers (the token embedding is: it is also the LM head), so compress="non-attention" sends
# it plainly, as tagc-gpt2 does.
_POSITION_EMBEDDINGS = frozenset(("wpe", "pos_emb", "pos_embed", "pos_embedding", "position_embedding",
                                  "position_embeddings", "embed_positions", "positional_embedding"))

COMPRESS_CHOICES = ("non-attention", "matrices", "all")


def _named_one_of(name, names):
    """Whether a qualified parameter name's own name or its module's is among `names`."""
    return any(part.lower() in names for part in name.split(".")[-2:])


def is_attention_input(name):
    """Whether a parameter's qualified name names an attention input projection (its own
    name or its module's, e.g. blocks.0.qkv.weight, attn.in_proj_weight)."""
    return _named_one_of(name, _ATTENTION_INPUTS)


def is_position_embedding(name):
    """Whether a parameter's qualified name names a learned position embedding (its own
    name or its module's, e.g. wpe.weight, embeddings.position_embeddings.weight)."""
    return _named_one_of(name, _POSITION_EMBEDDINGS)


def compress_predicate(compress):
    """apply_fsdp2's `compress` as (qualified name, parameter) -> bool; None for "all"
    (every unit compressed whole)."""
    if callable(compress):
        return compress
    if compress == "all":
        return None
    if compress == "matrices":
        return lambda name, p: p.dim() >= 2
    if compress == "non-attention":
        return lambda name, p: p.dim() >= 2 and not is_attention_input(name) and not is_position_embedding(name)
    raise ValueError("tagc: compress=%r: want one of %s or a callable (name, parameter) -> bool"
                     % (compress, ", ".join(COMPRESS_CHOICES)))


def plain_values_for(config):
    """The plain part's values: bf16 beside 16-bit bf16 compressed values (the traffic the
    user chose), fp32 otherwise."""
    return "plain-bf16" if config["values"].endswith("-bf16") else "plain-fp32"


GRANULARITY_CHOICES = ("unit", "parameter")


class UnitSplit:
    """A unit's gradient split into parts, each reduced by a reducer of its own: the
    compressed parameters (one part each, or one for all of them) and the plain ones (one
    part). FSDP2's copy-in lays each rank's shard out as the unit's parameters' padded
    chunks in the unit's parameter order (_fsdp_collectives.foreach_reduce_scatter_copy_in),
    so a parameter holds the same columns in every rank's row: a part's columns, taken from
    every row, are a reduce-scatter input of their own.

    parts: [(label, columns, plain)]; columns None: the whole unit. labels: the unit's name
    and its parameters' (what a part of this unit, split in any way, is labelled by)."""

    def __init__(self, parts, labels):
        self.parts, self.labels = parts, labels

    @staticmethod
    def whole(qualified_name):
        return UnitSplit([(qualified_name, None, False)], {qualified_name})

    @staticmethod
    def of(fsdp_module, qualified_name, names, predicate, granularity, shard, where):
        """The parts of `fsdp_module`'s shard of `shard` elements. FSDP2 does not publish
        where a parameter lies in the flat gradient; the layout is read from its parameter
        group and held to the shard's size. When it cannot be read (another torch, a
        parameter without a gradient), the unit goes whole, with a warning."""
        try:
            params = fsdp_module._get_fsdp_state()._fsdp_param_group.fsdp_params
            layout = [(names.get(id(fp.sharded_param)) or fp._param_fqn or "", fp.sharded_param,
                       math.prod(fp.padded_sharded_param_size)) for fp in params if fp.sharded_param.requires_grad]
        except AttributeError as e:
            layout, why = None, "this torch's FSDP2 does not show its parameter layout (%s)" % e
        if layout is not None and sum(n for _, _, n in layout) != shard:
            layout, why = None, ("its parameters' chunks hold %d elements, FSDP's shard %d (a parameter without "
                                 "a gradient?)" % (sum(n for _, _, n in layout), shard))
        if layout is None:
            warnings.warn("tagc: %s: compressing the whole unit: %s" % (where, why))
            return UnitSplit.whole(qualified_name)
        compressed, plain, at = [], [], 0
        for name, p, n in layout:
            (compressed if predicate(name, p) else plain).append((name, torch.arange(at, at + n)))
            at += n
        if granularity == "unit":
            if not plain:
                return UnitSplit.whole(qualified_name)
            compressed = [(qualified_name, torch.cat([c for _, c in compressed]))] if compressed else []
        parts = [(label, cols, False) for label, cols in compressed]
        if plain:
            parts.append((qualified_name, torch.cat([c for _, c in plain]), True))
        return UnitSplit(parts, {qualified_name} | {name for name, _, _ in layout})


def reduce_unit(state, kind, prefix, grad, rows, split, topology, method, where):
    """Reduces a unit's flat gradient (`rows` x shard) through the state's worker, part by
    part (UnitSplit); returns this rank's result (shard elements). Each part is a unit of
    the state, keyed <prefix><label>:<elements>[:plain]."""
    shard = grad.numel() // rows
    inputs = [grad if cols is None else grad.view(rows, shard).index_select(1, cols).reshape(-1)
              for _, cols, _ in split.parts]
    keys = ["%s%s:%d%s" % (prefix, label, inp.numel(), ":plain" if plain else "")
            for (label, _, plain), inp in zip(split.parts, inputs)]
    _refuse_other_layouts(state, prefix, split, keys, where)
    plain_values = plain_values_for(state.config)
    result = torch.empty(shard)

    def job():
        for (label, cols, plain), inp, key in zip(split.parts, inputs, keys):
            n = inp.numel()
            unit = state._unit((kind, key), (key,), [n], n, topology, lambda r: r.output_size,
                               plain_values=plain_values if plain else None)
            want = shard if cols is None else cols.numel()
            if unit.out.numel() != want:
                raise RuntimeError("tagc: %s: FSDP's shard has %d elements, tagc's layout gives %d on %d ranks"
                                   % (where, want, unit.out.numel(), state.world_size))
            state._reduce(unit, method, inp, unit.out)
            if cols is None:
                result.copy_(unit.out)
            else:
                result[cols] = unit.out

    state._run(job)
    return result


def _label_of(key, prefix):
    """The label in a part's key <prefix><label>:<elements>[:plain]."""
    rest = key[len(prefix):]
    if rest.endswith(":plain"):
        rest = rest[:-len(":plain")]
    return rest.rpartition(":")[0]


def _refuse_other_layouts(state, prefix, split, keys, where):
    """A checkpoint's residual for this unit under a key this split does not make (saved with
    another compress= or granularity=, or before units were split by parameter) would never
    be applied: refused, the same on every rank (each loaded its own state of one run),
    before any collective."""
    saved = {k[1] if isinstance(k, tuple) else k for k in state._saved_units} | set(state._pending)  # (kind, key); names
    stale = sorted(k for k in saved if k.startswith(prefix) and k not in keys and _label_of(k, prefix) in split.labels)
    if stale:
        raise RuntimeError("tagc: %s: the loaded state holds %s, which this layout does not make (it makes %s): "
                           "the checkpoint was saved with other apply_fsdp2 compress= or granularity= (before "
                           "units were split by parameter: compress='all', granularity='unit'); apply the same "
                           "ones to resume" % (where, ", ".join(stale), ", ".join(keys)))


def _fsdp_module_class():
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError as e:  # torch < 2.6 has no public FSDP2
        raise RuntimeError("tagc: apply_fsdp2 needs torch.distributed.fsdp.FSDPModule (FSDP2, torch >= 2.6); "
                           "this is torch %s" % torch.__version__) from e
    return FSDPModule


class _UnitComm:
    """What a unit's comm (reduce-scatter or all-reduce hook) keeps: its state, its unit's
    qualified name, and how its gradient splits into parts (per shard size, read once).
    predicate None and granularity "unit": the unit goes whole (compress="all")."""

    def __init__(self, state, qualified_name, module, names, predicate, granularity):
        self.state, self.qualified_name = state, qualified_name
        self.module, self.names, self.predicate, self.granularity = module, names, predicate, granularity
        self.splits = {}  # shard elements -> UnitSplit
        self.calls = 0

    def split(self, shard, where):
        if shard not in self.splits:
            if self.predicate is None and self.granularity == "unit":
                self.splits[shard] = UnitSplit.whole(self.qualified_name)
            else:
                self.splits[shard] = UnitSplit.of(self.module, self.qualified_name, self.names,
                                                  self.predicate or (lambda name, p: True), self.granularity,
                                                  shard, where)
        return self.splits[shard]


class TagcReduceScatter(_UnitComm):
    """The comm FSDP2 calls for one unit: comm(output_tensor, input_tensor, group, op).

    Reduces the unit's flat padded gradient with tagc's sharded topology into this rank's
    shard. FSDP2 waits for the reduction where it needs it (it does not pass async_op),
    so the call blocks; it runs on the state's worker thread, behind any reduction
    already queued there, on the state's own process group.

    Not float32 (MixedPrecisionPolicy(reduce_dtype=bf16)): reduced in float32 and
    rounded into FSDP's buffer; for 16-bit traffic choose values="packed-bf16".
    Not on the CPU: staged through host memory (tagc._C reduces host tensors)."""

    def allocate(self, size, *, dtype, device):
        return torch.empty(size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group=None, op=None, async_op=False):
        state = self.state
        n, shard = input_tensor.numel(), output_tensor.numel()
        where = "FSDP2 unit %r (%d elements)" % (self.qualified_name or "<root>", n)
        _check_group(state, group, where)
        scale = _scale_for(op, state.world_size, where)
        grad = input_tensor.detach().to(device="cpu", dtype=torch.float32).contiguous()
        if n != shard * state.world_size:
            raise RuntimeError("tagc: %s: FSDP's shard has %d elements, not 1/%d of the gradient"
                               % (where, shard, state.world_size))
        out = reduce_unit(state, "fsdp2", _UNIT_PREFIX, grad, state.world_size, self.split(shard, where), "sharded",
                          "reduce_scatter", where)
        if scale != 1:
            out *= scale
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


def _granularity(granularity):
    if granularity not in GRANULARITY_CHOICES:
        raise ValueError("tagc: granularity=%r: want one of %s" % (granularity, ", ".join(GRANULARITY_CHOICES)))
    return granularity


def apply_fsdp2(module, state, compress="non-attention", granularity="unit"):
    """Registers tagc's reduce-scatter on every FSDPModule in `module` (fully_shard'ed);
    returns {qualified name: comm}. Call it after fully_shard, before the first backward,
    on every rank alike. Refuses, on every rank, a configuration the world cannot run.

    compress: which parameters go through tagc; the others are reduced plainly (bf16 when
    the compressed values are bf16, else fp32) with no residual. "non-attention" (default):
    matrices (2+ dimensions) except attention's input projections (is_attention_input) and
    position embeddings (is_position_embedding), the paper's choice and tagc-gpt2's
    --compress non-attention; "matrices": every matrix;
    "all": every parameter, biases and norms included; or a callable (qualified name,
    parameter) -> bool, the same on every rank.

    granularity: "unit" (default): one reducer for the unit's compressed parameters, their
    top (1 - theta) share taken together, as tagc-gpt2's units do (compress="all": the unit
    whole); "parameter": every compressed parameter a reducer of its own, keeping its own
    share, as layer-wise top-k (DGC) does. At GPT-2 d4 over 500 steps the two ended within
    0.2 point of each other, "unit" ahead (docs/results.md, FSDP2 side by side)."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError("tagc: apply_fsdp2 wants the fully_shard'ed nn.Module, got %s" % type(module).__name__)
    predicate, granularity = compress_predicate(compress), _granularity(granularity)
    if state.config["values"] == "dense":
        raise RuntimeError("tagc: values='dense' is DDP's all-reduce; FSDP2 needs a reduce-scatter")
    _C.can_implement(state.config, state.world_size, state.world_size, state.rank, "sharded")
    names = {id(p): name for name, p in module.named_parameters()}
    comms = {}
    for name, m in _fsdp_modules(module, "apply_fsdp2").items():
        comm = TagcReduceScatter(state, name, m, names, predicate, granularity)
        m.set_custom_reduce_scatter(comm)
        comms[name] = comm
    state.fsdp2_comms = comms
    return comms


class TagcAllReduceHook(_UnitComm):
    """FSDPModule.set_all_reduce_hook for two levels (HSDP with tagc across replicas):
    FSDP2, sharded over a 1-D mesh (the shard group), reduce-scatters the unit's gradient
    inside it and hands this hook its shard, which the hook averages in place across the
    replicas (the state's group) through tagc's replicated topology. FSDP2's own 2-D HSDP
    would all-reduce first and call the hook after, so this hook wants the 1-D mesh."""


    def __call__(self, reduce_output):
        state = self.state
        n = reduce_output.numel()
        where = "HSDP unit %r (%d elements)" % (self.qualified_name or "<root>", n)
        grad = reduce_output.detach().to(device="cpu", dtype=torch.float32).contiguous()
        out = reduce_unit(state, "hsdp", _HSDP_PREFIX, grad, 1, self.split(n, where), "replicated", "all_reduce", where)
        reduce_output.copy_(out.view(reduce_output.shape))
        self.calls += 1


def apply_hsdp(module, state, compress="non-attention", granularity="unit"):
    """Two levels: FSDP2 reduce-scatters inside the shard group, tagc averages across replicas.

    `module` is fully_shard'ed on the shard dimension's 1-D mesh (mesh["shard"]); `state`
    is a TagcState over the replica group (mesh["replicate"].get_group()). Registers a
    TagcAllReduceHook on every FSDPModule; returns {qualified name: hook}. Refuses a
    module sharded on a 2-D mesh (FSDP2 would all-reduce across replicas itself).
    compress, granularity: which parameters go through tagc, and in what reducers, as for apply_fsdp2."""
    predicate, granularity = compress_predicate(compress), _granularity(granularity)
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
    names = {id(p): name for name, p in module.named_parameters()}
    hooks = {}
    for name, m in modules.items():
        hook = TagcAllReduceHook(state, name, m, names, predicate, granularity)
        m.set_all_reduce_hook(hook)
        hooks[name] = hook
    state.hsdp_hooks = hooks
    return hooks
