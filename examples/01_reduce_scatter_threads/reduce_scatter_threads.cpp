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
//   - The test gradients and the comparison with the dense mean are the numbered
//     examples' shared scaffolding, examples/common/gradient_check.hpp.
//
// Usage
//   cmake --build build --target tagc_example_01
//   build/examples/01_reduce_scatter_threads/tagc_example_01 [ranks=4] [elements=1000000] [steps=3]
//   Out of tree: cmake -S examples/01_reduce_scatter_threads -B b -DCMAKE_PREFIX_PATH=<tagc install prefix>
#include <tagc/tagc.hpp>

#include "../common/gradient_check.hpp"  // example::gradient, compare_to_mean, report_rank_errors

#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

using Reducer = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>, tagc::DecodePolicy<>>;

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
      const std::vector<float> g = example::gradient(n, comm.rank(), step);
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
      const example::mean_error e = example::compare_to_mean(shard, dense, comm.size());
      if (comm.rank() == 0)
        std::printf("step %d rank 0: sparsity %.4f, load %.2f, peeled %zu/%zu, %.0f bytes sent (dense fp32: %.0f), "
                    "max |shard - dense mean of sent| = %.2g (max %.2g)\n",
                    step, stats.sparsity, stats.load, stats.peeled, stats.support, stats.total_bytes(),
                    tagc::ring_bytes_sent(tagc::collective::reduce_scatter, 4.0 * double(sent.size()), comm.size()),
                    e.err, e.ref);
      if (stats.unresolved == 0 && !e.exact()) {
        error = "step " + std::to_string(step) + ": shard differs from the dense mean of what was sent by " +
                std::to_string(e.err);
        return;
      }
    }
  });
  const int rc = example::report_rank_errors(errors);
  if (rc == 0) std::printf("ok: %d ranks, %zu elements, %d steps\n", ranks, n, steps);
  return rc;
}
