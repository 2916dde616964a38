// Scratch driver behind the instruction counts in docs/results.md ("Codec speed"):
// two whole reduce_scatter calls of 2 ranks (threads over the in-process
// communicator, 1 OpenMP thread each) on 2M stand-in gradient entries, counted by
// callgrind between the client requests only (the gradients' generation is left
// out). Instructions are repeatable where times on this machine are not, so two
// commits compare by building this against each one's include/. Not built by CMake:
//
//   g++ -O3 -DNDEBUG -std=gnu++20 -fopenmp -DROW=0 -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP \
//       -isystem /usr/local/cuda/include/cccl -Iinclude codec_instructions.cpp -o codec_instructions
//   OMP_NUM_THREADS=1 valgrind --tool=callgrind --instr-atstart=no ./codec_instructions
//
// ROW 0: sketch 10x, 1-bit index (the paper's); ROW 1: packed fp32 values, exact index.
#include <tagc/tagc.hpp>
#include <valgrind/callgrind.h>
#include <omp.h>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>
#ifndef ROW
#define ROW 0
#endif
int main() {
  const std::size_t n = std::size_t(2) << 20;
  const int world = 2, iters = 2;
#if ROW == 0
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>, tagc::DecodePolicy<>>;
#else
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedPolicy>;
#endif
  tagc::local_world w(world, std::chrono::seconds(600));
  std::barrier sync(world);
  std::vector<std::thread> th;
  for (int r = 0; r < world; ++r) th.emplace_back([&, r] {
    omp_set_num_threads(1);
    R red;
    (void)red.initialize({.length = n, .world_size = world, .rank = r});
    std::mt19937_64 rng(1 + r);
    std::student_t_distribution<float> t(3.0f);
    std::vector<float> g(n), out(red.output_size());
    for (auto& x : g) x = 1e-3f * t(rng);
    auto comm = w.communicator(r);
    sync.arrive_and_wait();
    if (r == 0) CALLGRIND_START_INSTRUMENTATION;
    sync.arrive_and_wait();
    for (int it = 0; it < iters; ++it) {
      tagc::reduce_stats s;
      auto st = red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(out), &s);
      if (!st.ok()) { std::printf("%s\n", st.what().c_str()); return; }
      if (r == 0 && it == iters - 1) std::printf("kept %zu\n", std::size_t(s.kept));
    }
    sync.arrive_and_wait();
    if (r == 0) CALLGRIND_STOP_INSTRUMENTATION;
  });
  for (auto& x : th) x.join();
}
