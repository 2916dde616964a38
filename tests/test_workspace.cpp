// The workspace query (Reducer::workspace_bytes_for, CUTLASS's get_workspace_size):
// the bytes initialize() allocates, known from the arguments before anything is
// allocated, equal to workspace_bytes() after initialize, for every kind of reducer
// (sketch, packed, shared index, plain; fp32 and 16-bit values; float and bf16
// residuals; sharded and replicated; host and portable paths), several lengths
// (below and above the host select's bracket) and world sizes. Arguments a reducer
// refuses are sized 0. (The builder's path, reducer_catalogue::workspace_bytes_for,
// is held to the same for every default-catalogue entry in builder/check_entries.hpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include <tagc/plain_reducer.hpp>
#include <tagc/tagc.hpp>

using namespace tagc;

namespace {

template <class R>
void check_query(const char* what) {
  for (std::size_t length : {std::size_t(1), std::size_t(1000), std::size_t(3 * 32768 + 77), std::size_t(200003)})
    for (int world : {1, 2, 3, 5})
      for (topology topo : {topology::sharded, topology::replicated}) {
        reducer_arguments a;
        a.length = length;
        a.world_size = world;
        a.rank = world - 1;
        a.topo = topo;
        CAPTURE(what);
        CAPTURE(length);
        CAPTURE(world);
        CAPTURE(int(topo));
        const std::size_t queried = R::workspace_bytes_for(a);
        R r;
        if (!r.initialize(a).ok()) {
          CHECK(queried == 0);  // refused (e.g. a 4-bit index beyond 15 ranks)
          continue;
        }
        CHECK(queried > 0);
        CHECK(queried == r.workspace_bytes());
      }
}

}  // namespace

TEST_CASE("workspace query: sketch reducers") {
  check_query<Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<10>>>("paper sketch, 1-bit index");
  check_query<Reducer<SparsifyPolicy, IndexPolicy<4>, SketchPolicy<4>, DecodePolicy<decode_mode::estimate>>>(
      "4-bit index, estimate (no peeling workspace)");
  check_query<Reducer<SparsifyPolicy, IndexPolicy<index_auto, index_exchange::reduce_scatter>, SketchBf16Policy<10>>>(
      "bf16 cells, exact reduce-scattered index");
  check_query<Reducer<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<2>>>("fp16 cells, ratio 2");
  check_query<Reducer<SparsifyBf16ResidualPolicy, IndexPolicy<1>, SketchPolicy<10>>>("bf16 residual");
  check_query<Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<10>, DecodePolicy<>, exec::host_portable>>(
      "portable paths");
}

TEST_CASE("workspace query: packed, shared- and pooled-index reducers") {
  check_query<PackedReducer<SparsifyPolicy, ExactIndexPolicy, PackedPolicy>>("packed fp32");
  check_query<PackedReducer<SparsifyBf16ResidualPolicy, ExactIndexPolicy, PackedBf16Policy>>("packed bf16, bf16 residual");
  check_query<PackedReducer<SparsifyPolicy, ExactIndexPolicy, PackedFp16Policy, exec::host_portable>>(
      "packed fp16, portable paths");
  check_query<PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>>("shared index fp32");
  check_query<PackedReducer<SparsifyBf16ResidualPolicy, SharedIndexPolicy, PackedBf16Policy>>(
      "shared index bf16, bf16 residual");
  check_query<PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedBf16Policy, exec::host_portable>>(
      "shared index bf16, portable paths");
  check_query<PackedReducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy>>("pooled index fp32");
  check_query<PackedReducer<SparsifyBf16ResidualPolicy, PooledIndexPolicy, PackedBf16Policy, exec::host_portable>>(
      "pooled index bf16, bf16 residual, portable paths");
  check_query<PackedReducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy>>("gathered index bf16");
  check_query<PackedReducer<SparsifyPolicy, RoutedIndexPolicy, PackedBf16Policy>>("routed index bf16");
  check_query<PackedReducer<SparsifyPolicy, RoutedIndexPolicy, PackedPolicy, exec::host_portable>>(
      "routed index fp32, portable paths");
}

TEST_CASE("workspace: a selection that picks its own positions keeps no broadcast buffer") {
  // The leader's rule sizes a buffer for the broadcast list or bitmap; the routed index's
  // own picks need only the threshold's word there.
  stage::reducer_plan p;
  p.args.length = p.lay.length = 100003;
  const std::size_t capacity = 5000, words = (p.lay.length + 31) / 32;
  stage::SharedSelection<exec::host> leader, own;
  REQUIRE(leader.initialize(p, capacity, stage::selection_rule::leader, 0, exec::host{}).ok());
  REQUIRE(own.initialize(p, capacity, stage::selection_rule::own, 0, exec::host{}).ok());
  CHECK(leader.workspace_bytes() - own.workspace_bytes() == std::max(capacity, words) * sizeof(std::uint32_t));
  CHECK(own.workspace_bytes() ==
        stage::SharedSelection<exec::host>::workspace_bytes_for(p, capacity, stage::selection_rule::own, 0));
}

TEST_CASE("workspace query: plain reducers") {
  check_query<PlainReducer<float>>("plain fp32");
  check_query<PlainReducer<bfloat16>>("plain bf16");
}

TEST_CASE("workspace query: the shared index is sized for the densest theta of its schedule") {
  using R = PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>;
  reducer_arguments a;
  a.length = 100000;
  a.world_size = 2;
  a.sparsity = 0.99;
  const std::size_t flat = R::workspace_bytes_for(a);
  a.schedule.warmup_steps = 10;
  a.schedule.start = 0.5;  // 50x the positions of theta 0.99 at the first call
  const std::size_t ramped = R::workspace_bytes_for(a);
  CHECK(ramped > flat);
  R r;
  REQUIRE(r.initialize(a).ok());
  CHECK(ramped == r.workspace_bytes());
}

TEST_CASE("workspace query: shared and pooled indexes that may exchange the buffer (a dense-start schedule)") {
  // From theta 0 a call keeps every position: the padded buffer's values and the own
  // shard's sums are allocated too; a pooled index also sizes for min(N, 4) k picks.
  const auto check = [](auto reducer, const char* what) {
    using R = decltype(reducer);
    for (int world : {2, 3, 5})
      for (topology topo : {topology::sharded, topology::replicated}) {
        CAPTURE(what);
        CAPTURE(world);
        CAPTURE(int(topo));
        reducer_arguments a;
        a.length = 100003;
        a.world_size = world;
        a.rank = world - 1;
        a.topo = topo;
        a.sparsity = 0.95;
        a.schedule.warmup_steps = 10;
        a.schedule.start = 0.0;
        const std::size_t queried = R::workspace_bytes_for(a);
        R r;
        REQUIRE(r.initialize(a).ok());
        CHECK(queried == r.workspace_bytes());
      }
  };
  check(PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>{}, "shared fp32");
  check(PackedReducer<SparsifyBf16ResidualPolicy, PooledIndexPolicy, PackedBf16Policy>{}, "pooled bf16");
  check(PackedReducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy, exec::host_portable>{}, "pooled portable");
}

TEST_CASE("workspace query: refused arguments are sized 0") {
  reducer_arguments a;
  a.length = 1000;
  a.world_size = 2;
  a.rank = 2;  // outside [0, 2)
  CHECK(Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<10>>::workspace_bytes_for(a) == 0);
  CHECK(PlainReducer<float>::workspace_bytes_for(a) == 0);
  a.rank = 0;
  a.world_size = 16;  // a 4-bit index counts at most 15 ranks
  CHECK(Reducer<SparsifyPolicy, IndexPolicy<4>, SketchPolicy<10>>::workspace_bytes_for(a) == 0);
  a.world_size = 2;
  a.adapt.enabled = true;  // a shared index has no load to steer
  CHECK(PackedReducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>::workspace_bytes_for(a) == 0);
}
