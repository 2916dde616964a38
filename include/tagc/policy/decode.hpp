#pragma once
// defines: tagc::DecodePolicy<Mode> and its kernels — recover the owner's shard
//          from the summed sketch and the reduced index (the support).
//
// Modes:
//  - peel:                 exact values by peeling; what peeling cannot resolve is
//                          delivered as 0 this step and carried (see below).
//  - estimate:             median of the three signed cells for every support
//                          entry (the paper's fallback alone, noisy).
//  - peel_then_estimate:   peel, then estimate what is left (the reference).
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
// Nothing is lost: what peeling does not resolve (minus any estimate delivered)
// stays in the owner's *carry* — the leftover cells — and the entries are marked
// *pending*. The next step the owner marks pending entries in its own index (so
// the reduced index includes them) and adds the carry to the freshly summed
// sketch before decoding, so the remainder is delivered, exactly, as soon as the
// load allows. With the 1-bit index a pending entry can be lost to a carry in
// the summed index; the carry then waits for a step where all are marked.

#include <cstdint>
#include <cuda/atomic>

#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "index.hpp"
#include "sketch.hpp"

TAGC_BEGIN_NAMESPACE

enum class decode_mode { peel, estimate, peel_then_estimate };

template <decode_mode Mode = decode_mode::peel_then_estimate>
struct DecodePolicy {
  static constexpr decode_mode mode = Mode;
  static constexpr bool peels = Mode != decode_mode::estimate;
  static constexpr bool estimates = Mode != decode_mode::peel;
};

namespace kernels {

// Per-entry decode state.
enum : std::uint8_t {
  entry_absent = 0,      // not in the support
  entry_unresolved = 1,  // value unknown
  entry_resolved = 2,    // value known (peeled or estimated), not yet subtracted from its cells
  entry_applied = 3,     // value known and subtracted
  entry_applied_now = 4, // subtracted in the current round (its cells are released next)
};
inline constexpr std::uint32_t no_writer = 0xffffffffu;

TAGC_HOST_DEVICE inline float median3(float a, float b, float c) {
  const float lo = a < b ? a : b, hi = a < b ? b : a;
  return c < lo ? lo : (c > hi ? hi : c);
}

// Everything the decode kernels share; every pointer is workspace of the Reducer.
template <int Bits>
struct decode_view {
  layout lay;
  std::size_t shard;                 // which shard this rank decodes
  const std::uint8_t* reduced_index; // whole index; this shard's bytes are read
  float* cells;                      // this shard's summed sketch, consumed in place
  float* carry;                      // [cells] remainder carried across steps (state)
  std::uint8_t* pending;             // [shard] entries whose remainder is in carry (state)
  std::uint32_t* count;              // [cells] unresolved+unapplied entries in the cell
  std::uint32_t* ids;                // [cells] XOR of their ids
  std::uint32_t* writer;             // [cells] smallest entry that may subtract this round
  std::uint8_t* keep;                // [cells] cell still holds unresolved mass after peeling
  std::uint8_t* state;               // [shard] entry_*
  const std::uint32_t* support;      // compacted list of support entries
  float* out;                        // [shard] the caller's output

  TAGC_HOST_DEVICE bool in_support(std::size_t e) const {
    return shard * lay.shard_size + e < lay.length &&
           index_marked<Bits>(reduced_index, lay.index_bytes, shard, e);
  }
  TAGC_HOST_DEVICE std::size_t cell(std::size_t e, int h) const { return sketch_cell(lay, e, h); }
  TAGC_HOST_DEVICE float sign(std::size_t e, int h) const { return sketch_sign_of(lay, e, h); }
};

template <int Bits> struct mark_support {  // over shard entries
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const {
    v.state[e] = v.in_support(e) ? entry_unresolved : entry_absent;
    v.out[e] = 0.0f;
  }
};
template <int Bits> struct pending_unmarked {  // over shard entries -> 0/1
  decode_view<Bits> v;
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t e) const {
    return v.pending[e] && !v.in_support(e) ? 1ull : 0ull;
  }
};
struct is_support_entry {
  const std::uint8_t* state;
  TAGC_HOST_DEVICE bool operator()(std::uint32_t e) const { return state[e] == entry_unresolved; }
};
template <int Bits> struct apply_carry {  // over cells
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t c) const {
    v.cells[c] += v.carry[c];
    v.carry[c] = 0.0f;
  }
};
template <int Bits> struct reset_cells {  // over cells
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t c) const {
    v.count[c] = 0;
    v.ids[c] = 0;
    v.writer[c] = no_writer;
  }
};
template <int Bits> struct add_edges {  // over the support list
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    for (int h = 0; h < 3; ++h) {
      const std::size_t c = v.cell(e, h);
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.count[c]).fetch_add(1u, cuda::memory_order_relaxed);
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.ids[c]).fetch_xor(e, cuda::memory_order_relaxed);
    }
  }
};
// Resolve every entry that sits alone in one of its cells (reads only).
template <int Bits> struct peel_round {
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_unresolved) return;
    for (int h = 0; h < 3; ++h) {
      const std::size_t c = v.cell(e, h);
      if (v.count[c] == 1) {  // ids[c] == e necessarily
        v.out[e] = v.sign(e, h) * v.cells[c];
        v.state[e] = entry_resolved;
        return;
      }
    }
  }
};
// Estimate what peeling left: the median of the three signed cells (reads only).
template <int Bits> struct estimate_round {
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_unresolved) return;
    float s[3];
    for (int h = 0; h < 3; ++h) s[h] = v.sign(e, h) * v.cells[v.cell(e, h)];
    v.out[e] = median3(s[0], s[1], s[2]);
    v.state[e] = entry_resolved;
  }
};
// Subtraction, serialised per cell: claim, apply where all three claims won, release.
template <int Bits> struct claim_cells {
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_resolved) return;
    for (int h = 0; h < 3; ++h)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.writer[v.cell(e, h)])
          .fetch_min(e, cuda::memory_order_relaxed);
  }
};
template <int Bits> struct apply_resolved {
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] != entry_resolved) return;
    for (int h = 0; h < 3; ++h)
      if (v.writer[v.cell(e, h)] != e) return;  // another entry subtracts from that cell first
    for (int h = 0; h < 3; ++h) {
      const std::size_t c = v.cell(e, h);
      v.cells[c] -= v.sign(e, h) * v.out[e];
      v.count[c] -= 1;
      v.ids[c] ^= e;
    }
    v.state[e] = entry_applied_now;
  }
};
template <int Bits> struct release_cells {
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    const std::uint8_t s = v.state[e];
    if (s != entry_resolved && s != entry_applied_now) return;
    for (int h = 0; h < 3; ++h)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(v.writer[v.cell(e, h)])
          .store(no_writer, cuda::memory_order_relaxed);
    if (s == entry_applied_now) v.state[e] = entry_applied;
  }
};
// Work left in the peeling loop: unresolved entries count twice (resolve + apply).
template <int Bits> struct work_left {
  decode_view<Bits> v;
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint32_t e) const {
    const std::uint8_t s = v.state[e];
    return s == entry_unresolved ? 2ull : s == entry_resolved ? 1ull : 0ull;
  }
};
template <int Bits> struct count_state {
  decode_view<Bits> v;
  std::uint8_t which;
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint32_t e) const { return v.state[e] == which ? 1ull : 0ull; }
};
// After peeling: unresolved entries become pending; cells still holding them are kept.
template <int Bits> struct mark_pending {  // over the support list
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t e = v.support[i];
    if (v.state[e] == entry_unresolved) v.pending[e] = 1;
  }
};
template <int Bits> struct mark_keep {  // over cells
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t c) const { v.keep[c] = v.count[c] > 0 ? 1 : 0; }
};
template <int Bits> struct carry_leftover {  // over cells
  decode_view<Bits> v;
  TAGC_HOST_DEVICE void operator()(std::size_t c) const {
    if (v.keep[c]) v.carry[c] += v.cells[c];
  }
};

struct widen {
  TAGC_HOST_DEVICE unsigned long long operator()(std::uint8_t x) const { return x; }
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

}  // namespace kernels
TAGC_END_NAMESPACE
