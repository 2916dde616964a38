// 03_reduce_scatter_nccl — the same reduce-scatter across GPUs with NCCL.
//
// What it shows
//   Example 01's program with the gradients, the Reducer's buffers and its kernels
//   on GPUs: one thread per visible GPU (NCCL's "one device per thread" pattern),
//   each rank a tagc::nccl_communicator, the Reducer on tagc::exec::cuda (a stream).
//   The functors are the ones the CPU runs in examples 01 and 02 (single source).
//
// Details
//   - Stream contract: the Reducer launches on exec::cuda{s} and the communicator's
//     compute stream is the same s (set_compute_stream), so every collective is
//     ordered after the kernels before it and before those after it; no host sync.
//   - The check is the other examples': each rank's shard equals the dense mean of
//     what the ranks sent (sent = gradient + residual before - residual after;
//     examples/common/gradient_check.hpp).
//   - Without a CUDA device it prints why and exits 77, which ctest reports as
//     skipped (never as passed). CI compiles it with nvcc (scripts/test.sh stage 4)
//     but has no GPU to run it on.
//
// Usage
//   cmake -S . -B build-cuda -DTAGC_CUDA_CHECK=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
//   cmake --build build-cuda --target tagc_example_03
//   build-cuda/examples/03_reduce_scatter_nccl/tagc_example_03 [elements=1000000] [steps=3]
//   (TAGC_GPU_RANKS=n uses the first n GPUs)
#include <tagc/tagc.hpp>
#include <tagc/comm/nccl.hpp>
#include <tagc/exec/cuda.hpp>

#include "../common/gradient_check.hpp"  // example::gradient, compare_to_mean, report_rank_errors

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

template <class Exec>
using Reducer = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>, tagc::DecodePolicy<>, Exec>;

static tagc::status run_rank(const tagc::nccl_id& id, int world, int rank, std::size_t n, int steps) {
  auto comm = tagc::nccl_communicator::create(id, world, rank, {.device = rank});
  if (!comm) return comm.error();
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return {tagc::errc::communication, "cudaStreamCreateWithFlags failed"};
  comm->set_compute_stream(stream);
  const tagc::exec::cuda space{stream};
  const auto steps_on_gpu = [&]() -> tagc::status {
    Reducer<tagc::exec::cuda> reducer;
    TAGC_TRY(reducer.initialize({.length = n, .world_size = world, .rank = rank, .op = tagc::reduce_op::mean}, space));
    const std::size_t S = reducer.output_size();
    tagc::exec::cuda::vector<float> grad(n), shard(S), sent(S * std::size_t(world), 0.0f), dense(S);
    auto raw = [](auto& v) { return thrust::raw_pointer_cast(v.data()); };
    std::vector<float> h_shard(S), h_dense(S), h_sent(S * std::size_t(world), 0.0f);
    for (int step = 0; step < steps; ++step) {
      const std::vector<float> g = example::gradient(n, rank, step);
      const std::vector<float> before = reducer.residual_to_host();
      TAGC_TRY(space.copy_from_host(g.data(), raw(grad), n));
      tagc::reduce_stats stats;
      TAGC_TRY(reducer.reduce_scatter(*comm, std::span<const float>(raw(grad), n), std::span<float>(raw(shard), S),
                                      &stats));
      const std::vector<float> after = reducer.residual_to_host();
      for (std::size_t i = 0; i < n; ++i) h_sent[i] = g[i] + before[i] - after[i];
      TAGC_TRY(space.copy_from_host(h_sent.data(), raw(sent), h_sent.size()));
      TAGC_TRY(comm->reduce_scatter(std::span<const float>(raw(sent), h_sent.size()), std::span<float>(raw(dense), S)));
      TAGC_TRY(space.copy_to_host(raw(shard), h_shard.data(), S));
      TAGC_TRY(space.copy_to_host(raw(dense), h_dense.data(), S));
      const example::mean_error e = example::compare_to_mean(h_shard, h_dense, world);
      if (rank == 0)
        std::printf("step %d rank 0: sparsity %.4f, %.0f bytes sent, max |shard - dense mean of sent| = %.2g (max %.2g)\n",
                    step, stats.sparsity, stats.total_bytes(), e.err, e.ref);
      if (stats.unresolved == 0 && !e.exact())
        return {tagc::errc::internal, "step " + std::to_string(step) + ": shard differs from the dense mean by " +
                                          std::to_string(e.err)};
    }
    return comm->finalize();
  };
  const tagc::status s = steps_on_gpu();
  (void)cudaStreamDestroy(stream);
  return s;
}

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("SKIP tagc_example_03: %s\n",
                e != cudaSuccess ? (std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e)).c_str() : "no CUDA device");
    return 77;
  }
  int world = devices;
  if (const char* env = std::getenv("TAGC_GPU_RANKS"); env != nullptr && std::atoi(env) > 0)
    world = std::min(devices, std::atoi(env));
  auto id = tagc::nccl_unique_id();
  if (!id) {
    std::fprintf(stderr, "%s\n", id.error().what().c_str());
    return 1;
  }
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      if (const tagc::status s = run_rank(*id, world, r, n, steps); !s.ok()) errors[std::size_t(r)] = s.what();
    });
  for (auto& t : threads) t.join();
  const int rc = example::report_rank_errors(errors);
  if (rc == 0) std::printf("ok: %d GPU rank(s), %zu elements, %d steps\n", world, n, steps);
  return rc;
}
