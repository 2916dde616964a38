// Scratch driver behind "Issue 10, where the floor is" in docs/results/history.md: whole
// reduce_scatter calls of one Reducer per rank (ranks as threads over the
// in-process communicator, 1 OpenMP thread each), 16M elements, the Reducer's own
// stage times, the minimum over calls printed for rank 0. Not built by CMake:
//
//   g++ -O3 -DNDEBUG -std=gnu++20 -fopenmp -DRATIO=10 -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP \
//       -isystem /usr/local/cuda/include/cccl -Iinclude reducer_stages.cpp -o reducer_stages
//   ./reducer_stages 1 20      # ranks, calls
#include <tagc/tagc.hpp>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>
#include <algorithm>
int main(int argc, char** argv) {
  const std::size_t n = std::size_t(16) << 20;
  const int world = argc > 1 ? std::atoi(argv[1]) : 1;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<RATIO>, tagc::DecodePolicy<>>;
  tagc::local_world w(world, std::chrono::seconds(600));
  std::vector<std::thread> th;
  for (int r = 0; r < world; ++r) th.emplace_back([&, r] {
    omp_set_num_threads(1);
    R red;
    (void)red.initialize({.length = n, .world_size = world, .rank = r});
    red.set_profiling(true);
    std::mt19937_64 rng(1 + r);
    std::student_t_distribution<float> t(3.0f);
    std::vector<float> g(n), out(red.output_size());
    for (auto& x : g) x = 1e-3f * t(rng);
    auto comm = w.communicator(r);
    double best[8]; std::fill(best, best + 8, 1e9);
    for (int it = 0; it < iters; ++it) {
      tagc::reduce_stats s;
      auto t0 = std::chrono::steady_clock::now();
      auto st = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &s);
      double call = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) { std::printf("%s\n", st.what().c_str()); return; }
      double v[8] = {call, 1e3 * s.seconds.compress(), 1e3 * s.seconds.sparsify, 1e3 * s.seconds.index, 1e3 * s.seconds.sketch, 1e3 * s.seconds.residual, 1e3 * s.seconds.decode, double(s.kept)};
      for (int k = 0; k < 8; ++k) best[k] = std::min(best[k], v[k]);
    }
    if (r == 0) std::printf("rank0 min ms: call %.2f compress %.2f sparsify %.2f index %.2f sketch %.2f residual %.2f decode %.2f kept %.0f\n", best[0], best[1], best[2], best[3], best[4], best[5], best[6], best[7]);
  });
  for (auto& x : th) x.join();
}
