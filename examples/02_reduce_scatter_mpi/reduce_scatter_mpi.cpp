// 02_reduce_scatter_mpi — the same reduce-scatter across MPI processes, with the
// reducer chosen at run time by the builder.
//
// What it shows
//   A program that takes its compression from a configuration (here the command
//   line) rather than a type: tagc::parse_reducer_description reads a text such as
//   "values=packed index=exact", tagc::build_reducer finds that reducer in a
//   catalogue this program compiled, and description_text() prints what was chosen. Each
//   MPI process is one rank (tagc::mpi_communicator over MPI_COMM_WORLD).
//
// Details
//   - The catalogue (below) lists four reducer types; TAGC_REDUCER_CATALOGUE
//     instantiates them in this file only, behind tagc::AnyReducer's small virtual
//     interface. A larger program keeps that macro in a file of its own, so the
//     compile is paid once (the GPT-2 trainers use tagc::default_catalogue, 37 types).
//   - A description the catalogue lacks is refused with a status naming it and
//     what the catalogue has; every rank reaches that verdict before any
//     collective, so nothing hangs. Try "values=sketch ratio=3".
//   - The description may also carry the run-time knobs: theta, adaptive theta and
//     theta's warm-up ("values=packed index=exact theta=0.99 warmup=100
//     warmup-start=0.5"); any catalogue entry takes them. Where the reducer runs
//     (length, world, rank, sum or mean) is tagc::reducer_arguments', passed to
//     initialize().
//   - As in example 01, the program checks that every rank received the dense mean
//     of what the ranks sent, and exits 1 if not (examples/common/gradient_check.hpp).
//
// Usage
//   cmake --build build --target tagc_example_02
//   mpirun -np 2 build/examples/02_reduce_scatter_mpi/tagc_example_02 ["values=sketch ratio=10 index=1"] [elements]
#include <tagc/builder.hpp>
#include <tagc/builder/catalogue.hpp>
#include <tagc/comm/mpi.hpp>

#include <mpi.h>

#include "../common/gradient_check.hpp"  // example::gradient, compare_to_mean

#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

using Comm = tagc::mpi_communicator;

// What this program can build. One line per reducer type.
using example_reducers = tagc::reducer_list<
    tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>>,  // the paper's config
    tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<tagc::index_auto, tagc::index_exchange::reduce_scatter>,
                  tagc::SketchPolicy<10>>,                                                 // exact index, half its bytes
    tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedPolicy>,       // exact values, no sketch
    tagc::PlainReducer<float>>;                                                            // the uncompressed baseline
TAGC_REDUCER_CATALOGUE(example_catalogue, tagc::exec::host, Comm, example_reducers)

static tagc::status run(Comm& comm, const std::string& text, std::size_t n) {
  tagc::reducer_description description;
  TAGC_TRY(tagc::parse_reducer_description(text, description));
  tagc::AnyReducer<tagc::exec::host, Comm> reducer;
  TAGC_TRY(tagc::build_reducer(example_catalogue(), description, reducer));
  tagc::reducer_arguments args;
  args.length = n;
  args.world_size = comm.size();
  args.rank = comm.rank();
  args.op = tagc::reduce_op::mean;
  TAGC_TRY(reducer.initialize(args));
  if (comm.rank() == 0) std::printf("built: %s\n", reducer.description_text().c_str());

  std::vector<float> shard(reducer.output_size()), dense(reducer.output_size());
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = example::gradient(n, comm.rank(), step);
    std::vector<float> before = reducer.residual_to_host();  // empty for the plain reducer
    tagc::reduce_stats stats;
    TAGC_TRY(reducer.reduce_scatter(comm, g, shard, &stats));
    const std::vector<float> after = reducer.residual_to_host();
    std::vector<float> sent(shard.size() * std::size_t(comm.size()), 0.0f);
    for (std::size_t i = 0; i < n; ++i) sent[i] = g[i] + (after.empty() ? 0.0f : before[i] - after[i]);
    TAGC_TRY(comm.reduce_scatter(std::span<const float>(sent), std::span<float>(dense)));
    const example::mean_error e = example::compare_to_mean(shard, dense, comm.size());
    if (comm.rank() == 0)
      std::printf("step %d rank 0: sparsity %.4f, %.0f bytes sent, max |shard - dense mean of sent| = %.2g (max %.2g)\n",
                  step, stats.sparsity, stats.total_bytes(), e.err, e.ref);
    if (stats.unresolved == 0 && !e.exact())
      return {tagc::errc::internal, "rank " + std::to_string(comm.rank()) + " step " + std::to_string(step) +
                                        ": shard differs from the dense mean of what was sent by " + std::to_string(e.err)};
  }
  return {};
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string text = argc > 1 ? argv[1] : "values=sketch ratio=10 index=1";
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
  int rc = 0;
  {
    Comm comm(MPI_COMM_WORLD);
    if (const tagc::status s = run(comm, text, n); !s.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", comm.rank(), s.what().c_str());
      rc = 1;
    } else if (comm.rank() == 0) {
      std::printf("ok: %d ranks, %zu elements\n", comm.size(), n);
    }
  }
  MPI_Finalize();
  return rc;
}
