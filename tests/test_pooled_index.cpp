// PooledIndexPolicy (shared_reducer.hpp, stage/shared_selection.hpp): every rank
// picks its share of k, the shares are all-gathered and their union is the
// call's selection, at which every rank's value is summed (a reference
// computed here, bit for bit; the positions are those of the per-rank packed
// reducer keeping that share); its bytes per rank do not grow with N, theta = 0
// is the dense sum, inputs = delivered + residuals, and a rank that pools beside
// one that follows a leader is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using pooled_f32 = Reducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy>;
using pooled_bf16 = Reducer<SparsifyPolicy, PooledIndexPolicy, PackedBf16Policy>;
using per_rank_f32 = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy>;

}  // namespace

namespace {
// The reference, call by call: acc = g + residual per rank; rank r's share of k is
// k / N, plus one for the k mod N ranks whose turn it is ((r - call) mod N < k mod
// N); the union of the ranks' share largest |acc|; there the sum of every rank's
// acc (rank order, as the in-process communicator sums) and the residual 0;
// elsewhere nothing, acc kept. Bit for bit against what the reducer delivered.
void expect_reference(const run_record& pooled, int world, std::size_t n, std::size_t k, int steps) {
  std::vector<std::vector<float>> res(world, std::vector<float>(n, 0.0f));
  for (int t = 0; t < steps; ++t) {
    CAPTURE(t);
    std::vector<std::vector<float>> acc(world);
    std::set<std::size_t> pool;
    for (int r = 0; r < world; ++r) {
      acc[std::size_t(r)] = pooled.in[std::size_t(r)][std::size_t(t)];
      for (std::size_t i = 0; i < n; ++i) acc[std::size_t(r)][i] += res[std::size_t(r)][i];
      const std::size_t turn = std::size_t((r - t % world + world) % world);
      const std::size_t share = k / std::size_t(world) + (turn < k % std::size_t(world) ? 1 : 0);
      std::vector<std::size_t> order(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      const auto& a = acc[std::size_t(r)];
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(share), order.end(),
                        [&](std::size_t x, std::size_t y) { return std::fabs(a[x]) > std::fabs(a[y]); });
      pool.insert(order.begin(), order.begin() + std::ptrdiff_t(share));
    }
    std::vector<double> want(n, 0.0);
    for (std::size_t i : pool) {
      float sum = acc[0][i];
      for (int r = 1; r < world; ++r) sum += acc[std::size_t(r)][i];
      want[i] = sum;
      for (int r = 0; r < world; ++r) acc[std::size_t(r)][i] = 0.0f;
    }
    res = acc;
    const auto got = delivered_at(pooled, world, n, t);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += got[i] != want[i];
    CHECK(wrong == 0);
    for (int r = 0; r < world; ++r) {
      CAPTURE(r);
      const reduce_stats& s = pooled.stats[std::size_t(r)][std::size_t(t)];
      CHECK(s.kept == pool.size());
      CHECK(s.kept > k / std::size_t(world));  // more than one rank's share: the shares differ
      CHECK(s.packed_slots == s.kept);
      CHECK(s.deferred == 0);  // a rank's own picks are always sent
    }
  }
  for (int r = 0; r < world; ++r) CHECK(pooled.residual[std::size_t(r)] == res[std::size_t(r)]);
}
}  // namespace

TEST_CASE("pooled index: the union of every rank's share, every rank's value there, the rest kept") {
  // theta 0.5 keeps k = n / 2; with N = 4 each rank's share is n / 8, which the
  // per-rank reducer keeps at theta 0.875 (both exact in binary, so floor() agrees).
  const int world = 4, steps = 5;
  const std::size_t n = 4000, k = n / 2;
  REQUIRE(stage::ThresholdSelect<float, exec::host>::kept_at_most(0.5, n) == k);
  REQUIRE(stage::ThresholdSelect<float, exec::host>::kept_at_most(0.875, n) == k / world);
  const auto pooled = simulate<pooled_f32>(world, n, 0.5, steps, random_input(n, 17));
  REQUIRE(pooled.failures.empty());
  expect_reference(pooled, world, n, k, steps);
  // From the same (zero) residuals, the first call's positions are the per-rank
  // reducer's at that share; it sends only each rank's own picks there, so the
  // residuals part after it.
  const auto per_rank = simulate<per_rank_f32>(world, n, 0.875, 1, random_input(n, 17));
  REQUIRE(per_rank.failures.empty());
  const auto theirs = delivered_at(per_rank, world, n, 0), ours = delivered_at(pooled, world, n, 0);
  std::size_t other_support = 0;
  for (std::size_t i = 0; i < n; ++i) other_support += (theirs[i] != 0.0) != (ours[i] != 0.0);
  CHECK(other_support == 0);
}

TEST_CASE("pooled index: shares that do not divide k rotate their extra pick with the call") {
  const int world = 3, steps = 6;  // every rank takes the extra pick twice
  const std::size_t n = 2000;
  const std::size_t k = stage::ThresholdSelect<float, exec::host>::kept_at_most(0.9, n);
  REQUIRE(k % world != 0);
  const auto pooled = simulate<pooled_f32>(world, n, 0.9, steps, random_input(n, 29));
  REQUIRE(pooled.failures.empty());
  expect_reference(pooled, world, n, k, steps);
}

TEST_CASE("pooled index: every rank's hot entries are sent at every call") {
  const int world = 4;
  const std::size_t n = 4096, k = 8;  // a share of 2 per rank
  const double theta = 1.0 - double(k) / double(n);
  const input_fn input = [&](int r, int t) {
    auto g = gradient(n, 11, r, t);
    for (auto& x : g) x *= 1e-3f;
    g[100 * std::size_t(r) + 1] = 2.0f;  // rank r's two largest
    g[100 * std::size_t(r) + 8] = 1.5f;
    return g;
  };
  const auto rec = simulate<pooled_f32>(world, n, theta, 3, input);
  REQUIRE(rec.failures.empty());
  std::set<std::size_t> hot;
  for (int r = 0; r < world; ++r) hot.insert({100 * std::size_t(r) + 1, 100 * std::size_t(r) + 8});
  for (int t = 0; t < 3; ++t) {
    const auto d = delivered_at(rec, world, n, t);
    std::set<std::size_t> got;
    for (std::size_t i = 0; i < n; ++i)
      if (d[i] != 0.0) got.insert(i);
    CHECK_MESSAGE(got == hot, "step " << t);
    CHECK(rec.stats[0][std::size_t(t)].kept == k);
  }
}

TEST_CASE("pooled index: bytes per rank per call do not grow with the number of ranks") {
  const std::size_t n = 1 << 20;
  const double theta = 0.99;
  const std::size_t k = stage::ThresholdSelect<float, exec::host>::kept_at_most(theta, n);
  double bound = 0.0;
  for (int world : {2, 4, 8}) {
    CAPTURE(world);
    const auto rec = simulate<pooled_bf16>(world, n, theta, 2, random_input(n, 7));
    REQUIRE(rec.failures.empty());
    const double ring = double(world - 1) / double(world);
    for (int r = 0; r < world; ++r)
      for (const auto& s : rec.stats[std::size_t(r)]) {
        CHECK(s.kept > 0);
        CHECK(s.kept <= k);
        // the lists: N blocks of ceil(k / N) positions, all-gathered; the values: the union, all-reduced
        const std::size_t block = (k + std::size_t(world) - 1) / std::size_t(world);
        CHECK(s.index_bytes == doctest::Approx(ring * double(std::size_t(world) * block * 4)));
        CHECK(s.value_bytes == doctest::Approx(2.0 * ring * double(s.kept * sizeof(bfloat16))));
        // at most 4 bytes per position and 2 x 2 per value whatever N is (plus the ring factor)
        const double core = s.index_bytes + s.value_bytes;
        CHECK(core <= ring * (4.0 * double(k + std::size_t(world)) + 4.0 * double(k)));
        if (world == 2) bound = std::max(bound, core);
        CHECK(core <= 2.0 * bound);  // the ring factor, at most 2x from N = 2
      }
  }
}

TEST_CASE("pooled index: theta = 0 delivers exactly the dense sum without a position exchange") {
  const int world = 3;
  const std::size_t n = 1001;
  const auto rec = simulate<pooled_f32>(world, n, 0.0, 2, random_input(n, 3));
  REQUIRE(rec.failures.empty());
  for (int t = 0; t < 2; ++t) {
    const auto d = delivered_at(rec, world, n, t);
    for (std::size_t i = 0; i < n; ++i) {
      float want = rec.in[0][std::size_t(t)][i];  // the communicator's order: rank 0, 1, 2
      for (int r = 1; r < world; ++r) want += rec.in[std::size_t(r)][std::size_t(t)][i];
      if (float(d[i]) != want) FAIL("step " << t << " entry " << i << ": " << d[i] << " vs " << want);
    }
    CHECK(rec.stats[0][std::size_t(t)].kept == n);
    CHECK(rec.stats[0][std::size_t(t)].index_bytes == 0.0);
  }
  for (int r = 0; r < world; ++r) CHECK(rec.residual[std::size_t(r)] == std::vector<float>(n, 0.0f));
}

TEST_CASE("pooled index: conservation, inputs = delivered + residuals; k smaller than N") {
  for (const auto& [world, n, theta] : {std::tuple{3, std::size_t(5003), 0.95}, std::tuple{4, std::size_t(70001), 0.99},
                                        std::tuple{5, std::size_t(400), 0.995}}) {  // k = 2 < N: some ranks pick none
    CAPTURE(world);
    CAPTURE(n);
    const int steps = 6;
    const auto rec = simulate<pooled_f32>(world, n, theta, steps, random_input(n, 21));
    REQUIRE(rec.failures.empty());
    std::vector<double> in(n, 0.0), got(n, 0.0);
    std::size_t kept = 0;
    for (int t = 0; t < steps; ++t) {
      for (int r = 0; r < world; ++r)
        for (std::size_t i = 0; i < n; ++i) in[i] += rec.in[std::size_t(r)][std::size_t(t)][i];
      const auto d = delivered_at(rec, world, n, t);
      for (std::size_t i = 0; i < n; ++i) got[i] += d[i];
      kept += rec.stats[0][std::size_t(t)].kept;
    }
    CHECK(kept > 0);
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i) got[i] += rec.residual[std::size_t(r)][i];
    const double tol = 1e-5 * max_abs(in);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += std::fabs(got[i] - in[i]) > tol;
    CHECK(bad == 0);
  }
}

TEST_CASE("pooled index: a rank that pools beside one that follows a leader is refused on every rank") {
  const int world = 2;
  const std::size_t n = 2048;
  std::vector<status> got(world);
  on_ranks(world, [&](local_communicator& comm) {
    const int r = comm.rank();
    reducer_arguments args{.length = n, .world_size = world, .rank = r, .sparsity = 0.99};
    const auto g = gradient(n, 5, r, 0);
    auto call = [&](auto& red) {
      status s = red.initialize(args);
      std::vector<float> out(red.output_size());
      if (s.ok()) s = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out));
      got[std::size_t(r)] = s;
    };
    if (r == 0) {
      pooled_f32 red;
      call(red);
    } else {
      Reducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy> red;
      call(red);
    }
  });
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    CHECK(got[std::size_t(r)].code() == errc::invalid_argument);
  }
}
