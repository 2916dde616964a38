#pragma once
// defines: tagc::SharedIndexPolicy (the reducer: shared_reducer.hpp; functors:
//          detail/shared_kernels.hpp) — one selection for all ranks, agreed
//          before any value moves, so there is no union of supports.
//
// With a per-rank selection (IndexPolicy) every rank keeps its own top entries
// and the exchanged support is the union of N supports: it grows with the
// number of ranks (issue 33: union / kept 1.5x at 2 ranks, 4.1x at 16), and so
// do the packed values and the index width. SharedIndexPolicy follows
// ScaleCom's cyclic local top-k (Chen et al., NeurIPS 2020): at call s the
// leader, rank s mod N, picks the k = floor((1 - theta) n) largest |g + residual|
// of its own accumulated gradient (the radix select of SparsifyPolicy) and
// broadcasts the positions; every rank sends its value at exactly those
// positions; error feedback keeps everything else. Every rank therefore sends
// the same k values whatever N is:
//
//   positions  broadcast, a sorted uint32 list (4k bytes) or a bitmap (n / 8
//              bytes), whichever is smaller for the call's k (every rank knows k)
//   values     all-reduce of k packed values (fp32 or bf16), 2k (N-1)/N per rank
//
// so bytes per rank per call are bounded by 4k + 2k * sizeof(value), not N times
// anything. The rotation lets each rank's largest entries lead in turn; a rank's
// large entries that the leader did not pick wait in its residual (reported as
// reduce_stats::deferred: its entries above the leader's threshold that were not
// sent).
//
// Composes with PackedPolicy / PackedBf16Policy (16-bit rounding fed back to the
// residual, as for the per-rank packed reducer), the residual types of
// SparsifyPolicy, the sparsity schedule and save_state / load_state.

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE

struct SharedIndexPolicy {
  static constexpr const char* name = "shared index (cyclic leader's top-k, broadcast)";
};

TAGC_END_NAMESPACE
