#pragma once
// defines: tagc::detail::host::threshold_marker — the host's threshold select and
//          index marking in one pass over acc: a sampled bracket [lo, hi] around
//          the threshold, one pass that marks every entry above hi and collects
//          the few in the bracket, the exact threshold selected among those, the
//          bracket's entries above it marked; the kept list (positions and acc
//          values, ascending) staged by the same pass and filtered at the threshold.
//
// Same results as the radix select + build_index (the portable path), bit for bit:
// the threshold is the exact (k+1)-th largest |acc| bit pattern. What changed is
// the shape (why, on a CPU):
//  - the radix select's histograms cost a scattered increment per element, and
//    gradient magnitudes crowd a few bins, so the increments chain through the
//    same counters (store-to-load latency, ~5 cycles an element). A sample of 64K
//    entries brackets the threshold instead: everything above hi is kept whatever
//    the exact threshold is, everything below lo is not, and only the ~1 % in the
//    bracket need the threshold;
//  - the pass that counts above hi also writes the index (8 entries at a time,
//    SSE2 compares + movemask), so acc is read once after pass 0, not twice;
//  - the same pass stages every entry above lo (position and value, packed 8 at
//    a time by a lane table) into the index stage's kept list, one region per
//    chunk; the threshold then filters it in place. Listing the kept entries from
//    the index afterwards read acc at each kept position: one cache miss per kept
//    entry (~3.5 ms of 16M entries at 10x), now a pass over the staged entries;
//  - a bracket that misses (the sample was unlucky, or a crowded bin) costs a
//    fallback: the exact radix select over acc (host_select) and a marking pass.
// Work is cut into host_chunks fixed chunks of whole index groups (8 entries =
// index_bits bytes): results do not depend on the thread count, and chunks never
// share an index byte.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#if defined(__SSE2__) && !defined(__CUDACC__)
#  include <emmintrin.h>
#  define TAGC_HOST_SSE2 1
#endif
#if defined(TAGC_HOST_SSE2) && (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#  include <immintrin.h>
#  define TAGC_HOST_AVX2 1  // an AVX2 marking loop, chosen at run time (the build targets baseline x86-64)
#endif

#include "../../core/bits.hpp"
#include "../../shard/layout.hpp"
#include "../host_compress.hpp"
#include "../support_words.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

// Below this length the exact radix select over acc is as cheap as sampling.
inline constexpr std::size_t bracket_min_length = std::size_t(1) << 15;
// The sample: up to 16384 blocks of 4 consecutive entries (16 bytes), evenly
// spread, at most a quarter of the entries.
inline constexpr std::size_t sample_block = 4, sample_blocks = 16384;
inline std::size_t sample_blocks_for(std::size_t n) { return std::min(sample_blocks, n / (4 * sample_block)); }

// The bracket's bounds in its sample: the k1-th and k2-th largest (0-based, and
// k1 < k2 when both are asked for; a rank >= m is not, its output is left as it
// was) of s[0, m), |x| bits (< 2^31), which is reordered. A histogram of the top
// 11 bits names the bins holding the two ranks; the entries of those bins and the
// bins between are moved to the front, and only they are ordered. Two nth_element
// calls over the whole 64K sample cost ~0.6 ms, a tenth of the fused marking pass
// at 16M; the values are the same (the k-th largest does not depend on how it is
// found).
inline void sample_ranks(std::uint32_t* s, std::size_t m, std::size_t k1, std::size_t k2, std::uint32_t& u1,
                         std::uint32_t& u2) {
  constexpr int bins = 2048, shift = 20;  // |x| bits < 2^31: the exponent and 3 mantissa bits
  std::array<std::uint32_t, bins> hist{};
  for (std::size_t i = 0; i < m; ++i) ++hist[s[i] >> shift];
  int b1 = -1, b2 = -1;  // the bins holding ranks k1, k2 (-1: not asked for)
  std::size_t above = 0, above1 = 0, above2 = 0;  // entries in the bins above them
  for (int b = bins - 1; b >= 0 && (b1 < 0 || b2 < 0) && above < m; --b) {
    const std::size_t c = hist[std::size_t(b)];
    if (b1 < 0 && k1 < above + c) b1 = b, above1 = above;
    if (b2 < 0 && k2 < above + c) b2 = b, above2 = above;
    above += c;
  }
  if (b1 < 0 && b2 < 0) return;
  const int top = b1 >= 0 ? b1 : b2, bottom = b2 >= 0 ? b2 : b1;
  const std::size_t base = b1 >= 0 ? above1 : above2;  // entries above bin `top`
  std::uint32_t* const end = std::partition(s, s + m, [&](std::uint32_t u) {
    const int b = int(u >> shift);
    return b >= bottom && b <= top;
  });
  std::uint32_t* from = s;
  if (b1 >= 0) {
    std::nth_element(s, s + (k1 - base), end, std::greater<std::uint32_t>());
    u1 = s[k1 - base];
    from = s + (k1 - base) + 1;
  }
  if (b2 >= 0) {
    std::nth_element(from, s + (k2 - base), end, std::greater<std::uint32_t>());
    u2 = s[k2 - base];
  }
}

// Set bits of an 8-entry mask, by table (one load: the marking pass counts every group).
inline constexpr auto mask8_count = [] {
  std::array<std::uint8_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) t[m] = std::uint8_t((m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1) + ((m >> 3) & 1) +
                                                         ((m >> 4) & 1) + ((m >> 5) & 1) + ((m >> 6) & 1) + (m >> 7));
  return t;
}();

// The lanes of an 8-entry mask's set bits, ascending, one per byte (unused bytes 0):
// a permutation that packs the marked entries of a vector to its front.
inline constexpr auto lane_pack = [] {
  std::array<std::uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    int at = 0;
    for (unsigned k = 0; k < 8; ++k)
      if ((m >> k) & 1u) t[m] |= std::uint64_t(k) << (8 * at++);
  }
  return t;
}();

// Where a marking pass stages the entries it finds above lo: the index stage's kept
// list and its values (room for `capacity`), cut into host_chunks equal regions.
struct kept_stage {
  std::uint32_t* list = nullptr;
  float* values = nullptr;
  std::size_t capacity = 0;
  std::size_t region() const { return capacity / std::size_t(host_chunks); }
};

// Bit k of m (k < 8) moved to bit k * bits: the counters of 8 entries, each 1 where marked.
inline std::uint64_t spread_marks(unsigned m, int bits) {
  if (bits == 1) return m;
  std::uint64_t out = 0;
  for (int k = 0; k < 8; ++k) out |= std::uint64_t((m >> k) & 1u) << (k * bits);
  return out;
}

// Marks of 8 entries from their |x| bits: above (u > hi) and in the bracket (lo_m1 < u <= hi).
#if defined(TAGC_HOST_SSE2)
struct vec8 {
  __m128i u0, u1;  // |x| bits
};
inline void mark8(const vec8& v, std::int32_t hi, std::int32_t lo_m1, unsigned& above, unsigned& bracket) {
  const __m128i h = _mm_set1_epi32(hi), l = _mm_set1_epi32(lo_m1);
  // |x| bits are <= 0x7fffffff, so signed compares order them correctly
  const unsigned a0 = unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(v.u0, h))));
  const unsigned a1 = unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(v.u1, h))));
  const unsigned b0 = unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(v.u0, l))));
  const unsigned b1 = unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(v.u1, l))));
  above = a0 | (a1 << 4);
  bracket = (b0 | (b1 << 4)) & ~above;
}
inline __m128i abs_bits4(__m128 a) { return _mm_and_si128(_mm_castps_si128(a), _mm_set1_epi32(0x7fffffff)); }
#else
struct vec8 {
  std::int32_t u[8];
};
inline void mark8(const vec8& v, std::int32_t hi, std::int32_t lo_m1, unsigned& above, unsigned& bracket) {
  above = bracket = 0;
  for (int k = 0; k < 8; ++k) {
    above |= unsigned(v.u[k] > hi) << k;
    bracket |= unsigned(v.u[k] > lo_m1 && v.u[k] <= hi) << k;
  }
}
#endif

// Where a marking pass reads its entries: acc itself, written by pass 0.
struct acc_source {
  const float* acc;
  float operator()(std::size_t p) { return acc[p]; }
  vec8 load8(std::size_t p) {
#if defined(TAGC_HOST_SSE2)
    return {abs_bits4(_mm_loadu_ps(acc + p)), abs_bits4(_mm_loadu_ps(acc + p + 4))};
#else
    vec8 v;
    for (int k = 0; k < 8; ++k) v.u[k] = std::int32_t(abs_bits(acc[p + std::size_t(k)]));
    return v;
#endif
  }
  void merge(const acc_source&) {}
};

// Or g + residual, computed here: the marking pass *is* pass 0 (acc written, NaN/Inf
// counted, max |acc| kept when `Top`: only the fp16 wire scale needs it), when the
// threshold's rank is known before the agreement check.
template <class R, bool Top>
struct sum_source {
  static constexpr bool wants_top = Top;
  const float* g;
  const R* r;
  float* acc;
  std::uint32_t nonfinite = 0;
  std::int32_t top = -1;
#if defined(TAGC_HOST_SSE2)
  __m128i nf4 = _mm_setzero_si128(), top4 = _mm_set1_epi32(-1);
#endif
  float operator()(std::size_t p) {
    const float a = g[p] + residual_load(r, p);
    acc[p] = a;
    const auto u = std::int32_t(abs_bits(a));
    nonfinite += u >= std::int32_t(inf_bits) ? 1u : 0u;
    if constexpr (Top) top = u > top ? u : top;
    return a;
  }
#if defined(TAGC_HOST_SSE2)
  __m128 load_r4(std::size_t p) const {
    if constexpr (std::is_same_v<R, float>) {
      return _mm_loadu_ps(r + p);
    } else {
      return _mm_setr_ps(residual_load(r, p), residual_load(r, p + 1), residual_load(r, p + 2), residual_load(r, p + 3));
    }
  }
  __m128i take4(std::size_t p) {
    const __m128 a = _mm_add_ps(_mm_loadu_ps(g + p), load_r4(p));
    _mm_storeu_ps(acc + p, a);
    const __m128i u = abs_bits4(a);
    nf4 = _mm_sub_epi32(nf4, _mm_cmpgt_epi32(u, _mm_set1_epi32(std::int32_t(inf_bits) - 1)));  // -(-1) per NaN/Inf
    if constexpr (Top) {
      const __m128i gt = _mm_cmpgt_epi32(u, top4);
      top4 = _mm_or_si128(_mm_and_si128(gt, u), _mm_andnot_si128(gt, top4));
    }
    return u;
  }
  vec8 load8(std::size_t p) { return {take4(p), take4(p + 4)}; }
#else
  vec8 load8(std::size_t p) {
    vec8 v;
    for (int k = 0; k < 8; ++k) v.u[k] = std::int32_t(abs_bits((*this)(p + std::size_t(k))));
    return v;
  }
#endif
  // Fold the vector lanes into nonfinite / top, then add `o`'s.
  void merge(const sum_source& o) {
    nonfinite += o.nonfinite;
    top = o.top > top ? o.top : top;
  }
  void settle() {
#if defined(TAGC_HOST_SSE2)
    alignas(16) std::int32_t nf[4], t[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(nf), nf4);
    _mm_store_si128(reinterpret_cast<__m128i*>(t), top4);
    for (int k = 0; k < 4; ++k) {
      nonfinite += std::uint32_t(nf[k]);
      top = t[k] > top ? t[k] : top;
    }
    nf4 = _mm_setzero_si128();
    top4 = _mm_set1_epi32(-1);
#endif
  }
};

// The marking loop's vector width: AVX-512 (16 entries an instruction, two index
// bytes per compare, the staged entries packed by a compress) or AVX2 (8 entries,
// one byte, packed by a lane table) where the CPU has them, else SSE2 (two
// compares per byte). Same results bit for bit: the same float additions and
// integer compares, the same entries staged and pooled in the same order.
// host_simd_limit() caps the width for tests, which hold each narrower loop to
// the portable path on machines that would otherwise always take the widest.
enum class host_simd { sse2, avx2, avx512 };
inline std::atomic<host_simd>& host_simd_limit() {
  static std::atomic<host_simd> limit{host_simd::avx512};
  return limit;
}
inline bool host_avx2() {
#if defined(TAGC_HOST_AVX2)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has && host_simd_limit().load(std::memory_order_relaxed) >= host_simd::avx2;
#else
  return false;
#endif
}
inline bool host_avx512() {
#if defined(TAGC_HOST_AVX2)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx2") != 0 &&
           __builtin_cpu_supports("popcnt") != 0;
  }();
  return has && host_simd_limit().load(std::memory_order_relaxed) >= host_simd::avx512;
#else
  return false;
#endif
}

class threshold_marker {
 public:
  static constexpr std::uint32_t none = 0xffffffffu;

  // Sizes the sample and the bracket's pool for buffers of `length` entries.
  void initialize(const layout& l) {
    lay_ = l;
    groups_per_shard_ = (l.shard_size + 7) / 8;
    groups_ = groups_per_shard_ * std::size_t(l.shards);
    // The bracket holds ~1 % of the entries at 16M (~4 % at 40K); the
    // pool doubles as the exact select's candidate buffer (2 x pool_ entries).
    const std::size_t pool = l.length / 32 + 2048;  // as many bytes as the old n / 16 candidates
    segment_ = std::max<std::size_t>(16, pool / 256);
    seg_fill_.assign(pool / segment_, 0u);
    pool_.assign(seg_fill_.size() * segment_, 0ull);
    if (l.length >= bracket_min_length) sample_.assign(sample_block * sample_blocks_for(l.length), 0u);
  }
  std::size_t workspace_bytes() const {
    return sample_.size() * sizeof(std::uint32_t) + pool_.size() * sizeof(std::uint64_t) +
           seg_fill_.size() * sizeof(std::uint32_t);
  }
  // What initialize(l) allocates (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const layout& l) {
    const std::size_t pool = l.length / 32 + 2048, segment = std::max<std::size_t>(16, pool / 256);
    const std::size_t fills = pool / segment;
    const std::size_t sample = l.length >= bracket_min_length ? sample_block * sample_blocks_for(l.length) : 0;
    return sample * sizeof(std::uint32_t) + fills * segment * sizeof(std::uint64_t) + fills * sizeof(std::uint32_t);
  }

  // Threshold for target rank `target` (1-based, the (k+1)-th largest |acc|; 0:
  // `fixed` is the threshold), the index [shards][index_bytes] marked (counter 1
  // where |acc| > threshold), the kept count per chunk kept. `hist`: the exact
  // select's histograms (host_select) for a bracket that misses.
  std::uint32_t run(const float* acc, std::uint32_t target, std::uint32_t fixed, std::uint8_t* index,
                    std::uint32_t* hist) {
    if (target == 0) {
      mark_all(acc, std::int32_t(fixed), index);
      return threshold_ = fixed;
    }
    if (!sample_.empty()) {
      std::int32_t hi = 0, lo_m1 = 0;
      bracket([acc](std::size_t p) { return acc[p]; }, target, hi, lo_m1);
      next_seg_ = 0;
      pass(acc_source{acc}, hi, lo_m1, index);
    }
    return finish(acc, target, index, hist);
  }

  // Whether begin_fused() can serve a search for rank `target`.
  bool fusable(std::uint32_t target) const { return target != 0 && !sample_.empty(); }

  // Pass 0 and the marking pass in one, when the target rank is known before the
  // agreement check: acc = g + residual written, NaN/Inf counted, max |acc| kept,
  // the index marked against a bracket sampled from g + residual. finish() then
  // selects (after the check). Nothing here is visible state: acc and the index
  // are workspace, so a call refused by the check leaves everything as it was.
  // `want_top`: whether the caller needs max |acc| (host_pass0::top_bin; else left 0).
  template <class R>
  host_pass0 begin_fused(const float* g, const R* r, float* acc, std::uint32_t target, std::uint8_t* index,
                         bool want_top) {
    std::int32_t hi = 0, lo_m1 = 0;
    bracket([g, r](std::size_t p) { return g[p] + residual_load(r, p); }, target, hi, lo_m1);
    next_seg_ = 0;
    const std::size_t n = lay_.length;
    if (!want_top) return {pass(sum_source<R, false>{g, r, acc}, hi, lo_m1, index).nonfinite, 0u};
    const sum_source<R, true> sums = pass(sum_source<R, true>{g, r, acc}, hi, lo_m1, index);
    return {sums.nonfinite, n ? (std::uint32_t(sums.top) >> digit_shift(0)) + 1u : 0u};
  }

  // After a marking pass with the bracket for `target`: the exact threshold, the
  // index completed. A bracket that missed the target (or overflowed the pool)
  // costs the exact radix select over acc and a marking pass against it.
  std::uint32_t finish(const float* acc, std::uint32_t target, std::uint8_t* index, std::uint32_t* hist) {
    if (!sample_.empty()) {
      unsigned long long above = 0, in_bracket = 0;
      for (int c = 0; c < host_chunks; ++c) {
        above += kept_[c + 1];
        in_bracket += bracket_count_[c];
      }
      if (!overflow_ && above < target && target <= above + in_bracket) {
        const std::size_t rank = std::size_t(target - above);
        const std::uint32_t t = select_in_pool(rank);
        patch(t, index);
        return threshold_ = t;
      }
    }
    const std::size_t n = lay_.length;
    host_histogram_top(acc, n, hist);
    const std::uint32_t t = host_select(acc, n, hist, target, reinterpret_cast<std::uint32_t*>(pool_.data()),
                                        2 * pool_.size());
    mark_all(acc, std::int32_t(t), index);
    return threshold_ = t;
  }

  // Where the next marking passes stage what they find (the index stage's kept
  // list; an empty stage stages nothing). Set before begin_fused() / run().
  void stage_kept(kept_stage s) { stage_ = s; }
  // Whether the last list() filtered the stage (else it read the index: a chunk's
  // entries did not fit its region).
  bool listed_from_stage() const { return from_stage_; }

  // After run(): entries kept, and the ascending list of their positions written
  // into `list` (room for `cap`) when they fit, their acc values into `values`
  // beside them (the sketch and the residual commit then read the kept values in
  // order, not one cache miss each per read). Returns whether they fit.
  unsigned long long kept() const {
    unsigned long long k = 0;
    for (int c = 0; c < host_chunks; ++c) k += kept_[c + 1];
    return k;
  }
  bool list(const std::uint8_t* index, std::uint32_t* list, std::size_t cap, const float* acc, float* values) {
    std::size_t offset[host_chunks + 1];
    offset[0] = 0;
    for (int c = 0; c < host_chunks; ++c) offset[c + 1] = offset[c] + kept_[c + 1];
    from_stage_ = false;
    if (offset[host_chunks] > cap) return false;
    from_stage_ = staged_ && list == stage_.list && values == stage_.values && filter_staged(offset);
    if (from_stage_) return true;
    const layout l = lay_;
    const std::size_t gps = groups_per_shard_, G = groups_;
    const int bits = l.index_bits;
#pragma omp parallel for schedule(static) if (l.length >= host_inline_below)
    for (int c = 0; c < host_chunks; ++c) {
      std::uint32_t* out = list + offset[c];
      float* vout = values + offset[c];
      std::size_t gi = chunk_begin(G, c);
      const std::size_t g1 = chunk_begin(G, c + 1);
      while (gi < g1) {  // shard by shard: no division per group
        const std::size_t s = gi / gps, j0 = gi % gps, j1 = std::min(gps, j0 + (g1 - gi));
        const std::uint8_t* ix = index + s * l.index_bytes;
        const auto first = std::uint32_t(s * l.shard_size);
        std::size_t j = j0;
        if (bits == 1) {
          // 64 entries a word; at 1-10 % density many words are zero, skipped whole
          for (; j + 8 <= j1; j += 8) {
            std::uint64_t w = index_word(ix + j, 8, 0);  // bytes [j, j + 8): one load
            const auto at = first + std::uint32_t(8 * j);
            for (; w; w &= w - 1) {
              const std::uint32_t p = at + std::uint32_t(__builtin_ctzll(w));
              *out++ = p;
              *vout++ = acc[p];
            }
          }
        }
        for (; j < j1; ++j) {
          unsigned m;
          if (bits == 1) {
            m = ix[j];
          } else {
            const std::uint8_t* b = ix + j * std::size_t(bits);
            const std::size_t nb = std::min<std::size_t>(std::size_t(bits), l.index_bytes - j * std::size_t(bits));
            std::uint64_t w = 0;
            for (std::size_t q = 0; q < nb; ++q) w |= std::uint64_t(b[q]) << (8 * q);
            m = 0;
            for (int k = 0; k < 8; ++k) m |= unsigned((w >> (k * bits)) & 1u) << k;
          }
          const auto at = first + std::uint32_t(8 * j);
          for (; m; m &= m - 1) {
            const std::uint32_t p = at + std::uint32_t(__builtin_ctz(m));
            *out++ = p;
            *vout++ = acc[p];
          }
        }
        gi += j1 - j0;
      }
    }
    return true;
  }

 private:
  // The staged entries above the threshold, moved to the front of the kept list in
  // order (chunk c's to offset[c]): a chunk's region starts at c * region and holds
  // at most region entries, and offset[c] <= the entries before it, so every write
  // lands at or before the entry it reads (in place, front to back). Whether each
  // chunk's count matched kept_ (it does; a mismatch would fall back to the index).
  bool filter_staged(const std::size_t* offset) {
    std::uint32_t* list = stage_.list;
    float* values = stage_.values;
    const std::size_t region = stage_.region();
    const std::uint32_t t = threshold_;
    std::size_t w = 0;
    for (int c = 0; c < host_chunks; ++c) {
      const std::size_t r0 = std::size_t(c) * region, r1 = r0 + staged_count_[c];
      for (std::size_t i = r0; i < r1; ++i) {
        const float v = values[i];
        if (abs_bits(v) <= t) continue;
        list[w] = list[i];
        values[w++] = v;
      }
      if (w != offset[c + 1]) return false;
    }
    return true;
  }

  // A chunk's staged entries (position, value) in its region of the kept list;
  // `full` once an entry did not fit (the list then comes from the index).
  struct stage_writer {
    std::uint32_t* list = nullptr;
    float* values = nullptr;
    std::size_t fill = 0, end = 0;
    bool full = false;
    // Entries `m` of the 8 at `first` (values from acc, written already by the pass).
    void add(unsigned m, std::size_t first, const float* acc) {
      for (; m; m &= m - 1) {
        const std::size_t p = first + std::size_t(__builtin_ctz(m));
        if (fill == end) {
          full = true;
          return;
        }
        list[fill] = std::uint32_t(p);
        values[fill++] = acc[p];
      }
    }
  };

  // Entries of shard s inside the caller's length.
  std::size_t valid(std::size_t s) const {
    const std::size_t first = s * lay_.shard_size;
    return lay_.length > first ? std::min(lay_.shard_size, lay_.length - first) : 0;
  }

  // [lo, hi] from the sample: the target's rank in the sample +- 6 standard deviations (+16).
  template <class Value>
  void bracket(Value value, std::uint32_t target, std::int32_t& hi, std::int32_t& lo_m1) {
    const std::size_t n = lay_.length, blocks = sample_blocks_for(n), per = n / sample_block;
    std::uint32_t* s = sample_.data();
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t at = (per * b / blocks) * sample_block;
      for (std::size_t k = 0; k < sample_block; ++k) s[b * sample_block + k] = abs_bits(value(at + k));
    }
    const std::size_t m = blocks * sample_block;
    const double q = double(target) / double(n), r = q * double(m);
    const double d = 6.0 * std::sqrt(r * (1.0 - q)) + 16.0;
    const double r_hi = std::floor(r - d), r_lo = std::ceil(r + d);  // 1-based ranks, descending
    // 0-based; m where the rank falls outside the sample (no bound on that side)
    const std::size_t k_hi = r_hi >= 1.0 ? std::size_t(r_hi) - 1 : m;
    const std::size_t k_lo = r_lo <= double(m) ? std::size_t(r_lo) - 1 : m;
    std::uint32_t u_hi = 0, u_lo = 0;
    sample_ranks(s, m, k_hi, k_lo, u_hi, u_lo);
    hi = k_hi < m ? std::int32_t(u_hi) : 0x7fffffff;
    lo_m1 = k_lo < m ? std::int32_t(u_lo) - 1 : -1;
    bracket_hi_ = hi;
    bracket_lo_m1_ = lo_m1;
  }

  // Pool segments: runs of bracket entries ((u << 32) | position), one chunk's each.
  std::uint64_t* grab_segment() {
    std::size_t seg;
#pragma omp atomic capture
    seg = next_seg_++;
    if (seg >= seg_fill_.size()) return nullptr;
    seg_fill_[seg] = 0;
    return pool_.data() + seg * segment_;
  }

  // A chunk's bracket entries, appended to pool segments it grabs (rare: ~1 % of
  // the entries; kept out of line so the marking loop keeps its registers).
  struct pool_writer {
    threshold_marker* self;
    std::uint64_t* seg = nullptr;
    std::size_t fill = 0, seg_id = 0;
    bool overflow = false;
    __attribute__((noinline)) void add(unsigned in, std::size_t first, const float* acc) {
      for (unsigned m = in; m; m &= m - 1) {
        const std::size_t p = first + std::size_t(__builtin_ctz(m));
        if (fill == self->segment_ || !seg) {
          if (seg) self->seg_fill_[seg_id] = std::uint32_t(fill);
          seg = overflow ? nullptr : self->grab_segment();
          if (!seg) {
            overflow = true;
            continue;
          }
          seg_id = std::size_t(seg - self->pool_.data()) / self->segment_;
          fill = 0;
        }
        seg[fill++] = (std::uint64_t(abs_bits(acc[p])) << 32) | std::uint64_t(p);
      }
    }
    void close() {
      if (seg) self->seg_fill_[seg_id] = std::uint32_t(fill);
    }
  };

  // One pass over the entries (`src`: acc, or g + residual writing acc): index
  // bytes (counter 1 where u > hi), kept_ per chunk, and the bracket's entries
  // (lo_m1 < u <= hi) into the pool; lo_m1 = 0x7fffffff collects nothing. Stages
  // every entry with u > min(hi, lo_m1) when a stage is set (staged_ says whether
  // all fitted). Returns the source with its per-chunk findings merged.
  template <class Src>
  Src pass(const Src& src0, std::int32_t hi, std::int32_t lo_m1, std::uint8_t* index) {
    const layout l = lay_;
    Src sums[host_chunks];
    const std::size_t gps = groups_per_shard_, G = groups_;
    const int bits = l.index_bits;
    bool overflow = false, stage_full = false;
    kept_[0] = 0;
    [[maybe_unused]] const bool avx2 = bits == 1 && host_avx2(), avx512 = bits == 1 && host_avx512();
    const bool staging = stage_.list && stage_.region() >= 8;
#pragma omp parallel for schedule(static) reduction(|| : overflow, stage_full) if (l.length >= host_inline_below)
    for (int c = 0; c < host_chunks; ++c) {
      Src src = src0;
      unsigned long long kept = 0, in_bracket = 0;
      pool_writer pool{this};
      stage_writer stage;
      if (staging) {
        stage.list = stage_.list;
        stage.values = stage_.values;
        stage.fill = std::size_t(c) * stage_.region();
        stage.end = stage.fill + stage_.region();
      }
      const std::size_t stage_begin = stage.fill;
      std::size_t gi = chunk_begin(G, c);
      const std::size_t g1 = chunk_begin(G, c + 1);
      while (gi < g1) {
        const std::size_t s = gi / gps, j0 = gi % gps, j1 = std::min(gps, j0 + (g1 - gi));
        const std::size_t base = s * l.shard_size, v = valid(s);
        std::uint8_t* ix = index + s * l.index_bytes;
        std::size_t j = j0;
        if (bits == 1) {  // the paper's index: one byte per group, whole groups first
          const std::size_t full = std::min(j1, std::max(j0, v / 8));
          unsigned long long k = 0;
#if defined(TAGC_HOST_AVX2)
          if constexpr (avx2_source<Src>) {
            // AVX-512 takes groups two at a time; an odd one left goes to the AVX2 loop
            if (avx512)
              j = staging ? marks_avx512<true>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage)
                          : marks_avx512<false>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage);
            if (avx2)
              j = staging ? marks_avx2<true>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage)
                          : marks_avx2<false>(src, base, j, full, hi, lo_m1, ix, k, in_bracket, pool, stage);
          }
#endif
          for (; j < full; ++j) {
            unsigned above, in;
            mark8(src.load8(base + 8 * j), hi, lo_m1, above, in);
            ix[j] = std::uint8_t(above);
            k += mask8_count[above];
            if (in) [[unlikely]] {
              in_bracket += mask8_count[in];
              pool.add(in, base + 8 * j, src.acc);
            }
            if (staging && (above | in)) stage.add(above | in, base + 8 * j, src.acc);
          }
          kept += k;
        }
        for (; j < j1; ++j) {
          const std::size_t e = 8 * j;
          unsigned above, in;
          if (e + 8 <= v) {
            mark8(src.load8(base + e), hi, lo_m1, above, in);
          } else {
            above = in = 0;
            for (std::size_t k = 0; e + k < v && k < 8; ++k) {
              const auto u = std::int32_t(abs_bits(src(base + e + k)));
              above |= unsigned(u > hi) << k;
              in |= unsigned(u > lo_m1 && u <= hi) << k;
            }
          }
          if (bits == 1) {
            ix[j] = std::uint8_t(above);
          } else {
            const std::uint64_t w = spread_marks(above, bits);
            const std::size_t nb = std::min<std::size_t>(std::size_t(bits), l.index_bytes - j * std::size_t(bits));
            for (std::size_t q = 0; q < nb; ++q) ix[j * std::size_t(bits) + q] = std::uint8_t(w >> (8 * q));
          }
          kept += mask8_count[above];
          if (in) {
            in_bracket += mask8_count[in];
            pool.add(in, base + e, src.acc);
          }
          if (staging && (above | in)) stage.add(above | in, base + e, src.acc);
        }
        gi += j1 - j0;
      }
      pool.close();
      overflow = overflow || pool.overflow;
      stage_full = stage_full || stage.full;
      staged_count_[c] = stage.fill - stage_begin;
      kept_[c + 1] = kept;
      bracket_count_[c] = in_bracket;
      if constexpr (requires { src.settle(); }) src.settle();
      sums[c] = src;
    }
    overflow_ = overflow;
    staged_ = staging && !stage_full;
    Src out = src0;
    for (int c = 0; c < host_chunks; ++c) out.merge(sums[c]);
    return out;
  }

#if defined(TAGC_HOST_AVX2)
  // A vector loop's source pointers, as locals: acc to read, or g + residual to
  // sum and acc to write (the others null).
  struct loop_sources {
    const float* acc_in;
    const float* g;
    const float* r;
    float* acc_out;
  };
  template <class Src>
  static loop_sources loop_sources_of(const Src& src) {
    if constexpr (std::is_same_v<Src, acc_source>) return {src.acc, nullptr, nullptr, nullptr};
    else return {src.acc, src.g, src.r, src.acc};
  }

  // Sources with an AVX2 loop: acc, or g + residual with a float residual (a bf16
  // residual widens entry by entry: the SSE2 loop).
  template <class Src>
  static constexpr bool avx2_source = std::is_same_v<Src, acc_source> || std::is_same_v<Src, sum_source<float, true>> ||
                                      std::is_same_v<Src, sum_source<float, false>>;

  // The 1-bit index's whole groups [j, full) of the shard at `base`, 8 entries an
  // iteration: what pass()'s SSE2 loop computes (acc written, NaN/Inf counted and
  // max |acc| kept when summing; index byte, kept count, bracket entries pooled).
  // Returns `full`. Pointers are copied to locals: the index byte stores may alias
  // anything, and would otherwise reload them every iteration.
  // With Stage, the entries above lo go to `stage`, 8 lanes packed by lane_pack
  // and stored whole (no branch per group: the stores past the count are
  // overwritten by the next group's), while 8 slots are left in the region.
  template <bool Stage, class Src>
  __attribute__((target("avx2"))) static std::size_t marks_avx2(Src& src, std::size_t base, std::size_t j,
                                                                 std::size_t full, std::int32_t hi, std::int32_t lo_m1,
                                                                 std::uint8_t* ix, unsigned long long& kept,
                                                                 unsigned long long& in_bracket, pool_writer& pool,
                                                                 stage_writer& stage) {
    constexpr bool sum = !std::is_same_v<Src, acc_source>;
    const __m256i h = _mm256_set1_epi32(hi), l = _mm256_set1_epi32(lo_m1), abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i finite_max = _mm256_set1_epi32(std::int32_t(inf_bits) - 1);
    __m256i nf = _mm256_setzero_si256(), top = _mm256_set1_epi32(-1);
    const auto [acc_in, g, r, acc_out] = loop_sources_of(src);
    unsigned long long k = 0, b = 0;
    std::uint32_t* stage_list = stage.list;
    float* stage_values = stage.values;
    std::size_t fill = stage.fill;
    const std::size_t room_end = stage.end >= 8 ? stage.end - 8 : 0;  // a whole 8-lane store fits below it
    bool stage_full = stage.full;
    for (; j < full; ++j) {
      const std::size_t p = base + 8 * j;
      __m256 a;
      if constexpr (sum) {
        a = _mm256_add_ps(_mm256_loadu_ps(g + p), _mm256_loadu_ps(r + p));
        _mm256_storeu_ps(acc_out + p, a);
      } else {
        a = _mm256_loadu_ps(acc_in + p);
      }
      const __m256i u = _mm256_and_si256(_mm256_castps_si256(a), abs_mask);
      if constexpr (sum) {
        nf = _mm256_sub_epi32(nf, _mm256_cmpgt_epi32(u, finite_max));  // -(-1) per NaN/Inf
        if constexpr (Src::wants_top) top = _mm256_max_epi32(top, u);
      }
      const unsigned above = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(u, h))));
      const unsigned in = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(u, l)))) & ~above;
      if constexpr (Stage) {
        const unsigned found = above | in;
        if (fill <= room_end) {
          const __m256i lanes =
              _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&lane_pack[found])));
          _mm256_storeu_ps(stage_values + fill, _mm256_permutevar8x32_ps(a, lanes));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(stage_list + fill),
                              _mm256_add_epi32(_mm256_set1_epi32(std::int32_t(std::uint32_t(p))), lanes));
          fill += mask8_count[found];
        } else if (found) {
          stage_full = true;
        }
      }
      ix[j] = std::uint8_t(above);
      k += mask8_count[above];
      if (in) [[unlikely]] {
        b += mask8_count[in];
        pool.add(in, p, acc_in);
      }
    }
    kept += k;
    in_bracket += b;
    if constexpr (Stage) {
      stage.fill = fill;
      stage.full = stage_full;
    }
    if constexpr (sum) {
      alignas(32) std::int32_t nf8[8], top8[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(nf8), nf);
      _mm256_store_si256(reinterpret_cast<__m256i*>(top8), top);
      for (int q = 0; q < 8; ++q) {
        src.nonfinite += std::uint32_t(nf8[q]);
        if constexpr (Src::wants_top) src.top = top8[q] > src.top ? top8[q] : src.top;
      }
    }
    return j;
  }
  // marks_avx2's work 16 entries an iteration (groups [j, full) two at a time;
  // returns the first group not done: full, or full - 1 for an odd count). The
  // entries above lo are packed by a compress into registers, stored whole while
  // 16 slots are left in the region (the stores past the count are overwritten by
  // the next group's); counts are popcounts of the compare masks.
  template <bool Stage, class Src>
  __attribute__((target("avx512f,avx2,popcnt"))) static std::size_t marks_avx512(
      Src& src, std::size_t base, std::size_t j, std::size_t full, std::int32_t hi, std::int32_t lo_m1,
      std::uint8_t* ix, unsigned long long& kept, unsigned long long& in_bracket, pool_writer& pool,
      stage_writer& stage) {
    constexpr bool sum = !std::is_same_v<Src, acc_source>;
    const __m512i h = _mm512_set1_epi32(hi), l = _mm512_set1_epi32(lo_m1), abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i finite_max = _mm512_set1_epi32(std::int32_t(inf_bits) - 1);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i top = _mm512_set1_epi32(-1);
    const auto [acc_in, g, r, acc_out] = loop_sources_of(src);
    unsigned long long k = 0, b = 0, nf = 0;
    std::uint32_t* stage_list = stage.list;
    float* stage_values = stage.values;
    std::size_t fill = stage.fill;
    const std::size_t room_end = stage.end >= 16 ? stage.end - 16 : 0;  // a whole 16-lane store fits below it
    bool stage_full = stage.full;
    for (; j + 2 <= full; j += 2) {
      const std::size_t p = base + 8 * j;
      __m512 a;
      if constexpr (sum) {
        a = _mm512_add_ps(_mm512_loadu_ps(g + p), _mm512_loadu_ps(r + p));
        _mm512_storeu_ps(acc_out + p, a);
      } else {
        a = _mm512_loadu_ps(acc_in + p);
      }
      const __m512i u = _mm512_and_si512(_mm512_castps_si512(a), abs_mask);
      if constexpr (sum) {
        nf += unsigned(__builtin_popcount(unsigned(_mm512_cmpgt_epi32_mask(u, finite_max))));
        if constexpr (Src::wants_top) top = _mm512_max_epi32(top, u);
      }
      const unsigned above = _mm512_cmpgt_epi32_mask(u, h);
      const unsigned found = _mm512_cmpgt_epi32_mask(u, l) | above;
      const unsigned in = found & ~above;
      if constexpr (Stage) {
        if (fill <= room_end) {
          _mm512_storeu_ps(stage_values + fill, _mm512_maskz_compress_ps(__mmask16(found), a));
          const __m512i at = _mm512_add_epi32(_mm512_set1_epi32(std::int32_t(std::uint32_t(p))), lane);
          _mm512_storeu_si512(stage_list + fill, _mm512_maskz_compress_epi32(__mmask16(found), at));
          fill += unsigned(__builtin_popcount(found));
        } else if (found) {
          stage_full = true;
        }
      }
      const auto bytes = std::uint16_t(above);
      std::memcpy(ix + j, &bytes, 2);  // group j's byte, then group j + 1's
      k += unsigned(__builtin_popcount(above));
      if (in) [[unlikely]] {
        b += unsigned(__builtin_popcount(in));
        pool.add(in, p, acc_in);
      }
    }
    kept += k;
    in_bracket += b;
    if constexpr (Stage) {
      stage.fill = fill;
      stage.full = stage_full;
    }
    if constexpr (sum) {
      src.nonfinite += std::uint32_t(nf);
      if constexpr (Src::wants_top) src.top = std::max(src.top, _mm512_reduce_max_epi32(top));
    }
    return j;
  }
#endif

  void mark_all(const float* acc, std::int32_t t, std::uint8_t* index) {
    pass(acc_source{acc}, t, 0x7fffffff, index);
  }

  // The `rank`-th largest |acc| bits among the bracket's entries (rank <= the
  // entries in the pool). A histogram of their bits above lo (the bracket spans
  // few float patterns) names the bin holding it; only that bin's entries are
  // ordered, in sample_ (free once bracket() is done). A bin too full for it
  // falls back to ordering the whole pool.
  std::uint32_t select_in_pool(std::size_t rank) {
    constexpr int bins = 2048;
    const std::size_t segs = std::min(next_seg_, seg_fill_.size());
    const auto range = std::uint32_t(std::int64_t(bracket_hi_) - std::int64_t(bracket_lo_m1_));  // >= 1
    const int width = std::bit_width(range - 1u);
    const int shift = width > 11 ? width - 11 : 0;
    const auto bin_of = [&](std::uint64_t entry) {
      return (std::uint32_t(entry >> 32) - std::uint32_t(bracket_lo_m1_) - 1u) >> shift;
    };
    std::array<std::uint32_t, bins> hist{};
    for_each_pooled([&](std::uint64_t entry) { ++hist[bin_of(entry)]; });
    std::size_t above = 0;
    int bin = bins - 1;
    for (; bin > 0 && above + hist[std::size_t(bin)] < rank; --bin) above += hist[std::size_t(bin)];
    const std::size_t in_bin = hist[std::size_t(bin)], r = rank - above;  // r: rank within the bin, 1-based
    if (in_bin <= sample_.size()) {
      std::uint32_t* u = sample_.data();
      std::size_t m = 0;
      for_each_pooled([&](std::uint64_t entry) {
        if (bin_of(entry) == std::uint32_t(bin)) u[m++] = std::uint32_t(entry >> 32);
      });
      std::nth_element(u, u + (r - 1), u + m, std::greater<std::uint32_t>());
      return u[r - 1];
    }
    // Partly filled segments are padded with zeros: below every entry, so the rank holds.
    for (std::size_t k = 0; k < segs; ++k)
      std::fill(pool_.data() + k * segment_ + seg_fill_[k], pool_.data() + (k + 1) * segment_, 0ull);
    std::uint64_t* p = pool_.data();
    std::nth_element(p, p + (rank - 1), p + segs * segment_, std::greater<std::uint64_t>());
    // The entries moved between segments: every slot is an entry or a zero now (patch() reads them all).
    std::fill(seg_fill_.begin(), seg_fill_.begin() + std::ptrdiff_t(segs), std::uint32_t(segment_));
    return std::uint32_t(p[rank - 1] >> 32);
  }

  // Marks the bracket entries above t (those ranked above the target: `rank` - 1
  // of them) and counts them into their chunks' kept_. Positions fit 32 bits (the
  // kept list's), so the shard is a 32-bit division; the chunk is found by
  // comparing the group with the chunks' first groups (no division).
  void patch(std::uint32_t t, std::uint8_t* index) {
    const layout l = lay_;
    const std::size_t gps = groups_per_shard_, G = groups_;
    const auto bits = std::size_t(l.index_bits);
    const auto shard_size = std::uint32_t(l.shard_size);
    std::size_t chunk_first[host_chunks];
    for (int c = 0; c < host_chunks; ++c) chunk_first[c] = chunk_begin(G, c);
    for_each_pooled([&](std::uint64_t entry) {
      if (std::uint32_t(entry >> 32) <= t) return;
      const auto pos = std::uint32_t(entry);
      const std::uint32_t s = pos / shard_size, e = pos - s * shard_size;
      const std::size_t gi = std::size_t(s) * gps + e / 8u, bit = std::size_t(e) * bits;
      std::uint8_t* b = index + std::size_t(s) * l.index_bytes + bit / 8;
      *b = std::uint8_t(*b | (1u << (bit % 8)));
      int c = 0;  // the last chunk whose first group is <= gi
      for (int q = 1; q < host_chunks; ++q) c += chunk_first[q] <= gi ? 1 : 0;
      ++kept_[c + 1];
    });
  }

  // f(entry) for every entry in the pool's used segments ((u << 32) | position).
  template <class F>
  void for_each_pooled(F f) const {
    const std::size_t segs = std::min(next_seg_, seg_fill_.size());
    for (std::size_t k = 0; k < segs; ++k) {
      const std::uint64_t* seg = pool_.data() + k * segment_;
      for (std::uint32_t i = 0; i < seg_fill_[k]; ++i) f(seg[i]);
    }
  }

  layout lay_{};
  std::size_t groups_per_shard_ = 0, groups_ = 0;
  std::vector<std::uint32_t> sample_;
  std::size_t segment_ = 0;
  std::vector<std::uint64_t> pool_;      // bracket entries, segment by segment
  std::vector<std::uint32_t> seg_fill_;  // entries in each segment
  std::size_t next_seg_ = 0;
  std::int32_t bracket_hi_ = 0, bracket_lo_m1_ = -1;  // the last bracket: its pool holds lo_m1 < |acc| bits <= hi
  bool overflow_ = false;
  unsigned long long kept_[host_chunks + 1] = {};
  unsigned long long bracket_count_[host_chunks] = {};
  kept_stage stage_{};                        // where passes stage the entries above lo
  std::size_t staged_count_[host_chunks] = {};  // entries staged per chunk by the last pass
  bool staged_ = false;                       // the last pass staged every entry it found
  bool from_stage_ = false;                   // the last list() came from the stage
  std::uint32_t threshold_ = 0;               // the threshold the index was last marked at
};

}  // namespace detail::host
TAGC_END_NAMESPACE
