#pragma once
// defines: the shared-index functors (SharedIndexPolicy, PooledIndexPolicy): acc =
//          g + residual, the picking rank's threshold histogram over acc, its bitmap,
//          the pooled lists' or bitmaps' union, the bitmap's list of positions, packing / unpacking values at the positions, the residual's
//          commit and the statistics' counts.
//          Implementation detail of shared_reducer.hpp and stage/shared_selection.hpp;
//          users read policy/shared_index.hpp, not this file.

#include <cstddef>
#include <cstdint>
#include <cuda/atomic>
#include <cuda/std/bit>

#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "select_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

// Marks a free slot of the position list (every real position is < length < 2^32).
inline constexpr std::uint32_t no_position = 0xffffffffu;

// acc[i] = g[i] + residual[i]; NaN/Inf entries counted into *nonfinite.
template <class R>
struct shared_accumulate {
  const float* grad;
  const R* residual;
  float* acc;
  unsigned long long* nonfinite;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const float a = grad[i] + residual_load(residual, i);
    acc[i] = a;
    if (abs_bits(a) >= inf_bits) {
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> c(*nonfinite);
      c.fetch_add(1ull, cuda::memory_order_relaxed);
    }
  }
};

// Pass `pass` of the radix select over u = bits(|acc|) (as histogram_pass, from acc).
struct acc_histogram_pass {
  const float* acc;
  std::uint32_t* hist;  // [hist_copies][hist_bins]
  const select_state* state;
  int pass;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::uint32_t u = abs_bits(acc[i]);
    if (pass > 0 && (u >> (digit_shift(pass) + digit_bits(pass))) != state->prefix) return;
    const std::uint32_t digit = (u >> digit_shift(pass)) & ((1u << digit_bits(pass)) - 1u);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> h(hist[histogram_copy() * hist_bins + digit]);
    h.fetch_add(1u, cuda::memory_order_relaxed);
  }
};

// One bitmap word per call: bit b of word w marks position 32 w + b when
// |acc| > threshold, or every position when `all` (theta = 0: zeros too, so that
// other ranks' values there are sent). The threshold is also published in
// `threshold_out` (one thread), for the other ranks' statistics.
struct mark_word {
  const float* acc;
  const select_state* state;
  bool all;
  std::size_t length;
  std::uint32_t* words;
  std::uint32_t* threshold_out;
  TAGC_HOST_DEVICE void operator()(std::size_t w) const {
    const std::uint32_t t = all ? 0u : state->threshold;
    if (w == 0) *threshold_out = t;
    std::uint32_t bits = 0;
    for (std::uint32_t b = 0; b < 32; ++b) {
      const std::size_t i = w * 32 + b;
      if (i >= length) break;
      if (all || abs_bits(acc[i]) > t) bits |= 1u << b;
    }
    words[w] = bits;
  }
};

// Pooled index, shares sent as coded lists: a rank's sorted positions as 16-bit offsets
// within blocks of 65536 positions, half a 32-bit list's bytes. Its words: where each
// block's entries start in the list and the count of entries (blocks + 1 words), then
// the offsets, two to a word (the even entry in the low half).
inline constexpr std::size_t coded_block_positions = 65536;
TAGC_HOST_DEVICE inline constexpr std::size_t coded_list_blocks(std::size_t length) {
  return ceil_div(length, coded_block_positions);
}
TAGC_HOST_DEVICE inline constexpr std::size_t coded_list_words(std::size_t entries, std::size_t length) {
  return coded_list_blocks(length) + 1 + ceil_div(entries, 2);
}
// How many of a sorted list's first k entries are below x (a binary search; free slots,
// no_position, sort last).
TAGC_HOST_DEVICE inline std::size_t entries_below(const std::uint32_t* list, std::size_t k, std::uint64_t x) {
  std::size_t lo = 0, hi = k;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (std::uint64_t(list[mid]) < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}
// out[j]: how many of a sorted list's positions lie below j x stride (free slots,
// no_position, sort last and are never counted). Where a list splits into blocks of
// `stride` positions: the pooled index's coded blocks (uint32 starts, stride
// coded_block_positions), the routed index's shards (64-bit bounds, stride the shard size).
template <class Count>
struct list_starts {
  const std::uint32_t* list;
  std::size_t entries;
  std::uint64_t stride;
  Count* out;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::uint64_t first = std::uint64_t(j) * stride;
    out[j] = Count(entries_below(list, entries, first < no_position ? first : std::uint64_t(no_position)));
  }
};
// out[w]: entries 2w and 2w + 1's offsets within their blocks (0 past the list).
struct code_list_offsets {
  const std::uint32_t* list;
  std::size_t entries;
  std::uint32_t* out;
  TAGC_HOST_DEVICE void operator()(std::size_t w) const {
    const auto offset = [&](std::size_t i) -> std::uint32_t {
      return i < entries ? list[i] % std::uint32_t(coded_block_positions) : 0u;
    };
    out[w] = offset(2 * w) | offset(2 * w + 1) << 16;
  }
};
// Marks in `words` the position of entry i of rank r's coded list (thread r x entries
// + i; several ranks may list the same position, hence the atomic OR). Entries past
// the list's count and positions >= length are skipped, so a damaged list cannot
// write past the bitmap.
struct pool_coded_position {
  const std::uint32_t* all;  // `world` coded lists of `block_words` words each, rank by rank
  std::size_t block_words, entries, length;
  std::uint32_t* words;
  TAGC_HOST_DEVICE void operator()(std::size_t t) const {
    const std::size_t blocks = coded_list_blocks(length), i = t % entries;
    const std::uint32_t* c = all + (t / entries) * block_words;
    if (i >= c[blocks]) return;
    // its block: the last whose start is at most i (the starts are ascending)
    const std::size_t after = entries_below(c, blocks, std::uint64_t(i) + 1);
    if (after == 0) return;
    const std::uint32_t offset = (c[blocks + 1 + i / 2] >> (16 * (i % 2))) & 0xffffu;
    const std::uint64_t p = std::uint64_t(after - 1) * coded_block_positions + offset;
    if (p >= length) return;
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(words[p / 32u])
        .fetch_or(1u << (p % 32u), cuda::memory_order_relaxed);
  }
};

// Pooled index, shares sent as bitmaps: word w of the union is the OR of every
// rank's word w (`all` holds `world` bitmaps of `words` words each, rank by rank).
// Bits past `length` are cleared, so a damaged bitmap cannot name a position outside.
struct pool_bitmaps {
  const std::uint32_t* all;
  std::size_t world, words, length;
  std::uint32_t* out;
  TAGC_HOST_DEVICE void operator()(std::size_t w) const {
    std::uint32_t bits = 0;
    for (std::size_t r = 0; r < world; ++r) bits |= all[r * words + w];
    const std::size_t past = (w + 1) * 32;
    if (past > length) bits &= (1u << (32 - (past - length))) - 1u;
    out[w] = bits;
  }
};

// Pooled index: the positions the ranks actually picked, over the all-gathered
// shares (coded lists: each rank's count, i over the ranks; bitmaps: the set bits of
// word i). A rank picks fewer than its share where it holds fewer nonzero entries (or
// ties at its threshold).
struct pooled_picks {
  const std::uint32_t* all;
  bool lists;
  std::size_t block_words = 0, entries = 0, length = 0;  // the coded lists'
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t i) const {
    if (!lists) return (unsigned long long)cuda::std::popcount(all[i]);
    const std::uint32_t count = all[i * block_words + coded_list_blocks(length)];
    return count < entries ? count : entries;
  }
};

// Set bits of word w (0 past the end): the scan's input.
struct bitmap_word_marks {
  const std::uint32_t* words;
  std::size_t count;
  TAGC_HOST_DEVICE std::uint32_t operator()(std::size_t w) const {
    return w < count ? std::uint32_t(cuda::std::popcount(words[w])) : 0u;
  }
};

// The ascending positions of word w's bits at list[offsets[w] ...] (never past `capacity`).
struct expand_word {
  const std::uint32_t* words;
  const std::uint32_t* offsets;  // exclusive scan of bitmap_word_marks
  std::uint32_t* list;
  std::size_t capacity;
  TAGC_HOST_DEVICE void operator()(std::size_t w) const {
    std::uint32_t bits = words[w];
    std::size_t at = offsets[w];
    while (bits != 0u && at < capacity) {
      list[at++] = std::uint32_t(w * 32 + std::size_t(cuda::std::countr_zero(bits)));
      bits &= bits - 1u;
    }
  }
};

// One thread: how many positions the list holds (it is sorted, free slots last)
// and which of them fall in [first, last): counts[0] = listed, counts[1] = the
// first in range, counts[2] = one past the last in range.
struct count_positions {
  const std::uint32_t* list;
  std::size_t k;
  std::size_t first, last;
  unsigned long long* counts;
  TAGC_HOST_DEVICE void operator()(std::size_t) const {
    counts[0] = entries_below(list, k, no_position);
    counts[1] = entries_below(list, k, first);
    counts[2] = entries_below(list, k, last);
  }
};

// Whether this rank sends its value at shared position p: always, or with the
// pickers' rule (policy/shared_index.hpp) only where it picked p itself, i.e. |acc|
// strictly above its own threshold (`own`, bits of |acc|; null: always).
TAGC_HOST_DEVICE inline bool sends_at(const float* acc, std::uint32_t p, const std::uint32_t* own) {
  return !own || abs_bits(acc[p]) > *own;
}

// values[j] = this rank's acc at the j-th shared position, on the wire type (0 in free
// slots, and where it does not send).
template <class Value>
struct pack_shared {
  const float* acc;
  const std::uint32_t* list;
  std::size_t length;
  Value* values;
  const std::uint32_t* own = nullptr;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::uint32_t p = list[j];
    values[j] = p < length && sends_at(acc, p, own) ? Value(acc[p]) : Value(0.0f);
  }
};

// out[p - first] = scale * summed value, for the shared positions in [first, first + size).
template <class Value>
struct unpack_shared {
  const std::uint32_t* list;
  const Value* sums;
  std::size_t length, first, size;
  float scale;  // the op's: 1/N for mean
  float* out;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::uint32_t p = list[j];
    if (p >= length || p < first || p - first >= size) return;
    out[p - first] = float(sums[j]) * scale;
  }
};

// The residual at a shared position: what the wire did not carry of acc,
// acc - wire(acc) (0 for fp32 values). `from` holds acc there (for a float
// residual it is the residual itself, which became the acc buffer).
template <class Value, class R>
struct settle_shared {
  const std::uint32_t* list;
  const float* from;
  R* residual;
  std::size_t length;
  std::uint32_t seed;
  const std::uint32_t* own = nullptr;  // as pack_shared's: where it did not send, the residual keeps acc
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::uint32_t p = list[j];
    if (p >= length || !sends_at(from, p, own)) return;
    const float a = from[p];
    residual_store(residual, p, a - float(Value(a)), seed, residual_site::update);
  }
};

// A sharded call whose values travel in the padded buffer (buffer_exchange): every
// position's value (theta 0: pack_whole, 0 past the length) or the selection's at
// their positions (pack_in_buffer, into a zeroed buffer); the own shard's sums back
// as floats (unpack_buffer); at theta 0 the residual everywhere acc - wire(acc)
// (settle_whole).
template <class Value>
struct pack_whole {
  const float* acc;
  std::size_t length;
  Value* values;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const { values[i] = i < length ? Value(acc[i]) : Value(0.0f); }
};
template <class Value>
struct pack_in_buffer {
  const float* acc;
  const std::uint32_t* list;
  std::size_t length;
  Value* values;  // [padded length], zeroed
  const std::uint32_t* own = nullptr;  // as pack_shared's
  TAGC_HOST_DEVICE void operator()(std::size_t j) const {
    const std::uint32_t p = list[j];
    if (p < length && sends_at(acc, p, own)) values[p] = Value(acc[p]);
  }
};
template <class Value>
struct unpack_buffer {
  const Value* sums;
  float scale;  // the op's: 1/N for mean
  float* out;
  TAGC_HOST_DEVICE void operator()(std::size_t j) const { out[j] = float(sums[j]) * scale; }
};
template <class Value, class R>
struct settle_whole {
  const float* from;  // acc (for a float residual: the residual itself, which became the acc buffer)
  R* residual;
  std::uint32_t seed;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const float a = from[i];
    residual_store(residual, i, a - float(Value(a)), seed, residual_site::update);
  }
};

// A stored (bf16) residual: residual = acc everywhere first (settle_shared then
// overwrites the shared positions).
template <class R>
struct store_acc {
  const float* acc;
  R* residual;
  std::uint32_t seed;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    residual_store(residual, i, acc[i], seed, residual_site::update);
  }
};

// Statistics: entries with |acc| above the leader's threshold, over the whole
// buffer (above_threshold) and at the shared positions (above_at_shared); the
// difference is what this rank would have sent at the leader's threshold and holds back.
struct above_threshold {
  const float* acc;
  const std::uint32_t* threshold;
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t i) const { return abs_bits(acc[i]) > *threshold; }
};
struct above_at_shared {
  const float* acc;
  const std::uint32_t* list;
  std::size_t length;
  const std::uint32_t* threshold;
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t j) const {
    const std::uint32_t p = list[j];
    return p < length && abs_bits(acc[p]) > *threshold;
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
