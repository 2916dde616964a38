#pragma once
// defines: gpt2::AdamW, gpt2::adamw_update, gpt2::sum_of_squares — optimizer pieces that
// work on any flat span, so a sharded trainer runs them on its own shard only.
#include <cstddef>
#include <span>

namespace gpt2 {

struct AdamW {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// One AdamW step over a span, llm.c train_gpt2.c (CPU) semantics:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// t is the 1-based step number. Like llm.c's CPU trainer, decoupled weight decay applies
// to EVERY parameter (also biases, LayerNorm and embeddings); a caller that wants decay
// on 2-D weights only calls this twice per unit with different weight_decay (llm.c's
// CUDA trainer does that). All spans must have params.size() elements.
void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> m,
                  std::span<float> v, const AdamW& opt, int t);

// Sum of squares in double, the per-rank part of a global gradient norm
// (norm = sqrt(all-reduce-sum of these)).
double sum_of_squares(std::span<const float> x);

}  // namespace gpt2
