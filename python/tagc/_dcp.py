"""A TagcState inside torch.distributed.checkpoint (DCP), the way FSDP2 jobs checkpoint.

DCP treats a plain (non-DTensor) value under one key as the same on every rank and
writes it once; tagc's state differs per rank (each rank's residuals). So each rank
puts its state under a key of its own ("rank<r>"), as one serialised blob: DCP loads
only the keys its template names, and a fresh TagcState has no residual tensors yet
to name (its reducers are made on the first backward).

Loading goes through TagcState.load_state_dict, so every check it makes (version,
configuration, world, rank, parameters, run) refuses on every rank alike. A world
larger than the saved one finds no key for its new ranks: DCP raises on every rank.
"""

import io

import torch


class DcpState:
    """torch.distributed.checkpoint's Stateful protocol over a TagcState:

        dcp.save({"model": msd, "optim": osd, "tagc": tagc.torch.dcp_state(state)}, checkpoint_id=path)
        dcp.load({"model": msd, "optim": osd, "tagc": tagc.torch.dcp_state(state)}, checkpoint_id=path)

    DCP calls state_dict() to save and to build its load template, then load_state_dict()."""

    def __init__(self, state):
        self.state = state

    def _key(self):
        return "rank%d" % self.state.rank

    def state_dict(self):
        blob = io.BytesIO()
        torch.save(self.state.state_dict(), blob)
        return {self._key(): blob.getvalue()}

    def load_state_dict(self, sd):
        # Every rank must reach TagcState.load_state_dict, which agrees its verdict across
        # ranks: a blob that is absent or does not decode goes on as a refusal naming why.
        blob = sd.get(self._key()) if isinstance(sd, dict) else None
        try:
            saved = torch.load(io.BytesIO(blob), weights_only=False)
        except Exception as e:
            saved = {"refused": "tagc: the checkpoint's tagc state for %s does not decode (%s)" % (self._key(), e)}
        self.state.load_state_dict(saved)


def dcp_state(state):
    """`state` (a TagcState) as a torch.distributed.checkpoint Stateful (see DcpState)."""
    return DcpState(state)
