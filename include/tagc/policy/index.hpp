#pragma once
// defines: tagc::IndexPolicy<Bits, Exchange>, tagc::ExactIndexPolicy (index_exchange: choices.hpp)
//          (functors: detail/index_kernels.hpp) — the per-element bitmap of nonzero positions,
//          reduced across ranks with integer SUM.
//
// NCCL has no OR, so the index is summed. Counters of `bits` bits are packed
// into bytes and summed as uint8 (wrapping per byte, never across bytes):
//  - IndexPolicy<4>: nibble counters, exact for up to 15 ranks; more ranks are
//    refused at initialisation (errc::unsupported_world_size), never corrupted.
//    IndexPolicy<2> (3 ranks) and IndexPolicy<8> (255 ranks) likewise.
//  - IndexPolicy<1>: the paper's 1 bit per element. Two ranks marking the same
//    element carry into its neighbour (1 + 1 = 10b), so the summed index is not
//    the union. At N = 2 it is repaired exactly: the other rank's bits are
//    (sum - mine) mod 256, so union = mine | (sum - mine). For N > 2 the Reducer
//    stays consistent anyway: a rank only sends values the *reduced* index marks
//    and returns the rest to its residual, so the decoder never sees values it
//    does not expect and nothing is lost.
//  - ExactIndexPolicy (= IndexPolicy<index_auto>): the narrowest exact width for
//    the world size: 1 bit (N <= 2, repaired), 2 (N <= 3), 4 (N <= 15), 8 (N <= 255).
//
// Exchange: the paper all-reduces the whole index (2b bits per element per rank
// on a ring). With an exact index a sender's own entries are always marked, so
// only the shard's owner needs the summed index of its shard:
// index_exchange::reduce_scatter halves the index traffic. It requires an exact
// width (checked at initialisation).

#include <cstdint>

#include "../core/bfloat16.hpp"
#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "choices.hpp"  // index_exchange, index_auto
#include "sparsify.hpp"
#include "wire_value.hpp"

TAGC_BEGIN_NAMESPACE

template <int Bits, index_exchange Exchange = index_exchange::all_reduce>
struct IndexPolicy {
  static_assert(Bits == index_auto || Bits == 1 || Bits == 2 || Bits == 4 || Bits == 8,
                "tagc: IndexPolicy<Bits>: Bits is 1 (paper), 2, 4, 8, or index_auto (chosen from the world size)");
  static constexpr int bits = Bits;
  static constexpr index_exchange exchange = Exchange;

  // Counter width for a world size; 0 when no byte-packed width can be exact.
  static constexpr int width_for(int world) {
    if constexpr (Bits != index_auto) return Bits;
    return world <= 2 ? 1 : world <= 3 ? 2 : world <= 15 ? 4 : world <= 255 ? 8 : 0;
  }
  // Whether the reduced index is exactly the union of the ranks' supports.
  static constexpr bool exact(int width, int world) {
    return width > 0 && (world <= (1 << width) - 1 || (width == 1 && world == 2));
  }
};

using ExactIndexPolicy = IndexPolicy<index_auto>;

TAGC_END_NAMESPACE
