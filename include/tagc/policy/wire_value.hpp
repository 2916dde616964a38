#pragma once
// defines: tagc::wire_value (float | bfloat16 | float16), tagc::wire_type_id,
//          tagc::fp16_scale_exponent and the rounding helpers shared by the
//          packed and sketch value policies — how a value travels in 16 bits.
//
// A value x of a rank goes on the wire as V(x * 2^k): k = 0 for float and bf16
// (bf16 has float's range), and for fp16 a power of two agreed by all ranks
// every call (fp16_scale_exponent) so that no sum the collective forms can
// leave fp16's range (65504) — and so that small values do not sink into fp16's
// subnormals either. Scaling by 2^k is exact in float, so what the owner
// receives back, float(V(x * 2^k)) * 2^-k, differs from x only by the one
// rounding to V; that rounding is returned to the sender's residual
// (update_residual), so a rank loses nothing of its own values. What is not
// returned: the rounding of sums — of the collective's partial sums (every
// policy), and of a sketch cell's sum of this rank's rounded values (sketch
// policies: a cell mixes several entries, so its rounding belongs to no single
// entry; it is measured, reduce_stats::unfed_rounding).

#include <cstdint>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/bits.hpp"
#include "../core/config.hpp"
#include "../core/float16.hpp"

TAGC_BEGIN_NAMESPACE

template <class V>
concept wire_value = std::is_same_v<V, float> || std::is_same_v<V, bfloat16> || std::is_same_v<V, float16>;

// Stable ids (the communicators' type ids), for agreement checks and checkpoints.
template <wire_value V>
inline constexpr int wire_type_id = std::is_same_v<V, float> ? 0 : std::is_same_v<V, bfloat16> ? 7 : 8;
inline constexpr const char* wire_type_name(std::int64_t id) {
  return id == 0 ? "float" : id == 7 ? "bfloat16" : id == 8 ? "float16" : "?";
}
// fp16 needs a range scale; float and bf16 do not.
template <wire_value V>
inline constexpr bool wire_scaled = std::is_same_v<V, float16>;

// The smallest c with 2^c >= x (x >= 1).
constexpr int ceil_log2(std::uint64_t x) {
  int c = 0;
  while ((std::uint64_t(1) << c) < x) ++c;
  return c;
}

// The exponent k of the fp16 scale 2^k for one call. `top_bin` is 1 + the
// highest pass-0 histogram bin over all ranks (the top 10 bits of max |acc|;
// 0 when every acc is 0); `terms` bounds how many values one summed element
// adds up: world size x (1 for a packed slot, the most blocks sharing a sketch
// row for a cell). With |acc| < 2^(e+1), every sum stays below
// terms * 2^(e+1+k) <= 2^15, half of fp16's largest value, which leaves room
// for the roundings of the partial sums. k is clamped so that 2^k and 2^-k are
// normal floats (then scaling is exact).
constexpr int fp16_scale_exponent_unclamped(std::uint32_t top_bin, std::uint64_t terms) {
  if (top_bin == 0) return 0;
  const int biased = int((top_bin - 1u) >> 2);  // the float exponent field of max |acc|
  const int e = (biased == 0 ? -126 : biased - 127);
  return 14 - e - ceil_log2(terms < 1 ? 1 : terms);
}
constexpr int fp16_scale_exponent(std::uint32_t top_bin, std::uint64_t terms) {
  const int k = fp16_scale_exponent_unclamped(top_bin, terms);
  return k < -126 ? -126 : (k > 126 ? 126 : k);
}
// False when even 2^-126 cannot bring the sums below 2^15 (|acc| near float's
// largest values with thousands of terms): fp16 cannot carry them, the call is refused.
constexpr bool fp16_scale_fits(std::uint32_t top_bin, std::uint64_t terms) {
  return fp16_scale_exponent_unclamped(top_bin, terms) >= -126;
}

TAGC_END_NAMESPACE
