// A routed index's all-reduce with reducer_arguments::union_bound (stage/routed_exchange.hpp):
// every owner forwards only its ceil(B k / N) largest sums and the senders keep the
// others in their residuals. Held here: with fp32 values, the delivered sums and every
// rank's residual equal, bit for bit, a reference written from the rule (each rank's top
// k, float sums in rank order, each owner's largest, dealt in chunks of 1024); the held
// back picks are reported as deferred; a bound no owner reaches changes nothing; what a
// rank receives stays near B k at 2, 4 and 8 ranks where the unbounded union grows, as the
// cost model prices it; bf16
// and mean conserve inputs = delivered + residuals; a saved state resumes bit for bit; host
// = portable paths; refusals (a reduce-scatter, another index, a bad number, ranks that
// bound differently).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>

#include "support/harness.hpp"
#include "tagc/cost_model.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using routed_f32 = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedPolicy>;
using routed_bf16 = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy>;
using gathered_f32 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedPolicy>;
constexpr std::size_t chunk = stage::RoutedExchange<float, exec::host>::dealt_chunk;

std::function<void(reducer_arguments&)> bounded(double b) {
  return [b](reducer_arguments& a) { a.union_bound = b; };
}

// The rule, written out: every rank keeps its own k largest |acc|, the owners sum them
// in float in rank order, and each owner (chunks of 1024 dealt round-robin) forwards
// the sums above the (m + 1)-th largest |sum| of its region, m = ceil(B k / N).
struct bounded_reference {
  int world;
  std::size_t n;
  double theta, bound;
  std::vector<std::vector<float>> residual;  // [rank]
  std::vector<std::size_t> held_back;        // [rank] the last step's picks not forwarded

  std::vector<float> step(const std::vector<std::vector<float>>& g) {
    if (residual.empty()) residual.assign(std::size_t(world), std::vector<float>(n, 0.0f));
    held_back.assign(std::size_t(world), 0);
    const std::size_t k = std::size_t(std::floor((1.0 - theta) * double(n)));
    const std::size_t ranks = static_cast<std::size_t>(world);
    std::vector<std::vector<float>> acc(ranks, std::vector<float>(n));
    std::vector<std::vector<bool>> keep(ranks);
    std::vector<float> sums(n, 0.0f);
    for (std::size_t r = 0; r < std::size_t(world); ++r) {
      for (std::size_t i = 0; i < n; ++i) acc[r][i] = g[r][i] + residual[r][i];
      keep[r] = reference_keep(acc[r], theta);
      for (std::size_t i = 0; i < n; ++i)
        if (keep[r][i]) sums[i] += acc[r][i];
    }
    const std::size_t m = std::size_t(std::ceil(bound * double(k) / double(world)));
    std::vector<bool> forwarded(n, false);
    for (std::size_t q = 0; q < std::size_t(world); ++q) {
      std::vector<float> mag;  // the owner's region, zeros included
      for (std::size_t c = q; c * chunk < n; c += std::size_t(world))
        for (std::size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) mag.push_back(std::fabs(sums[i]));
      if (mag.empty()) continue;
      float t = 0.0f;
      if (m < mag.size()) {
        std::vector<float> sorted = mag;
        std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(m), sorted.end(), std::greater<float>());
        t = sorted[m];
      }
      for (std::size_t c = q; c * chunk < n; c += std::size_t(world))
        for (std::size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) forwarded[i] = std::fabs(sums[i]) > t;
    }
    std::vector<float> out(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i)
      if (forwarded[i]) out[i] = sums[i];
    for (std::size_t r = 0; r < std::size_t(world); ++r)
      for (std::size_t i = 0; i < n; ++i) {
        const bool delivered = keep[r][i] && forwarded[i];
        residual[r][i] = delivered ? 0.0f : acc[r][i];  // fp32 on the wire: nothing of a sent value stays
        held_back[r] += keep[r][i] && !forwarded[i];
      }
    return out;
  }
};

std::size_t nonzero(const std::vector<float>& v) {
  return std::size_t(std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; }));
}
}  // namespace

TEST_CASE("union bound: fp32 sums and residuals are the rule's, bit for bit; held-back picks are deferred") {
  for (const auto& [world, n, theta, bound] :
       {std::tuple{2, std::size_t(40000), 0.99, 1.0}, std::tuple{4, std::size_t(70001), 0.99, 1.0},
        std::tuple{3, std::size_t(9001), 0.95, 0.5}, std::tuple{8, std::size_t(50000), 0.98, 2.0},
        std::tuple{5, std::size_t(3000), 0.995, 1.0}}) {  // regions past the end are empty
    CAPTURE(world);
    CAPTURE(n);
    CAPTURE(bound);
    const int steps = 4;
    const auto rec = simulate<routed_f32>(world, n, theta, steps, random_input(n, 41), topology::replicated,
                                          reduce_op::sum, bounded(bound));
    REQUIRE(rec.failures.empty());
    bounded_reference ref{world, n, theta, bound, {}, {}};
    std::size_t held = 0;
    for (int t = 0; t < steps; ++t) {
      CAPTURE(t);
      std::vector<std::vector<float>> g(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r) g[std::size_t(r)] = rec.in[std::size_t(r)][std::size_t(t)];
      const auto want = ref.step(g);
      for (int r = 0; r < world; ++r) {
        CHECK(rec.out[std::size_t(r)][std::size_t(t)] == want);
        CHECK(rec.stats[std::size_t(r)][std::size_t(t)].deferred == ref.held_back[std::size_t(r)]);
        CHECK(rec.stats[std::size_t(r)][std::size_t(t)].support == nonzero(want));
        held += ref.held_back[std::size_t(r)];
      }
    }
    CHECK(held > 0);  // the bound held something back: the case tests it
    for (int r = 0; r < world; ++r) CHECK(rec.residual[std::size_t(r)] == ref.residual[std::size_t(r)]);
  }
}

TEST_CASE("union bound: a bound no owner reaches delivers the unbounded sums and residuals") {
  const int world = 4, steps = 3;
  const std::size_t n = 40000;
  const auto loose = simulate<routed_f32>(world, n, 0.99, steps, random_input(n, 5), topology::replicated,
                                          reduce_op::sum, bounded(double(world * world)));  // N k per owner: the whole union
  const auto plain = simulate<routed_f32>(world, n, 0.99, steps, random_input(n, 5), topology::replicated);
  REQUIRE(loose.failures.empty());
  REQUIRE(plain.failures.empty());
  expect_same_runs(loose, plain);
}

TEST_CASE("union bound: what a rank receives stays near B k at 2, 4 and 8 ranks, where the union grows") {
  const std::size_t n = 1 << 16;
  const double theta = 0.99;
  const std::size_t k = std::size_t(std::floor((1.0 - theta) * double(n)));
  std::vector<double> bounded_support, union_support;
  for (int world : {2, 4, 8}) {
    CAPTURE(world);
    const auto b = simulate<routed_bf16>(world, n, theta, 3, random_input(n, 7), topology::replicated, reduce_op::sum,
                                         bounded(1.0));
    const auto u = simulate<routed_bf16>(world, n, theta, 3, random_input(n, 7), topology::replicated);
    REQUIRE(b.failures.empty());
    REQUIRE(u.failures.empty());
    const reduce_stats& s = b.stats[0][2];
    CHECK(s.support <= std::size_t(world) * std::size_t(std::ceil(double(k) / double(world))));
    CHECK(s.support >= k * 9 / 10);
    // the bytes follow: the picks (at most k entries) and (N - 1) / N of the forwarded sums
    const double entry = double(sizeof(std::uint32_t) + sizeof(bfloat16)), ring = double(world - 1) / double(world);
    CHECK(s.index_bytes + s.value_bytes <= double(k) * entry + ring * double(s.support) * entry + 16.0 * world);
    // and the cost model, given the forwarded sums over k (at most the bound)
    const double model = ring * double(n) * routed_all_reduce_cross_bits(double(k) / double(n), double(s.support) / double(k)) / 8.0;
    CHECK(s.index_bytes + s.value_bytes == doctest::Approx(model).epsilon(0.1));
    bounded_support.push_back(double(s.support));
    union_support.push_back(double(u.stats[0][2].support));
  }
  CHECK(union_support[2] > 2.5 * union_support[0]);        // unbounded: the union grows with N
  CHECK(bounded_support[2] < 1.1 * bounded_support[0]);    // bounded: it does not
}

TEST_CASE_TEMPLATE("union bound: conservation, inputs = delivered + residuals; mean", R, routed_f32, routed_bf16) {
  for (const auto& [world, n, op] : {std::tuple{3, std::size_t(5003), reduce_op::sum},
                                     std::tuple{4, std::size_t(70001), reduce_op::mean}}) {
    CAPTURE(world);
    const int steps = 6;
    const auto rec = simulate<R>(world, n, 0.98, steps, random_input(n, 21), topology::replicated, op, bounded(0.5));
    REQUIRE(rec.failures.empty());
    const double scale = op == reduce_op::mean ? double(world) : 1.0;
    std::vector<double> in(n, 0.0), got(n, 0.0);
    for (int t = 0; t < steps; ++t) {
      for (int r = 0; r < world; ++r)
        for (std::size_t i = 0; i < n; ++i) in[i] += rec.in[std::size_t(r)][std::size_t(t)][i];
      const auto d = delivered_at(rec, world, n, t, topology::replicated);
      for (std::size_t i = 0; i < n; ++i) got[i] += d[i] * scale;
    }
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i) got[i] += rec.residual[std::size_t(r)][i];
    const double tol = (std::is_same_v<R, routed_bf16> ? 1e-2 : 1e-5) * max_abs(in);  // bf16: sums rounded once
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += std::fabs(got[i] - in[i]) > tol;
    CHECK(bad == 0);
  }
}

TEST_CASE("union bound: save and load in the middle resume bit for bit; host = portable paths") {
  const int world = 4;
  const auto args_for = [&](int r) {
    reducer_arguments a{.length = 9001, .world_size = world, .rank = r, .topo = topology::replicated, .sparsity = 0.98};
    a.schedule = {.warmup_steps = 5, .start = 0.5};
    a.union_bound = 1.0;
    return a;
  };
  expect_resumed_exactly(resume_in_the_middle<routed_bf16>(world, args_for, 3, 4, 9), 3);

  using portable = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy, DecodePolicy<>, exec::host_portable>;
  const std::size_t n = 40000;
  const auto host = simulate<routed_bf16>(world, n, 0.99, 3, random_input(n, 17), topology::replicated,
                                          reduce_op::sum, bounded(1.0));
  const auto other = simulate<portable>(world, n, 0.99, 3, random_input(n, 17), topology::replicated, reduce_op::sum,
                                        bounded(1.0));
  REQUIRE(host.failures.empty());
  REQUIRE(other.failures.empty());
  expect_same_runs(host, other);
}

TEST_CASE("union bound: refused for a reduce-scatter, another index, a bad number, and ranks that differ") {
  const auto refused = [](auto red, reducer_arguments a) {
    const status s = red.initialize(a);
    CHECK_FALSE(s.ok());
    CHECK(s.message().find("union_bound") != std::string::npos);
  };
  reducer_arguments a{.length = 1000, .world_size = 2, .rank = 0, .topo = topology::replicated, .sparsity = 0.9};
  a.union_bound = 1.0;
  refused(gathered_f32{}, a);
  refused(Reducer<SparsifyPolicy, IndexPolicy<4>, PackedPolicy>{}, a);
  reducer_arguments sharded = a;
  sharded.topo = topology::sharded;
  refused(routed_f32{}, sharded);
  for (double bad : {-1.0, std::nan("")}) {
    reducer_arguments b = a;
    b.union_bound = bad;
    refused(routed_f32{}, b);
  }

  const std::size_t n = 20000;
  const auto got = statuses_on_ranks(3, [&](local_communicator& comm) -> std::optional<status> {
    routed_f32 red;
    reducer_arguments b{.length = n, .world_size = 3, .rank = comm.rank(), .topo = topology::replicated, .sparsity = 0.99};
    b.union_bound = comm.rank() == 0 ? 1.0 : 2.0;
    REQUIRE(red.initialize(b).ok());
    const auto g = gradient(n, 3, comm.rank(), 0);
    std::vector<float> out(n);
    return red.all_reduce(comm, std::span<const float>(g), std::span<float>(out));
  });
  REQUIRE(got.size() == 3);
  for (const status& s : got) CHECK(s.code() == errc::invalid_argument);
}
