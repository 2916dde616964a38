"""tagc: homomorphic gradient compression (TAGC) for PyTorch data-parallel training.

`tagc.torch` holds the communication hooks (DDP: ddp_comm_hook, FSDP1: fsdp_comm_hook)
and their state (TagcState). The reducers themselves are the C++ library's, reached
through the extension module `tagc._C`.
"""

__all__ = ["torch"]
