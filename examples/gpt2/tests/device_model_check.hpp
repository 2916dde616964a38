#pragma once
// defines: gpt2_test::DeviceCase, device_cases(), MicroBatches, StepResult, max_probs_error,
// run_reference, run_per_unit, check_against_reference — the comparison of a
// DeviceModel<Exec> with gpt2::Model<float> shared by the CPU test (exec::host,
// test_device_model.cpp) and the GPU test (exec::cuda, test_device_model_gpu.cu), so
// both check the same things with the same cases.
//
// One comparison = two micro-batches with loss scales 0.25 and 0.75 accumulated (+=)
// into gradients that start non-zero, the device model driven unit by unit with one
// buffer per unit (as the sharded trainer drives it), then: both losses, every gradient
// tensor (scale-relative error), the padded wte rows untouched, and every tensor moved.
#include <doctest/doctest.h>

#include "gpt2/config.hpp"
#include "gpt2/init.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gpt2_test {

inline gpt2::Config small_config(int layers, int channels, int heads, int vocab, int max_t) {
  gpt2::Config c;
  c.max_seq_len = max_t;
  c.num_layers = layers;
  c.channels = channels;
  c.num_heads = heads;
  c.with_vocab(vocab);
  return c;
}

inline std::vector<int> random_tokens(size_t n, int V, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(0, V - 1);
  std::vector<int> t(n);
  for (int& x : t) x = d(g);
  return t;
}

inline std::vector<float> random_floats(size_t n, float scale, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// GPT-2 init plus noise, so that LayerNorm weights are not all 1 and biases not all 0:
// a kernel that mixed up w and b, or dropped a bias, would otherwise go unnoticed.
inline std::vector<float> noisy_params(const gpt2::Config& c, uint64_t seed) {
  std::vector<float> p(gpt2::num_parameters(c));
  gpt2::init_params(c, seed, p);
  const auto noise = random_floats(p.size(), 0.05f, static_cast<uint32_t>(seed) + 100);
  for (size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  return p;
}

// max |a - ref| / max |ref| over one tensor: relative to the tensor's scale, so that
// elements near zero (whose own relative error is meaningless) do not dominate.
inline double tensor_error(const float* a, const float* ref, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - ref[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

struct DeviceCase {
  std::string name;
  gpt2::Config cfg;
  int B, T;
};

inline std::vector<DeviceCase> device_cases() {
  return {
      {"L2 C64 NH4 V97 (Vp 128) B2 T16", small_config(2, 64, 4, 97, 16), 2, 16},
      {"L1 C64 NH1 V50257 (real vocab) B2 T8", small_config(1, 64, 1, 50257, 8), 2, 8},
      // B*T = 300 rows: three row chunks of the column sums (the last one partial)
      {"L1 C64 NH4 V97 B2 T150", small_config(1, 64, 4, 97, 160), 2, 150},
      // C, 3C, 4C not multiples of 64: the host's column blocks end part-way (last block partial)
      {"L1 C40 NH2 V97 B2 T8", small_config(1, 40, 2, 97, 8), 2, 8},
  };
}

struct MicroBatches {
  std::vector<float> params, grads0;  // flat layout; gradients start non-zero
  std::vector<int> in1, tg1, in2, tg2;
  float scale1 = 0.25f, scale2 = 0.75f;  // two micro-batches, as gradient accumulation
};

inline MicroBatches make_micro_batches(const DeviceCase& k) {
  const gpt2::Config& c = k.cfg;
  const size_t N = static_cast<size_t>(k.B) * k.T;
  MicroBatches m;
  m.params = noisy_params(c, 7);
  m.grads0 = random_floats(m.params.size(), 0.01f, 9);
  m.in1 = random_tokens(N, c.vocab_size, 1);
  m.tg1 = random_tokens(N, c.vocab_size, 2);
  m.in2 = random_tokens(N, c.vocab_size, 3);
  m.tg2 = random_tokens(N, c.vocab_size, 4);
  return m;
}

struct StepResult {
  float loss1 = 0, loss2 = 0;
  std::vector<float> grads;  // flat layout
};

inline StepResult run_reference(const DeviceCase& k, const MicroBatches& m) {
  gpt2::Model<float> cpu(k.cfg, k.B, k.T);
  StepResult r;
  r.grads = m.grads0;
  r.loss1 = cpu.forward(m.params.data(), m.in1.data(), m.tg1.data());
  cpu.backward(m.params.data(), r.grads.data(), m.scale1);
  r.loss2 = cpu.forward(m.params.data(), m.in2.data(), m.tg2.data());
  cpu.backward(m.params.data(), r.grads.data(), m.scale2);
  return r;
}

// One micro-step of a DeviceModel through the per-unit API; P(u) / G(u) give unit u's
// parameter / gradient buffer, in and tg are token ids, all in the model's Exec memory.
template <class Model, class ParamsOf, class GradsOf>
float run_per_unit(Model& dev, ParamsOf P, GradsOf G, const int* in, const int* tg, float loss_scale) {
  for (int u = 0; u < dev.num_units(); ++u) dev.forward_unit(u, P(u), u == 0 ? in : nullptr);
  const float loss = dev.forward_head(P(0), tg);
  dev.backward_head(P(0), G(0), loss_scale);
  for (int u = dev.num_units() - 1; u >= 0; --u) dev.backward_unit(u, P(u), G(u));
  return loss;
}

// Returns the largest scale-relative gradient error (for the log).
inline double check_against_reference(const DeviceCase& k, const MicroBatches& m, const StepResult& ref,
                                      const StepResult& got, double grad_tol, double loss_tol) {
  const gpt2::Config& c = k.cfg;
  CHECK(std::fabs(got.loss1 - ref.loss1) <= loss_tol * ref.loss1);
  CHECK(std::fabs(got.loss2 - ref.loss2) <= loss_tol * ref.loss2);
  CHECK(std::fabs(ref.loss1 - std::log(static_cast<float>(c.vocab_size))) < 1.0f);  // a sane loss, not 0 or NaN
  const auto us = gpt2::units(c);
  const auto off = gpt2::unit_offsets(us);
  REQUIRE(got.grads.size() == ref.grads.size());
  double worst = 0;
  for (size_t u = 0; u < us.size(); ++u)
    for (const gpt2::TensorInfo& t : us[u].tensors) {
      CAPTURE(t.name);
      const float* gd = got.grads.data() + off[u] + t.offset;
      const float* gr = ref.grads.data() + off[u] + t.offset;
      const float* g0 = m.grads0.data() + off[u] + t.offset;
      size_t used = t.size;
      if (t.name == "wte") {
        // padded rows V..Vp-1 never make a logit: their gradient stays exactly g0
        used = static_cast<size_t>(c.vocab_size) * c.channels;
        CHECK(std::memcmp(gd + used, g0 + used, (t.size - used) * sizeof(float)) == 0);
      }
      // every tensor received gradient (so the comparison is not of g0 with g0)
      double moved = 0;
      for (size_t i = 0; i < used; ++i) moved = std::max(moved, std::fabs(static_cast<double>(gr[i]) - g0[i]));
      CHECK(moved > 0);
      const double e = tensor_error(gd, gr, t.size);
      CHECK(e <= grad_tol);
      worst = std::max(worst, e);
    }
  return worst;
}

// The sampling check: the largest scale-relative difference, over every position (b, t),
// between the V probabilities a DeviceModel hands out for it (row_of(b, t, out), e.g.
// through copy_probs) and row b*T+t of the CPU model's probs(), both after a
// forward_head on the same inputs; each row must also sum to 1.
template <class RowOf>
double max_probs_error(const DeviceCase& k, const gpt2::Model<float>& cpu, RowOf row_of) {
  const int V = k.cfg.vocab_size, Vp = k.cfg.padded_vocab_size;
  std::vector<float> row(static_cast<size_t>(V));
  double worst = 0, worst_sum = 0;
  for (int b = 0; b < k.B; ++b)
    for (int t = 0; t < k.T; ++t) {
      row_of(b, t, row.data());
      const float* ref = cpu.probs() + (static_cast<size_t>(b) * k.T + t) * Vp;
      worst = std::max(worst, tensor_error(row.data(), ref, row.size()));
      double sum = 0;
      for (float p : row) sum += p;
      worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
    }
  CHECK(worst_sum <= 1e-4);
  return worst;
}

}  // namespace gpt2_test
