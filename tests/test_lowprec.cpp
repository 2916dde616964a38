// Low precision: float16 conversions and sums, 16-bit sketch cells and packed
// values (bf16, fp16 with its range scale), and the bf16 residual with
// stochastic rounding — exactness where the arithmetic allows it, conservation
// to the documented tolerance where it does not, byte accounting, checkpoints.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <tagc/comm/counting.hpp>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

static_assert(std::is_trivially_copyable_v<float16> && sizeof(float16) == 2);
static_assert(reducible<float16>);
static_assert(fp16_bits_from_float(1.0f) == 0x3c00);  // constexpr conversions
static_assert(float_from_fp16_bits(0x7bff) == 65504.0f);

namespace {

float f_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Small reducers for the property tests: 256 lanes keep shards of a few
// thousand entries sketched (not exchanged densely).
template <class Values, class Sparsify = SparsifyPolicy, class Index = ExactIndexPolicy>
using reducer_of = Reducer<Sparsify, Index, Values, DecodePolicy<>>;
template <int Ratio, class V>
using sketch_of = SketchPolicy<Ratio, 256, V>;

// Every rank nonzero at the same sparse positions, values +-2^-10: every sum
// any policy forms here (a slot: <= 31 terms; a cell at load < 0.1: a handful
// of entries per rank) is an integer multiple of 2^-10 below 256 * 2^-10, so
// exactly representable in bf16 and fp16 — nothing may be lost or rounded.
input_fn exact_inputs(std::size_t n) {
  return [n](int r, int t) {
    std::vector<float> g(n, 0.0f);
    for (std::size_t i = std::size_t(t) % 7; i < n; i += 50)
      g[i] = ((i / 50 + std::size_t(r)) % 3 == 0 ? -1.0f : 1.0f) * 0x1p-10f;
    return g;
  };
}

// Inputs minus what was delivered minus what the residuals hold, per element.
std::vector<double> conservation_gap(const run_record& rec, int world, std::size_t n, int steps) {
  const layout& l = rec.lay;
  std::vector<double> gap(l.padded(), 0.0);
  for (int r = 0; r < world; ++r) {
    for (int t = 0; t < steps; ++t) {
      for (std::size_t i = 0; i < n; ++i) gap[i] += rec.in[r][t][i];
      for (std::size_t e = 0; e < l.shard_size; ++e) gap[std::size_t(r) * l.shard_size + e] -= rec.out[r][t][e];
    }
    for (std::size_t i = 0; i < n; ++i) gap[i] -= rec.residual[r][i];
  }
  return gap;
}

double l2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// Relative L2 error of step `t`'s delivered sum against the exact (double) sum
// of what a float run delivered at that step.
double relative_error(const run_record& rec, const run_record& ref, int world, int t) {
  std::vector<double> d, want;
  for (int r = 0; r < world; ++r)
    for (std::size_t e = 0; e < rec.out[r][t].size(); ++e) {
      d.push_back(double(rec.out[r][t][e]) - double(ref.out[r][t][e]));
      want.push_back(ref.out[r][t][e]);
    }
  return l2(d) / std::max(l2(want), 1e-300);
}

}  // namespace

// ---------------------------------------------------------------- float16

TEST_CASE("float16: conversion rounds to nearest even; overflow is Inf, never silent") {
  const auto h = [](float f) { return float16(f).bits; };
  CHECK(h(1.0f) == 0x3c00);
  CHECK(h(f_of(0x3f801000u)) == 0x3c00);  // 1 + 2^-11: tie, even below: stays
  CHECK(h(f_of(0x3f801001u)) == 0x3c01);  // just above the tie: up
  CHECK(h(f_of(0x3f803000u)) == 0x3c02);  // tie, odd below: up to even
  CHECK(h(-1.0f) == 0xbc00);
  CHECK(h(65504.0f) == 0x7bff);           // largest finite
  CHECK(h(65519.996f) == 0x7bff);         // below the halfway point to 65536: finite
  CHECK(h(65520.0f) == 0x7c00);           // the tie rounds to the even pattern, which is Inf
  CHECK(h(1e6f) == 0x7c00);
  CHECK(h(-1e6f) == 0xfc00);
  CHECK(h(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(h(0x1p-14f) == 0x0400);           // smallest normal
  CHECK(h(0x1p-24f) == 0x0001);           // smallest subnormal: kept, not flushed
  CHECK(h(0x1p-25f) == 0x0000);           // tie at the bottom: to even (zero)
  CHECK(h(0x1.8p-25f) == 0x0001);         // above the tie: up
  CHECK(h(0x1.8p-24f) == 0x0002);         // 1.5 quanta: tie, odd below: up
  CHECK(h(0x1.ffcp-15f) == 0x0400);       // rounds up across into the normals
  CHECK(h(-0.0f) == 0x8000);
  for (std::uint32_t u : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu}) {
    CAPTURE(u);
    CHECK(std::isnan(float(float16(f_of(u)))));
  }
}

TEST_CASE("float16: every pattern round-trips; random floats within half an ulp") {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = float(float16::from_bits(std::uint16_t(b)));
    if (std::isnan(f)) {
      REQUIRE(((b >> 10) & 0x1f) == 0x1f);
      continue;
    }
    REQUIRE(float16(f).bits == b);
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  std::uniform_int_distribution<int> ex(-30, 15);
  for (int k = 0; k < 100000; ++k) {
    const float f = k % 2 ? u(rng) : std::ldexp(u(rng) / 70000.0f, ex(rng));
    const double r = double(float(float16(f)));
    if (std::fabs(f) >= 65520.0f) {
      REQUIRE(std::isinf(r));
      continue;
    }
    const int e = std::max(std::ilogb(f), -14);  // subnormal quantum below 2^-14
    REQUIRE(std::fabs(r - double(f)) <= std::ldexp(1.0, e - 11));
  }
}

TEST_CASE("local_communicator: fp16 sums in float, rounded once; mixed with bf16 is refused") {
  for (int n : {1, 3, 4}) {
    local_world w(n, std::chrono::seconds(30));
    w.run([&](local_communicator& c) {
      std::vector<float16> in(8 * std::size_t(n)), out(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = float16(0.1f * float(i + 1) * float(c.rank() + 1));
      REQUIRE(c.all_reduce(std::span<const float16>(in), std::span<float16>(out)).ok());
      for (std::size_t i = 0; i < in.size(); ++i) {
        float acc = 0;
        for (int r = 0; r < n; ++r) acc += float(float16(0.1f * float(i + 1) * float(r + 1)));
        REQUIRE(out[i] == float16(acc));
      }
    });
  }
  local_world w(2, std::chrono::seconds(30));
  w.run([&](local_communicator& c) {
    std::vector<float16> h(4, float16(1.0f));
    std::vector<bfloat16> b(4, bfloat16(1.0f));
    const status s = c.rank() == 0 ? c.all_reduce(std::span<const float16>(h), std::span<float16>(h))
                                   : c.all_reduce(std::span<const bfloat16>(b), std::span<bfloat16>(b));
    CHECK(s.code() == errc::invalid_argument);
    CHECK(s.what().find("float16") != std::string::npos);
  });
}

TEST_CASE("fp16 range scale: sums of the agreed terms stay below 2^15, small values above the subnormals") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int e = -120; e <= 120; e += 7)
    for (std::uint64_t terms : {1ull, 2ull, 31ull, 64ull, 31ull * 45ull}) {
      const float m = std::ldexp(mant(rng), e);  // max |acc|
      const std::uint32_t top = (abs_bits(m) >> 21) + 1u;
      const int k = fp16_scale_exponent(top, terms);
      CAPTURE(e); CAPTURE(terms); CAPTURE(k);
      if (k > -126 && k < 126) {
        CHECK(double(terms) * std::ldexp(double(m), k) < 32768.0);          // cannot overflow
        CHECK(double(terms) * std::ldexp(double(m), k) >= 32768.0 / 8.0);   // and wastes at most ~2 bits
      }
    }
  CHECK(fp16_scale_exponent(0, 8) == 0);  // all zero
  // Beyond what 2^-126 can bring below 2^15: refused, not clamped into overflow.
  const std::uint32_t huge = (abs_bits(std::ldexp(1.5f, 126)) >> 21) + 1u;
  CHECK(fp16_scale_fits(huge, 1));
  CHECK_FALSE(fp16_scale_fits(huge, 1u << 20));
  CHECK(fp16_scale_fits((abs_bits(1.0f) >> 21) + 1u, 1u << 20));
}

// ---------------------------------------------------------------- stochastic rounding

TEST_CASE("bf16 stochastic rounding: unbiased, exact where representable, never up to Inf, deterministic") {
  for (float x : {1.0f + 0x1p-12f, -3.14159f, 1e-30f, 0.7f, -1e20f, 0x1.fffffep-1f}) {
    CAPTURE(x);
    double sum = 0;
    const int draws = 1 << 16;
    const std::uint32_t seed = detail::residual_seed(3, 1);
    for (int i = 0; i < draws; ++i) {
      const std::uint16_t b = detail::bf16_bits_stochastic(x, detail::residual_random(std::size_t(i), seed,
                                                                                       detail::residual_site::update));
      const float y = float_from_bf16_bits(b);
      // Only the two neighbours: the truncation and one ulp up.
      const float lo = float_from_bf16_bits(std::uint16_t(abs_bits(x) >> 16)) * (x < 0 ? -1.0f : 1.0f);
      REQUIRE((y == lo || std::fabs(y) > std::fabs(lo)));
      sum += double(y);
    }
    const double ulp = std::ldexp(1.0, std::ilogb(x) - 7);
    // E = x; the mean of 2^16 Bernoulli(p) ulps has sd <= ulp / 2 / 256.
    CHECK(std::fabs(sum / draws - double(x)) <= 5.0 * ulp / 512.0);
  }
  CHECK(detail::bf16_bits_stochastic(1.5f, 0xffffu) == bfloat16(1.5f).bits);  // representable: unchanged
  CHECK(detail::bf16_bits_stochastic(std::numeric_limits<float>::max(), 0xffffu) == 0x7f7f);  // not Inf
  CHECK(std::isinf(float_from_bf16_bits(detail::bf16_bits_stochastic(INFINITY, 0))));
  CHECK(detail::residual_random(12, detail::residual_seed(7, 2), detail::residual_site::update) ==
        detail::residual_random(12, detail::residual_seed(7, 2), detail::residual_site::update));
  CHECK(detail::residual_seed(7, 2) != detail::residual_seed(8, 2));
  CHECK(detail::residual_seed(7, 2) != detail::residual_seed(7, 3));
}

// ---------------------------------------------------------------- reducers

TEST_CASE("16-bit values are exact where every sum is representable, at world sizes 2..16 and 31") {
  const std::size_t n = 65536;
  for (int world : {2, 3, 4, 5, 7, 8, 15, 16, 31}) {
    CAPTURE(world);
    const auto in = exact_inputs(n);
    auto f32 = simulate<reducer_of<sketch_of<4, float>>>(world, n, 0.0, 2, in);
    REQUIRE(f32.failures.empty());
    expect_dense_sum(f32, world, n, 0.0, 2);
    REQUIRE_FALSE(f32.lay.dense);
    const auto same = [&](const run_record& rec, const char* what) {
      CAPTURE(what);
      REQUIRE(rec.failures.empty());
      expect_dense_sum(rec, world, n, 0.0, 2);  // every entry arrives, residuals exactly the reference's
      for (int r = 0; r < world; ++r) CHECK(rec.out[r] == f32.out[r]);
      CHECK(rec.stats[0][1].unfed_rounding == 0.0);
      CHECK(rec.stats[0][1].value_type_bytes == 2);
    };
    same(simulate<reducer_of<sketch_of<4, bfloat16>>>(world, n, 0.0, 2, in), "bf16 sketch");
    same(simulate<reducer_of<sketch_of<4, float16>>>(world, n, 0.0, 2, in), "fp16 sketch");
    same(simulate<reducer_of<PackedBf16Policy>>(world, n, 0.0, 2, in), "bf16 packed");
    same(simulate<reducer_of<PackedFp16Policy>>(world, n, 0.0, 2, in), "fp16 packed");
    same(simulate<reducer_of<sketch_of<4, bfloat16>, SparsifyBf16ResidualPolicy>>(world, n, 0.0, 2, in),
         "bf16 sketch, bf16 residual");
  }
}

namespace {
// Gradients, several steps: conservation to the documented tolerance, the
// delivered error against the float policy, and the value bytes.
struct lowprec_figures {
  double rel_err = 0;        // relative L2 error of the delivered sum vs the float policy (step 0)
  double gap_l1 = 0;         // sum |inputs - delivered - residuals| over elements
  double mass_l1 = 0;        // sum |inputs| over ranks, steps, elements
  double bound_l1 = 0;       // the documented bound on gap_l1
  double value_bits = 0;     // value bits per parameter (step 0, this rank's sends)
  std::size_t unresolved = 0;
};

// `ref`: the same run with the float twin of `Values`.
template <class Values>
lowprec_figures measure(const run_record& ref, int world, std::size_t n, double theta, int steps, double ulp) {
  const input_fn in = [&](int r, int t) { return gradient(n, 41, r, t); };
  auto rec = simulate<reducer_of<Values>>(world, n, theta, steps, in);
  REQUIRE(rec.failures.empty());
  lowprec_figures f;
  f.rel_err = relative_error(rec, ref, world, 0);
  const auto gap = conservation_gap(rec, world, n, steps);
  for (double g : gap) f.gap_l1 += std::fabs(g);
  double delivered_l1 = 0, unfed = 0;
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < steps; ++t) {
      for (float x : rec.in[r][t]) f.mass_l1 += std::fabs(x);
      for (float x : rec.out[r][t]) delivered_l1 += std::fabs(x);
      unfed += rec.stats[r][t].unfed_rounding;
      f.unresolved += rec.stats[r][t].unresolved;
    }
  // What is not fed back: the collective's rounding of each summed slot / cell
  // (<= half an ulp of it: the local communicator rounds once), and for sketches
  // this rank's cell-sum roundings (unfed_rounding), which peeling carries into
  // the delivered values of the entries of those cells and along their peeling
  // chains. Measured: the loss stays below 5% of this bound (most slots and
  // cells hold one rank's value, which rounds exactly). Plus float sum noise.
  // (A sketch's cells hold each entry three times: their L1 is at most 3x the
  // delivered L1.)
  const double hops = 0.5 * ulp * delivered_l1 * ((std::is_same_v<Values, PackedValuesPolicy<typename Values::value_type>> ? 1.0 : 3.0));
  f.bound_l1 = unfed + hops + 1e-6 * f.mass_l1;
  f.value_bits = rec.stats[0][0].value_bytes * 8.0 / double(n);
  return f;
}
}  // namespace

TEST_CASE("16-bit values on gradients: conservation to the documented tolerance, error vs float, half the bytes") {
  const std::size_t n = 1 << 15;
  const int steps = 2;
  const double bf16_ulp = 0x1p-7, fp16_ulp = 0x1p-10;  // relative ulp at the bottom of a binade
  for (int world : {2, 5, 16, 31}) {
    CAPTURE(world);
    const double theta = 1.0 - 0.5 / (10.0 * world);  // sketch load up to ~0.5 at ratio 10
    const input_fn in = [&](int r, int t) { return gradient(n, 41, r, t); };
    const auto check = [&](const lowprec_figures& f, double float_bits, const std::string& what) {
      CAPTURE(what);
      CHECK(f.gap_l1 <= f.bound_l1);
      CHECK(f.unresolved == 0);
      CHECK(f.value_bits == doctest::Approx(float_bits / 2).epsilon(0.02));
      MESSAGE(what << " N=" << world << ": rel L2 err " << f.rel_err << ", lost " << f.gap_l1 / f.mass_l1
                   << " of the input mass (bound " << f.bound_l1 / f.mass_l1 << "), " << f.value_bits
                   << " value bits/param (float: " << float_bits << ")");
    };
    const auto f32 = simulate<reducer_of<sketch_of<10, float>>>(world, n, theta, steps, in);
    REQUIRE(f32.failures.empty());
    const double sketch_bits = f32.stats[0][0].value_bytes * 8.0 / double(n);
    const auto bs = measure<sketch_of<10, bfloat16>>(f32, world, n, theta, steps, bf16_ulp);
    const auto fs = measure<sketch_of<10, float16>>(f32, world, n, theta, steps, fp16_ulp);
    check(bs, sketch_bits, "bf16 sketch");
    check(fs, sketch_bits, "fp16 sketch");
    CHECK(bs.rel_err < 0.02);
    CHECK(fs.rel_err < bs.rel_err);  // 3 more mantissa bits
    const auto pf = simulate<reducer_of<PackedPolicy>>(world, n, theta, steps, in);
    REQUIRE(pf.failures.empty());
    const double packed_bits = pf.stats[0][0].value_bytes * 8.0 / double(n);
    const auto bp = measure<PackedBf16Policy>(pf, world, n, theta, steps, bf16_ulp);
    const auto fp = measure<PackedFp16Policy>(pf, world, n, theta, steps, fp16_ulp);
    check(bp, packed_bits, "bf16 packed");
    check(fp, packed_bits, "fp16 packed");
    CHECK(bp.rel_err < 0.01);
    CHECK(fp.rel_err < bp.rel_err);
  }
}

TEST_CASE("16-bit cells peel exactly what float cells peel: purity is a count, never a value comparison") {
  // Near and above the peeling threshold, so that some entries stay unresolved:
  // the same inputs give the same support, hence the same peeling, whatever the
  // cells' precision (step 0; later steps differ through the residuals).
  const std::size_t n = 1 << 15;
  const int world = 4;
  const input_fn in = [&](int r, int t) { return gradient(n, 47, r, t); };
  for (double theta : {0.97, 0.95}) {
    CAPTURE(theta);
    const auto f32 = simulate<reducer_of<sketch_of<10, float>>>(world, n, theta, 1, in);
    const auto b16 = simulate<reducer_of<sketch_of<10, bfloat16>>>(world, n, theta, 1, in);
    const auto f16 = simulate<reducer_of<sketch_of<10, float16>>>(world, n, theta, 1, in);
    REQUIRE(f32.failures.empty());
    REQUIRE(b16.failures.empty());
    REQUIRE(f16.failures.empty());
    std::size_t unresolved = 0;
    for (int r = 0; r < world; ++r) {
      const auto& want = f32.stats[r][0];
      unresolved += want.unresolved;
      for (const auto* rec : {&b16, &f16}) {
        CHECK(rec->stats[r][0].support == want.support);
        CHECK(rec->stats[r][0].peeled == want.peeled);
        CHECK(rec->stats[r][0].unresolved == want.unresolved);
      }
    }
    MESSAGE("theta " << theta << ": load " << f32.stats[0][0].load << ", unresolved over ranks " << unresolved);
    if (theta == 0.95) CHECK(unresolved > 0);  // overloaded: the comparison covers stopping sets too
  }
}

TEST_CASE("16-bit values at world 1: every value's own rounding goes back to the residual") {
  // One rank: the collective adds nothing, so all a packed run may lose is float
  // noise — a rounding not fed back would show as ~2^-9 of the delivered mass.
  // A sketch loses only its cell-sum roundings (unfed_rounding), carried along
  // the peeling chains; a densely exchanged shard (one value per cell) nothing.
  const int steps = 3;
  for (std::size_t n : {std::size_t(1) << 15, std::size_t(300)}) {
    CAPTURE(n);
    const input_fn in = [&](int r, int t) { return gradient(n, 43, r, t); };
    const auto check = [&](const run_record& rec, bool sketched, const std::string& what) {
      CAPTURE(what);
      REQUIRE(rec.failures.empty());
      const auto gap = conservation_gap(rec, 1, n, steps);
      double lost = 0, mass = 0, delivered = 0, unfed = 0, worst = 0;
      for (int t = 0; t < steps; ++t) {
        for (float x : rec.in[0][t]) mass += std::fabs(x);
        for (float x : rec.out[0][t]) delivered += std::fabs(x);
        unfed += rec.stats[0][t].unfed_rounding;
      }
      for (double g : gap) {
        lost += std::fabs(g);
        worst = std::max(worst, std::fabs(g));
      }
      MESSAGE(what << " n=" << n << ": lost " << lost / delivered << " of the delivered mass; unfed cell roundings "
                   << unfed / delivered);
      if (!sketched || rec.lay.dense) {
        CHECK(unfed == 0.0);
        CHECK(worst <= 1e-6 * mass / double(n));
      } else {
        // Only the cell roundings that peeling delivers are lost (measured: 0.12 of
        // them); a value rounding not fed back would add ~2^-10 of the delivered
        // mass, more than all the cell roundings here.
        CHECK(unfed > 0.0);
        CHECK(lost <= 0.5 * unfed + 1e-6 * mass);
      }
    };
    check(simulate<reducer_of<PackedBf16Policy>>(1, n, 0.95, steps, in), false, "bf16 packed");
    check(simulate<reducer_of<PackedFp16Policy>>(1, n, 0.95, steps, in), false, "fp16 packed");
    check(simulate<reducer_of<sketch_of<10, bfloat16>>>(1, n, 0.98, steps, in), true, "bf16 sketch");
    check(simulate<reducer_of<sketch_of<10, float16>>>(1, n, 0.98, steps, in), true, "fp16 sketch");
  }
}

TEST_CASE("16-bit values: the counting communicator sees half the value bytes") {
  const std::size_t n = 1 << 15;
  const int world = 4;
  const auto payload = [&](auto tag) {
    using R = decltype(tag);
    double bytes = 0;
    std::mutex m;
    on_ranks(world, [&](local_communicator& plain) {
      counting_communicator<local_communicator> c(plain);
      R red;
      REQUIRE(red.initialize({.length = n, .world_size = world, .rank = c.rank(), .sparsity = 0.99}).ok());
      const auto g = gradient(n, 3, c.rank(), 0);
      std::vector<float> out(red.output_size());
      REQUIRE(red.reduce_scatter(c, std::span<const float>(g), std::span<float>(out)).ok());
      std::lock_guard lk(m);
      if (c.rank() == 0) bytes = c.counters()[collective::reduce_scatter].payload_bytes;
    });
    return bytes;
  };
  const double f = payload(reducer_of<sketch_of<10, float>>{});
  CHECK(payload(reducer_of<sketch_of<10, bfloat16>>{}) == f / 2);
  CHECK(payload(reducer_of<sketch_of<10, float16>>{}) == f / 2);
  const double p = payload(reducer_of<PackedPolicy>{});
  CHECK(payload(reducer_of<PackedBf16Policy>{}) == p / 2);
  CHECK(payload(reducer_of<PackedFp16Policy>{}) == p / 2);
}

TEST_CASE("fp16 values: sums beyond 65504 and values below its normals arrive, scaled, never as Inf") {
  const std::size_t n = 8192;
  for (int world : {2, 4, 31}) {
    CAPTURE(world);
    for (float magnitude : {4e4f, 3e9f, 1e-7f, 1e-20f}) {
      CAPTURE(magnitude);
      // Every rank the same large (or tiny) values: every sum is world x magnitude.
      const input_fn in = [&](int r, int) {
        std::vector<float> g(n, 0.0f);
        for (std::size_t i = 0; i < n; i += 9) g[i] = magnitude * (1.0f + float(i % 13) / 16.0f) * (r % 2 ? 1.0f : 1.0f);
        return g;
      };
      const auto expect = [&](const run_record& rec, const std::string& what) {
        CAPTURE(what);
        REQUIRE(rec.failures.empty());
        dense_reference ref;
        std::vector<std::vector<float>> g(world);
        for (int r = 0; r < world; ++r) g[r] = rec.in[r][0];
        const auto want = ref.step(g, 0.0);
        for (int r = 0; r < world; ++r)
          for (std::size_t e = 0; e < rec.lay.shard_size; ++e) {
            const std::size_t gi = std::size_t(r) * rec.lay.shard_size + e;
            const double w = gi < n ? want[gi] : 0.0;
            const float got = rec.out[r][0][e];
            REQUIRE(std::isfinite(got));
            REQUIRE(std::fabs(got - w) <= std::fabs(w) * 0x1p-9);
          }
        CHECK(rec.stats[0][0].value_scale_exponent != 0);
      };
      expect(simulate<reducer_of<PackedFp16Policy>>(world, n, 0.0, 1, in), "packed");
      expect(simulate<reducer_of<sketch_of<4, float16>>>(world, n, 0.0, 1, in), "sketch");
    }
  }
  // The scale is agreed through the agreement check: fp16 without it is refused.
  reducer_of<PackedFp16Policy> r;
  const status s = r.initialize({.length = 100, .world_size = 2, .rank = 0, .check_inputs = false});
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.what().find("fp16") != std::string::npos);
}

// ---------------------------------------------------------------- bf16 residual

TEST_CASE("bf16 residual: half the memory; stochastic rounding keeps small updates that round-to-nearest drops") {
  // A host model of the drift first: a residual of 1 receiving +2^-10 per step
  // (a quarter of a bf16 ulp at 1). Round-to-nearest storage never moves; the
  // stochastic store tracks the float sum.
  {
    float rn = 1.0f, sr = 1.0f;
    double exact = 1.0;
    for (std::uint64_t t = 0; t < 4096; ++t) {
      rn = float(bfloat16(rn + 0x1p-10f));
      sr = float_from_bf16_bits(detail::bf16_bits_stochastic(
          sr + 0x1p-10f, detail::residual_random(0, detail::residual_seed(t, 0), detail::residual_site::update)));
      exact += 0x1p-10;
    }
    CHECK(rn == 1.0f);                             // 4 units of mass lost
    CHECK(std::fabs(sr - exact) < 0.1 * (exact - 1.0));
  }
  // The Reducer over many steps: inputs = delivered + residuals holds for the
  // float residual to float noise; the bf16 residual loses a random walk of
  // store roundings (unbiased), small against the mass that went through.
  const std::size_t n = 1 << 14;
  const int world = 4, steps = 60;
  const double theta = 0.99;
  const input_fn in = [&](int r, int t) { return gradient(n, 29, r, t); };
  using Sk = sketch_of<10, float>;
  auto f32 = simulate<reducer_of<Sk>>(world, n, theta, steps, in);
  auto b16 = simulate<reducer_of<Sk, SparsifyBf16ResidualPolicy>>(world, n, theta, steps, in);
  REQUIRE(f32.failures.empty());
  REQUIRE(b16.failures.empty());
  CHECK(b16.stats[0][0].residual_bytes * 2 == f32.stats[0][0].residual_bytes);
  const auto gf = conservation_gap(f32, world, n, steps), gb = conservation_gap(b16, world, n, steps);
  double mass = 0, lost_f = 0, lost_b = 0, signed_b = 0, resid = 0;
  for (int r = 0; r < world; ++r) {
    for (int t = 0; t < steps; ++t)
      for (float x : f32.in[r][t]) mass += std::fabs(x);
    for (float x : b16.residual[r]) resid += std::fabs(x);
  }
  for (double g : gf) lost_f += std::fabs(g);
  for (double g : gb) {
    lost_b += std::fabs(g);
    signed_b += g;
  }
  MESSAGE("over " << steps << " steps: mass lost " << lost_f / mass << " (fp32 residual), " << lost_b / mass
                  << " (bf16 residual, stochastic); net signed " << signed_b / mass << "; residual mass / input mass "
                  << resid / mass);
  CHECK(lost_f < 1e-5 * mass);
  // Each store errs by < 1 bf16 ulp (<= 2^-7 of the value) with mean 0: an
  // element's loss is a random walk of `steps` such errors, so it stays well
  // below sqrt(steps) * 2^-8 of its residual; and the errors of different
  // elements cancel in the total (unbiased).
  CHECK(lost_b < std::sqrt(double(steps)) * 0x1p-8 * resid);
  CHECK(std::fabs(signed_b) < 0.05 * lost_b);
  // Same results on a second run: the rounding is a pure function of (element, step, rank).
  auto again = simulate<reducer_of<Sk, SparsifyBf16ResidualPolicy>>(world, n, theta, steps, in);
  for (int r = 0; r < world; ++r) CHECK(again.residual[r] == b16.residual[r]);

  // Small updates on large residuals, the case round-to-nearest gets wrong: step
  // 0 leaves residuals near 1 (half a bf16 ulp there is 2^-8), then every step
  // adds +-2^-10 with a fixed sign per element. Round-to-nearest storage would
  // keep none of those updates (the host model above); stochastic storage keeps
  // them in expectation, so the net loss in the updates' direction is small.
  const int small_steps = 40;
  const auto dir = [](std::size_t i) { return i % 2 ? 1.0f : -1.0f; };  // the same on every rank
  const input_fn drip = [&](int r, int t) {
    auto g = gradient(n, 31, r, 0);
    for (std::size_t i = 0; i < n; ++i) g[i] = t == 0 ? dir(i) * (1.0f + std::fabs(g[i])) : dir(i) * 0x1p-10f;
    return g;
  };
  auto drip16 = simulate<reducer_of<Sk, SparsifyBf16ResidualPolicy>>(world, n, 0.999, small_steps, drip);
  REQUIRE(drip16.failures.empty());
  const auto gd = conservation_gap(drip16, world, n, small_steps);
  // Loss in the updates' direction: round-to-nearest would lose ~all of them.
  double net = 0;
  for (std::size_t i = 0; i < n; ++i) net += double(dir(i)) * gd[i];
  const double updates = double(n) * world * (small_steps - 1) * 0x1p-10;
  MESSAGE("small updates on large residuals, " << small_steps << " steps: the bf16 stochastic residual lost "
                                               << net / updates << " of the updates' mass (net, in their direction)");
  CHECK(std::fabs(net) < 0.05 * updates);
}

TEST_CASE("bf16 residual: checkpoint round trip continues bit-identically; the other residual type is refused") {
  const std::size_t n = 20000;
  const int world = 3;
  using B = reducer_of<sketch_of<10, bfloat16>, SparsifyBf16ResidualPolicy>;
  using F = reducer_of<sketch_of<10, bfloat16>>;
  on_ranks(world, [&](local_communicator& c) {
    const reducer_arguments args{.length = n, .world_size = world, .rank = c.rank(), .sparsity = 0.99};
    B a, b;
    REQUIRE(a.initialize(args).ok());
    REQUIRE(b.initialize(args).ok());
    std::vector<float> oa(a.output_size()), ob(b.output_size());
    std::vector<std::byte> saved;
    for (int t = 0; t < 6; ++t) {
      const auto g = gradient(n, 5, c.rank(), t);
      REQUIRE(a.reduce_scatter(c, std::span<const float>(g), std::span<float>(oa)).ok());
      if (t == 2) saved = a.save_state();
    }
    // The state holds the bf16 residual: 2 bytes per element.
    CHECK(saved.size() == 11 * 8 + 8 + 16 + 8 + n * 2);
    REQUIRE(b.load_state(saved).ok());
    CHECK(b.steps() == 3);
    for (int t = 3; t < 6; ++t) {
      const auto g = gradient(n, 5, c.rank(), t);
      REQUIRE(b.reduce_scatter(c, std::span<const float>(g), std::span<float>(ob)).ok());
    }
    CHECK(ob == oa);
    CHECK(a.save_state() == b.save_state());
    // A float-residual reducer refuses it, and the other way round, naming the residual types.
    F f;
    REQUIRE(f.initialize(args).ok());
    status s = f.load_state(saved);
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.what().find("bfloat16 residual") != std::string::npos);
    s = a.load_state(f.save_state());
    CHECK(s.code() == errc::size_mismatch);
    CHECK(s.what().find("float residual") != std::string::npos);
    // A version-3 state (float residual, no step counter) still loads into a float-residual reducer.
    auto v4 = f.save_state();
    std::vector<std::byte> v3;
    const std::uint64_t three = 3;
    v3.insert(v3.end(), v4.begin(), v4.begin() + 80);  // header words 0..9
    std::memcpy(v3.data() + 8, &three, 8);
    v3.insert(v3.end(), v4.begin() + 88, v4.begin() + 88 + 24);  // theta, feedback
    v3.insert(v3.end(), v4.begin() + 88 + 32, v4.end());          // residual (skip the step)
    CHECK(f.load_state(v3).ok());
    CHECK(a.load_state(v3).code() == errc::size_mismatch);
  });
}
