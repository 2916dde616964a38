#pragma once
// defines: tagc::detail::host::packed_slots (and packed_values<Wire>, the values
//          stage's host implementation over it) — PackedPolicy's slots on the CPU:
//          where each shard's union entries go (word popcounts, a scan over
//          chunks), this rank's values packed into them (from its kept list,
//          or from acc when there is none), and the owner's summed slots
//          unpacked into its shard. The slots are laid out either padded
//          ([shards][largest union]) or back to back (each shard's union after
//          the previous one's): see stage/values_packed.hpp for the choice.
//
// Same slots as the portable functors (detail/packed_kernels.hpp: a scan over
// every index byte, then one call per byte that decodes its entries one at a
// time and recomputes g + residual, with a division per byte to find its shard):
// here 64 index bits at a time (detail/support_words.hpp), in fixed chunks of
// words per shard (results do not depend on the thread count), reading acc,
// which pass 0 computed once. The slot of a union entry is the number of union
// entries before it in its shard, as the byte scan gives: the sent slots are
// bit-identical (tests/test_paths.cpp compares them). The chunk table is sized
// once; a call allocates nothing.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../core/status.hpp"
#include "../../shard/layout.hpp"
#include "../compress_handoff.hpp"
#include "../index_kernels.hpp"
#include "../packed_kernels.hpp"
#include "../select_kernels.hpp"
#include "../support_words.hpp"
#include "support_list.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

class packed_slots {
 public:
  // Index words per chunk (64K entries at 1 bit per entry): enough work to pay for a thread.
  static constexpr std::size_t words_per_chunk = 1024;
  static constexpr std::size_t parallel_from = 16;  // chunks (of all shards) below which one thread does it all

  void initialize(const layout& l, int shards) {
    lay_ = l;
    shards_ = std::size_t(shards);
    words_ = index_words(l.index_bytes);
    chunks_ = (words_ + words_per_chunk - 1) / words_per_chunk;
    start_.assign(shards_ * (chunks_ + 1), 0u);
    base_.assign(shards_ + 1, 0u);
  }
  std::size_t workspace_bytes() const {
    return start_.size() * sizeof(std::uint32_t) + base_.size() * sizeof(std::size_t);
  }
  // What initialize(l, shards) allocates (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const layout& l, int shards) {
    const std::size_t chunks = (index_words(l.index_bytes) + words_per_chunk - 1) / words_per_chunk;
    return std::size_t(shards) * (chunks + 1) * sizeof(std::uint32_t) + (std::size_t(shards) + 1) * sizeof(std::size_t);
  }

  // Union entries per shard from the whole reduced index [shards][index_bytes]:
  // each chunk's first slot; returns the largest union (the slots per shard).
  std::size_t count(const std::uint8_t* index) {
    const std::size_t C = chunks_, tasks = shards_ * C;
    std::uint32_t* start = start_.data();
#pragma omp parallel for schedule(static) if (tasks >= parallel_from)
    for (std::size_t t = 0; t < tasks; ++t) {
      const std::size_t s = t / C, k = t % C;
      const std::uint8_t* ix = index + s * lay_.index_bytes;
      const std::size_t valid = shard_entries(lay_, s), w1 = std::min(words_, (k + 1) * words_per_chunk);
      std::uint32_t n = 0;
      for (std::size_t w = k * words_per_chunk; w < w1; ++w)
        n += std::uint32_t(popcount64(word_marks(ix, lay_.index_bytes, lay_.index_bits, valid, w)));
      start[s * (C + 1) + k + 1] = n;
    }
    std::size_t slots = 0;
    for (std::size_t s = 0; s < shards_; ++s) {
      std::uint32_t* st = start + s * (C + 1);
      st[0] = 0;
      for (std::size_t k = 0; k < C; ++k) st[k + 1] += st[k];
      slots = std::max<std::size_t>(slots, st[C]);
      base_[s + 1] = base_[s] + st[C];
    }
    return slots;
  }
  // Union entries of shard s (after count()).
  std::size_t union_size(std::size_t s) const { return start_[s * (chunks_ + 1) + chunks_]; }
  // Union entries of the shards before s (s = shards: the whole union).
  std::size_t union_before(std::size_t s) const { return base_[s]; }

  // Where shard s's first slot lies: s * slots when padded, else after the
  // unions of the shards before it (slots = 0 selects the back-to-back layout).
  std::size_t shard_base(std::size_t s, std::size_t slots) const { return slots ? s * slots : base_[s]; }

  // This rank's values at every shard's union entries: Value(acc * wire_scale)
  // where this rank kept the entry (|acc| above `threshold`, and marked by the
  // reduced index `sender_check` when that is lossy), else 0; the padding slots
  // of each shard (beyond its union) 0. `packed`: [shards][slots], or the
  // unions back to back when `slots` is 0.
  template <class Value>
  void pack(const std::uint8_t* index, const float* acc, std::uint32_t threshold, const std::uint8_t* sender_check,
            float wire_scale, Value* packed, std::size_t slots) const {
    const layout l = lay_;
    fill_slots(index, wire_scale, packed, slots, [&](std::size_t s, std::size_t) {
      const float* a = acc + s * l.shard_size;
      return [=](std::size_t e) {
        const float v = a[e];
        const bool mine = is_kept(v, threshold) && (!sender_check || index_marked(sender_check, l, s, e));
        return mine ? v : 0.0f;
      };
    });
  }

  // pack() from this rank's kept list (global positions ascending, acc at each):
  // the same slots, bit for bit, without reading acc at every union entry. At 1-3 %
  // kept, union entries lie a cache line or more apart, so pack() pays a miss for
  // each; here the union is walked in the index words and merged with the list. A
  // kept entry the reduced index does not mark (a lossy index) is passed over, as
  // pack() never reaches it.
  template <class Value>
  void pack_kept(const std::uint8_t* index, const std::uint32_t* kept, const float* kept_values,
                 std::size_t kept_count, const std::uint8_t* sender_check, float wire_scale, Value* packed,
                 std::size_t slots) const {
    const layout l = lay_;
    const std::size_t per_word = 64 / std::size_t(l.index_bits);
    const std::uint32_t* kept_end = kept + kept_count;
    fill_slots(index, wire_scale, packed, slots, [&](std::size_t s, std::size_t k) {
      // the task's entries ascend: one cursor into the list, from the chunk's first position
      const std::size_t base = s * l.shard_size;
      const std::uint32_t* p = std::lower_bound(kept, kept_end, std::uint32_t(base + k * words_per_chunk * per_word));
      return [=](std::size_t e) mutable {
        while (p != kept_end && *p < base + e) ++p;
        float v = 0.0f;
        if (p != kept_end && *p == base + e) {
          if (!sender_check || index_marked(sender_check, l, s, e)) v = kept_values[p - kept];
          ++p;
        }
        return v;
      };
    });
  }

  // The owner's shard `own` from its summed slots: float(slot) * scale at its
  // union entries, 0 elsewhere (every entry of `out`, shard_size, written).
  template <class Value>
  void unpack(const std::uint8_t* index, std::size_t own, const Value* slots_in, float scale, float* out) const {
    const std::size_t C = chunks_;
    const layout l = lay_;
    const std::uint8_t* ix = index + own * l.index_bytes;
    const std::uint32_t* start = start_.data() + own * (C + 1);
    const std::size_t valid = shard_entries(l, own), per_word = 64 / std::size_t(l.index_bits);
#pragma omp parallel for schedule(static) if (C >= parallel_from)
    for (std::size_t k = 0; k < C; ++k) {
      const Value* in = slots_in + start[k];
      const std::size_t w1 = std::min(words_, (k + 1) * words_per_chunk);
      for (std::size_t w = k * words_per_chunk; w < w1; ++w) {
        const std::size_t first = w * per_word, last = std::min(l.shard_size, first + per_word);
        for (std::size_t e = first; e < last; ++e) out[e] = 0.0f;
        std::uint64_t m = word_marks(ix, l.index_bytes, l.index_bits, valid, w);
        for (; m; m &= m - 1) out[first + std::size_t(__builtin_ctzll(m)) / std::size_t(l.index_bits)] = float(*in++) * scale;
      }
    }
  }

 private:
  // The walk both packers share: each task (shard s, chunk k of its index words)
  // visits its union entries in ascending order and fills their slots with
  // Value(value_of(e) * wire_scale), value_of = source_for(s, k) (a task's own
  // state, e.g. a cursor, lives in it); the padding slots of each shard 0.
  template <class Value, class SourceFor>
  void fill_slots(const std::uint8_t* index, float wire_scale, Value* packed, std::size_t slots,
                  SourceFor source_for) const {
    const std::size_t C = chunks_, tasks = shards_ * C;
    const layout l = lay_;
    const std::uint32_t* start = start_.data();
    const std::size_t per_word = 64 / std::size_t(l.index_bits);
#pragma omp parallel for schedule(static) if (tasks >= parallel_from)
    for (std::size_t t = 0; t < tasks; ++t) {
      const std::size_t s = t / C, k = t % C;
      const std::uint8_t* ix = index + s * l.index_bytes;
      const std::size_t valid = shard_entries(l, s), w1 = std::min(words_, (k + 1) * words_per_chunk);
      auto value_of = source_for(s, k);
      Value* out = packed + shard_base(s, slots) + start[s * (C + 1) + k];
      for (std::size_t w = k * words_per_chunk; w < w1; ++w) {
        std::uint64_t m = word_marks(ix, l.index_bytes, l.index_bits, valid, w);
        const std::size_t first = w * per_word;
        for (; m; m &= m - 1)
          *out++ = Value(value_of(first + std::size_t(__builtin_ctzll(m)) / std::size_t(l.index_bits)) * wire_scale);
      }
    }
    for (std::size_t s = 0; s < shards_; ++s)  // (none back to back: slots = 0)
      for (std::size_t i = union_size(s); i < slots; ++i) packed[s * slots + i] = Value(0.0f);
  }

  layout lay_{};
  std::size_t shards_ = 0, words_ = 0, chunks_ = 0;
  std::vector<std::uint32_t> start_;  // [shards][chunks + 1] each chunk's first slot in its shard
  std::vector<std::size_t> base_;     // [shards + 1] union entries before each shard
};

// PackedPolicy's values on the host (exec::host): the interface
// detail/compress_dispatch.hpp gives both implementations (portable_packed.hpp),
// over packed_slots. The kept entries' values are packed from the list the
// threshold select made when there is one (no read of acc per union entry).
template <class Wire>
class packed_values {
 public:
  template <class Exec>
  status initialize(const layout& l, int shards, const Exec&) {
    slots_.initialize(l, shards);  // the slots from word popcounts per chunk: no scan over index bytes
    lay_ = l;
    shards_ = std::size_t(shards);
    return {};
  }
  std::size_t workspace_bytes() const { return slots_.workspace_bytes(); }
  static std::size_t workspace_bytes_for(const layout& l, int shards) { return packed_slots::workspace_bytes_for(l, shards); }

  template <class Residual>
  packed_layout pack(const std::uint8_t* idx, const contribution<Residual>& value, const kept_entries& kept,
                     float wire_scale, std::size_t own, Wire* send) {
    packed_layout p;
    p.largest = slots_.count(idx);
    p.whole_union = slots_.union_before(shards_);
    p.before_own = slots_.union_before(own);
    p.back_to_back = unions_back_to_back(shards_, p.largest, p.whole_union);
    const std::size_t slots = p.back_to_back ? 0 : p.largest;  // 0: back to back
    if (kept.listed)
      slots_.pack_kept(idx, kept.positions, kept.values, kept.count, value.reduced_index, wire_scale, send, slots);
    else
      slots_.pack(idx, kept.acc, value.state->threshold, value.reduced_index, wire_scale, send, slots);
    return p;
  }
  void unpack(const std::uint8_t* idx, std::size_t own, const Wire* recv, float scale, float* out) const {
    slots_.unpack(idx, own, recv, scale, out);
  }
  // 64 marks per popcount, not a loop per entry.
  unsigned long long support(const std::uint8_t* own_index, std::size_t own) const {
    return count_marks(own_index, lay_, own, 1);
  }

 private:
  packed_slots slots_;
  layout lay_{};
  std::size_t shards_ = 1;
};

}  // namespace detail::host
TAGC_END_NAMESPACE
