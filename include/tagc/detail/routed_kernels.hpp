#pragma once
// defines: the routed index's functors (RoutedIndexPolicy): this rank's entries packed
//          per owner, and an owner's sum of what it received (scaled for mean by
//          decode_kernels.hpp's scale_output); for an all-reduce, the owner's nonzero
//          sums marked and packed as one block for every rank, and (bounded) which of
//          this rank's picks the owners forwarded. Implementation detail of
//          stage/routed_exchange.hpp; users read policy/shared_index.hpp, not this file.
//
// The wire: this rank's block for owner d is c_d entries, first their offsets in d's
// shard (uint32, c_d of them), then their values (c_d of the wire type). The list is
// sorted, so the entries for d are list[bounds[d], bounds[d + 1]) (shared_kernels.hpp's
// list_starts, the shard size as stride) and the block starts at byte
// bounds[d] x (4 + sizeof(value)): no scan is needed to place them.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/config.hpp"
#include "decode_kernels.hpp"
#include "shared_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

// Bytes one routed entry takes on the wire.
template <class Value>
inline constexpr std::size_t routed_entry_bytes = sizeof(std::uint32_t) + sizeof(Value);

// Entry i of a block of `count` (see the wire above): written, and read back.
template <class Value>
TAGC_HOST_DEVICE inline void write_entry(std::uint8_t* block, std::size_t count, std::size_t i, std::uint32_t offset,
                                         Value v) {
  std::memcpy(block + i * sizeof(std::uint32_t), &offset, sizeof offset);
  std::memcpy(block + count * sizeof(std::uint32_t) + i * sizeof(Value), &v, sizeof v);
}
template <class Value>
TAGC_HOST_DEVICE inline void read_entry(const std::uint8_t* block, std::size_t count, std::size_t i,
                                        std::uint32_t& offset, Value& v) {
  std::memcpy(&offset, block + i * sizeof(std::uint32_t), sizeof offset);
  std::memcpy(&v, block + count * sizeof(std::uint32_t) + i * sizeof(Value), sizeof v);
}

// Entry j of the list into its owner's block.
template <class Value>
struct pack_routed {
  const float* acc;
  const std::uint32_t* list;
  const unsigned long long* bounds;
  std::size_t shard_size;
  std::uint8_t* wire;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::uint32_t p = list[j];
    const std::size_t d = std::size_t(p) / shard_size;
    const std::size_t first = std::size_t(bounds[d]), count = std::size_t(bounds[d + 1]) - first, i = j - first;
    write_entry(wire + first * routed_entry_bytes<Value>, count, i, std::uint32_t(std::size_t(p) - d * shard_size),
                Value(acc[p]));
  }
};

// One sender's block added into the owner's shard: its offsets are distinct, so the
// entries of one block add without conflict; blocks are added one after another in
// rank order, the same sums in the same order on every execution space.
template <class Value>
struct add_routed {
  const std::uint8_t* block;
  std::size_t count;
  float* out;
  std::size_t size;  // the shard's: an offset past it (which agreeing ranks never send) is dropped, not written
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    std::uint32_t offset;
    Value v;
    read_entry(block, count, i, offset, v);
    if (offset < size) out[offset] += float(v);
  }
};

// All-reduce (replicated) calls own the buffer in chunks dealt round-robin: chunk c (of
// `chunk` positions) belongs to owner c mod N, at offset (c / N) x chunk in its region, so
// that a run of large entries (the embedding's frequent rows) spreads over every owner.
// Entry j of the sorted list into its owner's block: its chunk's entries start at
// list[chunk_bounds[c]] and, in owner-major order, at entry chunk_first[c] of the send
// buffer; the owners' blocks are owner_bounds[d] .. owner_bounds[d + 1] there.
template <class Value>
struct pack_routed_dealt {
  const float* acc;
  const std::uint32_t* list;
  const unsigned long long* chunk_bounds;
  const unsigned long long* chunk_first;
  const unsigned long long* owner_bounds;
  std::size_t owners, chunk;
  std::uint8_t* wire;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::size_t p = list[j], c = p / chunk, d = c % owners;
    const std::size_t first = std::size_t(owner_bounds[d]), count = std::size_t(owner_bounds[d + 1]) - first;
    const std::size_t i = std::size_t(chunk_first[c]) + (j - std::size_t(chunk_bounds[c])) - first;
    write_entry(wire + first * routed_entry_bytes<Value>, count, i, std::uint32_t((c / owners) * chunk + p % chunk),
                Value(acc[p]));
  }
};

// Owner q's block of summed entries (offsets in its region) into the whole buffer: the
// region offset back to its position; one past the buffer (which agreeing ranks never
// send) is dropped, not written.
template <class Value>
struct place_dealt {
  const std::uint8_t* block;
  std::size_t count;
  float* out;
  std::size_t length, owner, owners, chunk;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    std::uint32_t offset;
    Value v;
    read_entry(block, count, i, offset, v);
    const std::size_t p = ((std::size_t(offset) / chunk) * owners + owner) * chunk + std::size_t(offset) % chunk;
    if (p < length) out[p] += float(v);
  }
};

// All-reduce (replicated) calls: bit b of word w marks entry 32 w + b of the owner's
// summed region where it is nonzero (nothing past `size`): what every rank must hear of.
// A zero sum is left out; every rank's output is zero there anyway.
struct mark_nonzero {
  const float* sums;
  std::size_t size;
  std::uint32_t* words;
  TAGC_HOST_DEVICE void operator()(std::size_t w) const {
    std::uint32_t bits = 0;
    const std::size_t first = w * 32, last = first + 32 < size ? first + 32 : size;
    for (std::size_t i = first; i < last; ++i)
      if (sums[i] != 0.0f) bits |= 1u << (i - first);
    words[w] = bits;
  }
};

// Entry i of the owner's listed sums into its block, the entries' wire layout above
// (count offsets, then count values on the wire type): what every rank adds back.
template <class Value>
struct pack_sums {
  const float* sums;
  const std::uint32_t* list;
  std::size_t count;
  std::uint8_t* block;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    write_entry(block, count, i, list[i], Value(sums[list[i]]));
  }
};

// A bounded all-reduce (reducer_arguments::union_bound): slot j of this rank's own
// picks stays a position where its owner forwarded the sum there, and becomes
// no_position where it did not (the sender then keeps that entry in its residual). The
// owner's block lists its region offsets ascending (its marks, listed in order), so a
// binary search finds one; owner q's block starts at entry starts[q] of the gathered
// blocks and holds counts[q] entries.
template <class Value>
struct keep_forwarded {
  const std::uint32_t* list;
  std::size_t length;
  const std::uint8_t* blocks;
  const unsigned long long* starts;
  const unsigned long long* counts;
  std::size_t owners, chunk;
  std::uint32_t* settled;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::size_t p = list[j];
    if (p >= length) {
      settled[j] = no_position;
      return;
    }
    const std::size_t c = p / chunk, q = c % owners, offset = (c / owners) * chunk + p % chunk;
    const std::size_t first = std::size_t(starts[q]), count = std::size_t(counts[q]);
    const std::uint8_t* block = blocks + first * routed_entry_bytes<Value>;
    const auto offset_at = [block](std::size_t i) {
      std::uint32_t o;
      std::memcpy(&o, block + i * sizeof(std::uint32_t), sizeof o);
      return std::size_t(o);
    };
    std::size_t lo = 0, hi = count;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (offset_at(mid) < offset) lo = mid + 1;
      else hi = mid;
    }
    settled[j] = lo < count && offset_at(lo) == offset ? std::uint32_t(p) : no_position;
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
