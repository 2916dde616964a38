// Results do not depend on the path: the host's own stage implementations
// (exec::host: acc once, chunk-private histograms, kept list, sparse commit;
// detail/host_compress.hpp) against the portable single-source functors (the
// code a GPU runs) on the host (exec::host_portable), on the same inputs, at 2
// and 3 ranks, for every policy combination and for loads near the peeling
// threshold. Bit-identical: threshold, kept set (this rank's index), the
// reduced index, what was sent (sketch cells / packed slots), the residual and
// the counters; decoded values within float tolerance.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "support/harness.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
// One call of `red` in the topology's collective (reduce-scatter or all-reduce).
template <class R>
status call_in(topology topo, R& red, local_communicator& comm, const std::vector<float>& g, std::vector<float>& out,
               reduce_stats& st) {
  return topo == topology::sharded ? red.reduce_scatter(comm, g, out, &st) : red.all_reduce(comm, g, out, &st);
}
}  // namespace

namespace {

template <class T>
bool same_bytes(const T* a, const T* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Runs `body` with the host marking pass held to vector loops no wider than
// `limit` (restored after, whatever happens): a CPU with AVX-512 would otherwise
// always take that loop, and the AVX2 and SSE2 ones would go untested.
template <class F>
void with_marking_limit(detail::host::host_simd limit, F body) {
  auto& cap = detail::host::host_simd_limit();
  struct restore {
    std::atomic<detail::host::host_simd>& a;
    ~restore() { a = detail::host::host_simd::avx512; }
  } r{cap};
  cap = limit;
  body();
}
constexpr detail::host::host_simd every_marking_loop[] = {detail::host::host_simd::avx512,
                                                          detail::host::host_simd::avx2,
                                                          detail::host::host_simd::sse2};

// Gradients that mislead the host's sampled bracket (detail/host/threshold_marker.hpp
// samples 4 entries of every 16 at these lengths): tiny where it samples, large
// elsewhere, so the bracket misses the threshold and the exact select runs.
inline std::vector<float> off_sample(std::size_t n, int rank, int step) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = murmur3_32(std::uint32_t(i), std::uint32_t(rank * 71 + step));
    const float mag = i % 16 < 4 ? 1e-6f : 1e-3f;
    g[i] = (h & 1 ? 1.0f : -1.0f) * mag * (1.0f + float((h >> 1) % 1000) * 1e-3f);
  }
  return g;
}

// Gradients whose magnitudes take a handful of values: the threshold's bin
// holds most entries, so the host select takes its radix fallback.
inline std::vector<float> crowded(std::size_t n, int rank, int step) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = murmur3_32(std::uint32_t(i), std::uint32_t(rank * 131 + step));
    g[i] = (h & 1 ? 1.0f : -1.0f) * (1e-3f + 1e-7f * float((h >> 1) % 5));
  }
  return g;
}

// Gradients whose first 16th is 100x larger than the rest: at theta 0.9 the host
// marking pass's first chunk finds more kept entries than its region of the kept
// list holds (a quarter of its entries), so the list comes from the index instead.
inline std::vector<float> front_heavy(std::size_t n, int rank, int step) {
  auto g = gradient(n, 977, rank, step);
  for (std::size_t i = 0; i < n / 16 + 64; ++i) g[i] *= 100.0f;
  return g;
}

// Gradients at 4M entries with two tied groups near the threshold: ~50K entries
// of 1e-2 and ~70K of 1e-3 (the rest below 1e-5), theta keeping ~51K. The host's
// bracket then holds both groups (hi = 1e-2, lo = 1e-3); the threshold's rank
// falls in the 1e-3 group, whose histogram bin holds more entries than the
// select's buffer (64K): the select orders the whole pool instead, and the
// 1e-2 entries are marked from wherever that put them.
inline constexpr std::size_t tied_length = std::size_t(1) << 22;
inline constexpr double tied_theta = 1.0 - 51200.5 / double(tied_length);
inline std::vector<float> two_ties(std::size_t n, int rank, int step) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = murmur3_32(std::uint32_t(i), std::uint32_t(rank * 37 + step));
    const std::uint32_t q = (h >> 1) % std::uint32_t(n);
    const float mag = q < 50000 ? 1e-2f : q < 120000 ? 1e-3f : 1e-6f * float(1 + (h >> 24) % 10);
    g[i] = (h & 1 ? 1.0f : -1.0f) * mag;
  }
  return g;
}

enum class input { gradient, crowded, off_sample, front_heavy, two_ties };

// Returns the calls (all ranks) whose packed slots went back to back (a hot shard).
template <class Sparsify, class Index, class Values>
int compare_paths(int world, std::size_t n, double theta, int steps, input kind = input::gradient,
                  topology topo = topology::sharded, bool adapt = false) {
  const bool crowd = kind == input::crowded;
  // Decode by peeling alone: the host and portable decoders peel in different orders
  // (detail/host/peel.hpp, a queue; the portable rounds), so their values and any
  // estimates differ in the last bits, and an owed estimate would carry that into the
  // owner's residual. With peeling alone the residual depends only on the resolved set,
  // which is order-independent, so the compress side is still held to the same bits.
  // The decoders themselves are compared in tests/test_decode_paths.cpp.
  using decode_t = DecodePolicy<decode_mode::peel>;
  using fast_t = Reducer<Sparsify, Index, Values, decode_t, exec::host>;
  using portable_t = Reducer<Sparsify, Index, Values, decode_t, exec::host_portable>;
  CAPTURE(world); CAPTURE(n); CAPTURE(theta); CAPTURE(crowd);
  std::mutex m;
  std::vector<std::string> failures;
  std::atomic<int> back_to_back{0};
  on_ranks(world, [&](local_communicator& comm) {
    const auto fail = [&](const std::string& what, int step) {
      std::lock_guard<std::mutex> lock(m);
      failures.push_back("rank " + std::to_string(comm.rank()) + " step " + std::to_string(step) + ": " + what);
    };
    reducer_arguments a{.length = n, .world_size = world, .rank = comm.rank(), .topo = topo, .sparsity = theta};
    a.adapt.enabled = adapt;  // theta moves at the agreement check: the host marks after it, not in pass 0
    fast_t fast;
    portable_t port;
    if (!fast.initialize(a).ok() || !port.initialize(a).ok()) return fail("initialize", -1);
    std::vector<float> out_f(fast.output_size()), out_p(port.output_size());
    for (int t = 0; t < steps; ++t) {
      const auto g = crowd                           ? crowded(n, comm.rank(), t)
                     : kind == input::off_sample  ? off_sample(n, comm.rank(), t)
                     : kind == input::front_heavy ? front_heavy(n, comm.rank(), t)
                     : kind == input::two_ties    ? two_ties(n, comm.rank(), t)
                                                  : gradient(n, 4242, comm.rank(), t, 0.7);
      reduce_stats sf, sp;
      const status stf = call_in(topo, fast, comm, g, out_f, sf);
      const status stp = call_in(topo, port, comm, g, out_p, sp);
      if (!stf.ok() || !stp.ok()) return fail("call failed: " + stf.what() + " / " + stp.what(), t);
      if (std::memcmp(&sf.threshold, &sp.threshold, sizeof(float)) != 0) fail("threshold", t);
      if (sf.kept != sp.kept || sf.deferred != sp.deferred || sf.retransmitted != sp.retransmitted)
        fail("counters kept/deferred/retransmitted", t);
      if (sf.support != sp.support || sf.unresolved != sp.unresolved || sf.index_popcount != sp.index_popcount)
        fail("support / unresolved / popcount", t);
      if (sf.value_scale_exponent != sp.value_scale_exponent) fail("fp16 scale", t);
      const auto fs = fast.stages(), ps = port.stages();
      const std::size_t ib = fast.plan().index_bytes * std::size_t(fast.plan().shards);
      if (!same_bytes(fs.select.marks(), ps.select.marks(), ib)) fail("local index (kept set)", t);
      if (!same_bytes(fs.index.reduced(), ps.index.reduced(), fs.index.reduced_bytes())) fail("reduced index", t);
      if (fs.values.sent_size() != ps.values.sent_size() ||
          !same_bytes(fs.values.sent(), ps.values.sent(), fs.values.sent_size()))
        fail("sketch cells / packed slots sent", t);
      if constexpr (requires { fs.values.sent_back_to_back(); }) {
        if (fs.values.sent_back_to_back() != ps.values.sent_back_to_back()) fail("packed layout", t);
        back_to_back += fs.values.sent_back_to_back();
      }
      const auto rf = fast.residual_to_host(), rp = port.residual_to_host();
      if (!same_bytes(rf.data(), rp.data(), rf.size())) fail("residual", t);
      double worst = 0.0, scale = 1e-30;
      for (std::size_t i = 0; i < out_f.size(); ++i) {
        worst = std::max(worst, std::fabs(double(out_f[i]) - double(out_p[i])));
        scale = std::max(scale, std::fabs(double(out_p[i])));
      }
      // Peeled values are sums in another order: fp32 cells agree to 1e-4 of the largest
      // value. 16-bit cells were rounded on the wire and no longer sum exactly, so a peel
      // chain carries a cell's rounding (relative to the cell, larger than the value) into
      // the entries after it, in an order that depends on the decoder: measured up to ~1 %
      // of the largest value here. This is only a sanity bound; tests/test_decode_paths.cpp
      // holds both decoders to the true values (host error <= 1.25x portable's on average).
      const double tolerance = sizeof(typename Values::value_type) == 4 ? 1e-4 : 0x1p-4;
      if (worst > tolerance * scale) fail("decoded values differ by " + std::to_string(worst), t);
    }
    // Both restore and continue alike from each other's checkpoint.
    const auto saved = fast.save_state();
    if (saved != port.save_state()) fail("saved state", steps);
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  return back_to_back;
}

template <class Sparsify, class Index, class Values>
void compare_at_2_and_3(std::size_t n, double theta, int steps = 3) {
  compare_paths<Sparsify, Index, Values>(2, n, theta, steps);
  compare_paths<Sparsify, Index, Values>(3, n + 2, theta, steps);
}

}  // namespace

TEST_CASE("paths: sketch fp32 cells, 1-bit index (the paper's), ratios 2 and 4 near the peeling threshold") {
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<2, 64>>(40001, 0.80);
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(40001, 0.90);
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(3001, 0.90);  // inline (no OpenMP team)
}
TEST_CASE("paths: sketch fp32, 4-bit index and the exact index reduce-scattered") {
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<4>, SketchPolicy<4, 64>>(40001, 0.90);
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<index_auto, index_exchange::reduce_scatter>, SketchPolicy<2, 64>>(
      40001, 0.80);
}
TEST_CASE("paths: 16-bit sketch cells (bf16, fp16)") {
  compare_at_2_and_3<SparsifyPolicy, ExactIndexPolicy, SketchBf16Policy<4, 64>>(40001, 0.90);
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<4>, SketchFp16Policy<2, 64>>(40001, 0.80);
}
TEST_CASE("paths: packed values fp32, bf16, fp16 with 1-bit, 4-bit and exact indexes") {
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, PackedPolicy>(40001, 0.95);
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<4>, PackedBf16Policy>(40001, 0.90);
  compare_at_2_and_3<SparsifyPolicy, ExactIndexPolicy, PackedFp16Policy>(40001, 0.90);
}
TEST_CASE("paths: packed values with a hot shard (the unions back to back, all-reduced) at 3 and 4 ranks") {
  CHECK(compare_paths<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy>(3, 40001, 0.95, 3, input::front_heavy) == 9);
  CHECK(compare_paths<SparsifyPolicy, IndexPolicy<4>, PackedPolicy>(4, 40001, 0.95, 3, input::front_heavy) == 12);
}
TEST_CASE("paths: bf16 residual (stochastic rounding from the same bits)") {
  compare_at_2_and_3<SparsifyBf16ResidualPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(40001, 0.90);
  compare_at_2_and_3<SparsifyBf16ResidualPolicy, ExactIndexPolicy, PackedBf16Policy>(40001, 0.90);
}
TEST_CASE("paths: the host fallbacks (no kept list at theta 0.5; a crowded threshold bin) and replicated") {
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 40001, 0.5, 2);
  compare_paths<SparsifyPolicy, IndexPolicy<4>, PackedBf16Policy>(2, 40001, 0.5, 2);  // packed from acc, not the list
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 40001, 0.90, 2, input::crowded);
  compare_paths<SparsifyPolicy, IndexPolicy<4>, PackedPolicy>(3, 40001, 0.90, 2, input::crowded);
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 40001, 0.90, 2, input::gradient,
                                                                      topology::replicated);
}
TEST_CASE("paths: the bracket's threshold bin fuller than the select's buffer (two tied groups)") {
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<10, 64>>(2, tied_length, tied_theta, 1, input::two_ties);
}
TEST_CASE("paths: a chunk with more kept entries than its region of the staged kept list") {
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 100003, 0.90, 2, input::front_heavy);
  compare_paths<SparsifyPolicy, IndexPolicy<4>, PackedPolicy>(3, 100003, 0.90, 2, input::front_heavy);
}

namespace {
// The marker's staged kept list against the list read from its index: same
// positions and values, and whether it came from the stage (`expect_staged`).
void check_staged_list(const std::vector<float>& acc, int shards, int index_bits, double theta, bool fused,
                       bool expect_staged) {
  CAPTURE(acc.size()); CAPTURE(shards); CAPTURE(index_bits); CAPTURE(theta); CAPTURE(fused);
  const std::size_t n = acc.size();
  const layout l = make_layout(n, shards, 64, 4, index_bits);
  const auto target = std::uint32_t(std::floor((1.0 - theta) * double(n))) + 1u;
  std::vector<std::uint8_t> index(l.index_bytes * std::size_t(shards)), index2(index.size());
  std::vector<std::uint32_t> hist(std::size_t(detail::hist_copies) * detail::hist_bins);
  std::vector<std::uint32_t> staged(n / 4 + 1), plain(staged.size());
  std::vector<float> staged_values(staged.size()), plain_values(staged.size()), acc2(n), zero(n, 0.0f);
  detail::host::threshold_marker a, b;
  a.initialize(l);
  b.initialize(l);
  a.stage_kept({staged.data(), staged_values.data(), staged.size()});
  std::uint32_t ta = 0;
  if (fused && a.fusable(target)) {
    (void)a.begin_fused(acc.data(), zero.data(), acc2.data(), target, index.data(), false);
    ta = a.finish(acc2.data(), target, index.data(), hist.data());
  } else {
    ta = a.run(acc.data(), target, 0u, index.data(), hist.data());
  }
  const std::uint32_t tb = b.run(acc.data(), target, 0u, index2.data(), hist.data());
  REQUIRE(ta == tb);
  REQUIRE(index == index2);
  REQUIRE(a.kept() == b.kept());
  const std::size_t k = std::size_t(a.kept());
  REQUIRE(a.list(index.data(), staged.data(), staged.size(), acc.data(), staged_values.data()));
  REQUIRE(b.list(index2.data(), plain.data(), plain.size(), acc.data(), plain_values.data()));
  CHECK(a.listed_from_stage() == expect_staged);
  CHECK_FALSE(b.listed_from_stage());
  CHECK(same_bytes(staged.data(), plain.data(), k));
  CHECK(same_bytes(staged_values.data(), plain_values.data(), k));
}
}  // namespace

TEST_CASE("paths: the marking pass's staged kept list equals the list read from the index") {
  // AVX-512's compressed stores, AVX2's lane-packed ones, and the SSE2 loop's
  for (const auto simd : every_marking_loop) with_marking_limit(simd, [&] {
    CAPTURE(int(simd));
    for (const std::size_t n : {std::size_t(100003), std::size_t(1) << 18}) {
      const auto g = gradient(n, 31, 0, 0, 0.7);
      check_staged_list(g, 2, 1, 0.99, true, true);   // the fused pass, a bracket that holds
      check_staged_list(g, 2, 1, 0.99, false, true);  // marking over acc (adaptive theta)
      check_staged_list(g, 3, 2, 0.90, true, true);   // a 2-bit index: the generic loop
      check_staged_list(g, 2, 1, 0.80, true, true);   // a fifth kept: most chunks near their region
      check_staged_list(front_heavy(n, 0, 0), 2, 1, 0.90, true, false);  // chunk 0 overflows
      check_staged_list(off_sample(n, 0, 0), 2, 1, 0.90, true, true);    // bracket misses: marked again
    }
  });
}

TEST_CASE("paths: the host's sampled bracket missing the threshold, and marking after the check (adaptive theta)") {
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 40001, 0.90, 2, input::off_sample);
  compare_paths<SparsifyPolicy, IndexPolicy<2>, SketchPolicy<2, 64>>(3, 40003, 0.80, 2, input::off_sample);
  compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 40001, 0.90, 3, input::gradient,
                                                                      topology::sharded, true);
  compare_paths<SparsifyBf16ResidualPolicy, IndexPolicy<1>, SketchPolicy<10, 64>>(2, 100003, 0.9875, 3,
                                                                                 input::gradient, topology::sharded,
                                                                                 true);
}

namespace {
// A NaN/Inf count as pass 0 makes it (fused with the marking pass from 32K
// entries on): every rank refuses the call and names rank 1's 5 entries, in
// whole 8-entry groups (the vector loops) and in the tail group.
template <class R>
void check_nonfinite_count(std::size_t n) {
  CAPTURE(n);
  const auto statuses = statuses_on_ranks(2, [&](local_communicator& comm) -> std::optional<status> {
    R red;
    REQUIRE(red.initialize({.length = n, .world_size = 2, .rank = comm.rank(), .sparsity = 0.9}).ok());
    std::vector<float> out(red.output_size());
    auto g = gradient(n, 17, comm.rank(), 0);
    if (comm.rank() == 1)
      for (std::size_t at : {std::size_t(77), n / 2, n / 2 + 9, n - 8, n - 1})
        g[at] = at == n / 2 ? INFINITY : at == n - 8 ? -INFINITY : std::nanf("");
    return red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out));
  });
  REQUIRE(statuses.size() == 2);
  for (const auto& st : statuses) {
    CAPTURE(st.message());
    CHECK(st.code() == errc::non_finite);
    CHECK(st.message().find("rank 1 has 5 NaN/Inf") != std::string::npos);
  }
}
}  // namespace

TEST_CASE("paths: the AVX2 and SSE2 marking loops (the wider ones switched off) against the portable path") {
  for (const auto simd : {detail::host::host_simd::avx2, detail::host::host_simd::sse2}) with_marking_limit(simd, [] {
    compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(40001, 0.90);
    compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<4, 64>>(40001, 0.90);
    compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, PackedPolicy>(40001, 0.95);
    compare_paths<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>>(2, 40001, 0.90, 2, input::off_sample);
  });
}
TEST_CASE("paths: 1-bit index with fp16 cells (the marking pass keeps max |acc| for the scale)") {
  compare_at_2_and_3<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<4, 64>>(40001, 0.90);
}
TEST_CASE("paths: NaN/Inf counted by the fused marking pass (AVX-512, AVX2 and SSE2 loops)") {
  using sketch_t = Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<4, 64>, DecodePolicy<>>;
  using fp16_t = Reducer<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<4, 64>, DecodePolicy<>>;
  for (const auto simd : every_marking_loop) with_marking_limit(simd, [] {
    check_nonfinite_count<sketch_t>(40001);
    check_nonfinite_count<fp16_t>(40001);
  });
}

TEST_CASE("paths: the bracket's bounds from its sample (bins of the top bits, then the bins between ordered)") {
  // Against nth_element over the whole sample: the value at each rank, for
  // sizes from 1 to the full 64K sample, ranks at both ends and in the middle,
  // either bound absent, and samples with many ties, zeros, NaN and Inf bits.
  std::mt19937_64 rng(7);
  std::student_t_distribution<float> t(3.0f);
  for (const std::size_t m : {std::size_t(1), std::size_t(2), std::size_t(100), std::size_t(65536)}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<std::uint32_t> base(m);
      for (std::size_t i = 0; i < m; ++i) {
        const float x = kind == 1 ? float(rng() % 4) * 0.25f : 1e-3f * t(rng);  // kind 1: four values (0 among them)
        base[i] = abs_bits(x);
      }
      if (kind == 2)
        for (std::size_t i = 0; i < m; i += 97) base[i] = i % 2 ? 0x7fc00000u : 0x7f800000u;  // NaN, Inf
      const std::size_t ranks[][2] = {{0, std::min<std::size_t>(1, m)},
                                      {m / 100, std::min(m - 1, m / 100 + 40)},
                                      {m / 2, m - 1},
                                      {m, m / 3},  // no upper bound
                                      {m / 3, m},  // no lower bound
                                      {m, m}};
      for (const auto& k : ranks) {
        if (k[0] < m && k[1] < m && k[0] >= k[1]) continue;
        CAPTURE(m);
        CAPTURE(kind);
        CAPTURE(k[0]);
        CAPTURE(k[1]);
        const auto nth = [&](std::size_t r) {
          std::vector<std::uint32_t> v = base;
          std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(r), v.end(), std::greater<std::uint32_t>());
          return v[r];
        };
        std::vector<std::uint32_t> s = base;
        std::uint32_t u1 = 12345u, u2 = 67890u;  // left as they are where no rank is asked for
        detail::host::sample_ranks(s.data(), m, k[0], k[1], u1, u2);
        CHECK(u1 == (k[0] < m ? nth(k[0]) : 12345u));
        CHECK(u2 == (k[1] < m ? nth(k[1]) : 67890u));
        std::sort(s.begin(), s.end());
        std::vector<std::uint32_t> sorted = base;
        std::sort(sorted.begin(), sorted.end());
        CHECK(s == sorted);  // reordered, nothing lost
      }
    }
  }
}

// ---- the shared selection (SharedIndexPolicy): the leader's marks and lists ----

namespace {
// What one leader select gives: the threshold and the k position slots.
struct leader_pick {
  std::uint32_t threshold = 0;
  std::vector<std::uint32_t> positions;
  bool operator==(const leader_pick&) const = default;
};

// The exact rule (stage/shared_selection.hpp): the (k+1)-th largest |acc| bits,
// the positions strictly above it ascending, then free slots; k = 0 keeps nothing
// (threshold inf), k >= n every position, zeros too (threshold 0).
leader_pick reference_pick(const std::vector<float>& acc, std::size_t k) {
  const std::size_t n = acc.size();
  leader_pick r;
  if (k >= n) {
    for (std::size_t i = 0; i < n; ++i) r.positions.push_back(std::uint32_t(i));
  } else {
    r.threshold = inf_bits;
    if (k > 0) {
      std::vector<std::uint32_t> u(n);
      for (std::size_t i = 0; i < n; ++i) u[i] = abs_bits(acc[i]);
      std::nth_element(u.begin(), u.begin() + std::ptrdiff_t(k), u.end(), std::greater<std::uint32_t>());
      r.threshold = u[k];
      for (std::size_t i = 0; i < n; ++i)
        if (abs_bits(acc[i]) > r.threshold) r.positions.push_back(std::uint32_t(i));
    }
  }
  r.positions.resize(k, detail::no_position);
  return r;
}

// One rank leading the stage on execution space Exec, several calls on one stage
// (what an earlier call left in its buffers must not show in a later one).
template <class Exec>
std::vector<leader_pick> picks_on(const std::vector<float>& acc, const std::vector<std::size_t>& ks) {
  stage::reducer_plan p;
  p.args.length = acc.size();
  p.lay.length = acc.size();
  stage::SharedSelection<Exec> sel;
  REQUIRE(sel.initialize(p, acc.size(), stage::selection_rule::leader, 0, Exec{}).ok());
  std::vector<leader_pick> out;
  on_ranks(1, [&](local_communicator& comm) {
    for (const std::size_t k : ks) {
      REQUIRE(sel.select(comm, acc.data(), k, 0).ok());
      out.push_back({*sel.threshold_bits(), {sel.positions(), sel.positions() + std::ptrdiff_t(k)}});
    }
  });
  return out;
}

void check_shared_picks(const char* what, const std::vector<float>& acc) {
  const std::size_t n = acc.size();
  CAPTURE(what);
  CAPTURE(n);
  // nothing, a list (k < n / 32), the bitmap from just past the switch (theta 0.95, 0.5),
  // everything but one, everything; and back to a list after the bitmap
  std::vector<std::size_t> ks = {0, 1, n / 100, n / 32, n / 20, n / 2, n - 1, n, std::max<std::size_t>(n / 64, 1)};
  for (auto& k : ks) k = std::min(k, n);
  const auto host = picks_on<exec::host>(acc, ks), portable = picks_on<exec::host_portable>(acc, ks);
  REQUIRE(host.size() == ks.size());
  REQUIRE(portable.size() == ks.size());
  for (std::size_t c = 0; c < ks.size(); ++c) {
    CAPTURE(ks[c]);
    const leader_pick want = reference_pick(acc, ks[c]);
    CHECK(portable[c].threshold == want.threshold);
    CHECK(portable[c].positions == want.positions);
    CHECK(host[c].threshold == portable[c].threshold);
    CHECK(host[c].positions == portable[c].positions);
  }
}
}  // namespace

TEST_CASE("paths: the shared selection's leader marks and lists (threshold and positions, bit for bit)") {
  // Tiny lengths (a partial bitmap word, a partial index byte), the exact select
  // (below the bracket's 32K), the sampled bracket, and one that misses.
  for (const std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(31), std::size_t(33), std::size_t(1000),
                              std::size_t(40001), std::size_t(100003)})
    check_shared_picks("gradient", gradient(n, 61, 0, 0, 0.7));
  check_shared_picks("a handful of magnitudes (ties; the select's crowded bin)", crowded(40001, 0, 0));
  check_shared_picks("bracket misses", off_sample(100003, 0, 0));
  for (const std::size_t n : {std::size_t(5), std::size_t(40001)}) {
    std::vector<float> same(n);
    for (std::size_t i = 0; i < n; ++i) same[i] = i % 3 ? 0.25f : -0.25f;  // one magnitude, both signs
    check_shared_picks("all equal", same);
    auto zeros = gradient(n, 62, 0, 0, 0.3);  // most entries 0, half of those -0
    for (std::size_t i = 0; i < n; ++i)
      if (zeros[i] == 0.0f && i % 2) zeros[i] = -0.0f;
    check_shared_picks("zeros and negative zeros", zeros);
  }
  auto wild = gradient(40001, 63, 0, 0);
  for (std::size_t i = 0; i < wild.size(); i += 997) wild[i] = i % 2 ? INFINITY : -INFINITY;
  wild[5] = std::nanf("");
  check_shared_picks("Inf and NaN (a rank that does not check its inputs)", wild);
  // the AVX2 and SSE2 marking loops too, where the CPU has wider ones
  for (const auto simd : every_marking_loop) with_marking_limit(simd, [] {
    check_shared_picks("gradient, each marking loop", gradient(100003, 64, 0, 0, 0.9));
  });
}

namespace {
// The shared-index reducer on both paths, several calls (the leader rotates, so
// every rank leads and expands received bitmaps): outputs, residuals, the
// statistics and the saved state bit for bit.
template <class Sparsify, class Values, class Index = SharedIndexPolicy>
void compare_shared_paths(int world, std::size_t n, double theta, int steps, topology topo = topology::sharded) {
  using fast_t = Reducer<Sparsify, Index, Values, DecodePolicy<>, exec::host>;
  using portable_t = Reducer<Sparsify, Index, Values, DecodePolicy<>, exec::host_portable>;
  CAPTURE(world); CAPTURE(n); CAPTURE(theta); CAPTURE(int(topo));
  std::mutex m;
  std::vector<std::string> failures;
  on_ranks(world, [&](local_communicator& comm) {
    const auto fail = [&](const std::string& what, int step) {
      std::lock_guard<std::mutex> lock(m);
      failures.push_back("rank " + std::to_string(comm.rank()) + " step " + std::to_string(step) + ": " + what);
    };
    const reducer_arguments a{.length = n, .world_size = world, .rank = comm.rank(), .topo = topo, .sparsity = theta};
    fast_t fast;
    portable_t port;
    if (!fast.initialize(a).ok() || !port.initialize(a).ok()) return fail("initialize", -1);
    std::vector<float> out_f(fast.output_size()), out_p(port.output_size());
    for (int t = 0; t < steps; ++t) {
      const auto g = gradient(n, 4343, comm.rank(), t, 0.7);
      reduce_stats sf, sp;
      const status stf = call_in(topo, fast, comm, g, out_f, sf);
      const status stp = call_in(topo, port, comm, g, out_p, sp);
      if (!stf.ok() || !stp.ok()) return fail("call failed: " + stf.what() + " / " + stp.what(), t);
      if (sf.kept == 0) fail("nothing kept (the comparison would hold trivially)", t);
      if (std::memcmp(&sf.threshold, &sp.threshold, sizeof(float)) != 0) fail("threshold", t);
      if (sf.kept != sp.kept || sf.deferred != sp.deferred || sf.support != sp.support ||
          sf.index_bits != sp.index_bits || sf.index_bytes != sp.index_bytes)
        fail("statistics kept / deferred / support / index", t);
      if (!same_bytes(out_f.data(), out_p.data(), out_f.size())) fail("output", t);
      const auto rf = fast.residual_to_host(), rp = port.residual_to_host();
      if (!same_bytes(rf.data(), rp.data(), rf.size())) fail("residual", t);
    }
    if (fast.save_state() != port.save_state()) fail("saved state", steps);
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}
}  // namespace

TEST_CASE("paths: shared-index reducers end to end (fp32 and bf16 values, bf16 residual; list and bitmap; pooled)") {
  compare_shared_paths<SparsifyPolicy, PackedPolicy>(3, 40001, 0.95, 4);       // a bitmap (k > n / 32)
  compare_shared_paths<SparsifyPolicy, PackedBf16Policy>(2, 100003, 0.99, 3);  // a list
  compare_shared_paths<SparsifyBf16ResidualPolicy, PackedBf16Policy>(3, 40001, 0.9, 3, topology::replicated);
  compare_shared_paths<SparsifyPolicy, PackedBf16Policy>(2, 1001, 0.95, 2);  // below the sampled bracket
  // pooled: every rank marks its share and lists it, and lists the union
  compare_shared_paths<SparsifyPolicy, PackedPolicy, PooledIndexPolicy>(3, 40001, 0.95, 4);
  compare_shared_paths<SparsifyBf16ResidualPolicy, PackedBf16Policy, PooledIndexPolicy>(4, 100003, 0.99, 3,
                                                                                         topology::replicated);
  compare_shared_paths<SparsifyPolicy, PackedPolicy, PooledIndexPolicy>(3, 1001, 0.0, 2);  // dense: no exchange
  // shares over n / 32: every rank marks its bitmap and the bitmaps are OR-ed
  compare_shared_paths<SparsifyBf16ResidualPolicy, PackedBf16Policy, PooledIndexPolicy>(4, 40001, 0.75, 4);
  // a union over half the buffer: the values travel in it, reduce-scattered
  compare_shared_paths<SparsifyPolicy, PackedBf16Policy, PooledIndexPolicy>(3, 40001, 0.3, 3);
  compare_shared_paths<SparsifyBf16ResidualPolicy, PackedBf16Policy>(3, 40001, 0.3, 2);
  // gathered: each rank's values only where it picked (in the union's slots and in the buffer)
  compare_shared_paths<SparsifyPolicy, PackedBf16Policy, GatheredIndexPolicy>(3, 40001, 0.95, 3);
  compare_shared_paths<SparsifyBf16ResidualPolicy, PackedBf16Policy, GatheredIndexPolicy>(4, 40001, 0.3, 3);
}

TEST_CASE("paths: a received bitmap with more marks than k lists its first k positions, nothing past them") {
  // A damaged broadcast: the list holds k slots whatever the bitmap says.
  const std::size_t n = 100003, k = 1000;
  std::vector<std::uint32_t> words((n + 31) / 32);
  for (std::size_t w = 0; w < words.size(); ++w)
    words[w] = murmur3_32(std::uint32_t(w), 5u) & murmur3_32(std::uint32_t(w), 6u);  // ~1/4 of the positions
  words.back() &= (1u << (n % 32)) - 1u;
  std::vector<std::uint32_t> want;
  for (std::size_t p = 0; p < n && want.size() < k; ++p)
    if ((words[p / 32] >> (p % 32)) & 1u) want.push_back(std::uint32_t(p));
  detail::host::shared_select host;
  detail::portable_shared_select<exec::host_portable> portable;
  REQUIRE(host.initialize(n, exec::host{}).ok());
  REQUIRE(portable.initialize(n, exec::host_portable{}).ok());
  constexpr std::uint32_t guard = 7u;  // slots past k must keep it
  std::vector<std::uint32_t> a(k + 64, guard), b(k + 64, guard);
  host.to_list(words.data(), a.data(), k);
  portable.to_list(words.data(), b.data(), k);
  CHECK(std::vector<std::uint32_t>(a.begin(), a.begin() + k) == want);
  CHECK(a == b);
  CHECK(std::all_of(a.begin() + k, a.end(), [](std::uint32_t x) { return x == guard; }));
}
