// The README's usage example, compiled and run; tests/readme_in_sync.cmake
// checks that the README shows exactly the lines between the markers.
#include <doctest/doctest.h>

// [readme-begin]
#include <tagc/tagc.hpp>

// Sum the gradients of 4 ranks (threads here; MPI or NCCL in a real job) and
// give each rank its quarter, compressed 10x with a 4-bit index.
using Reducer = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>,
                              tagc::SketchPolicy<10>, tagc::DecodePolicy<>>;

tagc::status reduce_on_rank(tagc::local_communicator& comm, std::span<const float> grad,
                            std::vector<float>& my_shard, tagc::reduce_stats& stats) {
  Reducer reducer;  // one per gradient buffer; keeps its error-feedback residual
  TAGC_TRY(reducer.initialize({.length = grad.size(), .world_size = comm.size(),
                               .rank = comm.rank(), .op = tagc::reduce_op::mean}));
  my_shard.resize(reducer.output_size());
  return reducer.reduce_scatter(comm, grad, my_shard, &stats);
}
// [readme-end]

#include <mutex>
#include <random>

TEST_CASE("the README example runs and reports sensible statistics") {
  const std::size_t n = 1 << 18;
  tagc::local_world world(4);
  std::mutex m;
  std::vector<tagc::reduce_stats> all;
  world.run([&](tagc::local_communicator& comm) {
    std::mt19937 rng(unsigned(comm.rank()));
    std::normal_distribution<float> d;
    std::vector<float> grad(n), shard;
    for (auto& x : grad) x = d(rng);
    tagc::reduce_stats st;
    const tagc::status s = reduce_on_rank(comm, grad, shard, st);
    CHECK(s.ok());
    CHECK(shard.size() == n / 4);
    std::lock_guard lk(m);
    all.push_back(st);
  });
  for (const auto& st : all) {
    CHECK(st.sparsity >= 0.9875);
    CHECK(st.unresolved == 0);
    CHECK(st.load < 0.81);
    // A dense fp32 reduce-scatter sends 0.75 * 4n bytes per rank; a 4-bit index
    // (2 x 4 bits, all-reduced) plus a 10x sketch (3.2 bits) is ~11.2 of 32 bits.
    const double dense = 0.75 * 4.0 * double(n);
    CHECK(st.total_bytes() < 0.40 * dense);
    CHECK(st.total_bytes() > 0.30 * dense);
  }
}
