// Beyond the paper: exact index for any world size (and the N = 2 repair),
// index reduce-scatter, packed exchange, adaptive sparsity — each against a
// dense reference, with conservation and byte accounting.
#include <doctest/doctest.h>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {

template <class Index, class Values = SketchPolicy<10>, decode_mode Mode = decode_mode::peel_then_estimate>
using reducer_of = Reducer<SparsifyPolicy, Index, Values, DecodePolicy<Mode>>;
using scatter_index = IndexPolicy<index_auto, index_exchange::reduce_scatter>;

// Every rank nonzero at the same positions: counters reach the world size.
input_fn identical_support(std::size_t n) {
  return [n](int r, int t) {
    std::vector<float> g(n, 0.0f);
    for (std::size_t i = std::size_t(t) % 7; i < n; i += 50) g[i] = 0.25f * float(r + 1) + float(i % 3);
    return g;
  };
}

}  // namespace

TEST_CASE("ExactIndexPolicy: the narrowest exact width for every world size, exact at 2..16 and 31") {
  const std::size_t n = 3000;
  for (int world : {2, 3, 4, 5, 7, 8, 15, 16, 31}) {
    CAPTURE(world);
    auto rec = simulate<reducer_of<ExactIndexPolicy, SketchPolicy<2>>>(world, n, 0.0, 2, identical_support(n));
    REQUIRE(rec.failures.empty());
    const int want_bits = world <= 2 ? 1 : world <= 3 ? 2 : world <= 15 ? 4 : 8;
    CHECK(rec.stats[0][0].index_bits == want_bits);
    CHECK(rec.stats[0][0].exact_index);
    expect_dense_sum(rec, world, n, 0.0, 2);
  }
  // Where the fixed 4-bit index must refuse, the exact one serves.
  reducer_of<IndexPolicy<4>> nibble;
  CHECK(nibble.initialize({.length = n, .world_size = 16, .rank = 0}).code() == errc::unsupported_world_size);
  reducer_of<ExactIndexPolicy> any;
  CHECK(any.initialize({.length = n, .world_size = 200, .rank = 0}).ok());
  CHECK(any.initialize({.length = n, .world_size = 256, .rank = 0}).code() == errc::unsupported_world_size);
}

TEST_CASE("index reduce-scatter: same results as the all-reduce, half the index traffic") {
  for (int world : {2, 3, 4, 8}) {
    CAPTURE(world);
    const std::size_t n = 100003;
    const double theta = 1.0 - 0.6 / (double(world) * 10);
    const input_fn in = [&](int r, int t) { return gradient(n, 13, r, t); };
    auto ar = simulate<reducer_of<ExactIndexPolicy>>(world, n, theta, 2, in);
    auto rs = simulate<reducer_of<scatter_index>>(world, n, theta, 2, in);
    REQUIRE(ar.failures.empty());
    REQUIRE(rs.failures.empty());
    expect_dense_sum(rs, world, n, theta, 2);
    for (int r = 0; r < world; ++r) {
      CHECK(rs.out[r] == ar.out[r]);
      CHECK(rs.stats[r][0].index_bytes == doctest::Approx(ar.stats[r][0].index_bytes / 2));
    }
  }
  // The 1-bit index is exact only at N = 2: a reduce-scatter of it is refused beyond.
  using one_bit_scatter = reducer_of<IndexPolicy<1, index_exchange::reduce_scatter>>;
  one_bit_scatter ok, bad;
  CHECK(ok.initialize({.length = 100, .world_size = 2, .rank = 0}).ok());
  CHECK(bad.initialize({.length = 100, .world_size = 3, .rank = 0}).code() == errc::unsupported_world_size);
}

TEST_CASE("packed exchange: exact for every world size and length, no peeling") {
  for (int world : {1, 2, 3, 4, 8})
    for (std::size_t n : {1ul, 7ul, 1000ul, 1025ul, 65539ul}) {
      CAPTURE(world); CAPTURE(n);
      const double theta = 0.95;  // far above what a 10x sketch could peel at N = 8
      const input_fn in = [&](int r, int t) { return gradient(n, 17, r, t); };
      auto rec = simulate<reducer_of<ExactIndexPolicy, PackedPolicy>>(world, n, theta, 3, in);
      REQUIRE(rec.failures.empty());
      expect_dense_sum(rec, world, n, theta, 3);
      // Bytes: every shard padded to the largest union, a ring reduce-scatter; or, where
      // one shard holds more than twice the mean union (here only the tiny lengths, whose
      // entries all lie in the first shards), the unions back to back, all-reduced.
      const auto& st = rec.stats[0][2];
      const double padded = ring_bytes_sent(collective::reduce_scatter, double(world) * double(st.packed_slots) * 4, world);
      const double back_to_back = ring_bytes_sent(collective::all_reduce, double(st.packed_union) * 4, world);
      CHECK(st.packed_back_to_back == (back_to_back < padded));
      CHECK(st.value_bytes == doctest::Approx(std::min(padded, back_to_back)));
      CHECK(st.packed_slots <= rec.lay.shard_size);
      if (n == 65539) CHECK_FALSE(st.packed_back_to_back);  // balanced shards stay padded
    }
  // With the 1-bit index (N = 4, carries) packed stays consistent: what is not
  // marked waits in the residual, and nothing is lost.
  const std::size_t n = 20000;
  const input_fn in = [&](int r, int t) { return gradient(n, 5, r, t); };
  auto rec = simulate<reducer_of<IndexPolicy<1>, PackedPolicy>>(4, n, 0.98, 4, in);
  REQUIRE(rec.failures.empty());
  std::vector<double> owed(rec.lay.padded(), 0.0);
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < 4; ++t) {
      for (std::size_t i = 0; i < n; ++i) owed[i] += rec.in[r][t][i];
      for (std::size_t e = 0; e < rec.lay.shard_size; ++e) owed[std::size_t(r) * rec.lay.shard_size + e] -= rec.out[r][t][e];
    }
    for (std::size_t i = 0; i < n; ++i) owed[i] -= rec.residual[r][i];
  }
  for (double x : owed) REQUIRE(std::fabs(x) < 1e-4);
  std::size_t deferred = 0;
  for (int r = 0; r < 4; ++r) deferred += rec.stats[r][0].deferred;
  CHECK(deferred > 0);  // the carries did happen
}

TEST_CASE("packed exchange: a hot shard sends the unions back to back, exact, at fewer bytes than padding") {
  // The embedding rows of frequent tokens: the first shard's entries 100x larger,
  // so nearly every rank's kept entries, and the union, fall in it.
  for (int world : {3, 4, 8}) {
    CAPTURE(world);
    const std::size_t n = 65539;
    const double theta = 0.95;
    const input_fn in = [&](int r, int t) {
      auto g = gradient(n, 29, r, t);
      for (std::size_t i = 0; i < n / std::size_t(world); ++i) g[i] *= 100.0f;
      return g;
    };
    auto rec = simulate<reducer_of<ExactIndexPolicy, PackedPolicy>>(world, n, theta, 3, in);
    REQUIRE(rec.failures.empty());
    expect_dense_sum(rec, world, n, theta, 3);  // every rank's shard exact, the hot one and the others
    for (int r = 0; r < world; ++r)
      for (int t = 0; t < 3; ++t) {
        const auto& st = rec.stats[r][t];
        CAPTURE(r); CAPTURE(t);
        CHECK(st.packed_back_to_back);  // every rank chose alike
        CHECK(st.packed_union > 0);
        const double padded =
            ring_bytes_sent(collective::reduce_scatter, double(world) * double(st.packed_slots) * 4, world);
        CHECK(st.value_bytes == doctest::Approx(ring_bytes_sent(collective::all_reduce, double(st.packed_union) * 4, world)));
        CHECK(st.value_bytes < padded);
      }
    const auto& st = rec.stats[0][2];
    MESSAGE(world << " ranks: largest shard " << st.packed_slots << " of " << st.packed_union
                  << " union entries; value bytes back to back / padded: "
                  << st.value_bytes / ring_bytes_sent(collective::reduce_scatter,
                                                      double(world) * double(st.packed_slots) * 4, world));
  }
}

TEST_CASE("packed sends fewer bits per parameter than the 10x sketch at the paper's sparsity") {
  const std::size_t n = 1u << 20;
  const int world = 4;
  const input_fn in = [&](int r, int t) { return gradient(n, 23, r, t); };
  auto sketch = simulate<reducer_of<IndexPolicy<1>>>(world, n, 0.9875, 1, in);
  auto packed = simulate<reducer_of<IndexPolicy<1>, PackedPolicy>>(world, n, 0.9875, 1, in);
  const auto bits = [&](const run_record& r) { return r.stats[0][0].value_bytes * 8.0 / double(n); };
  MESSAGE("value bits/param: sketch " << bits(sketch) << ", packed " << bits(packed));
  CHECK(bits(packed) < 0.6 * bits(sketch));
}

TEST_CASE("adaptive sparsity steers the load under the peeling threshold, the same on every rank") {
  const std::size_t n = 200000;
  const int world = 4;
  const input_fn in = [&](int r, int t) { return gradient(n, 31, r, t); };
  const auto adaptive = [](reducer_arguments& a) { a.adapt.enabled = true; };
  SUBCASE("from overload") {
    auto rec = simulate<reducer_of<ExactIndexPolicy>>(world, n, 0.9, 8, in, topology::sharded, reduce_op::sum, adaptive);
    REQUIRE(rec.failures.empty());
    CHECK(rec.stats[0][0].load > 1.0);       // the start is overloaded
    CHECK(rec.stats[0][0].unresolved > 0);
    for (int r = 0; r < world; ++r) {
      CHECK(rec.stats[r][7].theta == rec.stats[0][7].theta);
      CHECK(rec.stats[r][7].load < 0.81);
      CHECK(rec.stats[r][7].unresolved == 0);
    }
    CHECK(rec.stats[0][7].theta > 0.95);
  }
  SUBCASE("from underload") {
    auto rec = simulate<reducer_of<ExactIndexPolicy>>(world, n, 0.9999, 8, in, topology::sharded, reduce_op::sum, adaptive);
    REQUIRE(rec.failures.empty());
    CHECK(rec.stats[0][0].load < 0.1);
    CHECK(rec.stats[0][7].theta < 0.999);    // sends more once it learns the room it has
    for (int r = 0; r < world; ++r) CHECK(rec.stats[r][7].unresolved == 0);
  }
  reducer_of<ExactIndexPolicy, PackedPolicy> packed;
  CHECK(packed.initialize({.length = n, .world_size = 1, .rank = 0, .adapt = {.enabled = true}}).code() ==
        errc::invalid_argument);
}

TEST_CASE("checkpoint keeps theta and the loads adaptive sparsity steers by") {
  const std::size_t n = 50000;
  using R = reducer_of<ExactIndexPolicy>;
  on_ranks(2, [&](local_communicator& comm) {
    const reducer_arguments args{.length = n, .world_size = 2, .rank = comm.rank(), .sparsity = 0.9, .adapt = {.enabled = true}};
    R a, b;
    REQUIRE(a.initialize(args).ok());
    REQUIRE(b.initialize(args).ok());
    std::vector<float> out(a.output_size()), out_b(a.output_size());
    for (int t = 0; t < 3; ++t) {
      const auto g = gradient(n, 2, comm.rank(), t);
      REQUIRE(a.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out)).ok());
    }
    REQUIRE(b.load_state(a.save_state()).ok());
    CHECK(b.sparsity() == a.sparsity());
    const auto g = gradient(n, 2, comm.rank(), 3);
    REQUIRE(a.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out)).ok());
    REQUIRE(b.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out_b)).ok());
    CHECK(out == out_b);
    CHECK(a.sparsity() == b.sparsity());
  });
}

TEST_CASE("bf16 packed values: half the value bytes, each rank's rounding error kept in its residual") {
  const std::size_t n = 40000;
  const int world = 3;
  const double theta = 0.95;
  const input_fn in = [&](int r, int t) { return gradient(n, 41, r, t); };
  auto f32 = simulate<reducer_of<ExactIndexPolicy, PackedPolicy>>(world, n, theta, 3, in);
  auto b16 = simulate<reducer_of<ExactIndexPolicy, PackedBf16Policy>>(world, n, theta, 3, in);
  REQUIRE(f32.failures.empty());
  REQUIRE(b16.failures.empty());
  CHECK(b16.stats[0][0].value_bytes == doctest::Approx(f32.stats[0][0].value_bytes / 2));
  // Step 0 selects the same entries (residuals start at 0): the results agree to
  // bf16 precision (8 bits of mantissa, rounded per rank and per reduction step).
  // A value is a sum of terms of both signs, so its error is relative to the
  // terms, not to the (possibly cancelled) sum: compare against the largest value.
  float big = 0.0f;
  for (int r = 0; r < world; ++r)
    for (float a : f32.out[r][0]) big = std::max(big, std::fabs(a));
  std::size_t differ = 0;
  for (int r = 0; r < world; ++r)
    for (std::size_t e = 0; e < f32.out[r][0].size(); ++e) {
      const float a = f32.out[r][0][e], b = b16.out[r][0][e];
      REQUIRE(std::fabs(a - b) <= 0.01f * big);
      REQUIRE((a == 0.0f) == (b == 0.0f));  // same support
      differ += a != b;
    }
  CHECK(differ > 0);  // it really is rounded
  // Nothing a rank contributed is lost: inputs = delivered + residuals, up to the
  // bf16 rounding of the cross-rank sums (not attributable to any rank).
  std::vector<double> owed(b16.lay.padded(), 0.0);
  double mass = 0.0;
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < 3; ++t) {
      for (std::size_t i = 0; i < n; ++i) owed[i] += b16.in[r][t][i];
      for (std::size_t e = 0; e < b16.lay.shard_size; ++e) {
        owed[std::size_t(r) * b16.lay.shard_size + e] -= b16.out[r][t][e];
        mass += std::fabs(b16.out[r][t][e]);
      }
    }
  for (int r = 0; r < world; ++r)
    for (std::size_t i = 0; i < n; ++i) owed[i] -= b16.residual[r][i];
  double lost = 0.0;
  for (double x : owed) lost += std::fabs(x);
  MESSAGE("bf16 sum rounding not fed back: " << lost / mass << " of the delivered mass");
  CHECK(lost < 0.01 * mass);
  // Residuals hold the per-rank rounding errors: nonzero where entries were sent.
  std::size_t tiny_nonzero = 0;
  for (float x : b16.residual[0]) tiny_nonzero += x != 0.0f;
  std::size_t f32_nonzero = 0;
  for (float x : f32.residual[0]) f32_nonzero += x != 0.0f;
  CHECK(tiny_nonzero > f32_nonzero);
}
