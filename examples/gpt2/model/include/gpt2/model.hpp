#pragma once
// defines: gpt2::Model<Real> (GPT-2 forward/backward, split into per-unit steps so a
// sharded trainer can gather/reduce one unit at a time), gpt2::Gpt2 = Model<float>.
//
// One training micro-step, written the way an FSDP/ZeRO-3 trainer drives it
// (P[u] = the FULL gathered parameters of unit u, G[u] = its gradient buffer):
//
//   for u in 0 .. num_units()-1:  forward_unit(u, P[u], u == 0 ? inputs : nullptr)
//   loss = forward_head(P[0], targets)        // LM head is tied to wte: unit 0 again
//   backward_head(P[0], G[0])                 // dwte from the LM head
//   for u in num_units()-1 .. 0:  backward_unit(u, P[u], G[u])
//   // G[0] is complete only after backward_unit(0): reduce-scatter it last.
//
// Gradients ACCUMULATE (+=) into G; zeroing them before the first micro-batch of a step
// is the caller's job. Activations live in the object, allocated once in the
// constructor; no step allocates. Steps must come in the order above (checked: a
// std::logic_error names the step that was expected). Inputs and targets are B*T token
// ids in [0, vocab_size), row-major [B,T] (checked: std::out_of_range).
//
// Numerics follow GPT-2 / llm.c: learned token + position embeddings, pre-LayerNorm
// blocks (eps 1e-5), fused QKV, causal softmax attention with scale 1/sqrt(head size),
// GELU (tanh approximation), MLP 4C, final LayerNorm, logits = lnf @ wte^T over the
// first V rows only (padded rows never produce a logit), loss = mean cross-entropy over
// the B*T positions. All matmuls are BLAS gemm (sgemm for float, dgemm for double; the
// double instantiation exists for gradient checks), the rest is OpenMP.
#include "gpt2/config.hpp"
#include "gpt2/call_order.hpp"
#include "gpt2/layout.hpp"
#include "gpt2/tensor_offsets.hpp"

#include <cstddef>
#include <vector>

namespace gpt2 {

template <class Real>
class Model {
 public:
  // Validates cfg (std::invalid_argument); requires B >= 1 and 1 <= T <= max_seq_len.
  Model(const Config& cfg, int B, int T);

  const Config& config() const { return cfg_; }
  int batch() const { return B_; }
  int seq_len() const { return T_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  const std::vector<UnitInfo>& unit_infos() const { return units_; }

  // --- per-unit steps --------------------------------------------------------------
  // Unit u's forward. inputs ([B,T] token ids) is read (and copied) only for u == 0.
  void forward_unit(int u, const Real* unit_params, const int* inputs = nullptr);
  // LM head + softmax (+ cross-entropy when targets != nullptr). Needs unit 0's
  // parameters (wte). Returns the mean loss (0 when targets is null).
  float forward_head(const Real* embed_params, const int* targets);
  // Backward of head + loss; requires the last forward_head to have had targets.
  // d(loss)/d(logits) is multiplied by loss_scale (e.g. 1/grad_accum_steps).
  void backward_head(const Real* embed_params, Real* embed_grads, float loss_scale = 1.0f);
  // Unit u's backward: accumulates (+=) into unit_grads. Units go last to first.
  void backward_unit(int u, const Real* unit_params, Real* unit_grads);

  // --- whole model over the flat layout (units concatenated, see layout.hpp) --------
  float forward(const Real* params, const int* inputs, const int* targets);
  void backward(const Real* params, Real* grads, float loss_scale = 1.0f);

  // --- results -------------------------------------------------------------------
  float loss() const { return loss_; }  // mean loss of the last forward_head with targets
  // [B,T,Vp] probabilities after forward_head (columns >= V are unspecified).
  // backward_head changes them in place to (probs - onehot(targets)).
  const Real* probs() const { return logits_.data(); }
  // Loss of each position, [B,T], after forward_head with targets.
  const Real* losses() const { return losses_.data(); }

 private:
  const Real* layer_input(int l) const;
  size_t bt() const { return static_cast<size_t>(B_) * T_; }

  Config cfg_;
  int B_, T_;
  std::vector<UnitInfo> units_;
  std::vector<size_t> offsets_;
  TensorOffsets at_;  // where each tensor sits inside its unit
  CallOrder order_;   // progress through the step sequence
  float loss_ = 0.0f;

  std::vector<int> inputs_, targets_;
  // activations, per layer l at [l * size]
  std::vector<Real> encoded_;                     // [B,T,C]
  std::vector<Real> ln1_, ln1_mean_, ln1_rstd_;   // [L,B,T,C], [L,B,T]
  std::vector<Real> qkv_;                         // [L,B,T,3C]
  std::vector<Real> att_;                         // [L,B,NH,T,T] softmax probabilities
  std::vector<Real> atty_;                        // [L,B,T,C]
  std::vector<Real> res2_;                        // [L,B,T,C]
  std::vector<Real> ln2_, ln2_mean_, ln2_rstd_;   // [L,B,T,C], [L,B,T]
  std::vector<Real> fch_, fch_gelu_;              // [L,B,T,4C]
  std::vector<Real> res3_;                        // [L,B,T,C]
  std::vector<Real> lnf_, lnf_mean_, lnf_rstd_;   // [B,T,C], [B,T]
  std::vector<Real> logits_;                      // [B,T,Vp] logits -> probs -> dlogits
  std::vector<Real> losses_;                      // [B,T]
  // backward scratch, reused by every layer
  std::vector<Real> dres_;                        // [B,T,C] gradient of the residual stream
  std::vector<Real> dln_;                         // [B,T,C]
  std::vector<Real> datty_;                       // [B,T,C]
  std::vector<Real> dqkv_;                        // [B,T,3C]
  std::vector<Real> datt_;                        // [B,NH,T] per-(b,h) row scratch
  std::vector<Real> dfch_;                        // [B,T,4C]
  std::vector<Real> scratch_;                     // [B,T,4C] forward scratch (attproj/fcproj out)
};

extern template class Model<float>;
extern template class Model<double>;
using Gpt2 = Model<float>;

}  // namespace gpt2
