#pragma once
// defines: the peeling and estimation functors (DecodePolicy).
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
#include "sketch_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {


// Per-entry decode state.
enum : std::uint8_t {
  entry_absent = 0,      // not in the support
  entry_unresolved = 1,  // value unknown
  entry_resolved = 2,    // value known (peeled or estimated), not yet subtracted from its cells
  entry_applied = 3,     // value known and subtracted
  entry_applied_now = 4, // subtracted in the current round (its cells are released next)
};
inline constexpr std::uint32_t no_writer = 0xffffffffu;

// The conservative estimate (see the top of this file): the signed cell of least
// magnitude when all three agree in sign, else 0 (the entry is only retransmitted).
TAGC_HOST_DEVICE inline float conservative_estimate(float a, float b, float c) {
  const bool positive = a > 0.0f && b > 0.0f && c > 0.0f;
  const bool negative = a < 0.0f && b < 0.0f && c < 0.0f;
  if (!positive && !negative) return 0.0f;
  const float lo = a < b ? a : b, hi = a < b ? b : a;
  return positive ? (c < lo ? c : lo) : (c > hi ? c : hi);
}

// Everything the decode kernels share; every pointer is workspace of the Reducer.
struct decode_view {
  layout lay;
  std::size_t shard;                 // which shard this rank decodes
  const std::uint8_t* own_index;     // the reduced index of this shard
  float* cells;                      // this shard's summed sketch, consumed in place
  std::uint32_t* count;              // [cells] unresolved+unapplied entries in the cell
  std::uint32_t* ids;                // [cells] XOR of their ids
  std::uint32_t* writer;             // [cells] smallest entry that may subtract this round
  std::uint8_t* state;               // [shard] entry_*
  const std::uint32_t* support;      // compacted list of support entries
  std::uint32_t* edges;              // [3 * support] cell of each entry per partition, sign in bit 31
  float* out;                        // [shard] the caller's output

  TAGC_HOST_DEVICE bool in_support(std::size_t e) const {
    return shard * lay.shard_size + e < lay.length && index_marked(own_index, lay, 0, e);
  }
  // The hashes are computed once per entry (add_edges) and cached: every
  // peeling round reads them again.
  TAGC_HOST_DEVICE std::size_t cell(std::size_t i, int h) const { return edges[3 * i + std::size_t(h)] & 0x7fffffffu; }
  TAGC_HOST_DEVICE float sign(std::size_t i, int h) const { return (edges[3 * i + std::size_t(h)] >> 31) ? -1.0f : 1.0f; }
};

struct mark_support {  // over shard entries
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const {
    v.state[e] = v.in_support(e) ? entry_unresolved : entry_absent;
    v.out[e] = 0.0f;
  }
};
struct is_support_entry {
  const std::uint8_t* state;
  TAGC_HOST_DEVICE bool operator()(std::uint32_t e) const { return state[e] == entry_unresolved; }
};
struct reset_cells {  // over cells
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t c) const {
    v.count[c] = 0;
    v.ids[c] = 0;
    v.writer[c] = no_writer;
  }
};
struct add_edges {  // over the support list
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    for (int h = 0; h < 3; ++h) {
      const std::size_t c = sketch_cell(v.lay, e, h);
      v.edges[3 * i + std::size_t(h)] = std::uint32_t(c) | (sketch_sign_of(v.lay, e, h) < 0.0f ? 0x80000000u : 0u);
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.count[c]).fetch_add(1u, cuda::memory_order_relaxed);
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.ids[c]).fetch_xor(e, cuda::memory_order_relaxed);
    }
  }
};
// Resolve every entry that sits alone in one of its cells (reads only).
struct peel_round {
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_unresolved) return;
    for (int h = 0; h < 3; ++h) {
      const std::size_t c = v.cell(i, h);
      if (v.count[c] == 1) {  // ids[c] == e necessarily
        v.out[e] = v.sign(i, h) * v.cells[c];
        v.state[e] = entry_resolved;
        return;
      }
    }
  }
};
// Estimate what peeling left from its three signed cells (reads only).
struct estimate_round {
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_unresolved) return;
    float s[3];
    for (int h = 0; h < 3; ++h) s[h] = v.sign(i, h) * v.cells[v.cell(i, h)];
    v.out[e] = conservative_estimate(s[0], s[1], s[2]);  // stays entry_unresolved: it is retransmitted
  }
};
// Subtraction, serialised per cell: claim, apply where all three claims won, release.
struct claim_cells {
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_resolved) return;
    for (int h = 0; h < 3; ++h)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.writer[v.cell(i, h)])
          .fetch_min(e, cuda::memory_order_relaxed);
  }
};
struct apply_resolved {
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_resolved) return;
    for (int h = 0; h < 3; ++h)
      if (v.writer[v.cell(i, h)] != e) return;  // another entry subtracts from that cell first
    for (int h = 0; h < 3; ++h) {
      const std::size_t c = v.cell(i, h);
      v.cells[c] -= v.sign(i, h) * v.out[e];
      v.count[c] -= 1;
      v.ids[c] ^= e;
    }
    v.state[e] = entry_applied_now;
  }
};
struct release_cells {
  decode_view v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    const std::uint8_t s = v.state[e];
    if (s != entry_resolved && s != entry_applied_now) return;
    for (int h = 0; h < 3; ++h)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.writer[v.cell(i, h)])
          .store(no_writer, cuda::memory_order_relaxed);
    if (s == entry_applied_now) v.state[e] = entry_applied;
  }
};
// Work left in the peeling loop: unresolved entries count twice (resolve + apply).
struct work_left {
  decode_view v;
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint32_t e) const {
    const std::uint8_t s = v.state[e];
    return s == entry_unresolved ? 2ull : s == entry_resolved ? 1ull : 0ull;
  }
};
struct count_state {
  decode_view v;
  std::uint8_t which;
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint32_t e) const { return v.state[e] == which ? 1ull : 0ull; }
};

struct widen {
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint8_t x) const { return x; }
};

// Unresolved entries of the owner's shard as a bitmap (one byte per call).
struct unresolved_bitmap {
  const std::uint8_t* state;
  std::uint8_t* bits;
  std::size_t shard_size;
  TAGC_HOST_DEVICE void operator()(std::size_t byte) const {
    unsigned b = 0;
    for (int k = 0; k < 8; ++k) {
      const std::size_t e = byte * 8 + std::size_t(k);
      if (e < shard_size && state[e] == entry_unresolved) b |= 1u << k;
    }
    bits[byte] = std::uint8_t(b);
  }
};
TAGC_HOST_DEVICE inline bool bitmap_has(const std::uint8_t* bits, std::size_t i) { return (bits[i / 8] >> (i % 8)) & 1u; }

// The owner's estimates go into its own residual with the opposite sign, so
// their error is corrected by the senders' retransmission.
struct owe_estimates {
  const std::uint8_t* state;
  const float* out;       // unscaled estimates
  float* residual;        // the owner's whole residual
  std::size_t first;      // global index of the shard's first entry
  std::size_t length;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const {
    if (state[e] == entry_unresolved && first + e < length) residual[first + e] -= out[e];
  }
};

struct scale_output {
  float* out;
  float scale;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const { out[e] *= scale; }
};

// Dense shards (sketch would not be smaller): the summed cells are the values.
struct decode_dense {
  const float* cells;
  float* out;
  float scale;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const { out[e] = cells[e] * scale; }
};

}  // namespace detail
TAGC_END_NAMESPACE
