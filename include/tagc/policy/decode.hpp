#pragma once
// defines: tagc::DecodePolicy<Mode> (functors: detail/decode_kernels.hpp) — recover the owner's shard
//          from the summed sketch and the reduced index (the support).
//
// Modes:
//  - peel:                 exact values by peeling; what peeling cannot resolve is
//                          delivered as 0 this step and retransmitted (see below).
//  - estimate:             a conservative estimate from the three signed cells for
//                          every support entry (the paper's fallback alone, noisy).
//  - peel_then_estimate:   peel, then estimate what is left (the reference's order).
//
// The estimate is NOT the reference's median of the three signed cells. Cells
// left after peeling each hold two or more unresolved entries, so every signed
// cell is the value plus contamination of the same magnitude. Because we feed
// an estimate's error back (below), an estimator worse than 0 makes the
// residuals grow geometrically while the sketch stays overloaded: with the
// median, 4 ranks, ratio 10, theta 0.9 (load ~1.8), the error of the cumulative
// delivered sum reached 1e10 x the input in 20 steps (the trainer's gradient norm
// went to ~1e14). We deliver sign(s) * min|s_h| when all three signed cells agree
// in sign and 0 otherwise: it never exceeds the least contaminated cell, and in
// the same runs it stayed stable and beat peeling alone (cumulative error 0.84
// vs 0.98 of the input at theta 0.9; 0.60 vs 0.72 at 0.95; equal below the
// threshold, where nothing is left to estimate). tests/test_reducer.cpp keeps it.
//
// Peeling: a cell holding exactly one unresolved support entry holds that
// entry's value (times its sign); subtract it from its cells and repeat. Exact
// while the load (support / cells) stays below the 3-hypergraph peeling
// threshold (~0.81). Cells keep a count and the XOR of the ids of the entries
// still in them, so a count-1 cell names its entry without any list.
//
// Parallel and deterministic: peeling runs in rounds over the support list.
// Resolving reads only; subtracting is serialised per cell — an entry subtracts
// itself only in a round where it holds (smallest id) all three of its cells —
// so each cell sees its subtractions in one fixed order on every execution
// space, and the result is bit-for-bit reproducible. (The reference polls a
// device flag from the host every round; we check progress every few rounds.)
//
// Nothing is lost: the owner publishes which entries of its shard peeling did
// not resolve (a bitmap, all-gathered only in steps where anything was left),
// and every sender keeps its value of those entries in its residual, as if it
// had not been sent; it goes out again in a later step. Where the owner
// delivered an estimate instead of 0, it subtracts the estimate from its own
// residual, so the estimate's error is fed back like any other residual.
// (The reference applies estimates silently and never feeds the error back.)

#include <cstdint>

#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "choices.hpp"  // decode_mode
#include "index.hpp"
#include "sketch.hpp"

TAGC_BEGIN_NAMESPACE

template <decode_mode Mode = decode_mode::peel_then_estimate>
struct DecodePolicy {
  static constexpr decode_mode mode = Mode;
  static constexpr bool peels = Mode != decode_mode::estimate;
  static constexpr bool estimates = Mode != decode_mode::peel;
};

TAGC_END_NAMESPACE
