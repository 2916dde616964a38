// TwoLevelReducer: a plain reduce-scatter inside each node, a compressed one across
// nodes. Held to the flat reduce-scatter (same shard on every rank) for many node
// shapes and lengths, also with a cross stage that all-reduces the slice (HSDP); nothing
// lost, a routed cross stage with a union bound included; one verdict on every rank for
// bad input; state resumes exactly.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <mutex>
#include <vector>

#include <tagc/comm/local_cluster.hpp>
#include <tagc/plain_reducer.hpp>
#include <tagc/reducer.hpp>
#include <tagc/shared_reducer.hpp>
#include <tagc/two_level_all_gather.hpp>
#include <tagc/two_level_reducer.hpp>

using namespace tagc;

namespace {

using Plain = PlainReducer<float>;
using PlainBf16 = PlainReducer<bfloat16>;
using Packed = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy>;
using PackedBf16 = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy>;
using Routed = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedPolicy>;
using RoutedBf16 = Reducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy>;

// Small integers: every sum below is exact in fp32 and in bf16, whatever its order,
// so two-level and flat must agree bit for bit.
std::vector<float> small_integers(std::size_t n, int rank, int step) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = float(int((i * 2654435761u + std::size_t(rank) * 40503u + std::size_t(step) * 977u) % 9u) - 4);
  return g;
}

// A gradient with a spread of magnitudes (for sparsified runs).
std::vector<float> spread(std::size_t n, int rank, int step) {
  std::vector<float> g(n);
  std::uint32_t x = 0x9e3779b9u ^ std::uint32_t(rank * 7919 + step * 104729);
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    g[i] = (float(x % 20001u) - 10000.0f) * 1e-4f * (1.0f + float(i % 17));
  }
  return g;
}

template <class R>
std::vector<std::vector<float>> flat_run(int world, std::size_t n, reduce_op op, double theta = -1.0) {
  std::vector<std::vector<float>> out(static_cast<std::size_t>(world));
  local_world w(world);
  w.run([&](local_communicator& c) {
    R r;
    REQUIRE(r.initialize({.length = n, .world_size = world, .rank = c.rank(), .op = op, .sparsity = theta}).ok());
    auto& o = out[std::size_t(c.rank())];
    o.assign(r.output_size(), -1.0f);
    const auto g = small_integers(n, c.rank(), 0);
    REQUIRE(r.reduce_scatter(c, g, o).ok());
  });
  return out;
}

template <class Node, class Cross>
std::vector<std::vector<float>> two_level_run(node_shape shape, std::size_t n, reduce_op op, double theta = -1.0,
                                              lane_layout layout = lane_layout::automatic,
                                              topology cross = topology::sharded) {
  std::vector<std::vector<float>> out(static_cast<std::size_t>(shape.world()));
  local_cluster cluster(shape.nodes, shape.ranks_per_node);
  cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
    TwoLevelReducer<Node, Cross> r;
    REQUIRE(r.initialize({.length = n, .world_size = shape.world(), .rank = rank, .op = op, .sparsity = theta}, shape,
                         {}, layout, cross)
                .ok());
    auto& o = out[std::size_t(rank)];
    o.assign(r.output_size(), -1.0f);
    const auto g = small_integers(n, rank, 0);
    const status s = r.reduce_scatter(lv, g, o);
    REQUIRE_MESSAGE(s.ok(), s.message());
  });
  return out;
}

const node_shape shapes[] = {{1, 4}, {4, 1}, {2, 2}, {2, 3}, {3, 2}, {2, 4}};
const std::size_t lengths[] = {1, 7, 1000, 4099, 65537};

}  // namespace

TEST_CASE("two-level = flat, bit for bit: plain fp32, plain bf16 and packed values at theta = 0, either lane layout") {
  for (const node_shape shape : shapes) {
    for (const std::size_t n : lengths) {
      CAPTURE(shape.nodes);
      CAPTURE(shape.ranks_per_node);
      CAPTURE(n);
      const int world = shape.world();
      for (const reduce_op op : {reduce_op::sum, reduce_op::mean}) {
        const auto flat = flat_run<Plain>(world, n, op);
        CHECK(two_level_run<Plain, Plain>(shape, n, op) == flat);
        CHECK(flat_run<PlainBf16>(world, n, op) == flat);
        CHECK(two_level_run<PlainBf16, Plain>(shape, n, op) == flat);
        // An exact compressed stage across nodes (every nonzero kept, values packed).
        CHECK(two_level_run<Plain, Packed>(shape, n, op, 0.0) == flat);
        // Each layout with the other kind of cross stage than automatic gives it.
        CHECK(two_level_run<Plain, Plain>(shape, n, op, -1.0, lane_layout::interleaved) == flat);
        CHECK(two_level_run<Plain, Packed>(shape, n, op, 0.0, lane_layout::shards) == flat);
        // A cross stage that all-reduces the slice (HSDP) keeps the same shard.
        CHECK(two_level_run<Plain, Plain>(shape, n, op, -1.0, lane_layout::automatic, topology::replicated) == flat);
        CHECK(two_level_run<Plain, Packed>(shape, n, op, 0.0, lane_layout::automatic, topology::replicated) == flat);
      }
    }
  }
}

// inputs = delivered + residuals over `steps` calls of a TwoLevelReducer<Plain, Cross>
// whose cross stage has `cross` topology and `bound` (reducer_arguments::union_bound).
template <class Cross>
void check_nothing_lost(node_shape shape, topology cross, double bound) {
  const std::size_t n = 50001;
  const int steps = 4;
  std::vector<double> inputs(n, 0.0), delivered(n, 0.0), residual(n, 0.0);
  std::mutex m;
  local_cluster cluster(shape.nodes, shape.ranks_per_node);
  cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
    TwoLevelReducer<Plain, Cross> r;
    reducer_arguments args{.length = n, .world_size = shape.world(), .rank = rank, .sparsity = 0.95};
    args.union_bound = bound;
    REQUIRE(r.initialize(args, shape, {}, lane_layout::automatic, cross).ok());
    std::vector<float> out(r.output_size());
    for (int t = 0; t < steps; ++t) {
      const auto g = spread(n, rank, t);
      reduce_stats st;
      REQUIRE(r.reduce_scatter(lv, g, out, &st).ok());
      CHECK(st.kept < r.cross_stage().plan().length / 10);  // sparsified across nodes
      CHECK(st.intranode_bytes > 0.0);
      if (bound > 0.0) CHECK(st.deferred > 0);  // the owners held some picks back
      std::lock_guard lk(m);
      for (std::size_t i = 0; i < n; ++i) inputs[i] += g[i];
      const std::size_t first = std::size_t(rank) * r.output_size();
      for (std::size_t i = 0; i < out.size() && first + i < n; ++i) delivered[first + i] += out[i];
    }
    // The residual covers this rank's slice (interleaved lanes: every K-th element of each node's region).
    CHECK(r.layout() == lane_layout::interleaved);
    const auto res = r.cross_stage().residual_to_host();
    std::lock_guard lk(m);
    for (std::size_t i = 0; i < res.size(); ++i)
      if (const std::size_t flat = r.slice_position(i); flat < n) residual[flat] += res[i];
  });
  double err = 0.0, mass = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    err += std::abs(inputs[i] - delivered[i] - residual[i]);
    mass += std::abs(inputs[i]);
  }
  CHECK(err < 1e-5 * mass);
}

TEST_CASE("two-level, compressed across nodes: nothing lost over steps (inputs = delivered + residuals)") {
  for (const node_shape shape : {node_shape{2, 2}, node_shape{3, 2}, node_shape{2, 4}}) {
    CAPTURE(shape.nodes);
    CAPTURE(shape.ranks_per_node);
    // fp32 values: a bf16 collective's own rounding of the summed slots reaches no residual
    check_nothing_lost<Packed>(shape, topology::sharded, 0.0);
    // HSDP: the routed index all-reduces the slice across nodes, each owner forwarding its largest sums
    check_nothing_lost<Routed>(shape, topology::replicated, 0.5);
  }
}

// A hot shard (the embedding rows of frequent tokens): flat shard 0 holds the node's
// largest entries, exactly as many as the node may keep. Interleaved lanes share them out,
// so every one is delivered at once; whole-shard lanes give them all to lane 0, which keeps
// only its k / K, and the other lanes spend theirs on small entries.
TEST_CASE("two-level, interleaved lanes: a hot shard is kept as the node's top k, not its lane's") {
  const node_shape shape{2, 4};
  const std::size_t S = 1000, n = 8 * S;
  for (const lane_layout layout : {lane_layout::interleaved, lane_layout::shards}) {
    CAPTURE(int(layout));
    std::vector<std::size_t> hot_delivered(8), cold_delivered(8);
    local_cluster cluster(shape.nodes, shape.ranks_per_node);
    cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
      std::vector<float> g(n);
      for (std::size_t i = 0; i < n; ++i) g[i] = (i < S ? 100.0f : 1.0f) + 1e-4f * float(i);  // no ties
      TwoLevelReducer<Plain, Packed> r;
      // each lane's slice is 2 S long: k = 250 per lane, 1000 = S per node
      REQUIRE(r.initialize({.length = n, .world_size = 8, .rank = rank, .op = reduce_op::mean, .sparsity = 0.875}, shape,
                           {}, layout)
                  .ok());
      REQUIRE(r.cross_stage().plan().length == 2 * S);
      std::vector<float> out(r.output_size());
      REQUIRE(r.reduce_scatter(lv, g, out).ok());
      const std::size_t first = std::size_t(rank) * S;
      for (std::size_t e = 0; e < S; ++e)
        if (out[e] != 0.0f) {
          CHECK(out[e] == g[first + e]);  // the mean of equal gradients
          ++(first + e < S ? hot_delivered : cold_delivered)[std::size_t(rank)];
        }
    });
    std::size_t hot = 0, cold = 0;
    for (int r = 0; r < 8; ++r) hot += hot_delivered[std::size_t(r)], cold += cold_delivered[std::size_t(r)];
    if (layout == lane_layout::interleaved) {
      CHECK(hot == S);
      CHECK(cold == 0);
    } else {
      CHECK(hot == S / 4);  // lane 0's k
      CHECK(cold == 3 * S / 4);
    }
  }
}

TEST_CASE("two-level bf16: 16 bits x (M-1)/M per parameter and node cross the nodes") {
  const node_shape shape{4, 4};
  const std::size_t n = 64000;  // a multiple of 16: no padding
  std::vector<double> internode(std::size_t(shape.world()));
  local_cluster cluster(shape.nodes, shape.ranks_per_node);
  cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
    TwoLevelReducer<PlainBf16, PlainBf16> r;
    REQUIRE(r.initialize({.length = n, .world_size = shape.world(), .rank = rank}, shape).ok());
    std::vector<float> out(r.output_size());
    reduce_stats st;
    REQUIRE(r.reduce_scatter(lv, small_integers(n, rank, 0), out, &st).ok());
    internode[std::size_t(rank)] = st.internode_bytes() - st.control_bytes;
  });
  double node0 = 0.0;
  for (int l = 0; l < shape.ranks_per_node; ++l) node0 += internode[std::size_t(l)];
  CHECK(8.0 * node0 / double(n) == doctest::Approx(16.0 * 3.0 / 4.0));  // 12 bits: the fair bf16 baseline
}

TEST_CASE("two-level: NaN or a wrong size on one rank is refused on every rank, and nothing changes") {
  const node_shape shape{2, 2};
  const std::size_t n = 20000;
  for (const int bad : {0, 3}) {
    for (const bool nan : {true, false}) {
      CAPTURE(bad);
      CAPTURE(nan);
      local_cluster cluster(shape.nodes, shape.ranks_per_node, std::chrono::seconds(20));
      cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
        TwoLevelReducer<Plain, PackedBf16> r;
        REQUIRE(r.initialize({.length = n, .world_size = 4, .rank = rank, .sparsity = 0.9}, shape).ok());
        std::vector<float> out(r.output_size());
        REQUIRE(r.reduce_scatter(lv, spread(n, rank, 0), out).ok());
        const auto before = r.save_state();
        auto g = spread(n, rank, 1);
        if (rank == bad) {
          if (nan) g[n / 2] = std::nanf("");
          else g.pop_back();
        }
        const status s = r.reduce_scatter(lv, g, out);
        CHECK(s.code() == (nan ? errc::non_finite : errc::size_mismatch));
        CHECK(r.save_state() == before);
        // and the next good call works on every rank
        CHECK(r.reduce_scatter(lv, spread(n, rank, 2), out).ok());
      });
    }
  }
}

// The parameter all-gather: every rank holds flat shard r; two levels give every rank
// what the flat all-gather gives, bit for bit, in fp32 and bf16.
template <class T>
void check_all_gather(node_shape shape, std::size_t n) {
  CAPTURE(shape.nodes); CAPTURE(shape.ranks_per_node); CAPTURE(n);
  const std::size_t W = std::size_t(shape.world()), S = (n + W - 1) / W;
  std::vector<T> params(W * S, T(0.0f));  // distinct values, padding 0
  for (std::size_t i = 0; i < n; ++i) params[i] = T(float(i % 4093) - 2046.0f);
  std::mutex m;
  std::vector<std::string> failures;
  local_cluster cluster(shape.nodes, shape.ranks_per_node);
  cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator& flat) {
    TwoLevelAllGather<T> gather;
    REQUIRE(gather.initialize(n, shape, rank).ok());
    REQUIRE(gather.shard_size() == S);
    const std::span<const T> shard(params.data() + std::size_t(rank) * S, S);
    std::vector<T> two(n), one(W * S);
    const status s = gather.all_gather(lv, shard, std::span<T>(two));
    REQUIRE(flat.all_gather(shard, std::span<T>(one)).ok());
    std::lock_guard lk(m);
    if (!s.ok()) failures.push_back(s.message());
    else if (std::memcmp(two.data(), one.data(), n * sizeof(T)) != 0)
      failures.push_back("rank " + std::to_string(rank) + ": differs from the flat all-gather");
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

TEST_CASE("two-level all-gather = flat all-gather, bit for bit (fp32, bf16), every node shape and length") {
  for (const node_shape shape : shapes)
    for (const std::size_t n : lengths) {
      check_all_gather<float>(shape, n);
      check_all_gather<bfloat16>(shape, n);
    }
}

TEST_CASE("two-level all-gather: a wrong size on one rank is refused on every rank, no hang") {
  const node_shape shape{2, 3};
  const std::size_t n = 1000;
  for (const int bad : {0, 4}) {
    CAPTURE(bad);
    local_cluster cluster(shape.nodes, shape.ranks_per_node, std::chrono::seconds(20));
    cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
      TwoLevelAllGather<float> gather;
      REQUIRE(gather.initialize(n, shape, rank).ok());
      std::vector<float> shard(gather.shard_size(), float(rank)), whole(rank == bad ? n - 1 : n);
      const status s = gather.all_gather(lv, shard, whole);
      CHECK(s.code() == errc::size_mismatch);
      if (rank == bad) CHECK(s.message().find("want 167 and 1000") != std::string::npos);
      else CHECK(s.message().find("1 rank(s) gave buffers of the wrong size") != std::string::npos);
      whole.resize(n);  // and the next good call works on every rank
      REQUIRE(gather.all_gather(lv, shard, whole).ok());
      for (int r = 0; r < shape.world(); ++r) CHECK(whole[std::size_t(r) * 167] == float(r));
    });
  }
  TwoLevelAllGather<float> g;
  CHECK(g.initialize(10, {2, 2}, 4).code() == errc::invalid_argument);
  CHECK(g.initialize(10, {0, 2}, 0).code() == errc::invalid_argument);
}

TEST_CASE("two-level: node shapes that cannot work are refused with the reason") {
  node_shape s;
  CHECK(check_node_shape(8, 3, s).code() == errc::invalid_argument);
  CHECK(check_node_shape(8, 3, s).message().find("does not divide the world size 8") != std::string::npos);
  CHECK(check_node_shape(8, 0, s).code() == errc::invalid_argument);
  REQUIRE(check_node_shape(12, 4, s).ok());
  CHECK(s == node_shape{3, 4});

  TwoLevelReducer<Plain, Packed> r;
  CHECK(r.initialize({.length = 100, .world_size = 8, .rank = 0}, {3, 2}).code() == errc::invalid_argument);
  CHECK(r.initialize({.length = 100, .world_size = 4, .rank = 0, .topo = topology::replicated}, {2, 2}).code() ==
        errc::invalid_argument);
  CHECK(r.initialize({.length = 100, .world_size = 4, .rank = 0}, {2, 2}, {}, lane_layout(7)).code() ==
        errc::invalid_argument);
  // communicators of another shape than planned
  local_cluster cluster(2, 2);
  cluster.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
    TwoLevelReducer<Plain, Plain> q;
    REQUIRE(q.initialize({.length = 100, .world_size = 4, .rank = rank}, {1, 4}).ok());
    // its own buffers: the node-major gradient (100 floats), the slice (25) and the verdict (6 x 8 bytes);
    // the NaN count's workspace is empty on the host (on a device it holds CUB's temporary)
    CHECK(q.buffer_bytes() == 100 * 4 + 25 * 4 + 48);
    std::vector<float> g(100, 1.0f), out(q.output_size());
    CHECK(q.reduce_scatter(lv, g, out).code() == errc::invalid_argument);
  });
}

// A run of 6 calls whole, and resumed from a state saved after 3 (another cluster): the
// last outputs of both, and the saved states.
struct split_runs {
  std::vector<std::vector<float>> whole, resumed;
  std::vector<std::vector<std::byte>> saved;
};
template <class R>
split_runs run_split(node_shape shape, const reducer_arguments& base, topology cross = topology::sharded) {
  const std::size_t world = std::size_t(shape.world()), n = base.length;
  split_runs out{std::vector<std::vector<float>>(world), std::vector<std::vector<float>>(world),
                    std::vector<std::vector<std::byte>>(world)};
  local_cluster a(shape.nodes, shape.ranks_per_node), b(shape.nodes, shape.ranks_per_node);
  a.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
    R r;
    reducer_arguments args = base;
    args.rank = rank;
    REQUIRE(r.initialize(args, shape, {}, lane_layout::automatic, cross).ok());
    std::vector<float> o(r.output_size());
    for (int t = 0; t < 6; ++t) {
      if (t == 3) out.saved[std::size_t(rank)] = r.save_state();
      REQUIRE(r.reduce_scatter(lv, spread(n, rank, t), o).ok());
    }
    out.whole[std::size_t(rank)] = o;
  });
  b.run([&](int rank, two_level_communicator<local_communicator>& lv, local_communicator&) {
    R r;
    reducer_arguments args = base;
    args.rank = rank;
    REQUIRE(r.initialize(args, shape, {}, lane_layout::automatic, cross).ok());
    REQUIRE(r.load_state(out.saved[std::size_t(rank)]).ok());
    std::vector<float> o(r.output_size());
    for (int t = 3; t < 6; ++t) REQUIRE(r.reduce_scatter(lv, spread(n, rank, t), o).ok());
    out.resumed[std::size_t(rank)] = o;
  });
  return out;
}

TEST_CASE("two-level: a save / load in the middle continues bit for bit; foreign states are refused") {
  const node_shape shape{2, 3};
  const std::size_t n = 30011;
  using R = TwoLevelReducer<Plain, PackedBf16>;
  const reducer_arguments base{.length = n, .world_size = 6, .sparsity = 0.97,
                               .schedule = {.warmup_steps = 4, .start = 0.5}};
  const auto runs = run_split<R>(shape, base);
  CHECK(runs.resumed == runs.whole);
  const auto& saved = runs.saved;

  // Another node shape, or a flat reducer's state, is refused by name.
  R other;
  reducer_arguments args = base;
  args.rank = 0;
  REQUIRE(other.initialize(args, {3, 2}).ok());
  const status s = other.load_state(saved[0]);
  CHECK(s.code() == errc::size_mismatch);
  CHECK(s.message().find("2 nodes x 3 ranks") != std::string::npos);
  PackedBf16 flat;
  REQUIRE(flat.initialize({.length = n, .world_size = 6, .rank = 0, .sparsity = 0.97}).ok());
  CHECK(other.load_state(flat.save_state()).code() == errc::io);

  // The other lane layout: its residual covers other elements.
  R shards;
  REQUIRE(shards.initialize(args, shape, {}, lane_layout::shards).ok());
  const status l = shards.load_state(saved[0]);
  CHECK(l.code() == errc::size_mismatch);
  CHECK(l.message().find("saved with interleaved lanes, this reducer has whole-shard lanes") != std::string::npos);

  // A version-1 state (six header words, whole-shard lanes) loads into whole-shard lanes only.
  std::vector<std::byte> v2 = shards.save_state(), v1(v2.size() - sizeof(std::uint64_t));
  const std::uint64_t one = 1;
  std::memcpy(v1.data(), v2.data(), 6 * sizeof(std::uint64_t));
  std::memcpy(v1.data() + sizeof(std::uint64_t), &one, sizeof one);
  std::memcpy(v1.data() + 6 * sizeof(std::uint64_t), v2.data() + 7 * sizeof(std::uint64_t),
              v2.size() - 7 * sizeof(std::uint64_t));
  CHECK(shards.load_state(v1).ok());
  CHECK(shards.save_state() == v2);
  R interleaved;
  REQUIRE(interleaved.initialize(args, shape).ok());
  CHECK(interleaved.load_state(v1).code() == errc::size_mismatch);
}

TEST_CASE("two-level, routed index all-reduced across nodes (HSDP): resumes bit for bit; a reduce-scatter's state is refused") {
  const node_shape shape{2, 3};
  using R = TwoLevelReducer<Plain, RoutedBf16>;
  reducer_arguments base{.length = 30011, .world_size = 6, .sparsity = 0.97, .schedule = {.warmup_steps = 4, .start = 0.5}};
  base.union_bound = 1.0;
  const auto hsdp = run_split<R>(shape, base, topology::replicated);
  CHECK(hsdp.resumed == hsdp.whole);
  reducer_arguments unbounded = base;
  unbounded.union_bound = 0.0;
  const auto sharded = run_split<R>(shape, unbounded);
  R r;
  reducer_arguments args = base;
  args.rank = 0;
  REQUIRE(r.initialize(args, shape, {}, lane_layout::automatic, topology::replicated).ok());
  CHECK_FALSE(r.load_state(sharded.saved[0]).ok());
  // and a bound on a cross stage that reduce-scatters is refused, naming it
  R bad;
  const status s = bad.initialize(args, shape);
  CHECK_FALSE(s.ok());
  CHECK(s.message().find("union_bound") != std::string::npos);
}
