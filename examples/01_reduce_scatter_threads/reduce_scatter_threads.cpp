// 01_reduce_scatter_threads — a compressed reduce-scatter across threads.
//
// What it shows
//   The smallest complete use of tagc: N ranks (threads of this process, joined by
//   the in-process communicator tagc::local_communicator) each hold a gradient; one
//   tagc::Reducer per rank sums them, compressed 10x with a 4-bit index, and gives
//   rank r shard r of the mean. Over several steps the error-feedback residual
//   carries what a step did not send.
//
// Details
//   - The Reducer's type is its policies: SparsifyPolicy (threshold + residual),
//     IndexPolicy<4> (summed 4-bit counters of nonzeros: exact up to 15 ranks),
//     SketchPolicy<10> (count sketch, n/10 cells), DecodePolicy<> (peel, estimate
//     what peeling leaves; the rest stays in the senders' residuals).
//   - initialize() sizes every buffer once; reduce_scatter() allocates nothing.
//   - The program checks the library's contract: what each rank receives is the
//     dense mean of what the ranks sent (sent = gradient + residual before - residual
//     after), exactly up to float sums whenever peeling resolved everything; it exits
//     1 otherwise. The same program is the consumer of the install test (ctest
//     tagc_install_consumer), built out of tree against find_package(tagc).
//
// Usage
//   cmake --build build --target tagc_example_01
//   build/examples/01_reduce_scatter_threads/tagc_example_01 [ranks=4] [elements=1000000] [steps=3]
//   Out of tree: cmake -S examples/01_reduce_scatter_threads -B b -DCMAKE_PREFIX_PATH=<tagc install prefix>
#include <tagc/tagc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

using Reducer = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>, tagc::DecodePolicy<>>;

// A gradient-like vector: heavy-tailed, different on every rank and step.
static std::vector<float> gradient(std::size_t n, int rank, int step) {
  std::mt19937 rng(1000u * unsigned(rank) + unsigned(step));
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = 1e-3f * t(rng);
  return g;
}

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  if (ranks < 1 || ranks > 15 || n == 0 || steps < 1) {
    std::fprintf(stderr, "usage: %s [ranks 1..15] [elements > 0] [steps > 0]\n", argv[0]);
    return 2;
  }

  tagc::local_world world(ranks);
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  world.run([&](tagc::local_communicator& comm) {
    std::string& error = errors[std::size_t(comm.rank())];
    Reducer reducer;  // one per gradient buffer: it keeps that buffer's residual
    if (auto s = reducer.initialize({.length = n, .world_size = comm.size(), .rank = comm.rank(),
                                     .op = tagc::reduce_op::mean});
        !s.ok()) {
      error = s.what();
      return;
    }
    std::vector<float> shard(reducer.output_size()), dense(reducer.output_size());
    for (int step = 0; step < steps; ++step) {
      const std::vector<float> g = gradient(n, comm.rank(), step);
      const std::vector<float> before = reducer.residual_to_host();
      tagc::reduce_stats stats;
      if (auto s = reducer.reduce_scatter(comm, g, shard, &stats); !s.ok()) {
        error = s.what();  // every rank gets the same verdict, so none is left waiting
        return;
      }
      // The contract: shard == dense mean reduce-scatter of what was sent.
      const std::vector<float> after = reducer.residual_to_host();
      std::vector<float> sent(shard.size() * std::size_t(comm.size()), 0.0f);
      for (std::size_t i = 0; i < n; ++i) sent[i] = g[i] + before[i] - after[i];
      if (auto s = comm.reduce_scatter(std::span<const float>(sent), std::span<float>(dense)); !s.ok()) {
        error = s.what();
        return;
      }
      double err = 0, ref = 0;
      for (std::size_t i = 0; i < shard.size(); ++i) {
        err = std::max(err, std::abs(double(dense[i]) / comm.size() - shard[i]));
        ref = std::max(ref, std::abs(double(dense[i]) / comm.size()));
      }
      if (comm.rank() == 0)
        std::printf("step %d rank 0: sparsity %.4f, load %.2f, peeled %zu/%zu, %.0f bytes sent (dense fp32: %.0f), "
                    "max |shard - dense mean of sent| = %.2g (max %.2g)\n",
                    step, stats.sparsity, stats.load, stats.peeled, stats.support, stats.total_bytes(),
                    tagc::ring_bytes_sent(tagc::collective::reduce_scatter, 4.0 * double(sent.size()), comm.size()),
                    err, ref);
      if (stats.unresolved == 0 && err > 1e-5 * ref) {
        error = "step " + std::to_string(step) + ": shard differs from the dense mean of what was sent by " +
                std::to_string(err);
        return;
      }
    }
  });
  int rc = 0;
  for (int r = 0; r < ranks; ++r)
    if (!errors[std::size_t(r)].empty()) {
      std::fprintf(stderr, "rank %d: %s\n", r, errors[std::size_t(r)].c_str());
      rc = 1;
    }
  if (rc == 0) std::printf("ok: %d ranks, %zu elements, %d steps\n", ranks, n, steps);
  return rc;
}
