#!/usr/bin/env python3
"""Write bench/torch's GPT-2, initialised as the benches do (torch.manual_seed(SEED), then
gpt2.GPT2(DEPTH)), to an llm.c checkpoint (version 3, padded vocabulary), so that the C++
trainer (`tagc-gpt2 train --init-from FILE`) starts from the very weights the PyTorch benches
start from: the two trainers can then be held against each other step by step."""
import argparse
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402


def llmc_tensors(model):
    """The parameters in llm.c's order: wte, wpe, then each per-layer kind stacked over layers."""
    b = model.blocks
    per_layer = [lambda k: k.ln1.weight, lambda k: k.ln1.bias, lambda k: k.qkv.weight, lambda k: k.qkv.bias,
                 lambda k: k.attn_proj.weight, lambda k: k.attn_proj.bias, lambda k: k.ln2.weight,
                 lambda k: k.ln2.bias, lambda k: k.fc.weight, lambda k: k.fc.bias,
                 lambda k: k.fc_proj.weight, lambda k: k.fc_proj.bias]
    out = [model.wte.weight, model.wpe.weight]
    out += [torch.stack([get(k) for k in b]) for get in per_layer]
    return out + [model.ln_f.weight, model.ln_f.bias]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1337)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    model = gpt2.GPT2(a.depth)
    c = model.wte.weight.shape[1]
    header = [20240326, 3, gpt2.MAX_T, gpt2.VOCAB, a.depth, a.depth, c, gpt2.PADDED_VOCAB] + [0] * 248
    with open(a.out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for t in llmc_tensors(model):
            f.write(t.detach().contiguous().float().numpy().tobytes())
    print("export_llmc: d%d seed %d, %d parameters -> %s" % (a.depth, a.seed, sum(p.numel() for p in model.parameters()), a.out))


if __name__ == "__main__":
    main()
