// PooledIndexPolicy (shared_reducer.hpp, stage/shared_selection.hpp): every rank
// picks its share of the call's picks, the shares are all-gathered and their
// union is the call's selection, at which every rank's value is summed (a
// reference computed here, bit for bit; the first call's positions are those of
// the per-rank packed reducer keeping that share); the picks follow the ranks'
// overlap so that the union comes near k, and the overlap resumes from a saved
// state; its bytes per rank do not grow with N, theta = 0 is the dense sum,
// inputs = delivered + residuals, and a rank that pools beside one that follows a
// leader, or beside one that gathers every rank's own k (GatheredIndexPolicy: held
// here to the per-rank selection's sums at every call), is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using pooled_f32 = Reducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy>;
using pooled_bf16 = Reducer<SparsifyPolicy, PooledIndexPolicy, PackedBf16Policy>;
using gathered_f32 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedPolicy>;
using per_rank_f32 = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy>;

}  // namespace

namespace {
// The picks, as documented in shared_reducer.hpp: k times the overlap the last call
// measured (its picks / its union; 1 at first), rounded up, between k and min(N, 4) k.
struct overlap_reference {
  double overlap = 1.0;
  static double most(int world) { return double(std::min(world, 4)); }
  std::size_t picks(std::size_t k, std::size_t n, int world) const {
    if (k >= n) return k;
    return std::clamp(std::size_t(std::ceil(double(k) * overlap)), k, k * std::size_t(most(world)));
  }
  void after(std::size_t k, std::size_t n, int world, std::size_t picks, std::size_t pooled) {
    if (k < n && pooled > 0) overlap = std::clamp(double(picks) / double(pooled), 1.0, most(world));
  }
};

// The reference, call by call: acc = g + residual per rank; the call's picks
// (overlap_reference); rank r's share of them is picks / N, plus one for the picks
// mod N ranks whose turn it is ((r - call) mod N < picks mod N); the union of the
// ranks' share largest |acc|; there the sum of every rank's acc (rank order, as the
// in-process communicator sums) and the residual 0; elsewhere nothing, acc kept. Bit
// for bit against what the reducer delivered (also where the union holds over half
// the padded buffer and the values travel in it, reduce-scattered).
// `distinct`: the ranks' gradients differ, so the union holds more than one share.
void expect_reference(const run_record& pooled, int world, std::size_t n, std::size_t k, int steps,
                      bool distinct = true) {
  std::vector<std::vector<float>> res(world, std::vector<float>(n, 0.0f));
  overlap_reference overlap;
  for (int t = 0; t < steps; ++t) {
    CAPTURE(t);
    std::vector<std::vector<float>> acc(world);
    std::set<std::size_t> pool;
    const std::size_t picks = overlap.picks(k, n, world);
    for (int r = 0; r < world; ++r) {
      acc[std::size_t(r)] = pooled.in[std::size_t(r)][std::size_t(t)];
      for (std::size_t i = 0; i < n; ++i) acc[std::size_t(r)][i] += res[std::size_t(r)][i];
      const std::size_t turn = std::size_t((r - t % world + world) % world);
      const std::size_t share = picks / std::size_t(world) + (turn < picks % std::size_t(world) ? 1 : 0);
      std::vector<std::size_t> order(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      const auto& a = acc[std::size_t(r)];
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(share), order.end(),
                        [&](std::size_t x, std::size_t y) { return std::fabs(a[x]) > std::fabs(a[y]); });
      pool.insert(order.begin(), order.begin() + std::ptrdiff_t(share));
    }
    overlap.after(k, n, world, picks, pool.size());
    const std::size_t padded = std::size_t(world) * ((n + std::size_t(world) - 1) / std::size_t(world));
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
      if (distinct) CHECK(s.kept > picks / std::size_t(world));  // more than one rank's share
      CHECK(s.index_bits > 0);
      CHECK(s.packed_slots == (2 * pool.size() > padded ? padded : s.kept));  // in the buffer: all of it
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

namespace {
// GatheredIndexPolicy against the per-rank selection (ExactIndexPolicy, packed values)
// at the same theta: the same sums and residuals at every call, bit for bit.
template <class Gathered, class PerRank>
void expect_per_rank_sums(int world, std::size_t n, double theta, int steps, topology topo = topology::sharded) {
  CAPTURE(world);
  CAPTURE(theta);
  const auto ours = simulate<Gathered>(world, n, theta, steps, random_input(n, 29), topo);
  const auto theirs = simulate<PerRank>(world, n, theta, steps, random_input(n, 29), topo);
  REQUIRE(ours.failures.empty());
  REQUIRE(theirs.failures.empty());
  for (int t = 0; t < steps; ++t) {
    CAPTURE(t);
    CHECK(delivered_at(ours, world, n, t) == delivered_at(theirs, world, n, t));
    CHECK(ours.stats[0][std::size_t(t)].kept == theirs.stats[0][std::size_t(t)].packed_union);
  }
  for (int r = 0; r < world; ++r) CHECK(ours.residual[std::size_t(r)] == theirs.residual[std::size_t(r)]);
}
}  // namespace

TEST_CASE("gathered: every rank's own top-k all-gathered, its values where it picked: the exact index's sums") {
  using gathered_bf16 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy>;
  using per_rank_bf16 = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy>;
  expect_per_rank_sums<gathered_f32, per_rank_f32>(4, 4000, 0.875, 5);      // bitmaps (k >= n / 32)
  expect_per_rank_sums<gathered_f32, per_rank_f32>(3, 40000, 0.99, 5);      // lists
  expect_per_rank_sums<gathered_bf16, per_rank_bf16>(4, 40000, 0.9875, 4);  // bf16 values, lists
  expect_per_rank_sums<gathered_f32, per_rank_f32>(3, 6000, 0.5, 3);        // a union over half: in the buffer
  expect_per_rank_sums<gathered_f32, per_rank_f32>(2, 3001, 0.95, 3, topology::replicated);

  // its positions: N lists of k, all-gathered, where the exact index all-reduces a
  // counter per entry (4 bits at 4 ranks)
  const int world = 4;
  const std::size_t n = 1 << 16;
  const double theta = 0.9875;
  const std::size_t k = stage::ThresholdSelect<float, exec::host>::kept_at_most(theta, n);
  const auto ours = simulate<gathered_f32>(world, n, theta, 2, random_input(n, 3));
  const auto theirs = simulate<per_rank_f32>(world, n, theta, 2, random_input(n, 3));
  REQUIRE(ours.failures.empty());
  REQUIRE(theirs.failures.empty());
  const double ring = double(world - 1) / double(world);
  for (int t = 0; t < 2; ++t) {
    const reduce_stats& s = ours.stats[0][std::size_t(t)];
    CHECK(s.index_bits == 16);  // coded lists: 16-bit offsets, a word per 65536 positions and a count
    CHECK(s.index_bytes == doctest::Approx(ring * double(std::size_t(world) * detail::coded_list_words(k, n) * 4)));
    CHECK(s.index_bytes < ring * double(std::size_t(world) * k * 4) * 0.51);  // half a 32-bit list's
    CHECK(s.index_bytes < theirs.stats[0][std::size_t(t)].index_bytes / 4);
    CHECK(s.value_bytes == doctest::Approx(2.0 * ring * double(s.kept * sizeof(float))));
  }
}

TEST_CASE("pooled lists: 16-bit offsets by block decode to the positions coded, at block edges and past free slots") {
  // positions at both edges of blocks, an empty block between, the last position, then free slots
  const std::size_t n = 3 * detail::coded_block_positions + 77;
  const std::vector<std::uint32_t> positions = {0, 1, 65535, 65536, 65537, 3 * 65536, std::uint32_t(n - 1)};
  std::vector<std::uint32_t> list = positions;
  list.resize(positions.size() + 3, detail::no_position);  // a share with fewer picks than slots
  const std::size_t entries = list.size(), blocks = detail::coded_list_blocks(n);
  REQUIRE(blocks == 4);
  // two ranks' coded lists back to back: this one and an empty one
  const std::size_t words = detail::coded_list_words(entries, n);
  CHECK(words == blocks + 1 + (entries + 1) / 2);
  std::vector<std::uint32_t> all(2 * words, 0u);
  const auto starts = [&](const std::uint32_t* l, std::uint32_t* out) {
    return detail::list_starts<std::uint32_t>{l, entries, detail::coded_block_positions, out};
  };
  for (std::size_t j = 0; j <= blocks; ++j) starts(list.data(), all.data())(j);
  for (std::size_t w = 0; w < (entries + 1) / 2; ++w)
    detail::code_list_offsets{list.data(), entries, all.data() + blocks + 1}(w);
  const std::vector<std::uint32_t> none(entries, detail::no_position);
  for (std::size_t j = 0; j <= blocks; ++j) starts(none.data(), all.data() + words)(j);
  CHECK(all[blocks] == positions.size());  // the count leaves the free slots out
  CHECK(all[words + blocks] == 0);
  std::vector<std::uint32_t> bitmap((n + 31) / 32, 0u);
  for (std::size_t t = 0; t < 2 * entries; ++t) detail::pool_coded_position{all.data(), words, entries, n, bitmap.data()}(t);
  std::vector<std::uint32_t> decoded;
  for (std::size_t p = 0; p < n; ++p)
    if (bitmap[p / 32] >> (p % 32) & 1u) decoded.push_back(std::uint32_t(p));
  CHECK(decoded == positions);
  const detail::pooled_picks picks{all.data(), true, words, entries, n};
  CHECK(picks(0) + picks(1) == positions.size());
}

TEST_CASE("gathered: the cost model's gathered_index_cross_bits is what the reducer sends, given the union") {
  using gathered_bf16 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy>;
  const auto check_model = [](const auto& rec, int world, std::size_t n, double theta, double value_bits) {
    const std::size_t k = stage::ThresholdSelect<float, exec::host>::kept_at_most(theta, n);
    const double ring = double(world - 1) / double(world);
    for (int r = 0; r < world; ++r)
      for (const auto& s : rec.stats[std::size_t(r)]) {
        // the union of the N selections: what the stats report as kept (every rank sends there)
        const double union_ratio = double(s.kept) / double(k);
        CHECK(union_ratio >= 1.0);
        const double bits = gathered_index_cross_bits(double(k) / double(n), world, union_ratio, value_bits);
        CHECK(s.index_bytes + s.value_bytes == doctest::Approx(ring * double(n) * bits / 8.0).epsilon(1e-3));
      }
  };
  const std::size_t n = 1 << 18;
  // 0.99: coded lists (16 d + 1/2048 < 1 bit a node); 0.95: bitmaps
  for (const double theta : {0.99, 0.95})
    for (int world : {2, 4}) {
      CAPTURE(theta);
      CAPTURE(world);
      const auto rec = simulate<gathered_bf16>(world, n, theta, 2, random_input(n, 5));
      REQUIRE(rec.failures.empty());
      check_model(rec, world, n, theta, 16.0);
    }
  // a union over half the buffer: the buffer reduce-scattered (fp32 values)
  const auto dense = simulate<gathered_f32>(4, n, 0.75, 2, random_input(n, 5));
  REQUIRE(dense.failures.empty());
  check_model(dense, 4, n, 0.75, 32.0);
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
    const int steps = 3;
    const auto rec = simulate<pooled_bf16>(world, n, theta, steps, random_input(n, 7));
    REQUIRE(rec.failures.empty());
    const double ring = double(world - 1) / double(world);
    overlap_reference overlap;
    for (int t = 0; t < steps; ++t) {
      CAPTURE(t);
      const std::size_t picks = overlap.picks(k, n, world);
      overlap.after(k, n, world, picks, rec.stats[0][std::size_t(t)].kept);
      for (int r = 0; r < world; ++r) {
        const reduce_stats& s = rec.stats[std::size_t(r)][std::size_t(t)];
        CHECK(s.kept > 0);
        CHECK(s.kept <= picks);
        CHECK(s.index_bits == 16);  // shares of ~k / N < n / 16: coded lists
        // the lists: N coded blocks of ceil(picks / N) positions, all-gathered; the values: the union, all-reduced
        const std::size_t block = (picks + std::size_t(world) - 1) / std::size_t(world);
        CHECK(s.index_bytes == doctest::Approx(ring * double(std::size_t(world) * detail::coded_list_words(block, n) * 4)));
        CHECK(s.value_bytes == doctest::Approx(2.0 * ring * double(s.kept * sizeof(bfloat16))));
        // picks <= 4k: at most 4 bytes per pick and 2 x 2 per value whatever N is (plus the ring factor)
        const double core = s.index_bytes + s.value_bytes;
        CHECK(core <= ring * (4.0 * double(4 * k + std::size_t(world)) + 4.0 * double(4 * k)));
        if (world == 2) bound = std::max(bound, core);
        CHECK(core <= 2.0 * 2.0 * bound);  // the ring factor and the picks' factor (2 at N = 2, 4 beyond)
      }
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
    CHECK(rec.stats[0][std::size_t(t)].index_bits == 0);
    // every value reduce-scattered (the padded buffer's ring share), not all-reduced, no positions
    const double padded = double(world * ((n + world - 1) / world));
    CHECK(rec.stats[0][std::size_t(t)].value_bytes == doctest::Approx(padded * 4.0 * (world - 1) / world));
  }
  for (int r = 0; r < world; ++r) CHECK(rec.residual[std::size_t(r)] == std::vector<float>(n, 0.0f));
  // replicated: every position selected and all-reduced, still no positions sent
  const auto rep = simulate<pooled_f32>(world, n, 0.0, 1, random_input(n, 3), topology::replicated);
  REQUIRE(rep.failures.empty());
  CHECK(rep.stats[0][0].kept == n);
  CHECK(rep.stats[0][0].index_bits == 0);
  CHECK(rep.stats[0][0].index_bytes == 0.0);
}

TEST_CASE_TEMPLATE("pooled index: conservation, inputs = delivered + residuals; k smaller than N", R, pooled_f32,
                   gathered_f32) {
  for (const auto& [world, n, theta] : {std::tuple{3, std::size_t(5003), 0.95}, std::tuple{4, std::size_t(70001), 0.99},
                                        std::tuple{5, std::size_t(400), 0.995}}) {  // k = 2 < N: some ranks pick none
    CAPTURE(world);
    CAPTURE(n);
    const int steps = 6;
    const auto rec = simulate<R>(world, n, theta, steps, random_input(n, 21));
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

namespace {
// Rank 0 runs A, rank 1 runs B, one call each: what each rank's call returned.
template <class A, class B>
std::vector<status> mixed_call() {
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
      A red;
      call(red);
    } else {
      B red;
      call(red);
    }
  });
  return got;
}
}  // namespace

TEST_CASE("pooled index: a rank that pools beside one that follows a leader, or that sends only its own picks, is refused on every rank") {
  for (const status& s : mixed_call<pooled_f32, Reducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>>())
    CHECK(s.code() == errc::invalid_argument);
  for (const status& s : mixed_call<pooled_f32, gathered_f32>()) CHECK(s.code() == errc::invalid_argument);
}

TEST_CASE("pooled index: where the ranks agree the picks grow until the union is k; the overlap resumes from a state") {
  // Every rank sees the same gradient, so every rank's share is the same largest
  // entries: k picks make a union of ceil(k / N). The next call picks k times that
  // overlap (at most 4 k): at N = 4 every rank picks k and the union is k; at N = 8
  // the picks' bound leaves it at k / 2.
  const std::size_t n = 8192;
  const double theta = 0.75;
  const std::size_t k = stage::ThresholdSelect<float, exec::host>::kept_at_most(theta, n);
  REQUIRE(k == n / 4);
  const input_fn same = [&](int, int t) { return gradient(n, 41, 0, t); };
  for (const auto& [world, settled] : {std::pair{4, k}, std::pair{8, k / 2}}) {
    CAPTURE(world);
    const auto rec = simulate<pooled_f32>(world, n, theta, 4, same);
    REQUIRE(rec.failures.empty());
    CHECK(rec.stats[0][0].kept == k / std::size_t(world));
    for (int t = 1; t < 4; ++t) {
      CAPTURE(t);
      CHECK(rec.stats[0][std::size_t(t)].kept == settled);
      CHECK(rec.stats[0][std::size_t(t)].index_bits == 1);  // shares of k / N or more: bitmaps beat lists
    }
    expect_reference(rec, world, n, k, 4, false);
  }

  // Saved after two calls and loaded into a fresh reducer, the third call is the
  // uninterrupted one's (the union of k); without the state's overlap it would be k / 4.
  // A version 1 state (before the overlap) loads with overlap 1.
  const int world = 4;
  std::mutex m;
  std::vector<std::size_t> whole(world), resumed(world), from_v1(world), from_beyond(world);
  std::vector<std::vector<float>> whole_out(world), resumed_out(world);
  on_ranks(world, [&](local_communicator& comm) {
    const int r = comm.rank();
    const reducer_arguments args{.length = n, .world_size = world, .rank = r, .sparsity = theta};
    pooled_f32 a, b, c, v1;
    REQUIRE(a.initialize(args).ok());
    REQUIRE(b.initialize(args).ok());
    REQUIRE(c.initialize(args).ok());
    REQUIRE(v1.initialize(args).ok());
    std::vector<float> out(a.output_size()), out_c(a.output_size());
    reduce_stats sa, sc, s1;
    for (int t = 0; t < 3; ++t) REQUIRE(a.reduce_scatter(comm, same(r, t), out, &sa).ok());
    for (int t = 0; t < 2; ++t) REQUIRE(b.reduce_scatter(comm, same(r, t), out_c).ok());
    const auto state = b.save_state();
    REQUIRE(c.load_state(state).ok());
    REQUIRE(c.reduce_scatter(comm, same(r, 2), out_c, &sc).ok());
    // version 1: the same words without the overlap after the step counter
    auto old = state;
    const std::uint64_t one = 1;
    std::memcpy(old.data() + 8, &one, sizeof one);
    old.erase(old.begin() + 8 * 8 + 16, old.begin() + 8 * 8 + 24);
    REQUIRE(v1.load_state(old).ok());
    REQUIRE(v1.reduce_scatter(comm, same(r, 2), std::span<float>(out.data(), out.size()), &s1).ok());
    // a damaged overlap (NaN, under 1) is refused and changes nothing; one beyond what N
    // ranks reach is taken as that most (4 here)
    const std::size_t overlap_at = 8 * 8 + 16;
    for (double bad : {std::nan(""), 0.5}) {
      auto damaged = state;
      std::memcpy(damaged.data() + overlap_at, &bad, sizeof bad);
      pooled_f32 d;
      REQUIRE(d.initialize(args).ok());
      const status st = d.load_state(damaged);
      CHECK(st.code() == errc::io);
      CHECK(st.message().find("pooled overlap") != std::string::npos);
      pooled_f32 fresh;
      REQUIRE(fresh.initialize(args).ok());
      CHECK(d.save_state() == fresh.save_state());
    }
    auto beyond = state;
    const double hundred = 100.0;
    std::memcpy(beyond.data() + overlap_at, &hundred, sizeof hundred);
    pooled_f32 e;
    REQUIRE(e.initialize(args).ok());
    REQUIRE(e.load_state(beyond).ok());
    reduce_stats se;
    REQUIRE(e.reduce_scatter(comm, same(r, 2), std::span<float>(out.data(), out.size()), &se).ok());
    std::lock_guard lk(m);
    whole[std::size_t(r)] = sa.kept;
    resumed[std::size_t(r)] = sc.kept;
    from_v1[std::size_t(r)] = s1.kept;
    from_beyond[std::size_t(r)] = se.kept;
    whole_out[std::size_t(r)] = a.residual_to_host();
    resumed_out[std::size_t(r)] = c.residual_to_host();
  });
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    CHECK(whole[std::size_t(r)] == k);
    CHECK(resumed[std::size_t(r)] == k);
    CHECK(from_v1[std::size_t(r)] == k / std::size_t(world));
    CHECK(from_beyond[std::size_t(r)] == k);  // overlap 4: every rank picks k
    CHECK(std::memcmp(whole_out[std::size_t(r)].data(), resumed_out[std::size_t(r)].data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("shared and pooled index: a selection of over half the buffer travels in it, reduce-scattered") {
  // theta 0.3 keeps k = 0.7 n: the leader's k (or the ranks' union) is over half the
  // buffer, so a sharded call lays the values out in the padded buffer and
  // reduce-scatters it ((N - 1) / N of the buffer per rank, where an all-reduce of k
  // sends 1.4 (N - 1) / N). What is delivered and held back is the replicated twin's,
  // which all-reduces the selection: the same sums, bit for bit, the same residuals.
  const int world = 3;
  const std::size_t n = 3001, padded = 3003;
  const auto compare = [&](auto reducer, const char* what) {
    using R = decltype(reducer);
    CAPTURE(what);
    const auto sh = simulate<R>(world, n, 0.3, 3, random_input(n, 51));
    const auto rep = simulate<R>(world, n, 0.3, 3, random_input(n, 51), topology::replicated);
    REQUIRE(sh.failures.empty());
    REQUIRE(rep.failures.empty());
    for (int t = 0; t < 3; ++t) {
      CAPTURE(t);
      const auto a = delivered_at(sh, world, n, t), b = delivered_at(rep, world, n, t, topology::replicated);
      std::size_t differ = 0, zeros = 0;
      for (std::size_t i = 0; i < n; ++i) {
        differ += a[i] != b[i];
        zeros += a[i] == 0.0;
      }
      CHECK(differ == 0);
      CHECK(zeros > 0);  // held back, not sent
      const reduce_stats& s = sh.stats[1][std::size_t(t)];
      CHECK(2 * s.kept > padded);
      CHECK(s.kept == rep.stats[1][std::size_t(t)].kept);
      CHECK(s.packed_slots == padded);
      CHECK(s.value_bytes == doctest::Approx(double(padded) * double(s.value_type_bytes) * (world - 1) / world));
      CHECK(s.value_bytes < rep.stats[1][std::size_t(t)].value_bytes);  // 2 kept > padded
    }
    for (int r = 0; r < world; ++r) CHECK(sh.residual[std::size_t(r)] == rep.residual[std::size_t(r)]);
  };
  compare(pooled_f32{}, "pooled fp32");
  compare(pooled_bf16{}, "pooled bf16");
  compare(Reducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>{}, "rotating leader fp32");
  compare(Reducer<SparsifyBf16ResidualPolicy, SharedIndexPolicy, PackedBf16Policy>{}, "rotating leader bf16, bf16 residual");
}
