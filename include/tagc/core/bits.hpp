#pragma once
// defines: small bit tricks shared by the kernels (float <-> ordered bits, popcount8/64).

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

// Set bits of a 64-bit word. A build for baseline x86-64 (no -mpopcnt) turns
// __builtin_popcountll into a call into libgcc per word; the SWAR form below is a
// dozen inline instructions (and vectorises in a counting loop).
TAGC_HOST_DEVICE inline int popcount64(std::uint64_t x) noexcept {
#if defined(__CUDA_ARCH__)
  return __popcll(x);
#elif defined(__POPCNT__) || defined(__ARM_NEON) || defined(__aarch64__)
  return __builtin_popcountll(x);
#else
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return int((x * 0x0101010101010101ull) >> 56);
#endif
}

TAGC_END_NAMESPACE
