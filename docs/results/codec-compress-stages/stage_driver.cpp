// Scratch driver behind "Issue 10, compress stages" in docs/results/history.md: the host
// compress stages of one rank called alone (16M elements, 2 shards, 1-bit index),
// each timed, the minimum over calls printed, beside a plain acc = g + r pass (AVX2
// stores) that bounds the fused pass from below. Not built by CMake; compiled
// against a checkout's headers (`INC`), so two commits can be compared alternately:
//
//   g++ -O3 -DNDEBUG -std=gnu++20 -fopenmp -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP \
//       -isystem /usr/local/cuda/include/cccl -I$INC stage_driver.cpp -o stage_driver
//   OMP_NUM_THREADS=1 IT=20 ./stage_driver 10     # sketch ratio 10 (98.75 % sparsity); 4: 90 %
//
// Columns: store (acc = g + r alone), fused (sample bracket + marking pass writing acc,
// index, staged kept list), finish (select in the bracket's pool, marks), list (kept
// list filtered from the stage), sketch (cells from the kept list, with and without
// the sender check), commit (residual over the kept list; the first call meets its
// acc lines cold, the second warm).
#include <tagc/detail/host/threshold_marker.hpp>

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using clk = std::chrono::steady_clock;
static double ms_since(clk::time_point t0) { return std::chrono::duration<double, std::milli>(clk::now() - t0).count(); }

__attribute__((target("avx2"))) static void sum_store(const float* g, const float* r, float* a, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 8) _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(g + i), _mm256_loadu_ps(r + i)));
}

int main(int argc, char** argv) {
  const std::size_t n = std::size_t(16) << 20;
  const int shards = 2, ratio = argc > 1 ? std::atoi(argv[1]) : 10;
  const int iters = std::getenv("IT") ? std::atoi(std::getenv("IT")) : 8;
  const auto lay = tagc::make_layout(n, shards, 1024, ratio, 1);
  std::mt19937_64 rng(1);
  std::student_t_distribution<float> t(3.0f);  // bench_codec's gradient
  std::vector<float> g(n), r(n), acc(n), values(n / 4 + 1), cells(lay.cells * shards);
  for (auto& x : g) x = 1e-3f * t(rng);
  for (auto& x : r) x = 1e-4f * t(rng);
  std::vector<std::uint8_t> index(lay.index_bytes * shards);
  std::vector<std::uint32_t> hist(tagc::detail::hist_copies * tagc::detail::hist_bins), list(n / 4 + 1);
  tagc::detail::host::threshold_marker m;
  m.initialize(lay);
  m.stage_kept({list.data(), values.data(), list.size()});
  const double density = ratio == 10 ? 0.0125 : ratio == 4 ? 0.1 : 0.2;  // tagc::default_sparsity
  const auto target = std::uint32_t(double(n) * density) + 1;
  double best[8];
  std::fill(best, best + 8, 1e30);
  for (int it = 0; it < iters; ++it) {
    double s[8];
    auto t0 = clk::now();
    sum_store(g.data(), r.data(), acc.data(), n);
    s[0] = ms_since(t0);
    t0 = clk::now();
    (void)m.begin_fused(g.data(), r.data(), acc.data(), target, index.data(), false);
    s[1] = ms_since(t0);
    t0 = clk::now();
    const std::uint32_t threshold = m.finish(acc.data(), target, index.data(), hist.data());
    s[2] = ms_since(t0);
    t0 = clk::now();
    (void)m.list(index.data(), list.data(), list.size(), acc.data(), values.data());
    s[3] = ms_since(t0);
    t0 = clk::now();
    tagc::detail::host_sketch_from_kept<float>(values.data(), list.data(), m.kept(), lay, index.data(), cells.data(), 1.0f);
    s[4] = ms_since(t0);
    t0 = clk::now();
    tagc::detail::host_sketch_from_kept<float>(values.data(), list.data(), m.kept(), lay, nullptr, cells.data(), 1.0f);
    s[5] = ms_since(t0);
    unsigned long long counters[4] = {};
    for (int k = 0; k < 2; ++k) {
      t0 = clk::now();
      tagc::detail::host_commit_float<float>(acc.data(), list.data(), values.data(), m.kept(), true, n, threshold,
                                             tagc::detail::host_commit_entry{k ? nullptr : index.data(), nullptr, lay},
                                             1.0f, 1.0f, counters);
      s[6 + k] = ms_since(t0);
    }
    for (int k = 0; k < 8; ++k) best[k] = std::min(best[k], s[k]);
  }
  std::printf("min of %d: store %.2f fused %.2f finish %.2f list %.2f sketch %.2f (unchecked %.2f) "
              "commit %.2f (warm, unchecked %.2f) ms\n",
              iters, best[0], best[1], best[2], best[3], best[4], best[5], best[6], best[7]);
}
