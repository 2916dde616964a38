#pragma once
// defines: tagc::float16 — an IEEE-754 binary16 half float (1 sign, 5 exponent,
//          10 mantissa bits) that the communicators can reduce with SUM, and the
//          float <-> float16 conversions.
//
// Like tagc::bfloat16 (core/bfloat16.hpp), only what gradient reductions need:
// conversion from float with round-to-nearest-even (NaN stays NaN, quieted;
// Inf stays Inf; subnormals are produced and kept, not flushed; a float at or
// above 65520 rounds to Inf as IEEE rounding says), exact conversion to float,
// bitwise access, and the reduction step `fp16_add` (sum in float, rounded
// once per step, as NCCL's ncclFloat16 sum and our MPI / local sums do).
//
// fp16 has 3 more mantissa bits than bf16 but its largest finite value is 65504
// and its smallest normal 2^-14: gradients and their sums leave that range
// easily. The conversions here never hide that (overflow *is* Inf); the Reducer
// scales fp16 values by a power of two agreed across ranks so that its sums
// cannot overflow (see the fp16 notes in policy/packed.hpp).
//
// Layout-compatible with CUDA's __half and with ncclFloat16 elements: trivially
// copyable, 2 bytes, the binary16 bit pattern in native byte order.

#include <cstdint>
#include <cuda/std/bit>

#include "config.hpp"
#include "half_type.hpp"

TAGC_BEGIN_NAMESPACE

inline constexpr float float16_max = 65504.0f;

// Round a float to the nearest binary16 bit pattern, ties to even.
TAGC_HOST_DEVICE constexpr std::uint16_t fp16_bits_from_float(float f) noexcept {
  const std::uint32_t u = cuda::std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)  // NaN: keep sign and the top payload bits, set the quiet bit
    return std::uint16_t(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
  if (a >= 0x477ff000u)  // >= 65520 = 65504 + half an ulp (a tie, going to the even Inf), and Inf
    return std::uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // normal in fp16 (>= 2^-14): rebias the exponent by 127 - 15
    const std::uint32_t r = a - (112u << 23);
    const std::uint32_t lsb = (r >> 13) & 1u;
    return std::uint16_t(sign | ((r + 0x0fffu + lsb) >> 13));  // a mantissa carry moves the exponent up, as it should
  }
  // Subnormal fp16 (quantum 2^-24) or zero: m = round(|f| * 2^24), ties to even.
  const std::uint32_t e = a >> 23;
  if (e < 102u) return std::uint16_t(sign);  // |f| < 2^-25: rounds to zero (float subnormals included)
  const std::uint32_t mant = (a & 0x007fffffu) | 0x00800000u;
  const std::uint32_t shift = 126u - e;  // 14 .. 24
  const std::uint32_t m = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  const std::uint32_t up = (rem > half || (rem == half && (m & 1u))) ? 1u : 0u;
  return std::uint16_t(sign | (m + up));  // m + up = 0x400 is the smallest normal: right bits too
}

// The float of a binary16 pattern: exact (every fp16 value is a float).
TAGC_HOST_DEVICE constexpr float float_from_fp16_bits(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x03ffu;
  if (e == 0x1fu) return cuda::std::bit_cast<float>(sign | 0x7f800000u | (m << 13));  // Inf / NaN
  if (e != 0) return cuda::std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return cuda::std::bit_cast<float>(sign);
  std::uint32_t fe = 113u;  // subnormal m * 2^-24: normalise
  while (!(m & 0x0400u)) {
    m <<= 1;
    --fe;
  }
  return cuda::std::bit_cast<float>(sign | (fe << 23) | ((m & 0x03ffu) << 13));
}

struct float16 : half_type<float16> {  // bits, conversions, from_bits, ==: core/half_type.hpp
  using half_type::half_type;
  TAGC_HOST_DEVICE static constexpr std::uint16_t encode(float f) noexcept { return fp16_bits_from_float(f); }
  TAGC_HOST_DEVICE static constexpr float decode(std::uint16_t b) noexcept { return float_from_fp16_bits(b); }
};

static_assert(sizeof(float16) == 2 && alignof(float16) == 2, "float16 must be two bytes");

// One reduction step: a + b in float, rounded once to fp16.
TAGC_HOST_DEVICE constexpr float16 fp16_add(float16 a, float16 b) noexcept { return float16(float(a) + float(b)); }

TAGC_END_NAMESPACE
