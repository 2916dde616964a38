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
  // locals and restrict: nothing aliases, so the loop vectorizes
  float* __restrict p = params.data();
  const float* __restrict g = grads.data();
  float* __restrict mm = m.data();
  float* __restrict vv = v.data();
  const float b1 = o.beta1, b2 = o.beta2, lr = o.lr, eps = o.eps, wd = o.weight_decay;
#pragma omp parallel for simd if (n >= (size_t(1) << 16))
  for (size_t i = 0; i < n; ++i) {
    const float mi = b1 * mm[i] + (1.0f - b1) * g[i];
    const float vi = b2 * vv[i] + (1.0f - b2) * g[i] * g[i];
    mm[i] = mi;
    vv[i] = vi;
    p[i] -= lr * ((mi / bc1) / (std::sqrt(vi / bc2) + eps) + wd * p[i]);
  }
}

double sum_of_squares(std::span<const float> x) {
  const float* d = x.data();
  const size_t n = x.size();
  double s = 0;
#pragma omp parallel for reduction(+ : s) if (n >= (size_t(1) << 18))
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(d[i]) * d[i];
  return s;
}

}  // namespace gpt2
