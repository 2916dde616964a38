"""tagc communication hooks for torch.distributed (DDP and FSDP1).

Usage (DDP):
    state = tagc.torch.TagcState(module=model)          # paper config: 10x sketch, 1-bit index
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(state, tagc.torch.ddp_comm_hook)

The hook follows PyTorch's PowerSGD hook in shape: `hook(state, bucket)` returns a
torch.futures.Future holding the bucket's averaged gradient. The reduction runs on
the state's worker thread (the C++ reducer releases the GIL), so it overlaps the
rest of backward the way DDP's own all-reduce does; all of it runs on a process
group of the state's own, so it never interleaves with collectives the training
script issues on its group at the same time.

Error feedback: each bucket's residual lives in a reducer keyed by the *names of
the parameters the bucket holds*, not by the bucket's index. When DDP rebuilds its
buckets (after the first step) the residuals are split per parameter and moved to
the reducers of the new buckets: nothing is dropped. `state_dict()` /
`load_state_dict()` checkpoint them (each rank saves its own: residuals differ per
rank) so that a resumed run continues exactly.

Refusals (a world too large for the index, NaN/Inf in any rank's gradient, a
checkpoint for other parameters) raise RuntimeError("tagc: ...") on every rank
alike: the reducer agrees its verdict across ranks before it exchanges anything.
"""

import inspect
import queue
import secrets
import threading
import time

import torch
import torch.distributed as dist

from . import _C
from . import _dcp
from . import _fsdp2

__all__ = ["TagcState", "ddp_comm_hook", "fsdp_comm_hook", "apply_fsdp2", "apply_hsdp", "is_attention_input", "is_position_embedding", "dcp_state",
           "catalogue"]

_STATE_VERSION = 1
_NO_WARMUP = dict(sparsity_warmup=0, sparsity_schedule="exp", sparsity_start=0.75)
# Configuration keys added after version 1's first checkpoints, at the value that
# reproduces how those runs went.
_ADDED_KEYS = dict(_NO_WARMUP, min_compress_numel=0, union_bound=0.0)


def catalogue():
    """The reducer configurations this build offers (a text, one per line)."""
    return _C.catalogue()


def _group_ranks(group):
    if group is None or group is dist.group.WORLD:
        return None
    if hasattr(dist, "get_process_group_ranks"):  # torch >= 2
        return dist.get_process_group_ranks(group)
    return sorted(dist.distributed_c10d._pg_group_ranks[group].keys())  # torch 1.13


def _private_group(group):
    """A new group over `group`'s ranks, for the state's own collectives. Only those ranks
    take part when torch can (use_local_synchronization, torch >= 2.1): states over
    different subgroups (HSDP's replica groups: [0, 2] and [1, 3]) are then made at
    once; torch 1.13's new_group wants every rank of the world, with the same ranks."""
    ranks = _group_ranks(group)
    if ranks is not None and "use_local_synchronization" in inspect.signature(dist.new_group).parameters:
        return dist.new_group(ranks=ranks, use_local_synchronization=True)
    return dist.new_group(ranks=ranks)


class _Unit:
    """One reducer: a DDP bucket (its parameters, in bucket order) or an FSDP flat gradient.

    plain: a unit reduced uncompressed (below min_compress_numel, or the parameters
    apply_fsdp2 leaves uncompressed) by the library's plain reducer, so it holds no
    residual of its own; `carry` is residual its parameters
    brought from compressed units (a bucket rebuild, a checkpoint), added to its next
    gradient so that nothing owed is dropped."""

    def __init__(self, key, names, numels, reducer, out, length, plain=False):
        self.key, self.names, self.numels, self.reducer, self.out = key, names, numels, reducer, out
        self.length, self.plain, self.carry = length, plain, None

    def residual(self):
        if not self.plain:
            return self.reducer.residual()
        return self.carry if self.carry is not None else torch.zeros(self.length)

    def split(self, flat):
        return dict(zip(self.names, torch.split(flat, self.numels)))


class _DenseReducer:
    """values="dense": a plain fp32 all-reduce (mean) through the hook's machinery
    (worker thread, futures, per-parameter bookkeeping), to measure what the hook
    itself costs beside DDP's own all-reduce. No compression, no residual."""

    def __init__(self, length, group, world):
        self.length, self.group, self.world = length, group, world
        self.output_size, self.sparsity, self.name = length, 0.0, "dense"

    def all_reduce(self, inp, out):
        out.copy_(inp)
        dist.all_reduce(out, group=self.group)
        out.div_(self.world)
        return {"total_bytes": 2.0 * (self.world - 1) / self.world * 4 * self.length}

    def reduce_scatter(self, inp, out):
        raise RuntimeError("tagc: values='dense' is for DDP (all-reduce) only")

    def residual(self):
        return torch.zeros(self.length)

    def set_residual(self, r):
        pass

    def save_state(self):
        return b""

    def load_state(self, blob):
        pass


# The library's description keys (tagc/builder/description.hpp, the trainer's --reducer)
# and the TagcState keyword each one sets: one vocabulary for C++, the trainer and Python.
REDUCER_KEYS = {"values": "values", "ratio": "ratio", "index": "index_bits", "theta": "sparsity",
                "warmup": "sparsity_warmup", "warmup-shape": "sparsity_schedule",
                "warmup-start": "sparsity_start", "union-bound": "union_bound"}


def _reducer_keywords(text):
    """TagcState keywords from a description text ("values=packed-bf16 index=exact theta=0.9875")."""
    out = {}
    for item in text.replace(",", " ").split():
        key, eq, value = item.partition("=")
        if not eq or not value:
            raise ValueError("tagc: reducer item %r is not key=value" % item)
        if key not in REDUCER_KEYS:
            raise ValueError("tagc: reducer key %r is not one TagcState takes (it takes %s)"
                             % (key, ", ".join(sorted(REDUCER_KEYS))))
        name = REDUCER_KEYS[key]
        if name in out:
            raise ValueError("tagc: reducer key %r given twice" % key)
        out[name] = value
    return out


class TagcState:
    """What the tagc hooks keep between calls: one reducer per bucket, its residual, a worker.

    process_group: the group whose ranks reduce together (default: the world).
      The hooks run their collectives on a new group over the same ranks, so
      every rank must construct the state (dist.new_group is collective).
    reducer: the configuration as the library's description text, the same keys as the
      C++ builder and the trainer's --reducer, e.g. "values=packed-bf16 index=exact
      theta=0.9875 warmup=300" (REDUCER_KEYS: each key sets the keyword below it names;
      a key it gives replaces that keyword).
    ratio, index_bits, values: the reducer, built by the library's builder from its
      catalogue (catalogue() lists it; the library's default catalogue less the entries
      these keywords cannot name): "sketch" (count sketch; ratio 10, index_bits 1: the
      paper's configuration; also index_bits 4, ratio 2 or 4), "sketch-bf16" or
      "sketch-fp16" (16-bit cells; ratio 10), "packed-bf16", "packed-fp16" or "packed"
      (fp32) with index_bits="exact"; "packed-bf16" or "packed" with index_bits="pooled"
      (one selection for every rank, the union of each rank's largest entries, sized to
      about k: no union of per-rank supports, so the bytes do not grow with the ranks or replicas; the choice
      for many of them), index_bits="gathered" (index_bits="exact"'s sums with every rank's
      positions all-gathered as lists: fewer bytes at a few ranks or replicas, growing with them),
      index_bits="routed" (the same sums, every rank's own top-k sent to the shards' owners
      as entries: its picks' bytes independent of the ranks; in an all-reduce hook each
      owner then shares its summed part, the union of the ranks' picks, which grows
      with them, unless union_bound bounds it) or index_bits="shared" (one selection, a
      rotating leader's top-k);
      "dense" is an uncompressed fp32 all-reduce through the hook's machinery (to
      measure the hook's own cost).
    sparsity: theta, the fraction of entries kept back per call (None: the paper's
      pairing for the ratio, 0.9875 at 10x). adaptive: move theta to keep the sketch peelable.
    sparsity_warmup, sparsity_schedule, sparsity_start: theta's warm-up, per reducer, over
      its first `sparsity_warmup` calls from `sparsity_start` (0: dense) to the target,
      "exp" (DGC's) or "linear" (tagc/policy/sparsity_schedule.hpp). 0 calls: off. The
      reducer's call count is in state_dict(), so a resumed run continues the ramp. A
      sketch decodes at most ~0.8x its cells: with a 10x sketch start at 0.97, not lower;
      packed values can start dense (docs/results.md, "Time to quality").
    union_bound: index_bits="routed" in all-reduce hooks (DDP, HSDP's replicas): each owner
      forwards at most ceil(union_bound x k / N) of its largest sums and the ranks keep the
      rest in their residuals, so what every rank receives stays near union_bound x k at
      any N (0: every nonzero sum). A reduce-scatter hook (FSDP) refuses it.
    min_compress_numel: units (DDP buckets, FSDP flat gradients) with fewer elements go
      uncompressed through the library's plain fp32 reducer: on a small unit the index,
      the agreement check and the collectives' latency cost more than the bytes saved
      (the paper compresses only the large layers). 0: compress every unit. Residual a
      parameter brought from a compressed unit is sent with its first plain call.
    profile: time every call and each compressed reducer's stages (the library's
      reduce_stats::seconds; each stage then ends with a synchronisation) into
      `call_log`, one dict per call (unit size, seconds queued behind the worker,
      seconds inside the reducer, stage seconds). Not part of the configuration.
    module: the model; parameters are then named as in module.named_parameters()
      (checkpoints name them; FSDP needs it to know where a backward pass starts).
      Without it they are named by the order DDP's first buckets hold them.
    """

    def __init__(self, process_group=None, ratio=10, index_bits=1, values="sketch", sparsity=None,
                 adaptive=False, module=None, check_inputs=True, sparsity_warmup=0, sparsity_schedule="exp",
                 sparsity_start=_NO_WARMUP["sparsity_start"], min_compress_numel=0, profile=False, reducer=None,
                 union_bound=0.0):
        if reducer is not None:
            given = _reducer_keywords(reducer)
            ratio = int(given.get("ratio", ratio))
            index_bits = given.get("index_bits", index_bits)
            values = given.get("values", values)
            sparsity = float(given["sparsity"]) if "sparsity" in given else sparsity
            sparsity_warmup = int(given.get("sparsity_warmup", sparsity_warmup))
            sparsity_schedule = given.get("sparsity_schedule", sparsity_schedule)
            sparsity_start = float(given.get("sparsity_start", sparsity_start))
            union_bound = float(given.get("union_bound", union_bound))
        if not dist.is_initialized():
            raise RuntimeError("tagc: TagcState needs torch.distributed to be initialized")
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.world_size = dist.get_world_size(self.process_group)
        self.rank = dist.get_rank(self.process_group)
        self.config = dict(values=str(values), ratio=int(ratio), index=str(index_bits),
                           sparsity=-1.0 if sparsity is None else float(sparsity),
                           adaptive=bool(adaptive), check_inputs=bool(check_inputs),
                           sparsity_warmup=int(sparsity_warmup), sparsity_schedule=str(sparsity_schedule),
                           sparsity_start=float(sparsity_start), min_compress_numel=int(min_compress_numel),
                           union_bound=float(union_bound))
        if self.config["min_compress_numel"] < 0:
            raise ValueError("tagc: min_compress_numel %d is negative" % self.config["min_compress_numel"])
        # Refuse a configuration the world cannot run before the first backward.
        if self.config["values"] != "dense":
            _C.can_implement(self.config, 1, self.world_size, self.rank, "replicated")
        self._group = _private_group(self.process_group)
        # This run's identity: rank 0's random draw, agreed by a MAX all-reduce. A checkpoint
        # carries it, so ranks that load states of different runs are refused together.
        rid = torch.tensor([secrets.randbits(62) if self.rank == 0 else 0], dtype=torch.int64)
        dist.all_reduce(rid, op=dist.ReduceOp.MAX, group=self._group)
        self.run_id = int(rid.item())
        self._names = {}                  # id(parameter) -> name
        self._order = {}                  # id(parameter) -> place in the module
        self._numel = {}                  # name -> numel (a changed parameter set is refused)
        if module is not None:
            for name, p in module.named_parameters():
                self._names[id(p)] = name
                self._order[id(p)] = len(self._order)
                self._numel[name] = p.numel()
        self.module = module
        self._units = {}                  # key -> _Unit
        self._owner = {}                  # parameter name -> key of the unit holding its residual
        self._pending = {}                # name -> residual waiting for its new unit (rebuilds, checkpoints)
        self._saved_units = {}            # key -> reducer state from a checkpoint
        self.rebuilds = 0                 # units re-formed from other units' parameters
        self.calls = 0
        self.plain_calls = 0              # of which through a plain (uncompressed) unit
        self.bytes_sent = 0.0             # per rank, ring model, all reducer collectives so far
        self.reduce_seconds = 0.0         # wall time inside the reducers (codec + collectives)
        self.last_stats = None
        self.profile = bool(profile)
        self.call_log = []                # profile=True: one dict per call
        self._fsdp_seen = {}
        if module is not None:
            module.register_forward_pre_hook(lambda *_: self._fsdp_seen.clear())
        self._jobs = queue.Queue()
        self._worker = threading.Thread(target=self._work, name="tagc-comm", daemon=True)
        self._worker.start()

    # ---- the worker ----
    def _work(self):
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                job()
            finally:
                self._jobs.task_done()

    def _submit(self, fn):
        self._jobs.put(fn)

    def wait(self):
        """Block until every submitted reduction has finished."""
        self._jobs.join()

    def _run(self, fn):
        """Runs fn on the worker (behind what is queued there) and waits; its error is raised here."""
        done, err = threading.Event(), []

        def job():
            try:
                fn()
            except Exception as e:
                err.append(e)
            finally:
                done.set()

        self._submit(job)
        done.wait()
        if err:
            raise err[0]

    # ---- units and their residuals ----
    def _name_of(self, p):
        name = self._names.get(id(p))
        if name is None:
            name = "param%d" % len(self._names)
            self._names[id(p)] = name
            self._order[id(p)] = len(self._order)
        return name

    def _index_of(self, p):
        """The parameter's place in the module (or in first-seen order without one)."""
        self._name_of(p)
        return self._order[id(p)]

    def _unit(self, key, names, numels, length, topology, out_shape_of, plain_values=None):
        """The unit under `key`, made on first use. plain_values ("plain-fp32", "plain-bf16"):
        reduced uncompressed with those values, whatever its size (apply_fsdp2's plain part)."""
        unit = self._units.get(key)
        if unit is not None:
            return unit
        for name, n in zip(names, numels):
            known = self._numel.setdefault(name, n)
            if known != n:
                raise RuntimeError("tagc: parameter '%s' has %d elements, it had %d when its residual was "
                                   "made; the parameter set changed under the hook (make a new TagcState)"
                                   % (name, n, known))
        # Parameters this unit takes over from units of an earlier bucketing:
        # split those units' residuals per parameter and retire them.
        for name in names:
            old_key = self._owner.get(name)
            if old_key is not None and old_key != key and old_key in self._units:
                old = self._units.pop(old_key)
                self._pending.update({k: v.clone() for k, v in old.split(old.residual()[:sum(old.numels)]).items()})
                for k in old.names:
                    self._owner.pop(k, None)
                self.rebuilds += 1
        c = self.config
        plain = plain_values is not None or (c["values"] != "dense" and length < c["min_compress_numel"])
        if c["values"] == "dense":
            reducer = _DenseReducer(length, self._group, self.world_size)
        elif plain:
            reducer = _C.Reducer(dict(c, values=plain_values or "plain-fp32", sparsity=-1.0, adaptive=False,
                                      sparsity_warmup=0, union_bound=0.0), length, self._group, topology)
        else:
            reducer = _C.Reducer(c, length, self._group, topology)
        if self.profile and not isinstance(reducer, _DenseReducer):
            reducer.profiling = True
        unit = _Unit(key, names, numels, reducer, torch.zeros(out_shape_of(reducer)), length, plain)
        saved = self._saved_units.pop(key, None)
        if saved is not None and not plain:
            reducer.load_state(saved)
            for name in names:
                self._pending.pop(name, None)
        elif any(name in self._pending for name in names):
            parts = [self._pending.pop(name, None) for name in names]
            parts = [torch.zeros(n) if t is None else t for t, n in zip(parts, numels)]
            flat = torch.cat(parts)
            if flat.numel() < length:  # FSDP padding
                flat = torch.cat([flat, torch.zeros(length - flat.numel())])
            if plain:
                unit.carry = flat
            else:
                reducer.set_residual(flat)
        self._units[key] = unit
        for name in names:
            self._owner[name] = key
        return unit

    def _reduce(self, unit, method, grad, out, queued_at=None):
        t0 = time.perf_counter()
        if unit.plain:
            grad = self._plain_input(unit, grad)
        stats = getattr(unit.reducer, method)(grad, out)
        unit.carry = None
        t1 = time.perf_counter()
        self.reduce_seconds += t1 - t0
        if self.profile:
            self.call_log.append(dict(length=unit.length, plain=unit.plain, reduce=t1 - t0, start=t0,
                                      queued=None if queued_at is None else t0 - queued_at,
                                      seconds=dict(stats.get("seconds", {})), total_bytes=stats["total_bytes"]))
        self.calls += 1
        self.plain_calls += unit.plain
        self.bytes_sent += stats["total_bytes"]
        self.last_stats = stats
        return stats

    def _plain_input(self, unit, grad):
        """A plain unit's gradient plus what its parameters carried in. The plain reducer
        checks nothing, so the hook agrees on finiteness across ranks itself (one int
        all-reduce) and raises the same error on every rank, as the compressed ones do."""
        if unit.carry is not None:
            grad = grad + unit.carry
        if self.config["check_inputs"]:
            bad = torch.tensor([0 if bool(torch.isfinite(grad).all()) else 1], dtype=torch.int32)
            dist.all_reduce(bad, group=self._group)
            if bad.item():
                raise RuntimeError("tagc: unit %r (%d elements, reduced plainly): the gradient "
                                   "on %d rank(s) is not finite (NaN or Inf)" % (unit.names[0], unit.length, bad.item()))
        return grad

    def residuals(self):
        """Every parameter's error-feedback residual (name -> flat tensor) on this rank."""
        self.wait()
        res = {k: v.clone() for k, v in self._pending.items()}
        for unit in self._units.values():
            res.update({k: v.clone() for k, v in unit.split(unit.residual()[:sum(unit.numels)]).items()})
        return res

    # ---- checkpoints ----
    def _check_state(self, sd):
        if "refused" in sd:  # a state its reader could not decode (_dcp.DcpState): refused on every rank
            raise RuntimeError(sd["refused"])
        if sd.get("version") != _STATE_VERSION:
            raise RuntimeError("tagc: checkpoint version %r, this build reads %d" % (sd.get("version"), _STATE_VERSION))
        # Checkpoints from before a configuration key existed ran as its _ADDED_KEYS value.
        saved = dict(sd, config={**sd["config"], **{k: v for k, v in _ADDED_KEYS.items() if k not in sd["config"]}})
        for field, mine in (("config", self.config), ("world_size", self.world_size), ("rank", self.rank)):
            if saved[field] != mine:
                if field == "config":
                    keys = sorted(k for k in set(saved[field]) | set(mine) if saved[field].get(k) != mine.get(k))
                    theirs = {k: saved[field].get(k) for k in keys}
                    mine = {k: mine.get(k) for k in keys}
                    raise RuntimeError("tagc: checkpoint was saved with config %r, this state has %r" % (theirs, mine))
                raise RuntimeError("tagc: checkpoint was saved with %s %r, this state has %r" % (field, saved[field], mine))
        if self.module is not None:
            # The module's parameters must match; the FSDP hook's flat-gradient units
            # (named by size and place, made on first use) are not module parameters.
            have = {k for k in self._numel if not _is_fsdp_unit(k)}
            saved = {k for k in sd["numel"] if not _is_fsdp_unit(k)}
            if have != saved:
                raise RuntimeError("tagc: checkpoint holds residuals for other parameters: missing %s, unexpected %s"
                                   % (sorted(have - saved)[:5], sorted(saved - have)[:5]))
            for name, n in sd["numel"].items():
                if name in self._numel and self._numel[name] != n:
                    raise RuntimeError("tagc: checkpoint's residual for '%s' has %d elements, the parameter has %d"
                                       % (name, n, self._numel[name]))

    def state_dict(self):
        """This rank's state: per-parameter residuals and each reducer's own state (theta, counters)."""
        self.wait()
        return {"version": _STATE_VERSION, "config": dict(self.config), "world_size": self.world_size,
                "rank": self.rank, "run_id": self.run_id, "residuals": self.residuals(),
                "units": {**self._saved_units, **{k: u.reducer.save_state() for k, u in self._units.items()}},
                "numel": dict(self._numel)}

    def load_state_dict(self, sd):
        """Restore state_dict() of the same rank; call on every rank, before the first backward
        of the resumed run. Refused on every rank alike (never one rank alone, which would
        leave the others waiting) when any rank's state is of another version, configuration,
        world, rank or parameter set, or when the ranks' states come from different runs."""
        self.wait()
        try:
            self._check_state(sd)
            mine = ""
        except (RuntimeError, KeyError, TypeError, AttributeError) as e:
            mine = str(e) if isinstance(e, RuntimeError) else "tagc: not a TagcState.state_dict(): %r" % (e,)
        run = int(sd.get("run_id", 0)) if isinstance(sd, dict) else 0
        refused = torch.tensor([1 if mine else 0], dtype=torch.int64)
        runs = torch.tensor([run, -run], dtype=torch.int64)  # max and -min of the ranks' run ids
        dist.all_reduce(refused, group=self._group)
        dist.all_reduce(runs, op=dist.ReduceOp.MAX, group=self._group)
        if refused.item():
            raise RuntimeError(mine or "tagc: %d other rank(s) refused their checkpoint state (see their error)"
                               % refused.item())
        if runs[0].item() != -runs[1].item():
            raise RuntimeError("tagc: the ranks loaded tagc states of different runs (run ids %d to %d): every rank "
                               "must load its own state of the same checkpoint" % (-runs[1].item(), runs[0].item()))
        self.run_id = run
        self._numel.update(sd["numel"])
        self._units.clear()
        self._owner.clear()
        self._pending = {k: v.clone() for k, v in sd["residuals"].items()}
        self._saved_units = dict(sd["units"])


_FSDP_UNIT = "fsdp_unit_%d_%d"  # the FSDP hook's name for the k-th flat gradient of n elements in a backward


def _is_fsdp_unit(name):
    """A flat-gradient unit's name (the FSDP1 hook's or FSDP2's), not a module parameter's."""
    if _fsdp2.is_unit_name(name):
        return True
    parts = name.split("_")
    return name.startswith("fsdp_unit_") and len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit()


def _unwrap(fut):
    value = fut.value()
    if isinstance(value, BaseException):
        raise value
    return value


def ddp_comm_hook(state: TagcState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradient averaged over the group, through tagc.

    Returns at once; the future completes on the state's worker thread. The
    reducer sees the bucket's parameters in the module's order (a copy when DDP's
    order differs), so a bucket that DDP re-forms with the same parameters in
    another order keeps its reducer, and a resumed run meets the same layout."""
    done = torch.futures.Future()
    queued_at = time.perf_counter()
    buf = bucket.buffer()
    params = list(bucket.parameters())

    def job():
        try:
            order = sorted(range(len(params)), key=lambda i: state._index_of(params[i]))
            names = tuple(state._name_of(params[i]) for i in order)
            numels = [params[i].numel() for i in order]
            if sum(numels) != buf.numel():
                raise RuntimeError("tagc: bucket of %d elements holds parameters of %d in all (sparse or padded "
                                   "buckets are not supported)" % (buf.numel(), sum(numels)))
            unit = state._unit(("ddp",) + names, names, numels, buf.numel(), "replicated", lambda r: r.output_size)
            if order == sorted(order):
                state._reduce(unit, "all_reduce", buf, unit.out, queued_at)
                done.set_result(unit.out)
                return
            views = torch.split(buf, [p.numel() for p in params])
            state._reduce(unit, "all_reduce", torch.cat([views[i] for i in order]), unit.out, queued_at)
            back = dict(zip(order, torch.split(unit.out, numels)))
            done.set_result(torch.cat([back[i] for i in range(len(params))]))
        except Exception as e:  # the same verdict on every rank: each raises it from backward
            done.set_result(e)

    state._submit(job)
    return done.then(_unwrap)


def fsdp_comm_hook(state: TagcState, grad: torch.Tensor, output: torch.Tensor = None):
    """FSDP1 communication hook (torch >= 2, sharded strategies): reduce-scatter `grad`
    (the flat, padded unsharded gradient) into `output` (this rank's shard), averaged,
    through tagc's sharded topology. With NO_SHARD FSDP passes no output: all-reduce in place.

    FSDP calls it synchronously and reads `output` when it returns, so it blocks."""
    if state.module is None:
        raise RuntimeError("tagc: fsdp_comm_hook needs TagcState(module=fsdp_model): it tells the hook "
                           "where a backward pass starts, so that units of equal size keep their own residuals")
    n = grad.numel()
    k = state._fsdp_seen.get(n, 0)
    state._fsdp_seen[n] = k + 1
    name = _FSDP_UNIT % (n, k)
    topo = "replicated" if output is None else "sharded"

    def job():
        unit = state._unit(("fsdp", n, k, topo), (name,), [n], n, topo, lambda r: r.output_size)
        target = unit.out
        if output is not None and unit.reducer.output_size != output.numel():
            raise RuntimeError("tagc: FSDP's shard has %d elements, tagc's layout gives %d for a gradient of %d "
                               "on %d ranks" % (output.numel(), unit.reducer.output_size, n, state.world_size))
        state._reduce(unit, "reduce_scatter" if output is not None else "all_reduce",
                      grad.detach().contiguous(), target)
        (output if output is not None else grad).copy_(target.view_as(output if output is not None else grad))

    state._run(job)


apply_fsdp2 = _fsdp2.apply_fsdp2
apply_hsdp = _fsdp2.apply_hsdp
is_attention_input = _fsdp2.is_attention_input
is_position_embedding = _fsdp2.is_position_embedding
dcp_state = _dcp.dcp_state
