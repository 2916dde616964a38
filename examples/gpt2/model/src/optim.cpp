// defines: gpt2::adamw_update, gpt2::sum_of_squares.
#include "gpt2/optim.hpp"

#include <cmath>
#include <stdexcept>

namespace gpt2 {

void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> m,
                  std::span<float> v, const AdamW& o, int t) {
  const size_t n = params.size();
  if (grads.size() != n || m.size() != n || v.size() != n)
    throw std::invalid_argument("gpt2::adamw_update: grads, m and v must have params.size() elements");
  if (t < 1) throw std::invalid_argument("gpt2::adamw_update: step t (" + std::to_string(t) + ") must be >= 1");
  const float bc1 = 1.0f - std::pow(o.beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(o.beta2, static_cast<float>(t));
  float* p = params.data();
  const float* g = grads.data();
  float* mm = m.data();
  float* vv = v.data();
#pragma omp parallel for simd
  for (size_t i = 0; i < n; ++i) {
    const float mi = o.beta1 * mm[i] + (1.0f - o.beta1) * g[i];
    const float vi = o.beta2 * vv[i] + (1.0f - o.beta2) * g[i] * g[i];
    mm[i] = mi;
    vv[i] = vi;
    p[i] -= o.lr * ((mi / bc1) / (std::sqrt(vi / bc2) + o.eps) + o.weight_decay * p[i]);
  }
}

double sum_of_squares(std::span<const float> x) {
  const float* d = x.data();
  const size_t n = x.size();
  double s = 0;
#pragma omp parallel for reduction(+ : s)
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(d[i]) * d[i];
  return s;
}

}  // namespace gpt2
