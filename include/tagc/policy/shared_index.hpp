#pragma once
// defines: tagc::shared_pick, tagc::BasicSharedIndexPolicy<Pick>,
//          tagc::SharedIndexPolicy (the rotating leader), tagc::PooledIndexPolicy
//          (every rank's share), tagc::GatheredIndexPolicy (every rank's own k, the
//          per-rank selection) (the reducer: shared_reducer.hpp; functors:
//          detail/shared_kernels.hpp) — one selection for all ranks, agreed
//          before any value moves, so there is no union of per-rank supports to
//          grow with N.
//
// With a per-rank selection (IndexPolicy) every rank keeps its own top entries
// and the exchanged support is the union of N supports: it grows with the
// number of ranks (docs/results.md, Scaling), and so
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
//              (a sharded call with k over half the buffer: the values laid out
//              in the buffer, reduce-scattered, n (N-1)/N per rank)
//
// so bytes per rank per call are bounded by 4k + 2k * sizeof(value), not N times
// anything. The rotation lets each rank's largest entries lead in turn; a rank's
// large entries that the leader did not pick wait in its residual (reported as
// reduce_stats::deferred: its entries above the leader's threshold that were not
// sent).
//
// PooledIndexPolicy: the ranks pick `picks` positions together: every rank its
// share (picks / N; picks mod N of them, rotating with the call, one more) of
// largest |g + residual|, and the positions are pooled (an all-gather of N lists of
// about picks / N, coded in 16-bit offsets within blocks of 65536 positions, or of N
// bitmaps when a share is about n / 16 or more, whichever is smaller); the sorted union
// is the call's selection. Every rank's view counts at
// every call, where the rotating leader's picks see 1/N of the batch (what that
// costs in quality: docs/results.md, Scaling). A rank's own picks are always sent,
// so it holds nothing back above its own threshold.
//
// The ranks' picks overlap (their largest gradients are largely the same entries),
// so k picks would make a union under k: half of it at 4 ranks on GPT-2, and
// during a dense-start warm-up far less than the schedule asks for. The picks
// therefore follow the overlap the last call measured, picks / union (the
// reducer's state, saved with the residual): picks = k x overlap, between k and
// min(N, 4) k, so that the union comes near k. The bound keeps the lists at most
// about 8k bytes per rank whatever N is; where the ranks agree more than 4-fold the
// union stays under k.
//
// GatheredIndexPolicy: the per-rank selection with its index gathered. Every rank
// picks its own k largest (k per rank, as IndexPolicy's theta means, not k in all),
// the positions are all-gathered (coded lists, or bitmaps once k reaches about n / 16)
// and OR-ed,
// and each rank sends its value only where it picked (zeros elsewhere; its residual
// keeps the rest of the union). The sums are those of ExactIndexPolicy with packed
// values, bit for bit; only the index travels differently: N lists of k positions,
// about 2 (N - 1) k bytes per rank on a ring, where the exact index all-reduces a
// counter of ceil(log2(N + 1)) bits per entry. At theta 0.9875 across 4 ranks (or
// nodes) that is 0.6 bits per parameter against 6. The union and the lists still grow with N:
// this is the cheaper exact index for a few ranks or nodes (two levels), not a
// selection whose bytes are independent of N.
//
// RoutedIndexPolicy: the per-rank selection without an index. Every rank picks its
// own k largest, as GatheredIndexPolicy, and sends each pick as an entry (its offset
// in the shard, 4 bytes, and its value) to the owner of its shard only, by an
// all-to-all with counts (stage/routed_exchange.hpp); the owner adds what it
// receives. Nothing is all-gathered or all-reduced, so a rank sends about
// (N - 1) / N k (4 + sizeof(value)) bytes whatever N is: at theta 0.9875 with bf16
// values 0.6 bits per parameter at 2 ranks or 1000. The sums are GatheredIndexPolicy's
// (and ExactIndexPolicy's with packed values): what every rank picked, summed at the
// owner (fp32 values: the same bits as the gathered index's; bf16 values are added in
// float, not rounded to bf16 on the way). Its communicator must offer all_to_all_v
// (routing_communicator). A call keeping over about a third of the buffer (bf16; a half
// with fp32 values) sends its picks laid out in the buffer and reduce-scattered instead,
// which is then fewer bytes. In an all-reduce the buffer is dealt to N owners in
// chunks, which then broadcast their nonzero sums to every rank: the union of the ranks'
// picks, which grows with N (stage/routed_exchange.hpp); past a quarter of the buffer's
// bytes in picks the call all-reduces the buffer.
//
// Composes with PackedPolicy / PackedBf16Policy (16-bit rounding fed back to the
// residual, as for the per-rank packed reducer), the residual types of
// SparsifyPolicy, the sparsity schedule and save_state / load_state.

#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE

// Who picks a call's positions.
enum class shared_pick {
  rotating_leader,  // rank (call mod N) its k largest, broadcast
  pooled,           // every rank its share of the picks, all-gathered, the union (about k)
  gathered,         // every rank its own k, all-gathered; each rank's values only where it picked
  routed,           // every rank its own k, sent as entries to the shards' owners (all_to_all_v)
};

template <shared_pick Pick>
struct BasicSharedIndexPolicy {
  static constexpr shared_pick pick = Pick;
  static constexpr const char* name =
      Pick == shared_pick::pooled       ? "pooled index (every rank's share of the picks, all-gathered, their union)"
      : Pick == shared_pick::gathered ? "gathered index (every rank's own top-k, all-gathered; its values where it picked)"
      : Pick == shared_pick::routed   ? "routed index (every rank's own top-k, sent to the shards' owners)"
                                        : "shared index (cyclic leader's top-k, broadcast)";
};
using SharedIndexPolicy = BasicSharedIndexPolicy<shared_pick::rotating_leader>;
using PooledIndexPolicy = BasicSharedIndexPolicy<shared_pick::pooled>;
using GatheredIndexPolicy = BasicSharedIndexPolicy<shared_pick::gathered>;
using RoutedIndexPolicy = BasicSharedIndexPolicy<shared_pick::routed>;

TAGC_END_NAMESPACE
