#pragma once
// defines: the host's marking loops (threshold_marker.hpp runs them): 8 entries
//          at a time, their |x| bits compared with the bracket [lo, hi]
//          (sample_bracket.hpp): the index byte (counter 1 above hi), the kept
//          count, the bracket's entries pooled (bracket_pool.hpp) and every entry
//          above lo staged into the kept list; reading acc, or summing g +
//          residual into acc as they go (pass 0 fused with marking).
//
// The loop's vector width: AVX-512 (16 entries an instruction, two index bytes
// per compare, the staged entries packed by a compress) or AVX2 (8 entries, one
// byte, packed by a lane table) where the CPU has them (chosen at run time: the
// build targets baseline x86-64), else SSE2 (two compares per byte, in
// threshold_marker.hpp's pass). Same results bit for bit: the same float
// additions and integer compares, the same entries staged and pooled in the same
// order. host_simd_limit() caps the width for tests, which hold each narrower loop
// to the portable path on machines that would otherwise always take the widest.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__SSE2__) && !defined(__CUDACC__)
#  include <emmintrin.h>
#  define TAGC_HOST_SSE2 1
#endif
#if defined(TAGC_HOST_SSE2) && (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#  include <immintrin.h>
#  define TAGC_HOST_AVX2 1  // an AVX2 marking loop, chosen at run time (the build targets baseline x86-64)
#endif

#include "../../core/bits.hpp"
#include "../../core/config.hpp"
#include "../host_compress.hpp"
#include "bracket_pool.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

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
inline loop_sources loop_sources_of(const Src& src) {
  if constexpr (std::is_same_v<Src, acc_source>) return {src.acc, nullptr, nullptr, nullptr};
  else return {src.acc, src.g, src.r, src.acc};
}

// Sources with an AVX2 loop: acc, or g + residual with a float residual (a bf16
// residual widens entry by entry: the SSE2 loop).
template <class Src>
inline constexpr bool avx2_source = std::is_same_v<Src, acc_source> || std::is_same_v<Src, sum_source<float, true>> ||
                                    std::is_same_v<Src, sum_source<float, false>>;

// What differs between the vector widths of the marking loop below: the lanes
// (`lanes` entries, `groups` 8-entry groups, one index byte each, a time), a
// compare that yields a bitmask (bit k: entry k), the packing of the entries
// above lo into the stage, and counting a mask's bits. The rest of the loop is
// written once, on GNU vector types of the width (`floats`, `ints`): the compiler
// emits the width's instructions for it once the loop is inlined into the width's
// entry point below (marks_avx2, marks_avx512), which carries its target. Vectors
// cross a call only by reference: a vector argument by value outside its target
// would change the calling convention.
#define TAGC_AVX2_TARGET __attribute__((target("avx2")))
#define TAGC_AVX512_TARGET __attribute__((target("avx512f,avx2,popcnt")))

// AVX2: 8 entries, one index byte per compare; the staged entries packed by a
// lane table (lane_pack); counts by table (mask8_count).
struct avx2_lanes {
  static constexpr std::size_t groups = 1, lanes = 8;
  using index_bytes = std::uint8_t;
  using floats = float __attribute__((vector_size(32)));
  using ints = std::int32_t __attribute__((vector_size(32)));
  TAGC_AVX2_TARGET static unsigned greater(const ints& u, const ints& bound) {
    return unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(__m256i(u), __m256i(bound)))));
  }
  TAGC_AVX2_TARGET static void stage(const floats& a, unsigned found, std::size_t p, std::uint32_t* list,
                                     float* values) {
    const __m256i at = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&lane_pack[found])));
    _mm256_storeu_ps(values, _mm256_permutevar8x32_ps(__m256(a), at));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(list),
                        _mm256_add_epi32(_mm256_set1_epi32(std::int32_t(std::uint32_t(p))), at));
  }
  static unsigned count(unsigned mask) { return mask8_count[mask]; }
};

// AVX-512: 16 entries (two groups, two index bytes) per compare, which yields the
// mask itself; the staged entries packed by a compress; counts are popcounts.
struct avx512_lanes {
  static constexpr std::size_t groups = 2, lanes = 16;
  using index_bytes = std::uint16_t;  // group j's byte, then group j + 1's
  using floats = float __attribute__((vector_size(64)));
  using ints = std::int32_t __attribute__((vector_size(64)));
  TAGC_AVX512_TARGET static unsigned greater(const ints& u, const ints& bound) {
    return _mm512_cmpgt_epi32_mask(__m512i(u), __m512i(bound));
  }
  TAGC_AVX512_TARGET static void stage(const floats& a, unsigned found, std::size_t p, std::uint32_t* list,
                                       float* values) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm512_storeu_ps(values, _mm512_maskz_compress_ps(__mmask16(found), __m512(a)));
    const __m512i at = _mm512_add_epi32(_mm512_set1_epi32(std::int32_t(std::uint32_t(p))), lane);
    _mm512_storeu_si512(list, _mm512_maskz_compress_epi32(__mmask16(found), at));
  }
  TAGC_AVX512_TARGET static unsigned count(unsigned mask) { return unsigned(__builtin_popcount(mask)); }
};

// The 1-bit index's whole groups [j, full) of the shard at `base`, Lanes::groups
// at a time (returns the first group not done: full, or less where fewer than
// Lanes::groups are left): what pass()'s SSE2 loop computes (acc written, NaN/Inf
// counted and max |acc| kept when summing; index bytes, kept count, bracket
// entries pooled), the same float additions and integer compares. Pointers are
// copied to locals: the index byte stores may alias anything, and would otherwise
// reload them every iteration.
// With Stage, the entries above lo go to `stage`, packed and stored whole (no
// branch per group: the stores past the count are overwritten by the next
// iteration's), while Lanes::lanes slots are left in the region.
template <class Lanes, bool Stage, class Src>
inline std::size_t marks_loop(Src& src, std::size_t base, std::size_t j, std::size_t full, std::int32_t hi,
                              std::int32_t lo_m1, std::uint8_t* ix, unsigned long long& kept,
                              unsigned long long& in_bracket, bracket_pool::writer& pool, stage_writer& stage) {
  using floats = typename Lanes::floats;
  using ints = typename Lanes::ints;
  constexpr bool sum = !std::is_same_v<Src, acc_source>;
  constexpr std::size_t groups = Lanes::groups, lanes = Lanes::lanes;
  const ints h = ints{} + hi, l = ints{} + lo_m1, finite_max = ints{} + (std::int32_t(inf_bits) - 1);
  ints nf{}, top = ints{} - 1;  // per lane: NaN/Inf seen, max |acc| bits
  const auto [acc_in, g, r, acc_out] = loop_sources_of(src);
  unsigned long long k = 0, b = 0;
  std::uint32_t* stage_list = stage.list;
  float* stage_values = stage.values;
  std::size_t fill = stage.fill;
  const std::size_t room_end = stage.end >= lanes ? stage.end - lanes : 0;  // a whole store fits below it
  bool stage_full = stage.full;
  const std::size_t last = full >= groups ? full - (groups - 1) : 0;  // j < last: `groups` groups left
  for (; j < last; j += groups) {
    const std::size_t p = base + 8 * j;
    floats a;
    if constexpr (sum) {
      floats gv, rv;
      std::memcpy(&gv, g + p, sizeof gv);
      std::memcpy(&rv, r + p, sizeof rv);
      a = gv + rv;
      std::memcpy(acc_out + p, &a, sizeof a);
    } else {
      std::memcpy(&a, acc_in + p, sizeof a);
    }
    const ints u = ints(a) & 0x7fffffff;  // |x| bits (a vector cast keeps the bits)
    if constexpr (sum) {
      nf -= u > finite_max;  // -(-1) per NaN/Inf
      if constexpr (Src::wants_top) top = u > top ? u : top;
    }
    const unsigned above = Lanes::greater(u, h);
    const unsigned found = Lanes::greater(u, l) | above;
    const unsigned in = found & ~above;
    if constexpr (Stage) {
      if (fill <= room_end) {
        Lanes::stage(a, found, p, stage_list + fill, stage_values + fill);
        fill += Lanes::count(found);
      } else if (found) {
        stage_full = true;
      }
    }
    const auto bytes = typename Lanes::index_bytes(above);
    std::memcpy(ix + j, &bytes, sizeof bytes);
    k += Lanes::count(above);
    if (in) [[unlikely]] {
      b += Lanes::count(in);
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
    for (std::size_t q = 0; q < lanes; ++q) {
      src.nonfinite += std::uint32_t(nf[q]);
      if constexpr (Src::wants_top) src.top = top[q] > src.top ? top[q] : src.top;
    }
  }
  return j;
}

// The loop in each width (marks_loop's arguments after Lanes): `flatten` inlines
// it, and the lanes' operations, here under this function's target, so no call is
// left in the loop but pool.add's.
template <bool Stage, class... Args>
TAGC_AVX2_TARGET __attribute__((flatten)) inline std::size_t marks_avx2(Args&&... args) {
  return marks_loop<avx2_lanes, Stage>(std::forward<Args>(args)...);
}
template <bool Stage, class... Args>
TAGC_AVX512_TARGET __attribute__((flatten)) inline std::size_t marks_avx512(Args&&... args) {
  return marks_loop<avx512_lanes, Stage>(std::forward<Args>(args)...);
}
#undef TAGC_AVX2_TARGET
#undef TAGC_AVX512_TARGET
#endif

}  // namespace detail::host
TAGC_END_NAMESPACE
