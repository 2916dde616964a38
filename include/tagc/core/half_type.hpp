#pragma once
// defines: tagc::half_type<Derived> — what the 16-bit wire floats tagc::bfloat16
//          and tagc::float16 share: the bit pattern (public, 2 bytes, trivially
//          copyable: layout-compatible with CUDA's and NCCL's 16-bit types), the
//          explicit conversions from and to float, from_bits, and bitwise ==.
//
// The format is Derived's: Derived::encode(float) rounds a float to its bit
// pattern and Derived::decode(bits) widens one back exactly. Each type stays a
// type of its own (a reducer's wire type is told apart by it), deriving from this
// and inheriting its constructors.

#include <cstdint>

#include "config.hpp"

TAGC_BEGIN_NAMESPACE

template <class Derived>
struct half_type {
  std::uint16_t bits;  // public so that the type stays aggregate-like and trivially copyable

  half_type() = default;  // uninitialised, like float
  TAGC_HOST_DEVICE constexpr explicit half_type(float f) noexcept : bits(Derived::encode(f)) {}
  TAGC_HOST_DEVICE constexpr explicit operator float() const noexcept { return Derived::decode(bits); }

  TAGC_HOST_DEVICE static constexpr Derived from_bits(std::uint16_t b) noexcept {
    Derived x{};
    x.bits = b;
    return x;
  }
  TAGC_HOST_DEVICE constexpr float to_float() const noexcept { return Derived::decode(bits); }

  // Bitwise identity (so NaN == NaN when the patterns match, and +0 != -0):
  // what tests of a transport need. Compare float(x) for numeric equality.
  TAGC_HOST_DEVICE friend constexpr bool operator==(Derived a, Derived b) noexcept { return a.bits == b.bits; }
};

TAGC_END_NAMESPACE
