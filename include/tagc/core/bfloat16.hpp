#pragma once
// defines: tagc::bfloat16 — a 16-bit brain float (1 sign, 8 exponent, 7 mantissa
//          bits: the top half of an IEEE-754 float) that the communicators can
//          reduce with SUM, and the float <-> bfloat16 conversions.
//
// Only what gradient reductions need: conversion from float with
// round-to-nearest-even (NaN stays NaN, quieted; Inf stays Inf; a float above
// the largest bf16 rounds to Inf as IEEE rounding says; subnormals are kept,
// not flushed), exact conversion to float, bitwise access, and the reduction
// step `bf16_add`. There is no bf16 arithmetic: a sum is computed in fp32 and
// rounded once per reduction step, which is how the backends reduce it:
//   - local_communicator adds all ranks in float, in rank order, and rounds once;
//   - mpi_communicator's user-defined op adds two bf16 vectors in float and rounds
//     each pairwise result, so a ring / butterfly reduction rounds at every hop,
//     as NCCL's ncclBfloat16 sum does (up to log2(N) or N-1 roundings).
//
// Layout-compatible with CUDA's __nv_bfloat16 and with ncclBfloat16 elements:
// trivially copyable, 2 bytes, the bf16 bit pattern in native byte order.

#include <cstdint>
#include <cuda/std/bit>

#include "config.hpp"
#include "half_type.hpp"

TAGC_BEGIN_NAMESPACE

// Round a float to the nearest bf16 bit pattern, ties to even.
TAGC_HOST_DEVICE constexpr std::uint16_t bf16_bits_from_float(float f) noexcept {
  const std::uint32_t u = cuda::std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)                  // NaN: keep sign and top payload,
    return std::uint16_t((u >> 16) | 0x0040u);          // set the quiet bit so it cannot become Inf
  const std::uint32_t lsb = (u >> 16) & 1u;              // ties go to the even result
  return std::uint16_t((u + 0x7fffu + lsb) >> 16);       // carries into the exponent (and to Inf) as it should
}

// The float whose top half is `b`: exact.
TAGC_HOST_DEVICE constexpr float float_from_bf16_bits(std::uint16_t b) noexcept {
  return cuda::std::bit_cast<float>(std::uint32_t(b) << 16);
}

struct bfloat16 : half_type<bfloat16> {  // bits, conversions, from_bits, ==: core/half_type.hpp
  using half_type::half_type;
  TAGC_HOST_DEVICE static constexpr std::uint16_t encode(float f) noexcept { return bf16_bits_from_float(f); }
  TAGC_HOST_DEVICE static constexpr float decode(std::uint16_t b) noexcept { return float_from_bf16_bits(b); }
};

static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2, "bfloat16 must be two bytes");

// One reduction step: a + b in float, rounded once to bf16.
TAGC_HOST_DEVICE constexpr bfloat16 bf16_add(bfloat16 a, bfloat16 b) noexcept {
  return bfloat16(float(a) + float(b));
}

TAGC_END_NAMESPACE
