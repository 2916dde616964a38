// bfloat16: conversions (round-to-nearest-even, NaN/Inf, subnormals) and bf16
// sums through the in-process communicator against a double reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include <tagc/comm/counting.hpp>
#include <tagc/comm/local.hpp>
#include <tagc/core/bfloat16.hpp>

using namespace tagc;

static_assert(std::is_trivially_copyable_v<bfloat16>);
static_assert(std::is_trivially_default_constructible_v<bfloat16>);
static_assert(sizeof(bfloat16) == 2);
static_assert(reducible<bfloat16>);
static_assert(bf16_bits_from_float(1.0f) == 0x3f80);  // constexpr conversions

namespace {
float f_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t b_of(std::uint32_t float_bits) { return bfloat16(f_of(float_bits)).bits; }
}  // namespace

TEST_CASE("bfloat16: conversion rounds to nearest, ties to even") {
  CHECK(b_of(0x3f800000u) == 0x3f80);  // 1.0 exactly
  CHECK(b_of(0x3f807fffu) == 0x3f80);  // just below half an ulp: down
  CHECK(b_of(0x3f808000u) == 0x3f80);  // tie, even below: stays
  CHECK(b_of(0x3f808001u) == 0x3f81);  // just above half: up
  CHECK(b_of(0x3f818000u) == 0x3f82);  // tie, odd below: up to even
  CHECK(b_of(0xbf818000u) == 0xbf82);  // same with the sign
  CHECK(b_of(0x3fffffffu) == 0x4000);  // mantissa carry into the exponent
  CHECK(b_of(0x7f7fffffu) == 0x7f80);  // FLT_MAX rounds to +Inf
  CHECK(b_of(0x7f7f7fffu) == 0x7f7f);  // largest finite bf16 stays finite
  CHECK(b_of(0x7f800000u) == 0x7f80);  // +Inf
  CHECK(b_of(0xff800000u) == 0xff80);  // -Inf
  CHECK(b_of(0x00000000u) == 0x0000);
  CHECK(b_of(0x80000000u) == 0x8000);  // -0 keeps its sign
  CHECK(b_of(0x00010000u) == 0x0001);  // smallest bf16 subnormal: not flushed
  CHECK(b_of(0x00008000u) == 0x0000);  // tie at the bottom: to even (zero)
  CHECK(b_of(0x00018000u) == 0x0002);
}

TEST_CASE("bfloat16: NaN stays NaN, Inf stays Inf") {
  // A NaN whose payload lives only in the low 16 bits would truncate to Inf.
  for (std::uint32_t u : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu, 0x7f80ffffu}) {
    CAPTURE(u);
    const bfloat16 b(f_of(u));
    CHECK(std::isnan(float(b)));
    CHECK((b.bits & 0x8000) == ((u >> 16) & 0x8000));  // sign kept
  }
  CHECK(std::isinf(float(bfloat16(std::numeric_limits<float>::infinity()))));
}

TEST_CASE("bfloat16: every bf16 value round-trips through float exactly") {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const auto x = bfloat16::from_bits(std::uint16_t(b));
    const float f = float(x);
    std::uint32_t fu;
    std::memcpy(&fu, &f, 4);
    REQUIRE(fu == b << 16);                               // to float is exact
    if (!std::isnan(f)) REQUIRE(bfloat16(f).bits == b);   // and back
    else REQUIRE(std::isnan(float(bfloat16(f))));
  }
}

TEST_CASE("bfloat16: conversion error is at most half an ulp (random floats vs double)") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
  for (int k = 0; k < 100000; ++k) {
    const float f = u(rng);
    const double r = double(float(bfloat16(f)));
    const int e = std::ilogb(f);
    const double half_ulp = std::ldexp(1.0, e - 8);  // bf16 has 7 stored mantissa bits
    REQUIRE(std::fabs(r - double(f)) <= half_ulp);
  }
}

namespace {
// Deterministic bf16 inputs of rank r: heavy-ish tailed values of mixed sign.
bfloat16 input(int r, std::size_t i) {
  const float v = float((int(i * 37 + std::size_t(r) * 101) % 199) - 99) * 0.013f * float(1 + (i % 5) * (r + 1));
  return bfloat16(v);
}
// Float sum in rank order, rounded once: what local_communicator promises.
bfloat16 local_reference(int n, std::size_t i) {
  float acc = float(input(0, i));
  for (int r = 1; r < n; ++r) acc += float(input(r, i));
  return bfloat16(acc);
}
double exact(int n, std::size_t i) {
  double acc = 0;
  for (int r = 0; r < n; ++r) acc += double(float(input(r, i)));
  return acc;
}
}  // namespace

TEST_CASE("local_communicator: bf16 all_reduce and reduce_scatter sum in float, round once") {
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const std::size_t block = 101;
    local_world w(n, std::chrono::seconds(30));
    w.run([&](local_communicator& plain) {
      counting_communicator<local_communicator> c(plain);
      const int me = c.rank();
      std::vector<bfloat16> in(block * std::size_t(n));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = input(me, i);

      std::vector<bfloat16> all(in.size());
      REQUIRE(c.all_reduce(std::span<const bfloat16>(in), std::span<bfloat16>(all)).ok());
      for (std::size_t i = 0; i < all.size(); ++i) {
        REQUIRE(all[i] == local_reference(n, i));
        // within half a bf16 ulp of the exact sum (the float sum of <= 4 bf16 values is exact here)
        const double e = exact(n, i);
        REQUIRE(std::fabs(double(float(all[i])) - e) <= std::fabs(e) * std::ldexp(1.0, -8) + 1e-30);
      }

      std::vector<bfloat16> part(block);
      REQUIRE(c.reduce_scatter(std::span<const bfloat16>(in), std::span<bfloat16>(part)).ok());
      for (std::size_t i = 0; i < block; ++i) REQUIRE(part[i] == local_reference(n, std::size_t(me) * block + i));
      CHECK(c.counters()[collective::reduce_scatter].payload_bytes == double(in.size() * 2));
    });
  }
}

TEST_CASE("local_communicator: ranks passing bf16 and float disagree with a message") {
  local_world w(2, std::chrono::seconds(30));
  w.run([&](local_communicator& c) {
    status s;
    if (c.rank() == 0) {
      std::vector<bfloat16> x(4, bfloat16(1.0f));
      s = c.all_reduce(std::span<const bfloat16>(x), std::span<bfloat16>(x));
    } else {
      std::vector<float> x(4, 1.0f);
      s = c.all_reduce(std::span<const float>(x), std::span<float>(x));
    }
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.what().find("bfloat16") != std::string::npos);
  });
}
