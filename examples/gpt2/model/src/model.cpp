// defines: gpt2::Model<Real> — the per-unit forward/backward sequence (see model.hpp).
#include "gpt2/model.hpp"

#include "kernels.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpt2 {

namespace k = kernels;

namespace {
void check_tokens(const int* tok, size_t n, int V, const char* what) {
  for (size_t i = 0; i < n; ++i)
    if (tok[i] < 0 || tok[i] >= V)
      throw std::out_of_range(std::string("gpt2::Model: ") + what + "[" + std::to_string(i) + "] = " +
                              std::to_string(tok[i]) + " is outside [0, vocab_size=" + std::to_string(V) + ")");
}
}  // namespace

template <class Real>
Model<Real>::Model(const Config& cfg, int B, int T)
    : cfg_(cfg), B_(B), T_(T), order_("gpt2::Model", gpt2::num_units(cfg)) {
  cfg_.validate();
  k::set_blas_single_threaded();  // process-wide: our OpenMP threads split the gemms instead
  if (B < 1) throw std::invalid_argument("gpt2::Model: batch size B (" + std::to_string(B) + ") must be >= 1");
  if (T < 1 || T > cfg_.max_seq_len)
    throw std::invalid_argument("gpt2::Model: sequence length T (" + std::to_string(T) + ") must be in [1, max_seq_len=" +
                                std::to_string(cfg_.max_seq_len) + "]");
  units_ = units(cfg_);
  offsets_ = unit_offsets(units_);
  at_ = tensor_offsets(cfg_, units_);

  const size_t L = cfg_.num_layers, C = cfg_.channels, NH = cfg_.num_heads, N = bt();
  inputs_.assign(N, 0);
  targets_.assign(N, 0);
  encoded_.assign(N * C, 0);
  ln1_.assign(L * N * C, 0);
  ln1_mean_.assign(L * N, 0);
  ln1_rstd_.assign(L * N, 0);
  qkv_.assign(L * N * 3 * C, 0);
  att_.assign(L * B_ * NH * T_ * T_, 0);
  atty_.assign(L * N * C, 0);
  res2_.assign(L * N * C, 0);
  ln2_.assign(L * N * C, 0);
  ln2_mean_.assign(L * N, 0);
  ln2_rstd_.assign(L * N, 0);
  fch_.assign(L * N * 4 * C, 0);
  fch_gelu_.assign(L * N * 4 * C, 0);
  res3_.assign(L * N * C, 0);
  lnf_.assign(N * C, 0);
  lnf_mean_.assign(N, 0);
  lnf_rstd_.assign(N, 0);
  logits_.assign(N * cfg_.padded_vocab_size, 0);
  losses_.assign(N, 0);
  dres_.assign(N * C, 0);
  dln_.assign(N * C, 0);
  datty_.assign(N * C, 0);
  dqkv_.assign(N * 3 * C, 0);
  datt_.assign(static_cast<size_t>(B_) * NH * T_, 0);
  dfch_.assign(N * 4 * C, 0);
  scratch_.assign(N * 4 * C, 0);
}

template <class Real>
const Real* Model<Real>::layer_input(int l) const {
  return l == 0 ? encoded_.data() : res3_.data() + static_cast<size_t>(l - 1) * bt() * cfg_.channels;
}

template <class Real>
void Model<Real>::forward_unit(int u, const Real* p, const int* inputs) {
  // A forward may restart at unit 0 from any phase (e.g. evaluation between steps).
  order_.check_forward_unit(u);
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers;
  const int N = static_cast<int>(bt());
  const size_t NC = bt() * C;
  if (u == 0) {
    if (!inputs) throw std::invalid_argument("gpt2::Model::forward_unit(0): inputs must not be null");
    check_tokens(inputs, bt(), cfg_.vocab_size, "inputs");
    std::copy(inputs, inputs + bt(), inputs_.begin());
    k::encoder_forward(encoded_.data(), inputs_.data(), p, p + at_.wpe, B, T, C);
  } else if (u == lnf_unit(cfg_)) {
    k::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), res3_.data() + (L - 1) * NC,
                         p + at_.lnfw, p + at_.lnfb, N, C);
  } else if ((u - 1) % 2 == 0) {  // attention block of layer l
    const int l = (u - 1) / 2;
    Real* ln1 = ln1_.data() + l * NC;
    Real* qkv = qkv_.data() + l * NC * 3;
    Real* atty = atty_.data() + l * NC;
    k::layernorm_forward(ln1, ln1_mean_.data() + l * bt(), ln1_rstd_.data() + l * bt(), layer_input(l),
                         p + at_.attn.ln1w, p + at_.attn.ln1b, N, C);
    k::matmul_forward(qkv, ln1, p + at_.attn.qkvw, p + at_.attn.qkvb, N, C, 3 * C);
    k::attention_forward(atty, att_.data() + static_cast<size_t>(l) * B * NH * T * T, qkv, B, T, C, NH);
    k::matmul_forward(scratch_.data(), atty, p + at_.attn.attprojw, p + at_.attn.attprojb, N, C, C);
    k::residual_forward(res2_.data() + l * NC, layer_input(l), scratch_.data(), NC);
  } else {  // MLP block of layer l
    const int l = (u - 2) / 2;
    Real* ln2 = ln2_.data() + l * NC;
    Real* fch = fch_.data() + l * NC * 4;
    Real* fchg = fch_gelu_.data() + l * NC * 4;
    const Real* res2 = res2_.data() + l * NC;
    k::layernorm_forward(ln2, ln2_mean_.data() + l * bt(), ln2_rstd_.data() + l * bt(), res2, p + at_.mlp.ln2w,
                         p + at_.mlp.ln2b, N, C);
    k::matmul_forward(fch, ln2, p + at_.mlp.fcw, p + at_.mlp.fcb, N, C, 4 * C);
    k::gelu_forward(fchg, fch, NC * 4);
    k::matmul_forward(scratch_.data(), fchg, p + at_.mlp.fcprojw, p + at_.mlp.fcprojb, N, 4 * C, C);
    k::residual_forward(res3_.data() + l * NC, res2, scratch_.data(), NC);
  }
  order_.forward_unit_done();
}

template <class Real>
float Model<Real>::forward_head(const Real* p, const int* targets) {
  order_.check_forward_head();
  const int N = static_cast<int>(bt()), C = cfg_.channels, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
  if (targets) {
    check_tokens(targets, bt(), V, "targets");
    std::copy(targets, targets + bt(), targets_.begin());
  }
  // Only the first V rows of wte make logits: the padded rows never count.
  k::gemm(false, true, N, V, C, Real(1), lnf_.data(), C, p, C, Real(0), logits_.data(), Vp);
  k::softmax_ce_forward(logits_.data(), losses_.data(), targets ? targets_.data() : nullptr, N, V, Vp);
  double sum = 0;
  if (targets)
    for (int i = 0; i < N; ++i) sum += losses_[i];
  loss_ = static_cast<float>(sum / N);
  order_.forward_head_done(targets != nullptr);
  return targets ? loss_ : 0.0f;
}

template <class Real>
void Model<Real>::backward_head(const Real* p, Real* g, float loss_scale) {
  order_.check_backward_head();
  const int N = static_cast<int>(bt()), C = cfg_.channels, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
  // d(loss_scale * mean loss)/d(logits) = s * (probs - onehot), s = loss_scale / N; s goes
  // into the gemm alpha. dlnf = dlogits @ wte[:V];  dwte[:V] += dlogits^T @ lnf
  k::softmax_ce_backward(logits_.data(), targets_.data(), N, Vp);
  const Real s = static_cast<Real>(loss_scale) / N;
  k::gemm(false, false, N, C, V, s, logits_.data(), Vp, p, C, Real(0), dln_.data(), C);
  k::gemm(true, false, V, C, N, s, logits_.data(), Vp, lnf_.data(), C, Real(1), g, C);
  order_.backward_head_done();
}

template <class Real>
void Model<Real>::backward_unit(int u, const Real* p, Real* g) {
  order_.check_backward_unit(u);
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers;
  const int N = static_cast<int>(bt());
  const size_t NC = bt() * C;
  Real* dres = dres_.data();
  if (u == lnf_unit(cfg_)) {
    std::fill(dres_.begin(), dres_.end(), Real(0));
    k::layernorm_backward(dres, g + at_.lnfw, g + at_.lnfb, dln_.data(), res3_.data() + (L - 1) * NC,
                          p + at_.lnfw, lnf_mean_.data(), lnf_rstd_.data(), N, C);
  } else if (u == 0) {
    k::encoder_backward(g, g + at_.wpe, dres, inputs_.data(), B, T, C);
  } else if ((u - 1) % 2 == 0) {  // attention block: res2 = x + proj(attn(ln1(x)))
    const int l = (u - 1) / 2;
    const Real* ln1 = ln1_.data() + l * NC;
    const Real* qkv = qkv_.data() + l * NC * 3;
    const Real* atty = atty_.data() + l * NC;
    k::matmul_backward(datty_.data(), g + at_.attn.attprojw, g + at_.attn.attprojb, dres, atty, p + at_.attn.attprojw, N, C, C);
    std::fill(dqkv_.begin(), dqkv_.end(), Real(0));
    k::attention_backward(dqkv_.data(), datt_.data(), datty_.data(), qkv,
                          att_.data() + static_cast<size_t>(l) * B * NH * T * T, B, T, C, NH);
    k::matmul_backward(dln_.data(), g + at_.attn.qkvw, g + at_.attn.qkvb, dqkv_.data(), ln1, p + at_.attn.qkvw, N, C, 3 * C);
    k::layernorm_backward(dres, g + at_.attn.ln1w, g + at_.attn.ln1b, dln_.data(), layer_input(l), p + at_.attn.ln1w,
                          ln1_mean_.data() + l * bt(), ln1_rstd_.data() + l * bt(), N, C);
  } else {  // MLP block: res3 = res2 + fcproj(gelu(fc(ln2(res2))))
    const int l = (u - 2) / 2;
    const Real* ln2 = ln2_.data() + l * NC;
    const Real* fch = fch_.data() + l * NC * 4;
    const Real* fchg = fch_gelu_.data() + l * NC * 4;
    k::matmul_backward(dfch_.data(), g + at_.mlp.fcprojw, g + at_.mlp.fcprojb, dres, fchg, p + at_.mlp.fcprojw, N, 4 * C, C);
    k::gelu_backward(dfch_.data(), fch, dfch_.data(), NC * 4);
    k::matmul_backward(dln_.data(), g + at_.mlp.fcw, g + at_.mlp.fcb, dfch_.data(), ln2, p + at_.mlp.fcw, N, C, 4 * C);
    k::layernorm_backward(dres, g + at_.mlp.ln2w, g + at_.mlp.ln2b, dln_.data(), res2_.data() + l * NC, p + at_.mlp.ln2w,
                          ln2_mean_.data() + l * bt(), ln2_rstd_.data() + l * bt(), N, C);
  }
  order_.backward_unit_done();
}

template <class Real>
float Model<Real>::forward(const Real* params, const int* inputs, const int* targets) {
  for (int u = 0; u < num_units(); ++u) forward_unit(u, params + offsets_[u], u == 0 ? inputs : nullptr);
  return forward_head(params, targets);
}

template <class Real>
void Model<Real>::backward(const Real* params, Real* grads, float loss_scale) {
  backward_head(params, grads, loss_scale);
  for (int u = num_units() - 1; u >= 0; --u) backward_unit(u, params + offsets_[u], grads + offsets_[u]);
}

template class Model<float>;
template class Model<double>;

}  // namespace gpt2
