#pragma once
// defines: the index and residual-update functors (IndexPolicy).
//          Implementation detail of the Reducer's stages (include/tagc/stage/);
//          users read the policy tags in policy/*.hpp, not this file.

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <type_traits>
#include <vector>
#include <cuda/atomic>
#include <cuda/std/span>

#include "../core/config.hpp"
#include "../core/bits.hpp"
#include "../shard/layout.hpp"
#include "select_kernels.hpp"
#include "wire_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {


// Is element e of shard s marked in an index laid out shard by shard?
// A counter of `bits` (a divisor of 8) starts at bit e * bits: shifts, not a
// division by the counters per byte (a 64-bit divide costs tens of cycles, and
// the sketch build and the residual commit ask this once per kept entry).
TAGC_HOST_DEVICE inline bool index_marked(const std::uint8_t* index, const layout& l, std::size_t s, std::size_t e) {
  const auto bits = std::size_t(l.index_bits);
  const std::size_t bit = e * bits;
  const std::uint8_t byte = index[s * l.index_bytes + (bit >> 3)];
  return ((unsigned(byte) >> (bit & 7u)) & ((1u << bits) - 1u)) != 0;
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

}  // namespace detail
TAGC_END_NAMESPACE
