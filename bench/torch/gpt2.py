"""GPT-2 in PyTorch at tagc-gpt2's shapes (examples/gpt2/model/include/gpt2/config.hpp).

dN: L = N layers, C = 64 N channels, NH = N heads, max_seq_len 1024, vocab 50257
padded to 50304; the token embedding is tied to the LM head; GELU (tanh), pre-LN,
GPT-2's initialisation (std 0.02, residual projections scaled by 1/sqrt(2L)).
The loss covers the 50257 real tokens only, as llm.c's and tagc-gpt2's do.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, PADDED_VOCAB, MAX_T = 50257, 50304, 1024


class Block(nn.Module):
    def __init__(self, c, nh, layers):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fc_proj = nn.Linear(4 * c, c)
        for proj in (self.attn_proj, self.fc_proj):
            nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * layers))
        for lin in (self.qkv, self.fc):
            nn.init.normal_(lin.weight, std=0.02)
        for lin in (self.qkv, self.attn_proj, self.fc, self.fc_proj):
            nn.init.zeros_(lin.bias)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.nh))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.attn_proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        layers, c, nh = depth, 64 * depth, depth
        self.wte = nn.Embedding(PADDED_VOCAB, c)
        self.wpe = nn.Embedding(MAX_T, c)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(c, nh, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        # not a parameter and not a DDP buffer to broadcast: a plain attribute
        self.mask = torch.triu(torch.ones(MAX_T, MAX_T, dtype=torch.bool), diagonal=1)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = F.linear(self.ln_f(x), self.wte.weight)[..., :VOCAB]  # tied LM head
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
