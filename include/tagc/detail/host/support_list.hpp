#pragma once
// defines: tagc::detail::host::support_list — the sorted list of the entries a
//          shard's reduced index marks, built on the CPU from 64-bit index words
//          (popcount per chunk, a scan over the chunks, then each chunk writes its
//          entries), into caller-owned memory; tagc::detail::host::count_marks
//          (marks in an index, by word popcounts) and shard_entries.
//
// The chunk table is the only workspace and is sized once (reserve); a call
// allocates nothing. Chunks run in parallel on OpenMP threads when there are
// several; the list comes out ascending whatever the thread count.


#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../shard/layout.hpp"
#include "../support_words.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

// Marked entries among the first `entries` of an index of `bytes` bytes (word popcounts).
inline std::size_t count_marks(const std::uint8_t* index, std::size_t bytes, int bits, std::size_t entries) {
  const std::size_t words = index_words(bytes);
  std::size_t total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (words >= (std::size_t(1) << 16))
  for (std::size_t k = 0; k < words; ++k)
    total += std::size_t(popcount64(word_marks(index, bytes, bits, entries, k)));
  return total;
}

// Entries of shard `shard` inside the caller's length.
inline std::size_t shard_entries(const layout& l, std::size_t shard) {
  const std::size_t first = shard * l.shard_size;
  return l.length > first ? (l.length - first < l.shard_size ? l.length - first : l.shard_size) : 0;
}

// Marks in `shards` consecutive shard indexes starting at shard `first_shard`
// (reduce_stats::index_popcount, PackedPolicy's support): word popcounts.
inline std::size_t count_marks(const std::uint8_t* index, const layout& l, std::size_t first_shard, std::size_t shards) {
  std::size_t total = 0;
  for (std::size_t k = 0; k < shards; ++k)
    total += count_marks(index + k * l.index_bytes, l.index_bytes, l.index_bits, shard_entries(l, first_shard + k));
  return total;
}

class support_list {
 public:
  // Index words per chunk: 64K entries at 1 bit per entry, enough work to pay for a thread.
  static constexpr std::size_t words_per_chunk = 1024;

  // Sizes the chunk table for an index of up to `index_bytes` bytes.
  void reserve(std::size_t index_bytes) {
    chunk_start_.assign((index_words(index_bytes) + words_per_chunk - 1) / words_per_chunk + 1, 0u);
  }
  std::size_t workspace_bytes() const { return chunk_start_.size() * sizeof(std::uint32_t); }
  static std::size_t workspace_bytes_for(std::size_t index_bytes) {
    return ((index_words(index_bytes) + words_per_chunk - 1) / words_per_chunk + 1) * sizeof(std::uint32_t);
  }

  // Writes the marked entries (< `entries`) of `index` ascending into `list` (room
  // for `entries`, or for `room` when given), returns how many. When there are more
  // than `room`, nothing is written: a damaged index (a received bitmap) cannot
  // overrun a list sized for what it should hold, and the count comes from the
  // same pass. `bytes` must not exceed what reserve() saw.
  std::size_t build(const std::uint8_t* index, std::size_t bytes, int bits, std::size_t entries, std::uint32_t* list,
                    std::size_t room = std::size_t(-1)) {
    const std::size_t words = index_words(bytes);
    const std::size_t chunks = (words + words_per_chunk - 1) / words_per_chunk;
    std::uint32_t* start = chunk_start_.data();
#pragma omp parallel if (chunks > 1)
    {
#pragma omp for schedule(static)
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t k1 = (c + 1) * words_per_chunk < words ? (c + 1) * words_per_chunk : words;
        std::uint32_t n = 0;
        for (std::size_t k = c * words_per_chunk; k < k1; ++k)
          n += std::uint32_t(popcount64(word_marks(index, bytes, bits, entries, k)));
        start[c + 1] = n;
      }
#pragma omp single
      {
        start[0] = 0;
        for (std::size_t c = 0; c < chunks; ++c) start[c + 1] += start[c];
      }  // (implicit barrier)
      const std::size_t writing = start[chunks] <= room ? chunks : 0;  // the same on every thread, after the barrier
#pragma omp for schedule(static)
      for (std::size_t c = 0; c < writing; ++c) {
        const std::size_t k1 = (c + 1) * words_per_chunk < words ? (c + 1) * words_per_chunk : words;
        // A word holds a few marks at the densities a sketch runs at (1-2 at ratio
        // 10), so a loop over its marks exits at a random count and mispredicts
        // about once per word. Instead the first four slots are written whatever
        // the count (past it they hold junk the next word overwrites) and only the
        // rest loop; near the chunk's end, where junk would land in the next
        // chunk's part of the list, the exact loop runs. The list at ratio 10
        // (16M elements, 2 ranks) went from ~1.4 to ~0.7 ms.
        std::uint32_t* out = list + start[c];
        std::uint32_t* const end = list + start[c + 1];
        const int shift = std::countr_zero(unsigned(bits));  // entry = bit / bits
        const auto rest = [&](std::uint64_t m, std::uint32_t first, std::uint32_t* o) {
          for (; m; m &= m - 1) *o++ = first + (std::uint32_t(__builtin_ctzll(m)) >> shift);
        };
        for (std::size_t k = c * words_per_chunk; k < k1; ++k) {
          std::uint64_t m = word_marks(index, bytes, bits, entries, k);
          const std::uint32_t first = std::uint32_t(k * (64 / std::size_t(bits)));
          const int n = popcount64(m);
          if (end - out < 4) {
            rest(m, first, out);
          } else {
            for (int t = 0; t < 4; ++t, m &= m - 1)  // bit 63: a defined ctz once m runs out
              out[t] = first + (std::uint32_t(__builtin_ctzll(m | (1ull << 63))) >> shift);
            if (n > 4) rest(m, first, out + 4);
          }
          out += n;
        }
      }
    }
    return chunks ? start[chunks] : 0;
  }

 private:
  std::vector<std::uint32_t> chunk_start_;  // [chunks + 1] exclusive scan of the chunks' counts
};

}  // namespace detail::host
TAGC_END_NAMESPACE
