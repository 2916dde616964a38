#pragma once
// defines: tagc::detail::marked_fields, tagc::detail::index_word,
//          tagc::detail::count_word_marks / write_word_marks — the support of a
//          shard (the entries its reduced index marks) read 64 index bits at a time.
//
// An index packs one counter of `bits` bits per entry (policy/index.hpp); an
// entry is in the support when its counter is not zero. A 64-bit word of the
// index covers 64 / bits entries: folding each counter onto its lowest bit turns
// the word into a mask with one bit per marked entry, so counting is a popcount
// and listing is a walk over the set bits. Both execution spaces build the
// support list this way (popcount per word, an exclusive scan over the counts,
// then each word writes its entries at its offset), instead of a compaction over
// every entry of the shard: no per-entry work, no temporaries.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cuda/std/bit>

#include "../core/bits.hpp"
#include "../core/config.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t index_word_bytes = 8;

// One bit per field of `bits` bits (at the field's lowest bit), set where the field is not zero.
TAGC_HOST_DEVICE inline std::uint64_t marked_fields(std::uint64_t w, int bits) {
  switch (bits) {
    case 1: return w;
    case 2: return (w | (w >> 1)) & 0x5555555555555555ull;
    case 4: w |= w >> 1; w |= w >> 2; return w & 0x1111111111111111ull;
    default: w |= w >> 1; w |= w >> 2; w |= w >> 4; return w & 0x0101010101010101ull;
  }
}

// Word `k` of an index of `bytes` bytes (little-endian; the last word zero-padded),
// assembled a byte at a time: the index of a shard need not be 8-byte aligned.
TAGC_HOST_DEVICE inline std::uint64_t index_word(const std::uint8_t* index, std::size_t bytes, std::size_t k) {
  const std::size_t first = k * index_word_bytes;
  const std::uint8_t* p = index + first;
  std::uint64_t w = 0;
  if (bytes - first >= index_word_bytes) {  // a whole word: one load on a little-endian machine
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&w, p, index_word_bytes);
#else
    for (std::size_t b = 0; b < index_word_bytes; ++b) w |= std::uint64_t(p[b]) << (8 * b);
#endif
    return w;
  }
  for (std::size_t b = 0; b < bytes - first; ++b) w |= std::uint64_t(p[b]) << (8 * b);
  return w;
}

// Marked entries of word k, restricted to entries < `entries` (a shard's last
// entries may lie beyond the caller's length).
TAGC_HOST_DEVICE inline std::uint64_t word_marks(const std::uint8_t* index, std::size_t bytes, int bits,
                                                 std::size_t entries, std::size_t k) {
  std::uint64_t m = marked_fields(index_word(index, bytes, k), bits);
  const std::size_t per_word = 64 / std::size_t(bits);
  const std::size_t first = k * per_word;
  if (first + per_word > entries) {
    const std::size_t keep = entries > first ? (entries - first) * std::size_t(bits) : 0;  // bits of valid fields
    m &= keep >= 64 ? ~0ull : ((1ull << keep) - 1ull);
  }
  return m;
}

inline std::size_t index_words(std::size_t index_bytes) { return (index_bytes + index_word_bytes - 1) / index_word_bytes; }

// Portable functors (one word per call): counts, then the entries at the scanned offsets.
struct count_word_marks {
  const std::uint8_t* index;
  std::size_t bytes;
  int bits;
  std::size_t entries;
  std::uint32_t* counts;  // [words]
  TAGC_HOST_DEVICE void operator()(std::size_t k) const {
    counts[k] = std::uint32_t(popcount64(word_marks(index, bytes, bits, entries, k)));
  }
};
struct write_word_marks {
  const std::uint8_t* index;
  std::size_t bytes;
  int bits;
  std::size_t entries;
  const std::uint32_t* offsets;  // [words] exclusive scan of the counts
  std::uint32_t* list;
  TAGC_HOST_DEVICE void operator()(std::size_t k) const {
    std::uint64_t m = word_marks(index, bytes, bits, entries, k);
    const std::uint32_t first = std::uint32_t(k * (64 / std::size_t(bits)));
    std::uint32_t* out = list + offsets[k];
    while (m) {
      *out++ = first + std::uint32_t(cuda::std::countr_zero(m)) / std::uint32_t(bits);
      m &= m - 1;
    }
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
