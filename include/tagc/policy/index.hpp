#pragma once
// defines: tagc::IndexPolicy<Bits> and its kernels — the per-element bitmap of
//          nonzero positions, reduced across ranks with integer SUM.
//
// NCCL has no OR, so the index is summed. Counters are packed into bytes and
// summed as uint8 (wrapping per byte, never across bytes):
//  - IndexPolicy<4>: a nibble counter per element, exact for up to 15 ranks.
//    More ranks are refused at construction (errc::unsupported_world_size), never
//    silently corrupted.
//  - IndexPolicy<1>: the paper's 1 bit per element. Two ranks marking the same
//    element carry into its neighbour (1 + 1 = 10b), so the reduced index is not
//    the union. The Reducer stays consistent anyway: a rank only sketches the
//    values that the *reduced* index marks and returns the rest to its residual,
//    so the decoder is never fed values it does not expect and nothing is lost.

#include <cstdint>

#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "sparsify.hpp"

TAGC_BEGIN_NAMESPACE

template <int Bits>
struct IndexPolicy {
  static_assert(Bits == 1 || Bits == 4, "tagc: IndexPolicy<Bits> supports 1 (paper) and 4 (nibble counters) bits");
  static constexpr int bits = Bits;
  static constexpr int per_byte = 8 / Bits;
  static constexpr std::uint8_t mask = std::uint8_t((1u << Bits) - 1u);
  // Largest world whose counters cannot overflow; 0 = any world (consistent, not exact).
  static constexpr int max_exact_world = Bits == 4 ? 15 : 0;
  // Whether the reduced index is exactly the union of the ranks' supports.
  static constexpr bool exact_union = Bits == 4;
};

namespace kernels {

// Is element e of shard s marked in an index laid out shard by shard?
template <int Bits>
TAGC_HOST_DEVICE inline bool index_marked(const std::uint8_t* index, std::size_t index_bytes, std::size_t s,
                                          std::size_t e) {
  using P = IndexPolicy<Bits>;
  const std::uint8_t byte = index[s * index_bytes + e / P::per_byte];
  return ((byte >> ((e % P::per_byte) * Bits)) & P::mask) != 0;
}

// Build this rank's index, one byte per call: bit/nibble = 1 where the entry is
// kept. The owner of a shard also marks its *pending* entries (unpeeled
// remainders it carries to this step, see policy/decode.hpp) so the reduced
// index includes them.
template <int Bits>
struct build_index {
  using P = IndexPolicy<Bits>;
  const float* grad;
  const float* residual;
  const kernels::select_state* state;
  const std::uint8_t* pending;  // own shard's pending flags, or nullptr
  std::uint8_t* index;          // [shards][index_bytes]
  unsigned long long* kept_count;
  layout lay;
  std::size_t own_shard;

  TAGC_HOST_DEVICE void operator()(std::size_t byte) const {
    const std::size_t s = byte / lay.index_bytes;
    const std::size_t first = (byte % lay.index_bytes) * P::per_byte;
    const std::uint32_t threshold = state->threshold;
    std::uint8_t out = 0;
    int kept = 0;
    for (int k = 0; k < P::per_byte; ++k) {
      const std::size_t e = first + std::size_t(k);
      if (e >= lay.shard_size) break;
      const std::size_t g = s * lay.shard_size + e;
      bool mark = false;
      if (g < lay.length && is_kept(grad[g] + residual[g], threshold)) {
        mark = true;
        ++kept;
      }
      if (pending && s == own_shard && pending[e]) mark = true;
      if (mark) out = std::uint8_t(out | (1u << (k * Bits)));
    }
    index[byte] = out;
    if (kept) {
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> c(*kept_count);
      c.fetch_add((unsigned long long)kept, cuda::memory_order_relaxed);
    }
  }
};

// Count marked entries of one byte of the reduced index (for statistics).
template <int Bits>
struct count_marks {
  using P = IndexPolicy<Bits>;
  const std::uint8_t* index;
  layout lay;
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t byte) const {
    const std::size_t first = (byte % lay.index_bytes) * P::per_byte;
    unsigned long long c = 0;
    for (int k = 0; k < P::per_byte; ++k) {
      if (first + std::size_t(k) >= lay.shard_size) break;
      if ((index[byte] >> (k * Bits)) & P::mask) ++c;
    }
    return c;
  }
};

}  // namespace kernels
TAGC_END_NAMESPACE
