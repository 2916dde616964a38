#pragma once
// defines: tagc::SketchPolicy<Ratio, Lanes, Value>, tagc::SketchBf16Policy,
//          tagc::SketchFp16Policy (functors: detail/sketch_kernels.hpp) — the count sketch of each
//          shard, keyed by block so that access is coalesced.
//
// A shard is seen as [blocks x lanes]. Block j hashes with MurmurHash3_x86_32
// (seeds 0, 1, 2) to one row in each of three partitions of p rows and to a sign
// (the hash's top bit), as in the reference; element (j, lane) adds
// sign * value to cell (row, (lane + rot) mod lanes) of each partition, where
// rot is a second hash of the block (seeds 3, 4, 5). For one block all lanes
// still land in one row, in order (rotated), so access stays coalesced; the
// rotation joins the lanes into one large peeling problem. Without it every lane
// is a separate little sketch of ~blocks/ratio cells, and such small random
// hypergraphs fail to peel far below the asymptotic threshold (measured here:
// 530 of 12,800 entries unresolved at load 0.46 with 27 rows per lane, against
// 2 with 64 lanes).
//
// Building is a *gather*, not a scatter: the block -> row map depends only on
// the layout, so it is inverted once at initialisation (per partition, the
// blocks of each row, CSR style), and each cell sums its own blocks in a fixed
// order. No float atomics, so the sketch, and therefore the whole Reducer, is
// bit-for-bit deterministic on every execution space — which exact resume of a
// training run depends on.
//
// The sketch is linear: the sum over ranks of their sketches is the sketch of
// the summed gradient, so plain sum collectives carry it.
//
// Low precision (Value = bfloat16 or float16): the cells travel in 16 bits.
//  - Each value is rounded to Value *before* it enters the sketch (after the
//    fp16 range scale 2^k, policy/wire_value.hpp) and the sender keeps
//    value - rounded in its residual: that part of the rounding is attributed
//    to its entry exactly and nothing of it is lost.
//  - A cell then sums the rounded values in fp32 and is rounded once more to
//    Value for the exchange. That rounding mixes the entries sharing the cell;
//    none of them owns it, and its effect on the decoded values depends on the
//    owner's peeling order, which the sender does not know, so it cannot be fed
//    back. It is measured instead (reduce_stats::unfed_rounding), as are none of
//    the collective's own roundings of the summed cells (no rank sees them).
//  - The owner widens the summed cells to fp32 (times 2^-k) and decodes there:
//    peeling and estimation accumulate in fp32. Peeling never compares cell
//    values: a cell is "pure" when its *count* of unresolved support entries
//    (from the exact reduced index) is 1, so rounding cannot make a mixed cell
//    look pure or a pure one look mixed. Rounding only perturbs the values; a
//    perturbation peeled from one cell is subtracted from that entry's other
//    cells and so travels along the peeling chain (measured in
//    tests/test_lowprec.cpp: the delivered error stays within a few bf16 ulps
//    of the cell magnitudes at loads up to ~0.7).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../core/config.hpp"
#include "../core/murmur3.hpp"
#include "../shard/layout.hpp"
#include "index.hpp"
#include "sparsify.hpp"
#include "wire_value.hpp"

TAGC_BEGIN_NAMESPACE

template <int Ratio, int Lanes = 1024, class Value = float>
struct SketchPolicy {
  static_assert(Ratio >= 1, "tagc: SketchPolicy<Ratio>: the compression ratio must be at least 1");
  static_assert(Lanes >= 1, "tagc: SketchPolicy<Ratio, Lanes>: at least one lane");
  static_assert(wire_value<Value>, "tagc: SketchPolicy<Ratio, Lanes, Value>: Value is float, tagc::bfloat16 or tagc::float16");
  static constexpr int ratio = Ratio;
  static constexpr int lanes = Lanes;  // B, the block width (reference: 1024)
  static constexpr int hashes = 3;     // k
  using value_type = Value;            // what a cell travels as; decoding is fp32 whatever it is
};
template <int Ratio, int Lanes = 1024>
using SketchBf16Policy = SketchPolicy<Ratio, Lanes, bfloat16>;
template <int Ratio, int Lanes = 1024>
using SketchFp16Policy = SketchPolicy<Ratio, Lanes, float16>;

TAGC_END_NAMESPACE
