#pragma once
// defines: helpers shared by the reducer tests — deterministic per-rank
//          gradients, a multi-rank driver over the in-process communicator, and
//          double-precision host references (sparsify, index, sketch).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <tagc/tagc.hpp>

namespace tagc_test {

// Heavy-tailed, sign-symmetric values like real gradients; fixed seed per (seed, rank, step).
inline std::vector<float> gradient(std::size_t n, std::uint64_t seed, int rank, int step, double density = 1.0) {
  std::mt19937_64 rng(seed * 1000003ull + std::uint64_t(rank) * 7919ull + std::uint64_t(step) * 104729ull);
  std::student_t_distribution<float> t(3.0f);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> g(n);
  for (auto& x : g) x = u(rng) < density ? 1e-3f * t(rng) : 0.0f;
  return g;
}

// The exact threshold rule of SparsifyPolicy: keep |acc| strictly above the
// (k+1)-th largest |acc|, k = floor((1 - theta) n).
inline std::vector<bool> reference_keep(const std::vector<float>& acc, double theta) {
  const std::size_t n = acc.size();
  const auto k = static_cast<std::size_t>(std::floor((1.0 - theta) * double(n)));
  std::vector<bool> keep(n, false);
  if (k == 0) return keep;
  float t = 0.0f;
  if (k < n) {
    std::vector<float> mag(n);
    for (std::size_t i = 0; i < n; ++i) mag[i] = std::fabs(acc[i]);
    std::nth_element(mag.begin(), mag.begin() + std::ptrdiff_t(k), mag.end(), std::greater<float>());
    t = mag[k];
  }
  for (std::size_t i = 0; i < n; ++i) keep[i] = std::fabs(acc[i]) > t;
  return keep;
}

// What every rank of a multi-rank run saw and produced.
struct rank_result {
  tagc::status status;
  std::vector<float> out;
  tagc::reduce_stats stats;
};

// Run `body(comm)` on N in-process ranks.
template <class Body>
void on_ranks(int n, Body&& body, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  tagc::local_world world(n, timeout);
  world.run([&](tagc::local_communicator& comm) { body(comm); });
}

// Sketch of a vector of one shard with the library's hashing (for carry checks).
inline std::vector<double> sketch_of(const tagc::layout& l, const std::vector<double>& shard_values) {
  std::vector<double> cells(l.cells, 0.0);
  for (std::size_t e = 0; e < shard_values.size(); ++e)
    if (shard_values[e] != 0.0)
      for (int h = 0; h < 3; ++h)
        cells[tagc::kernels::sketch_cell(l, e, h)] += double(tagc::kernels::sketch_sign_of(l, e, h)) * shard_values[e];
  return cells;
}

}  // namespace tagc_test
