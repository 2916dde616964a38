#pragma once
// defines: tagc::IndexPolicy<Bits, Exchange>, tagc::ExactIndexPolicy, tagc::index_exchange
//          and the index kernels — the per-element bitmap of nonzero positions,
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
#include "sparsify.hpp"
#include "wire_value.hpp"

TAGC_BEGIN_NAMESPACE

enum class index_exchange { all_reduce, reduce_scatter };
inline constexpr int index_auto = 0;

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

namespace kernels {

// Is element e of shard s marked in an index laid out shard by shard?
TAGC_HOST_DEVICE inline bool index_marked(const std::uint8_t* index, const layout& l, std::size_t s, std::size_t e) {
  const int bits = l.index_bits;
  const int per_byte = 8 / bits;
  const std::uint8_t byte = index[s * l.index_bytes + e / std::size_t(per_byte)];
  return ((byte >> ((e % std::size_t(per_byte)) * std::size_t(bits))) & ((1u << bits) - 1u)) != 0;
}

// Build this rank's index, one byte per call: counter = 1 where the entry is kept.
template <class R = float>
struct build_index {
  const float* grad;
  const R* residual;
  const select_state* state;
  std::uint8_t* index;          // [shards][index_bytes]
  unsigned long long* kept_count;
  layout lay;

  TAGC_HOST_DEVICE void operator()(std::size_t byte) const {
    const int bits = lay.index_bits, per_byte = 8 / bits;
    const std::size_t s = byte / lay.index_bytes;
    const std::size_t first = (byte % lay.index_bytes) * std::size_t(per_byte);
    const std::uint32_t threshold = state->threshold;
    unsigned out = 0;
    int kept = 0;
    for (int k = 0; k < per_byte; ++k) {
      const std::size_t e = first + std::size_t(k);
      if (e >= lay.shard_size) break;
      const std::size_t g = s * lay.shard_size + e;
      if (g < lay.length && is_kept(grad[g] + residual_load(residual, g), threshold)) {
        out |= 1u << (k * bits);
        ++kept;
      }
    }
    index[byte] = std::uint8_t(out);
    if (kept) {
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> c(*kept_count);
      c.fetch_add((unsigned long long)kept, cuda::memory_order_relaxed);
    }
  }
};

// The exact union at N = 2 from a 1-bit sum: the other rank's bits are sum - mine.
struct repair_pair_index {
  const std::uint8_t* mine;
  std::uint8_t* summed;
  TAGC_HOST_DEVICE void operator()(std::size_t byte) const {
    summed[byte] = std::uint8_t(mine[byte] | std::uint8_t(summed[byte] - mine[byte]));
  }
};

// Marked real entries (not padding) of one byte of a reduced index whose first
// byte belongs to shard `first_shard`.
struct count_marks {
  const std::uint8_t* index;
  layout lay;
  std::size_t first_shard;
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t byte) const {
    const int bits = lay.index_bits, per_byte = 8 / bits;
    const std::size_t s = first_shard + byte / lay.index_bytes;
    const std::size_t first = (byte % lay.index_bytes) * std::size_t(per_byte);
    unsigned long long c = 0;
    for (int k = 0; k < per_byte; ++k) {
      const std::size_t e = first + std::size_t(k);
      if (e >= lay.shard_size || s * lay.shard_size + e >= lay.length) break;
      if ((index[byte] >> (k * bits)) & ((1u << bits) - 1u)) ++c;
    }
    return c;
  }
};

// The value this rank sends for padded element (s, e): the accumulated gradient
// if it is kept and (unless the index is exact, when every kept entry is marked)
// the reduced index marks it; else 0.
template <class R = float>
struct contribution {
  const float* grad;
  const R* residual;
  const std::uint8_t* reduced_index;  // whole reduced index, or nullptr when exact
  const select_state* state;
  layout lay;

  TAGC_HOST_DEVICE float operator()(std::size_t s, std::size_t e) const {
    const std::size_t g = s * lay.shard_size + e;
    if (g >= lay.length) return 0.0f;
    const float acc = grad[g] + residual_load(residual, g);
    if (!is_kept(acc, state->threshold)) return 0.0f;
    return !reduced_index || index_marked(reduced_index, lay, s, e) ? acc : 0.0f;
  }
};

// After the exchange: residual = acc where nothing was delivered, else 0. An
// entry was not delivered if the reduced index did not mark it (1-bit carries:
// `deferred`) or its owner could not resolve it (`retransmit`, one bitmap of
// shard_size bits per shard: the sender keeps it and sends it again later).
//
// Value: the wire type. What was delivered is the value as sent, rounded to it
// (after scaling by 2^k, see policy/wire_value.hpp): the rounding error stays
// in the residual (for float it is exactly 0). R: the residual's storage type.
template <class Value = float, class R = float>
struct update_residual {
  const float* grad;
  R* residual;
  const std::uint8_t* reduced_index;  // nullptr when exact
  const std::uint8_t* retransmit;     // [shards][ceil(shard_size / 8)] or nullptr
  const select_state* state;
  unsigned long long* counters;       // [0] kept, [1] deferred, [2] retransmitted
  layout lay;
  float wire_scale = 1.0f;            // 2^k: values travel as Value(acc * 2^k)
  float wire_unscale = 1.0f;          // 2^-k
  std::uint32_t seed = 0;             // stochastic rounding of a bf16 residual (residual_seed)

  TAGC_HOST_DEVICE void operator()(std::size_t g) const {
    const float acc = grad[g] + residual_load(residual, g);
    bool delivered = false;
    if (is_kept(acc, state->threshold)) {
      const std::size_t s = g / lay.shard_size, e = g % lay.shard_size;
      const bool marked = !reduced_index || index_marked(reduced_index, lay, s, e);
      const std::size_t mask_bytes = (lay.shard_size + 7) / 8;
      const bool resolved = !retransmit || !((retransmit[s * mask_bytes + e / 8] >> (e % 8)) & 1u);
      delivered = marked && resolved;
      if (!delivered) {
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> d(counters[marked ? 2 : 1]);
        d.fetch_add(1ull, cuda::memory_order_relaxed);
      }
    }
    const float left = delivered ? acc - wire_round<Value>(acc * wire_scale) * wire_unscale : acc;
    residual_store(residual, g, left, seed, residual_site::update);
  }
};

}  // namespace kernels
TAGC_END_NAMESPACE
