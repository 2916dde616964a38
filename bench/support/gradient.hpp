#pragma once
// defines: tagc_bench::heavy_tailed_gradient — the benches' stand-in gradient:
// Student-t (3 degrees of freedom) times 1e-3, sign-symmetric and heavy-tailed like
// a language model's, so a top-k select and a sketch see a realistic spread of
// magnitudes. The same seed gives the same gradient in every bench.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace tagc_bench {

inline std::vector<float> heavy_tailed_gradient(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = 1e-3f * t(rng);
  return g;
}

}  // namespace tagc_bench
