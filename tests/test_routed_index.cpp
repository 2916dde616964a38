// RoutedIndexPolicy (shared_reducer.hpp, stage/routed_exchange.hpp): every rank sends
// its own top-k as (offset, value) entries to the owners of their shards. Held here:
// with fp32 values the gathered index's sums and residuals bit for bit at every call
// (and so the exact index's with packed values), bf16 values within their rounding
// with the same residuals; its bytes per rank do not grow with N, and the counting
// communicator measures the bytes the statistics report, and the cost model's
// routed_index_cross_bits predicts them; a call keeping over a third
// of the buffer (bf16) reduce-scatters the buffer instead; theta 0 is the dense sum;
// inputs = delivered + residuals; a saved state resumes bit for bit; refusals for a
// rank that gathers beside one that routes, and a communicator without all_to_all_v.
// An all-reduce (replicated): every rank the same whole buffer, with fp32 values the
// gathered index's all-reduce and the routed reduce-scatter's shards bit for bit, with
// bf16 values those sums rounded once; the owners' shared sums counted as sent and
// priced by routed_all_reduce_cross_bits; a hot run of entries dealt to every owner; the
// host and portable paths alike.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <mutex>

#include "support/harness.hpp"
#include "tagc/comm/counting.hpp"
#include "tagc/cost_model.hpp"

using namespace tagc;
using namespace tagc_test;

namespace {
using routed_f32 = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedPolicy>;
using routed_bf16 = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy>;
using gathered_f32 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedPolicy>;
using gathered_bf16 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy>;

std::size_t kept_at(double theta, std::size_t n) {
  return stage::ThresholdSelect<float, exec::host>::kept_at_most(theta, n);
}
}  // namespace

TEST_CASE("routed: fp32 values deliver the gathered index's sums and residuals, bit for bit") {
  for (const auto& [world, n, theta] : {std::tuple{2, std::size_t(5000), 0.9}, std::tuple{4, std::size_t(40000), 0.99},
                                        std::tuple{3, std::size_t(4001), 0.875}, std::tuple{5, std::size_t(400), 0.995},
                                        std::tuple{4, std::size_t(6000), 0.6}}) {  // last: over a third, in the buffer
    CAPTURE(world);
    CAPTURE(n);
    const int steps = 4;
    const auto ours = simulate<routed_f32>(world, n, theta, steps, random_input(n, 29));
    const auto theirs = simulate<gathered_f32>(world, n, theta, steps, random_input(n, 29));
    REQUIRE(ours.failures.empty());
    REQUIRE(theirs.failures.empty());
    for (int t = 0; t < steps; ++t) {
      CAPTURE(t);
      CHECK(delivered_at(ours, world, n, t) == delivered_at(theirs, world, n, t));
      for (int r = 0; r < world; ++r) CHECK(ours.stats[std::size_t(r)][std::size_t(t)].deferred == 0);
    }
    for (int r = 0; r < world; ++r) CHECK(ours.residual[std::size_t(r)] == theirs.residual[std::size_t(r)]);
  }
}

TEST_CASE("routed: bf16 values are summed in float at the owner: within bf16 rounding of the gathered sums") {
  const int world = 4, steps = 4;
  const std::size_t n = 40000;
  const auto ours = simulate<routed_bf16>(world, n, 0.9875, steps, random_input(n, 31));
  const auto theirs = simulate<gathered_bf16>(world, n, 0.9875, steps, random_input(n, 31));
  REQUIRE(ours.failures.empty());
  REQUIRE(theirs.failures.empty());
  for (int t = 0; t < steps; ++t) {
    CAPTURE(t);
    const auto a = delivered_at(ours, world, n, t), b = delivered_at(theirs, world, n, t);
    std::size_t support = 0, off = 0;
    for (std::size_t i = 0; i < n; ++i) {
      support += a[i] != 0.0;
      off += (a[i] != 0.0) != (b[i] != 0.0) || std::fabs(a[i] - b[i]) > std::ldexp(std::fabs(b[i]), -7);
    }
    CHECK(support > 0);
    CHECK(off == 0);
  }
  // what each rank sent is rounded alike: acc - bf16(acc) stays in both residuals
  for (int r = 0; r < world; ++r) CHECK(ours.residual[std::size_t(r)] == theirs.residual[std::size_t(r)]);
}

TEST_CASE("routed: bytes per rank per call do not grow with the number of ranks; the communicator counts them") {
  const std::size_t n = 1 << 18;
  const double theta = 0.99;
  const std::size_t k = kept_at(theta, n);
  const std::size_t entry = sizeof(std::uint32_t) + sizeof(bfloat16);
  for (int world : {2, 4, 8}) {
    CAPTURE(world);
    std::mutex m;
    std::vector<double> counted(static_cast<std::size_t>(world)), reported(static_cast<std::size_t>(world));
    on_ranks(world, [&](local_communicator& inner) {
      counting_communicator<local_communicator> comm(inner);
      const int r = comm.rank();
      routed_bf16 red;
      REQUIRE(red.initialize({.length = n, .world_size = world, .rank = r, .sparsity = theta}).ok());
      std::vector<float> out(red.output_size());
      double sum = 0.0;
      for (int t = 0; t < 3; ++t) {
        reduce_stats s;
        const auto g = gradient(n, 7, r, t);
        REQUIRE(red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &s).ok());
        CHECK(s.index_bits == 32);
        CHECK(s.kept <= k);
        CHECK(s.kept > k / 2);
        // the counts (one int64 per peer) and, per entry for another shard, 4 + 2 bytes
        const double entries = s.value_bytes / sizeof(bfloat16);
        CHECK(entries <= double(k));
        CHECK(entries >= 0.5 * double(k) * double(world - 1) / double(world));
        CHECK(s.index_bytes == doctest::Approx(double(world - 1) * 8.0 + entries * 4.0));
        // independent of N: at most k entries and a count per peer
        CHECK(s.index_bytes + s.value_bytes <= double(k * entry) + double(world - 1) * 8.0);
        sum += s.index_bytes + s.value_bytes;
      }
      const double check_bytes = comm.counters()[collective::all_gather].bytes_sent;  // the agreement check
      std::lock_guard lk(m);
      counted[std::size_t(r)] = comm.counters()[collective::all_to_all].bytes_sent;
      reported[std::size_t(r)] = sum;
      CHECK(comm.counters().total_bytes_sent() == doctest::Approx(sum + check_bytes));
    });
    for (int r = 0; r < world; ++r) CHECK(counted[std::size_t(r)] == doctest::Approx(reported[std::size_t(r)]));
  }
}

TEST_CASE("routed: the cost model's routed_index_cross_bits is what the reducer sends, where shards load evenly") {
  // random gradients spread the picks evenly over the shards: (N - 1) / N of them leave
  const std::size_t n = 1 << 18;
  for (int world : {2, 4, 8})
    for (const double theta : {0.99, 0.95}) {
      CAPTURE(world);
      CAPTURE(theta);
      const auto rec = simulate<routed_bf16>(world, n, theta, 2, random_input(n, 11));
      REQUIRE(rec.failures.empty());
      const double ring = double(world - 1) / double(world);
      const double model = ring * double(n) * routed_index_cross_bits(1.0 - theta) / 8.0;
      for (int r = 0; r < world; ++r) {
        const reduce_stats& s = rec.stats[std::size_t(r)][1];
        const double sent = s.index_bytes + s.value_bytes - double(world - 1) * 8.0;  // the counts left out
        CHECK(sent == doctest::Approx(model).epsilon(0.05));
      }
    }
}

TEST_CASE("routed: theta 0 and a call keeping over a third of the buffer reduce-scatter the buffer, no entries") {
  const int world = 3;
  const std::size_t n = 1001;
  const auto rec = simulate<routed_f32>(world, n, 0.0, 2, random_input(n, 3));
  REQUIRE(rec.failures.empty());
  for (int t = 0; t < 2; ++t) {
    const auto d = delivered_at(rec, world, n, t);
    for (std::size_t i = 0; i < n; ++i) {
      float want = rec.in[0][std::size_t(t)][i];  // the communicator's order: rank 0, 1, 2
      for (int r = 1; r < world; ++r) want += rec.in[std::size_t(r)][std::size_t(t)][i];
      if (float(d[i]) != want) FAIL("step " << t << " entry " << i << ": " << d[i] << " vs " << want);
    }
    CHECK(rec.stats[0][std::size_t(t)].index_bytes == 0.0);
    CHECK(rec.stats[0][std::size_t(t)].index_bits == 0);
  }
  for (int r = 0; r < world; ++r) CHECK(rec.residual[std::size_t(r)] == std::vector<float>(n, 0.0f));
  // bf16: 6 bytes an entry against 2 a buffer element, so from a third of the buffer on
  const std::size_t big = 30000;
  const auto buf = simulate<routed_bf16>(world, big, 0.6, 1, random_input(big, 5));    // 40 %: the buffer
  const auto ent = simulate<routed_bf16>(world, big, 0.7, 1, random_input(big, 5));    // 30 %: entries
  REQUIRE(buf.failures.empty());
  REQUIRE(ent.failures.empty());
  CHECK(buf.stats[0][0].index_bytes == 0.0);
  CHECK(buf.stats[0][0].value_bytes == doctest::Approx(double(big) * 2.0 * (world - 1) / world));
  CHECK(ent.stats[0][0].index_bits == 32);
  CHECK(ent.stats[0][0].value_bytes < double(big) * 2.0 * 0.3);
}

TEST_CASE_TEMPLATE("routed: conservation, inputs = delivered + residuals; k smaller than N; mean", R, routed_f32,
                   routed_bf16) {
  for (const auto& [world, n, theta, op] :
       {std::tuple{3, std::size_t(5003), 0.95, reduce_op::sum}, std::tuple{4, std::size_t(70001), 0.99, reduce_op::mean},
        std::tuple{5, std::size_t(400), 0.995, reduce_op::sum}}) {  // k = 2 < N
    CAPTURE(world);
    CAPTURE(n);
    const int steps = 6;
    for (const topology topo : {topology::sharded, topology::replicated}) {
      CAPTURE(int(topo));
      const auto rec = simulate<R>(world, n, theta, steps, random_input(n, 21), topo, op);
      REQUIRE(rec.failures.empty());
      const double scale = op == reduce_op::mean ? double(world) : 1.0;
      std::vector<double> in(n, 0.0), got(n, 0.0);
      for (int t = 0; t < steps; ++t) {
        for (int r = 0; r < world; ++r)
          for (std::size_t i = 0; i < n; ++i) in[i] += rec.in[std::size_t(r)][std::size_t(t)][i];
        const auto d = delivered_at(rec, world, n, t, topo);
        for (std::size_t i = 0; i < n; ++i) got[i] += d[i] * scale;
      }
      for (int r = 0; r < world; ++r)
        for (std::size_t i = 0; i < n; ++i) got[i] += rec.residual[std::size_t(r)][i];
      // bf16 all-reduced: the owners' sums are rounded once more on the way to every rank
      const bool rounded = topo == topology::replicated && std::is_same_v<R, routed_bf16>;
      const double tol = (rounded ? 1e-2 : 1e-5) * max_abs(in);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) bad += std::fabs(got[i] - in[i]) > tol;
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("routed: save and load in the middle resume bit for bit, reduce-scatter and all-reduce") {
  const int world = 4, first = 3, second = 4;
  for (const topology topo : {topology::sharded, topology::replicated}) {
    CAPTURE(int(topo));
    const auto args_for = [&](int r) {
      reducer_arguments a{.length = 9001, .world_size = world, .rank = r, .topo = topo, .sparsity = 0.98};
      a.schedule = {.warmup_steps = 5, .start = 0.5};
      return a;
    };
    expect_resumed_exactly(resume_in_the_middle<routed_bf16>(world, args_for, first, second, 9), first);
  }
}

TEST_CASE("routed all-reduce: every rank the same buffer; fp32 the gathered all-reduce's and the routed shards' sums") {
  for (const auto& [world, n, theta] : {std::tuple{2, std::size_t(5000), 0.9}, std::tuple{4, std::size_t(40000), 0.99},
                                        std::tuple{3, std::size_t(4001), 0.875}, std::tuple{5, std::size_t(400), 0.995},
                                        std::tuple{7, std::size_t(10), 0.9}}) {  // last: regions past the end are empty
    CAPTURE(world);
    CAPTURE(n);
    const int steps = 4;
    const auto ours = simulate<routed_f32>(world, n, theta, steps, random_input(n, 29), topology::replicated);
    const auto gathered = simulate<gathered_f32>(world, n, theta, steps, random_input(n, 29), topology::replicated);
    const auto shards = simulate<routed_f32>(world, n, theta, steps, random_input(n, 29));
    REQUIRE(ours.failures.empty());
    REQUIRE(gathered.failures.empty());
    REQUIRE(shards.failures.empty());
    for (int t = 0; t < steps; ++t) {
      CAPTURE(t);
      for (int r = 1; r < world; ++r) CHECK(ours.out[std::size_t(r)][std::size_t(t)] == ours.out[0][std::size_t(t)]);
      const auto d = delivered_at(ours, world, n, t, topology::replicated);
      CHECK(d == delivered_at(gathered, world, n, t, topology::replicated));
      CHECK(d == delivered_at(shards, world, n, t));
      // what every rank received: the owners' nonzero sums, as entries
      CHECK(ours.stats[0][std::size_t(t)].index_bits == 32);
      std::size_t nonzero = 0;
      for (double x : d) nonzero += x != 0.0;
      CHECK(ours.stats[0][std::size_t(t)].support == nonzero);
    }
    for (int r = 0; r < world; ++r) CHECK(ours.residual[std::size_t(r)] == shards.residual[std::size_t(r)]);
  }
}

TEST_CASE("routed all-reduce: bf16 values deliver the owners' float sums rounded to bf16 once, on every rank") {
  const int world = 4, steps = 3;
  const std::size_t n = 40000;
  const auto ours = simulate<routed_bf16>(world, n, 0.9875, steps, random_input(n, 31), topology::replicated);
  const auto shards = simulate<routed_bf16>(world, n, 0.9875, steps, random_input(n, 31));
  REQUIRE(ours.failures.empty());
  REQUIRE(shards.failures.empty());
  for (int t = 0; t < steps; ++t) {
    CAPTURE(t);
    const auto want = delivered_at(shards, world, n, t);
    std::size_t off = 0, support = 0;
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i) off += ours.out[std::size_t(r)][std::size_t(t)][i] != float(bfloat16(float(want[i])));
    for (double x : want) support += x != 0.0;
    CHECK(off == 0);
    CHECK(support > 0);
  }
  for (int r = 0; r < world; ++r) CHECK(ours.residual[std::size_t(r)] == shards.residual[std::size_t(r)]);
}

TEST_CASE("routed all-reduce: the picks and the owners' shared sums are what the communicator counts") {
  const std::size_t n = 1 << 16;
  const double theta = 0.99;
  const std::size_t entry = sizeof(std::uint32_t) + sizeof(bfloat16);
  for (int world : {2, 4, 8}) {
    CAPTURE(world);
    std::mutex m;
    std::vector<double> counted(static_cast<std::size_t>(world)), reported(static_cast<std::size_t>(world));
    on_ranks(world, [&](local_communicator& inner) {
      counting_communicator<local_communicator> comm(inner);
      const int r = comm.rank();
      routed_bf16 red;
      REQUIRE(red.initialize({.length = n, .world_size = world, .rank = r, .topo = topology::replicated, .sparsity = theta}).ok());
      std::vector<float> out(red.output_size());
      REQUIRE(out.size() == n);
      double sum = 0.0, control = 0.0;
      for (int t = 0; t < 3; ++t) {
        reduce_stats s;
        const auto g = gradient(n, 7, r, t);
        REQUIRE(red.all_reduce(comm, std::span<const float>(g), std::span<float>(out), &s).ok());
        CHECK(s.index_bits == 32);
        // the owners' union to every rank, 4 + 2 bytes an entry: (N - 1) / N of the blocks
        // all-gathered, each padded to the fullest (random gradients load the owners evenly,
        // so the padding stays under a quarter; else a broadcast per owner, unpadded)
        const std::size_t chunk = stage::RoutedExchange<bfloat16, exec::host>::dealt_chunk;
        std::vector<std::size_t> per_owner(static_cast<std::size_t>(world), 0);
        for (std::size_t i = 0; i < n; ++i) per_owner[(i / chunk) % std::size_t(world)] += out[i] != 0.0f;
        std::size_t nonzero = 0, fullest = 0;
        for (std::size_t c : per_owner) nonzero += c, fullest = std::max(fullest, c);
        CHECK(s.support == nonzero);
        CHECK(nonzero >= s.kept);  // at least this rank's own picks
        CHECK(4 * std::size_t(world) * fullest <= 5 * nonzero);  // padded
        const double ring = double(world - 1) / double(world), counts = 2.0 * double(world - 1) * 8.0;
        const double picks = s.index_bytes + s.value_bytes - counts - ring * double(std::size_t(world) * fullest * entry);
        CHECK(picks <= double(s.kept * entry) + 1e-6);
        CHECK(picks >= 0.5 * ring * double(s.kept * entry));
        // the cost model (the union unpadded), given the union over k
        const double k = double(s.kept), model_bits = routed_all_reduce_cross_bits(k / double(n), double(nonzero) / k);
        CHECK(picks + ring * double(nonzero * entry) == doctest::Approx(ring * double(n) * model_bits / 8.0).epsilon(0.05));
        sum += s.index_bytes + s.value_bytes;
        control += s.control_bytes;
      }
      std::lock_guard lk(m);
      counted[std::size_t(r)] = comm.counters().total_bytes_sent() - control;  // the agreement check left out
      reported[std::size_t(r)] = sum;
    });
    for (int r = 0; r < world; ++r) CHECK(counted[std::size_t(r)] == doctest::Approx(reported[std::size_t(r)]));
  }
}

TEST_CASE("routed: the host and the portable paths deliver the same bits, reduce-scatter and all-reduce") {
  using portable = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy, DecodePolicy<>, exec::host_portable>;
  const int world = 4, steps = 3;
  const std::size_t n = 40000;
  for (const topology topo : {topology::sharded, topology::replicated}) {
    CAPTURE(int(topo));
    const auto host = simulate<routed_bf16>(world, n, 0.99, steps, random_input(n, 17), topo);
    const auto other = simulate<portable>(world, n, 0.99, steps, random_input(n, 17), topo);
    REQUIRE(host.failures.empty());
    REQUIRE(other.failures.empty());
    expect_same_runs(host, other);
  }
}

namespace {
// Forwards to a local communicator and counts the entry bytes this rank receives from
// other ranks by all_to_all_v (what loads its incoming link).
struct receive_counting {
  local_communicator* inner;
  double received = 0.0;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  template <reducible T> status all_reduce(std::span<const T> i, std::span<T> o) { return inner->all_reduce(i, o); }
  template <reducible T> status reduce_scatter(std::span<const T> i, std::span<T> o) {
    return inner->reduce_scatter(i, o);
  }
  template <reducible T> status all_gather(std::span<const T> i, std::span<T> o) { return inner->all_gather(i, o); }
  template <reducible T> status broadcast(std::span<T> b, int root) { return inner->broadcast(b, root); }
  template <reducible T>
  status all_to_all_v(std::span<const T> i, std::span<const std::size_t> sc, std::span<T> o,
                      std::span<const std::size_t> rc) {
    if constexpr (std::is_same_v<T, std::uint8_t>)
      for (std::size_t q = 0; q < rc.size(); ++q) received += q == std::size_t(rank()) ? 0.0 : double(rc[q]);
    return inner->all_to_all_v(i, sc, o, rc);
  }
};
static_assert(routing_communicator<receive_counting>);
}  // namespace

TEST_CASE("routed all-reduce: a hot run of entries is dealt to every owner, where a shard's owner takes it all") {
  // the first eighth of the buffer 1000x larger (the embedding's frequent rows): every
  // rank picks there first; it is the first shard, and 32 chunks (4 to each owner)
  const int world = 8;
  const std::size_t n = 1 << 18;
  for (const topology topo : {topology::sharded, topology::replicated}) {
    CAPTURE(int(topo));
    std::mutex m;
    std::vector<double> received(static_cast<std::size_t>(world));
    on_ranks(world, [&](local_communicator& inner) {
      receive_counting comm{&inner};
      const int r = comm.rank();
      routed_bf16 red;
      REQUIRE(red.initialize({.length = n, .world_size = world, .rank = r, .topo = topo, .sparsity = 0.99}).ok());
      std::vector<float> out(red.output_size());
      auto g = gradient(n, 13, r, 0);
      for (std::size_t i = 0; i < n / 8; ++i) g[i] *= 1000.0f;
      const std::span<const float> in(g);
      REQUIRE((topo == topology::sharded ? red.reduce_scatter(comm, in, std::span<float>(out))
                                         : red.all_reduce(comm, in, std::span<float>(out)))
                  .ok());
      std::lock_guard lk(m);
      received[std::size_t(r)] = comm.received;
    });
    double mean = 0.0, most = 0.0;
    for (double b : received) {
      mean += b / world;
      most = std::max(most, b);
    }
    REQUIRE(mean > 0.0);
    if (topo == topology::sharded)
      CHECK(most > 4.0 * mean);  // the first shard's owner receives nearly every entry
    else
      CHECK(most < 1.25 * mean);  // dealt in chunks, every owner about its share
  }
}

TEST_CASE("routed all-reduce: theta 0 and picks over a quarter of the buffer's bytes all-reduce the buffer") {
  const int world = 3;
  const std::size_t n = 1001;
  const auto rec = simulate<routed_f32>(world, n, 0.0, 2, random_input(n, 3), topology::replicated);
  REQUIRE(rec.failures.empty());
  for (int t = 0; t < 2; ++t) {
    for (std::size_t i = 0; i < n; ++i) {
      float want = rec.in[0][std::size_t(t)][i];
      for (int r = 1; r < world; ++r) want += rec.in[std::size_t(r)][std::size_t(t)][i];
      for (int r = 0; r < world; ++r)
        if (rec.out[std::size_t(r)][std::size_t(t)][i] != want) FAIL("rank " << r << " step " << t << " entry " << i);
    }
    CHECK(rec.stats[0][std::size_t(t)].index_bytes == 0.0);
  }
  // bf16: 6 bytes an entry, a quarter of the buffer's 2 per element: from k = n / 12 on
  const std::size_t big = 30000;
  const auto buf = simulate<routed_bf16>(world, big, 0.9, 1, random_input(big, 5), topology::replicated);  // 10 %
  const auto ent = simulate<routed_bf16>(world, big, 0.93, 1, random_input(big, 5), topology::replicated);  // 7 %
  REQUIRE(buf.failures.empty());
  REQUIRE(ent.failures.empty());
  CHECK(buf.stats[0][0].index_bytes == 0.0);
  CHECK(buf.stats[0][0].value_bytes == doctest::Approx(double(big) * 2.0 * 2.0 * (world - 1) / world));
  CHECK(ent.stats[0][0].index_bits == 32);
  CHECK(buf.out[1][0] == buf.out[0][0]);
}

namespace {
// A communicator that carries a Reducer but cannot route (no all_to_all_v).
struct no_routing {
  local_communicator* inner;
  int rank() const { return inner->rank(); }
  int size() const { return inner->size(); }
  template <reducible T> status all_reduce(std::span<const T> i, std::span<T> o) { return inner->all_reduce(i, o); }
  template <reducible T> status reduce_scatter(std::span<const T> i, std::span<T> o) {
    return inner->reduce_scatter(i, o);
  }
  template <reducible T> status all_gather(std::span<const T> i, std::span<T> o) { return inner->all_gather(i, o); }
  template <reducible T> status broadcast(std::span<T> b, int root) { return inner->broadcast(b, root); }
};
static_assert(communicator<no_routing> && !routing_communicator<no_routing>);
}  // namespace

TEST_CASE("routed: refused alike on every rank: beside a gathering rank, without all_to_all_v") {
  const std::size_t n = 4096;
  const auto mixed = statuses_on_ranks(2, [&](local_communicator& comm) -> status {
    const int r = comm.rank();
    const reducer_arguments args{.length = n, .world_size = 2, .rank = r, .sparsity = 0.99};
    const auto g = gradient(n, 5, r, 0);
    std::vector<float> out(n / 2);
    if (r == 0) {
      routed_f32 red;
      TAGC_TRY(red.initialize(args));
      return red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out));
    }
    gathered_f32 red;
    TAGC_TRY(red.initialize(args));
    return red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out));
  });
  REQUIRE(mixed.size() == 2);
  for (const status& st : mixed) CHECK(st.code() == errc::invalid_argument);

  const auto plain = statuses_on_ranks(2, [&](local_communicator& comm) -> status {
    no_routing c{&comm};
    routed_f32 red;
    TAGC_TRY(red.initialize({.length = n, .world_size = 2, .rank = comm.rank(), .sparsity = 0.99}));
    const auto g = gradient(n, 5, comm.rank(), 0);
    std::vector<float> out(red.output_size());
    const std::vector<float> before = red.residual_to_host();
    const status st = red.reduce_scatter(c, std::span<const float>(g), std::span<float>(out));
    CHECK(red.residual_to_host() == before);  // a refused call leaves the residual as it was
    return st;
  });
  REQUIRE(plain.size() == 2);
  for (const status& st : plain) {
    CHECK(st.code() == errc::invalid_argument);
    CHECK_MESSAGE(st.message().find("all_to_all_v") != std::string::npos, st.message());
  }
}
