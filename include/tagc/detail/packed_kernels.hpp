#pragma once
// defines: the packed-values functors (PackedPolicy).
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
#include "../shard/layout.hpp"
#include "index_kernels.hpp"
#include "wire_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {


// Marked real entries in byte `byte` of the all-reduced index (any shard), and
// how many of them come before entry slot k of that byte.
TAGC_HOST_DEVICE inline unsigned marks_before(const std::uint8_t* index, const layout& l, std::size_t byte, int k_end) {
  const int bits = l.index_bits, per_byte = 8 / bits;
  const std::size_t s = byte / l.index_bytes;
  const std::size_t first = (byte % l.index_bytes) * std::size_t(per_byte);
  unsigned c = 0;
  for (int k = 0; k < per_byte && k < k_end; ++k) {
    const std::size_t e = first + std::size_t(k);
    if (e >= l.shard_size || s * l.shard_size + e >= l.length) break;
    c += ((index[byte] >> (k * bits)) & ((1u << bits) - 1u)) != 0;
  }
  return c;
}

// Input of the exclusive scan: marks per byte, and 0 for the one-past-the-end slot.
struct marks_in_byte {
  const std::uint8_t* index;
  layout lay;
  std::size_t bytes;
  TAGC_HOST_DEVICE std::uint32_t operator()(std::size_t byte) const {
    return byte < bytes ? marks_before(index, lay, byte, 8) : 0u;
  }
};

// start[s] = scan offset of shard s's first byte (s = 0..shards).
struct shard_starts {
  const std::uint32_t* offsets;  // exclusive scan over all bytes, plus the total
  std::uint32_t* start;
  std::size_t index_bytes;
  TAGC_HOST_DEVICE void operator()(std::size_t s) const { start[s] = offsets[s * index_bytes]; }
};

// Write this rank's values at the union positions, one index byte per call.
template <class Value, class Contribution = contribution<>>
struct pack_values {
  Contribution value;
  const std::uint8_t* index;
  const std::uint32_t* offsets;
  const std::uint32_t* start;
  Value* packed;       // [shards][slots], or the unions back to back when slots = 0
  std::size_t slots;   // the largest union over shards (0: back to back)
  float wire_scale = 1.0f;  // 2^k (fp16), else 1

  TAGC_HOST_DEVICE void operator()(std::size_t byte) const {
    const layout& l = value.lay;
    const int bits = l.index_bits, per_byte = 8 / bits;
    const std::size_t s = byte / l.index_bytes;
    const std::size_t first = (byte % l.index_bytes) * std::size_t(per_byte);
    std::size_t pos = slots ? s * slots + (offsets[byte] - start[s]) : offsets[byte];
    for (int k = 0; k < per_byte; ++k) {
      const std::size_t e = first + std::size_t(k);
      if (e >= l.shard_size || s * l.shard_size + e >= l.length) break;
      if (((index[byte] >> (k * bits)) & ((1u << bits) - 1u)) == 0) continue;
      packed[pos++] = Value(value(s, e) * wire_scale);
    }
  }
};

// Zero the padding slots of each shard's packed vector (beyond its own union).
template <class Value>
struct zero_padding_slots {
  const std::uint32_t* start;
  Value* packed;
  std::size_t slots;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t s = i / slots, slot = i % slots;
    if (slot >= std::size_t(start[s + 1] - start[s])) packed[i] = Value(0.0f);
  }
};

// Owner: scatter the summed slots back to the shard, one index byte per call.
template <class Value>
struct unpack_values {
  const std::uint8_t* index;    // whole all-reduced index
  const std::uint32_t* offsets;
  const std::uint32_t* start;
  const Value* packed;          // this shard's summed slots
  float* out;
  float scale;  // the op's (mean: 1/N) times 2^-k, the fp16 range scale undone
  layout lay;
  std::size_t shard;

  TAGC_HOST_DEVICE void operator()(std::size_t local_byte) const {
    const int bits = lay.index_bits, per_byte = 8 / bits;
    const std::size_t byte = shard * lay.index_bytes + local_byte;
    const std::size_t first = local_byte * std::size_t(per_byte);
    std::size_t pos = offsets[byte] - start[shard];
    for (int k = 0; k < per_byte; ++k) {
      const std::size_t e = first + std::size_t(k);
      if (e >= lay.shard_size) break;
      const bool real = shard * lay.shard_size + e < lay.length;
      const bool marked = real && ((index[byte] >> (k * bits)) & ((1u << bits) - 1u)) != 0;
      out[e] = marked ? float(packed[pos++]) * scale : 0.0f;
    }
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
