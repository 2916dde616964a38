#pragma once
// defines: small bit tricks shared by the kernels (float <-> ordered bits, popcount).

#include <cstdint>
#include <cuda/std/bit>

#include "config.hpp"

TAGC_BEGIN_NAMESPACE

// |x| as its IEEE-754 bit pattern. For non-negative floats the unsigned order of
// the bits is the numeric order, which is what radix selection needs; anything
// >= 0x7f800000 is Inf or NaN.
TAGC_HOST_DEVICE inline std::uint32_t abs_bits(float x) noexcept {
  return cuda::std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
}
inline constexpr std::uint32_t inf_bits = 0x7f800000u;

TAGC_HOST_DEVICE inline float float_from_bits(std::uint32_t b) noexcept { return cuda::std::bit_cast<float>(b); }

TAGC_HOST_DEVICE inline int popcount8(std::uint8_t b) noexcept { return cuda::std::popcount(unsigned(b)); }

TAGC_END_NAMESPACE
