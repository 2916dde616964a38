// examples/common/gradient_check.hpp — the scaffolding the numbered examples (01, 02, 03)
// share around the Reducer: the gradients they reduce, the comparison of a rank's shard
// with the dense mean of what the ranks sent, and the report of each rank's verdict.
// None of it is tagc's API; each example shows that in full. Header-only, host code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace example {

// A gradient-like vector: heavy-tailed, different on every rank and step.
inline std::vector<float> gradient(std::size_t n, int rank, int step) {
  std::mt19937 rng(1000u * unsigned(rank) + unsigned(step));
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = 1e-3f * t(rng);
  return g;
}

// How far a shard is from the dense mean of what was sent: err = max |mean - shard|,
// ref = max |mean| (the scale err is judged against).
struct mean_error {
  double err = 0, ref = 0;
  // Equal up to float sums: what the contract promises where peeling resolved everything.
  bool exact() const { return err <= 1e-5 * ref; }
};

// `dense_sum`: the plain (uncompressed) reduce-scatter of what the `world` ranks sent,
// this rank's part; its mean is dense_sum / world.
inline mean_error compare_to_mean(std::span<const float> shard, std::span<const float> dense_sum, int world) {
  mean_error e;
  for (std::size_t i = 0; i < shard.size(); ++i) {
    const double mean = double(dense_sum[i]) / world;
    e.err = std::max(e.err, std::abs(mean - shard[i]));
    e.ref = std::max(e.ref, std::abs(mean));
  }
  return e;
}

// For programs whose ranks are threads: prints "rank r: error" for each rank whose error is
// not empty; the exit status (0 when none failed, else 1).
inline int report_rank_errors(const std::vector<std::string>& errors) {
  int rc = 0;
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) {
      std::fprintf(stderr, "rank %zu: %s\n", r, errors[r].c_str());
      rc = 1;
    }
  return rc;
}

}  // namespace example
