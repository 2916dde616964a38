#!/usr/bin/env python3
"""GPT-2 BPE tokens of the corpus for the PyTorch benchmark (llm.c shard format).

tagc-gpt2 prepares its shards in C++ (`tagc-gpt2 prepare`); this is a small
Python version so that the benchmark needs no C++ build: byte-level BPE with
data/gpt2/{encoder.json,vocab.bpe}. Its pre-tokenizer approximates GPT-2's
(\\p{L} / \\p{N} as Python's [^\\W\\d_] / \\d), which on English text splits the
same. Documents are joined by <|endoftext|> (50256).

Usage: tokenize_corpus.py DATA_DIR OUT_DIR [--train-tokens N] [--val-tokens N]
Writes OUT_DIR/train.bin and OUT_DIR/val.bin: int32 header[256] (magic 20240520,
version 1, count) + uint16 tokens. Val takes the newest speeches; train takes the others
spread over the years (in bit-reversed order of their dates, so any number of them spans
1790 to the newest left), so that the validation speeches are of the training's kind. The
two never share a speech. (Before, train took the oldest speeches first: 500 steps read
1790-1830 and validated on the 2010s, docs/results.md, FSDP2 side by side.)
"""
import argparse
import json
import os
import re
import struct

import numpy as np

PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Bpe:
    def __init__(self, gpt2_dir):
        with open(os.path.join(gpt2_dir, "encoder.json")) as f:
            self.encoder = json.load(f)
        with open(os.path.join(gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
            merges = [tuple(l.split()) for l in f.read().split("\n")[1:] if l]
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.byte_enc = bytes_to_unicode()
        self.cache = {}

    def word(self, token):
        if token in self.cache:
            return self.cache[token]
        parts = list(token)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids = [self.encoder[p] for p in parts]
        self.cache[token] = ids
        return ids

    def encode(self, text):
        out = []
        for tok in PAT.findall(text):
            out.extend(self.word("".join(self.byte_enc[b] for b in tok.encode("utf-8"))))
        return out


def spread(n):
    """0 .. n-1 in bit-reversed order: every prefix is spread over the whole range."""
    bits = max(1, (n - 1).bit_length())
    reverse = lambda i: int(format(i, "0%db" % bits)[::-1], 2)
    return [i for i in sorted(range(1 << bits), key=reverse) if i < n]


def write_shard(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--train-tokens", type=int, default=120_000, help="the benchmark reads them in order: give it at least steps x world x B x T")
    ap.add_argument("--val-tokens", type=int, default=20_000)
    a = ap.parse_args()
    bpe = Bpe(os.path.join(a.data_dir, "gpt2"))
    corpus = os.path.join(a.data_dir, "corpus")
    docs = sorted(f for f in os.listdir(corpus) if f.startswith("sotu_"))

    def take(files, limit):
        """The first `limit` tokens of `files` and how many files they came from."""
        toks, used = [], 0
        for f in files:
            with open(os.path.join(corpus, f), encoding="utf-8", errors="replace") as fh:
                toks += [50256] + bpe.encode(fh.read())
            used += 1
            if len(toks) >= limit:
                break
        return toks[:limit], used

    val, n_val = take(list(reversed(docs)), a.val_tokens)
    rest = docs[:len(docs) - n_val]
    train, _ = take([rest[i] for i in spread(len(rest))], a.train_tokens)
    if len(train) < a.train_tokens or not rest:
        raise SystemExit("tokenize_corpus: %d train + %d val tokens do not fit in %d speeches apart"
                         % (a.train_tokens, a.val_tokens, len(docs)))
    os.makedirs(a.out_dir, exist_ok=True)
    write_shard(os.path.join(a.out_dir, "train.bin"), train)
    write_shard(os.path.join(a.out_dir, "val.bin"), val)
    print("tokenize_corpus: %d train + %d val tokens in %s" % (a.train_tokens, a.val_tokens, a.out_dir))


if __name__ == "__main__":
    main()
