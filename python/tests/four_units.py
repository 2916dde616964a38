"""The model and batches the FSDP tests share (test_fsdp_hook.py, test_fsdp2.py, test_hsdp.py).

Four FSDP units, two of them of equal size, so a hook must keep their residuals apart:
the embedding in the root unit, two linears of equal size and a head. The embedding is
4096 x 128 = 524288 elements: large enough that the sketch's row granularity
(3 partitions x 1024 lanes) does not dominate its size. At 128000 elements a
64000-element shard rounds up to 9216 cells (1.44x the nominal 6400) and the unit sends
1/4.8 of fp32, not 1/5: a layout fact the tests check exactly.
"""
import torch
import torch.nn as nn

VOCAB = 4096
EMB = VOCAB * 128  # the root unit's element count


class Net(nn.Module):
    def __init__(self, vocab=VOCAB, dim=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)    # root unit: EMB elements
        self.body1 = nn.Linear(dim, dim)       # 16512
        self.body2 = nn.Linear(dim, dim)       # 16512: same size as body1
        self.head = nn.Linear(dim, 10)         # 1290

    def forward(self, x):
        h = self.emb(x).mean(1)
        return self.head(torch.tanh(self.body2(torch.tanh(self.body1(h)))))


def batch(rank, step, vocab=VOCAB):
    """32 sequences of 8 tokens, a fixed function of (rank, step)."""
    g = torch.Generator().manual_seed(1000 * step + 17 * rank + 3)
    x = torch.randint(0, vocab, (32, 8), generator=g)
    return x, x[:, 0] % 10  # learnable: the class is a function of the first token
