// SharedIndexPolicy (shared_reducer.hpp): one selection per call, the leader's
// top-k broadcast, so bytes per rank do not grow with the number of ranks;
// conservation (inputs = delivered + residuals), theta = 0 is the dense sum, the
// leader rotates, save/load resumes bit for bit, NaN is refused alike on every rank.
#include <doctest/doctest.h>

#include <cstring>
#include <mutex>
#include <set>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using shared_f32 = Reducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>;
using shared_bf16 = Reducer<SparsifyPolicy, SharedIndexPolicy, PackedBf16Policy>;
using shared_bf16_residual = Reducer<SparsifyBf16ResidualPolicy, SharedIndexPolicy, PackedBf16Policy>;
using per_rank_bf16 = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy>;

// Inputs over ranks and steps = delivered + residuals, per entry, to `rel` of the largest input sum.
template <class R>
void expect_conservation(int world, std::size_t n, double theta, int steps, double rel,
                         topology topo = topology::sharded) {
  const auto rec = simulate<R>(world, n, theta, steps, random_input(n, 21), topo);
  REQUIRE(rec.failures.empty());
  std::vector<double> in(n, 0.0), got(n, 0.0);
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < steps; ++t)
      for (std::size_t i = 0; i < n; ++i) in[i] += rec.in[std::size_t(r)][std::size_t(t)][i];
  std::size_t kept = 0;
  for (int t = 0; t < steps; ++t) {
    const auto d = delivered_at(rec, world, n, t, topo);
    for (std::size_t i = 0; i < n; ++i) got[i] += d[i];
    kept += rec.stats[0][std::size_t(t)].kept;
  }
  CHECK(kept > 0);
  for (int r = 0; r < world; ++r)
    for (std::size_t i = 0; i < n; ++i) got[i] += rec.residual[std::size_t(r)][i];
  const double tol = rel * max_abs(in);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += std::fabs(got[i] - in[i]) > tol;
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("shared index: bytes per rank per call do not grow with the number of ranks") {
  const std::size_t n = 1 << 20;
  const double theta = 0.99;
  double base = 0.0, total_at_2 = 0.0, shared_at_8 = 0.0;
  for (int world : {2, 4, 8}) {
    const auto rec = simulate<shared_bf16>(world, n, theta, 2, random_input(n, 7));
    REQUIRE(rec.failures.empty());
    const double ring = double(world - 1) / double(world);
    for (int r = 0; r < world; ++r)
      for (const auto& s : rec.stats[std::size_t(r)]) {
        CHECK(s.kept > 0);
        CHECK(s.packed_slots == std::size_t(std::floor((1.0 - theta) * double(n))));
        // The selection and the values: the same bytes at every N, up to the ring factor.
        const double core = (s.index_bytes + s.value_bytes) / ring;
        if (base == 0.0) base = core;
        CHECK(core == doctest::Approx(base).epsilon(1e-12));
        // Everything (the 48-byte agreement record per rank included): within the
        // ring factor of the N = 2 figure (1 % for the record, which grows with N).
        if (world == 2 && total_at_2 == 0.0) total_at_2 = s.total_bytes();
        CHECK(s.total_bytes() >= total_at_2);
        CHECK(s.total_bytes() <= total_at_2 * ring / 0.5 * 1.01);
      }
    if (world == 8) shared_at_8 = rec.stats[0].back().total_bytes();
  }
  // What it replaces: the per-rank selection's union grows with N (independent gradients).
  const auto per_rank = simulate<per_rank_bf16>(8, n, theta, 2, random_input(n, 7));
  REQUIRE(per_rank.failures.empty());
  CHECK(per_rank.stats[0].back().total_bytes() > 3.0 * shared_at_8);
}

TEST_CASE("shared index: the cost model's shared_selection_cross_bits is what the reducer sends") {
  const std::size_t n = 1 << 18;
  // 0.99: the positions go as a list (32 d < 1 bit); 0.95: as a bitmap
  for (const double theta : {0.99, 0.95})
    for (int world : {2, 4}) {
      CAPTURE(theta);
      CAPTURE(world);
      const auto rec = simulate<shared_bf16>(world, n, theta, 2, random_input(n, 5));
      REQUIRE(rec.failures.empty());
      const double ring = double(world - 1) / double(world);
      const double model = ring * double(n) * shared_selection_cross_bits(1.0 - theta) / 8.0;
      for (int r = 0; r < world; ++r)
        for (const auto& s : rec.stats[std::size_t(r)])
          CHECK(s.index_bytes + s.value_bytes == doctest::Approx(model).epsilon(1e-3));
    }
}

TEST_CASE("shared index: conservation, inputs = delivered + residuals (fp32, bf16, bf16 residual; both topologies)") {
  expect_conservation<shared_f32>(3, 5003, 0.95, 6, 1e-5);
  expect_conservation<shared_f32>(4, 4099, 0.9, 5, 1e-5, topology::replicated);
  // bf16 values: each rank's rounding goes back to its residual; the collective's
  // rounding of the sums (a few parts in a thousand of a sum) is not fed back.
  expect_conservation<shared_bf16>(3, 5003, 0.95, 6, 2e-2);
  expect_conservation<shared_bf16_residual>(2, 5003, 0.9, 6, 2e-2);
  expect_conservation<shared_bf16>(3, 70001, 0.99, 4, 2e-2);  // above the host's inline launch size (OpenMP)
}

TEST_CASE("shared index: theta = 0 delivers exactly the dense sum, nothing left in the residuals") {
  for (topology topo : {topology::sharded, topology::replicated}) {
    const int world = 3;
    const std::size_t n = 1001;
    const auto rec = simulate<shared_f32>(world, n, 0.0, 2, random_input(n, 3), topo);
    REQUIRE(rec.failures.empty());
    for (int t = 0; t < 2; ++t) {
      const auto d = delivered_at(rec, world, n, t, topo);
      for (std::size_t i = 0; i < n; ++i) {
        float want = rec.in[0][std::size_t(t)][i];  // the communicator's order: rank 0, 1, 2
        for (int r = 1; r < world; ++r) want += rec.in[std::size_t(r)][std::size_t(t)][i];
        if (float(d[i]) != want) FAIL("step " << t << " entry " << i << ": " << d[i] << " vs " << want);
      }
      CHECK(rec.stats[0][std::size_t(t)].kept == n);
      // sharded: sent whole, no positions; replicated: all n positions, the bitmap is smaller
      CHECK(rec.stats[0][std::size_t(t)].index_bits == (topo == topology::sharded ? 0 : 1));
      CHECK((rec.stats[0][std::size_t(t)].index_bytes == 0.0) == (topo == topology::sharded));
    }
    for (int r = 0; r < world; ++r) CHECK(rec.residual[std::size_t(r)] == std::vector<float>(n, 0.0f));
  }
}

TEST_CASE("shared index: the delivered positions are the leader's top-k, and the leader rotates") {
  const int world = 4;
  const std::size_t n = 4096, k = 8;
  const double theta = 1.0 - double(k) / double(n);
  // Rank r's large entries lie at positions 100 r + 7 j (j < k), larger the higher
  // the rank, so every rank's top k is its own set and differs from the others'.
  const auto hot = [&](int r) {
    std::set<std::size_t> s;
    for (std::size_t j = 0; j < k; ++j) s.insert(100 * std::size_t(r) + 7 * j + 1);
    return s;
  };
  const input_fn input = [&](int r, int t) {
    auto g = gradient(n, 11, r, t);
    for (auto& x : g) x *= 1e-3f;
    for (std::size_t p : hot(r)) g[p] = 1.0f + 0.1f * float(r);
    return g;
  };
  const int steps = 2 * world;
  const auto rec = simulate<shared_f32>(world, n, theta, steps, input);
  REQUIRE(rec.failures.empty());
  for (int t = 0; t < steps; ++t) {
    const auto d = delivered_at(rec, world, n, t, topology::sharded);
    std::set<std::size_t> got;
    for (std::size_t i = 0; i < n; ++i)
      if (d[i] != 0.0) got.insert(i);
    // Leader t mod N: its own hot set (the others' hot entries wait in their residuals).
    const int leader = t % world;
    CHECK_MESSAGE(got == hot(leader), "step " << t);
    CHECK(rec.stats[0][std::size_t(t)].kept == k);
    CHECK(rec.stats[0][std::size_t(t)].index_bits == 32);  // k << n / 32: the list is smaller
    // Held back, visible: every non-leader has its k hot entries above the leader's threshold, unsent.
    // (and possibly a few noise entries above the leader's threshold too).
    for (int r = 0; r < world; ++r) {
      const std::size_t held = rec.stats[std::size_t(r)][std::size_t(t)].deferred;
      if (r == leader) CHECK(held == 0);
      else CHECK(held >= k);
    }
  }
}

TEST_CASE("shared index: save and load in the middle resume bit for bit; mismatched states are refused") {
  const int world = 3;
  const std::size_t n = 3001;
  const int first = 4, second = 5;
  const auto args_for = [&](int r) {
    reducer_arguments a{.length = n, .world_size = world, .rank = r, .sparsity = 0.95};
    a.schedule = {.warmup_steps = 6, .start = 0.5};
    return a;
  };
  const resume_record run = resume_in_the_middle<shared_bf16_residual>(world, args_for, first, second, 9);
  expect_resumed_exactly(run, first);
  const std::vector<std::byte>& saved_rank0 = run.saved[0];
  const reducer_arguments args0 = args_for(0);

  const auto refused = [&](auto&& reducer, const reducer_arguments& a, std::span<const std::byte> s, const char* words) {
    REQUIRE(reducer.initialize(a).ok());
    const status st = reducer.load_state(s);
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find(words) != std::string::npos, st.message());
  };
  reducer_arguments other = args0;
  other.length = n + 1;
  refused(shared_bf16_residual{}, other, saved_rank0, "length 3001, this reducer has 3002");
  other = args0;
  other.rank = 1;
  refused(shared_bf16_residual{}, other, saved_rank0, "rank 0, this reducer has 1");
  refused(shared_bf16{}, args0, saved_rank0, "residual type bfloat16, this reducer has float");
  refused(Reducer<SparsifyBf16ResidualPolicy, SharedIndexPolicy, PackedPolicy>{}, args0, saved_rank0,
          "value type bfloat16, this reducer has float");
  refused(shared_bf16_residual{}, args0, std::span(saved_rank0).first(saved_rank0.size() - 1), "bytes, expected");
  // A state of the per-rank selection is not a shared-index state, nor the other way round.
  per_rank_bf16 pr;
  REQUIRE(pr.initialize({.length = n, .world_size = world, .rank = 0, .sparsity = 0.95}).ok());
  refused(shared_bf16{}, {.length = n, .world_size = world, .rank = 0, .sparsity = 0.95}, pr.save_state(),
          "per-rank selection Reducer");
  CHECK_FALSE(pr.load_state(saved_rank0).ok());
  // A state whose theta is denser than this reducer was sized for.
  auto dense = saved_rank0;
  const double half = 0.1;
  std::memcpy(dense.data() + 8 * 8, &half, sizeof half);
  refused(shared_bf16_residual{}, args0, dense, "sized for at initialize");
  shared_bf16_residual sized;
  REQUIRE(sized.initialize(args0).ok());
  CHECK_FALSE(sized.set_sparsity(0.1).ok());
  CHECK(sized.set_sparsity(0.6).ok());
}

TEST_CASE("shared index: NaN on one rank is refused alike on every rank, residual and step unchanged") {
  const int world = 4;
  const std::size_t n = 2000;
  std::mutex m;
  std::vector<std::string> messages;
  on_ranks(world, [&](local_communicator& comm) {
    const int r = comm.rank();
    shared_bf16 red;
    REQUIRE(red.initialize({.length = n, .world_size = world, .rank = r, .sparsity = 0.9, .name = "mlp.fc"}).ok());
    std::vector<float> out(red.output_size());
    REQUIRE(red.reduce_scatter(comm, gradient(n, 4, r, 0), out).ok());
    const auto before = red.residual_to_host();
    auto g = gradient(n, 4, r, 1);
    if (r == 2) g[17] = std::numeric_limits<float>::quiet_NaN();
    const status s = red.reduce_scatter(comm, g, out);
    CHECK(s.code() == errc::non_finite);
    CHECK(red.residual_to_host() == before);
    CHECK(red.steps() == 1u);
    // A mismatched length on one rank: the same refusal everywhere, too.
    const auto g2 = gradient(r == 1 ? n - 1 : n, 4, r, 2);
    const status s2 = red.reduce_scatter(comm, g2, out);
    CHECK(s2.code() == errc::size_mismatch);
    // And the next good call goes through.
    CHECK(red.reduce_scatter(comm, gradient(n, 4, r, 3), out).ok());
    std::lock_guard lk(m);
    messages.push_back(s.message());
  });
  REQUIRE(messages.size() == std::size_t(world));
  for (const auto& msg : messages) {
    CHECK(msg == messages[0]);
    CHECK_MESSAGE(msg.find("unit 'mlp.fc' (step 1)") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("rank 2 has 1 NaN/Inf") != std::string::npos, msg);
  }
}
