#pragma once
// defines: tagc::detail::host::sample_bracket and sample_ranks — a bracket [lo, hi]
//          around the threshold from a sample of |acc|: the host's threshold
//          select (threshold_marker.hpp) keeps everything above hi whatever the
//          exact threshold is, nothing below lo, and only the ~1 % in the bracket
//          need the threshold.
//
// Why a sample (on a CPU): the radix select's histograms cost a scattered
// increment per element, and gradient magnitudes crowd a few bins, so the
// increments chain through the same counters (store-to-load latency, ~5 cycles an
// element). A sample of 64K entries brackets the threshold instead; a bracket that
// misses (the sample was unlucky, or a crowded bin) costs the marker a fallback.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "../../core/bits.hpp"
#include "../../core/config.hpp"

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


// The bracket: entries with lo_m1 < |x| bits <= hi hold the threshold; hi =
// 0x7fffffff (nothing above) or lo_m1 = -1 (nothing below) where the rank falls
// outside the sample.
struct bracket_bounds {
  std::int32_t hi = 0x7fffffff, lo_m1 = -1;
};

// [lo, hi] for the `target`-th largest |value(p)| (1-based) of n entries: the
// target's rank in the sample +- 6 standard deviations (+16). `s`: room for
// sample_block * sample_blocks_for(n) entries (reordered).
template <class Value>
inline bracket_bounds sample_bracket(Value value, std::size_t n, std::uint32_t target, std::uint32_t* s) {
  const std::size_t blocks = sample_blocks_for(n), per = n / sample_block;
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
  return {k_hi < m ? std::int32_t(u_hi) : 0x7fffffff, k_lo < m ? std::int32_t(u_lo) - 1 : -1};
}

}  // namespace detail::host
TAGC_END_NAMESPACE
