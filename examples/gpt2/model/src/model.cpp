// defines: gpt2::Model<Real> — the per-unit forward/backward sequence (see model.hpp).
#include "gpt2/model.hpp"

#include "kernels.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpt2 {

namespace k = kernels;

namespace {
size_t find_offset(const UnitInfo& u, const std::string& suffix) {
  for (const TensorInfo& t : u.tensors) {
    const std::string& n = t.name;
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (n.size() == suffix.size() || n[n.size() - suffix.size() - 1] == '.'))
      return t.offset;
  }
  throw std::logic_error("gpt2::Model: unit " + u.name + " has no tensor " + suffix);
}

void check_tokens(const int* tok, size_t n, int V, const char* what) {
  for (size_t i = 0; i < n; ++i)
    if (tok[i] < 0 || tok[i] >= V)
      throw std::out_of_range(std::string("gpt2::Model: ") + what + "[" + std::to_string(i) + "] = " +
                              std::to_string(tok[i]) + " is outside [0, vocab_size=" + std::to_string(V) + ")");
}
}  // namespace

template <class Real>
Model<Real>::Model(const Config& cfg, int B, int T) : cfg_(cfg), B_(B), T_(T) {
  cfg_.validate();
  k::set_blas_single_threaded();  // process-wide: our OpenMP threads split the gemms instead
  if (B < 1) throw std::invalid_argument("gpt2::Model: batch size B (" + std::to_string(B) + ") must be >= 1");
  if (T < 1 || T > cfg_.max_seq_len)
    throw std::invalid_argument("gpt2::Model: sequence length T (" + std::to_string(T) + ") must be in [1, max_seq_len=" +
                                std::to_string(cfg_.max_seq_len) + "]");
  units_ = units(cfg_);
  offsets_ = unit_offsets(units_);
  wpe_off_ = find_offset(units_[0], "wpe");
  const UnitInfo& a = units_[attn_unit(0)];
  ao_ = {find_offset(a, "attprojw"), find_offset(a, "ln1w"), find_offset(a, "ln1b"),
         find_offset(a, "qkvw"),     find_offset(a, "qkvb"), find_offset(a, "attprojb")};
  const UnitInfo& m = units_[mlp_unit(0)];
  mo_ = {find_offset(m, "fcw"),  find_offset(m, "fcprojw"), find_offset(m, "ln2w"),
         find_offset(m, "ln2b"), find_offset(m, "fcb"),     find_offset(m, "fcprojb")};
  lnfw_off_ = find_offset(units_[lnf_unit(cfg_)], "lnfw");
  lnfb_off_ = find_offset(units_[lnf_unit(cfg_)], "lnfb");

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
void Model<Real>::expect(bool ok, const char* what) const {
  if (!ok) {
    static const char* phases[] = {"forward_unit", "forward_head", "backward_head", "backward_unit"};
    throw std::logic_error(std::string("gpt2::Model: out-of-order call to ") + what + "; expected " +
                           phases[static_cast<int>(phase_)] +
                           (phase_ == Phase::forward || phase_ == Phase::backward ? "(" + std::to_string(next_) + ")" : std::string()));
  }
}

template <class Real>
const Real* Model<Real>::layer_input(int l) const {
  return l == 0 ? encoded_.data() : res3_.data() + static_cast<size_t>(l - 1) * bt() * cfg_.channels;
}

template <class Real>
void Model<Real>::forward_unit(int u, const Real* p, const int* inputs) {
  // A forward may restart at unit 0 from any phase (e.g. evaluation between steps).
  if (u == 0) { phase_ = Phase::forward; next_ = 0; }
  expect(phase_ == Phase::forward && u == next_, "forward_unit");
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers;
  const int N = static_cast<int>(bt());
  const size_t NC = bt() * C;
  if (u == 0) {
    if (!inputs) throw std::invalid_argument("gpt2::Model::forward_unit(0): inputs must not be null");
    check_tokens(inputs, bt(), cfg_.vocab_size, "inputs");
    std::copy(inputs, inputs + bt(), inputs_.begin());
    k::encoder_forward(encoded_.data(), inputs_.data(), p, p + wpe_off_, B, T, C);
  } else if (u == lnf_unit(cfg_)) {
    k::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), res3_.data() + (L - 1) * NC,
                         p + lnfw_off_, p + lnfb_off_, N, C);
  } else if ((u - 1) % 2 == 0) {  // attention block of layer l
    const int l = (u - 1) / 2;
    Real* ln1 = ln1_.data() + l * NC;
    Real* qkv = qkv_.data() + l * NC * 3;
    Real* atty = atty_.data() + l * NC;
    k::layernorm_forward(ln1, ln1_mean_.data() + l * bt(), ln1_rstd_.data() + l * bt(), layer_input(l),
                         p + ao_.ln1w, p + ao_.ln1b, N, C);
    k::matmul_forward(qkv, ln1, p + ao_.qkvw, p + ao_.qkvb, N, C, 3 * C);
    k::attention_forward(atty, att_.data() + static_cast<size_t>(l) * B * NH * T * T, qkv, B, T, C, NH);
    k::matmul_forward(scratch_.data(), atty, p + ao_.attprojw, p + ao_.attprojb, N, C, C);
    k::residual_forward(res2_.data() + l * NC, layer_input(l), scratch_.data(), NC);
  } else {  // MLP block of layer l
    const int l = (u - 2) / 2;
    Real* ln2 = ln2_.data() + l * NC;
    Real* fch = fch_.data() + l * NC * 4;
    Real* fchg = fch_gelu_.data() + l * NC * 4;
    const Real* res2 = res2_.data() + l * NC;
    k::layernorm_forward(ln2, ln2_mean_.data() + l * bt(), ln2_rstd_.data() + l * bt(), res2, p + mo_.ln2w,
                         p + mo_.ln2b, N, C);
    k::matmul_forward(fch, ln2, p + mo_.fcw, p + mo_.fcb, N, C, 4 * C);
    k::gelu_forward(fchg, fch, NC * 4);
    k::matmul_forward(scratch_.data(), fchg, p + mo_.fcprojw, p + mo_.fcprojb, N, 4 * C, C);
    k::residual_forward(res3_.data() + l * NC, res2, scratch_.data(), NC);
  }
  if (++next_ == num_units()) phase_ = Phase::head;
}

template <class Real>
float Model<Real>::forward_head(const Real* p, const int* targets) {
  expect(phase_ == Phase::head || phase_ == Phase::backward_head, "forward_head");
  const int N = static_cast<int>(bt()), C = cfg_.channels, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
  if (targets) {
    check_tokens(targets, bt(), V, "targets");
    std::copy(targets, targets + bt(), targets_.begin());
  }
  // Only the first V rows of wte make logits: the padded rows never count.
  k::gemm(false, true, N, V, C, Real(1), lnf_.data(), C, p, C, Real(0), logits_.data(), Vp);
  k::softmax_ce_forward(logits_.data(), losses_.data(), targets ? targets_.data() : nullptr, N, V, Vp);
  have_targets_ = targets != nullptr;
  double sum = 0;
  if (targets)
    for (int i = 0; i < N; ++i) sum += losses_[i];
  loss_ = static_cast<float>(sum / N);
  phase_ = Phase::backward_head;
  return targets ? loss_ : 0.0f;
}

template <class Real>
void Model<Real>::backward_head(const Real* p, Real* g, float loss_scale) {
  expect(phase_ == Phase::backward_head, "backward_head");
  if (!have_targets_) throw std::logic_error("gpt2::Model::backward_head: the last forward_head had no targets");
  const int N = static_cast<int>(bt()), C = cfg_.channels, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
  // d(loss_scale * mean loss)/d(logits) = s * (probs - onehot), s = loss_scale / N; s goes
  // into the gemm alpha. dlnf = dlogits @ wte[:V];  dwte[:V] += dlogits^T @ lnf
  k::softmax_ce_backward(logits_.data(), targets_.data(), N, Vp);
  const Real s = static_cast<Real>(loss_scale) / N;
  k::gemm(false, false, N, C, V, s, logits_.data(), Vp, p, C, Real(0), dln_.data(), C);
  k::gemm(true, false, V, C, N, s, logits_.data(), Vp, lnf_.data(), C, Real(1), g, C);
  phase_ = Phase::backward;
  next_ = num_units() - 1;
}

template <class Real>
void Model<Real>::backward_unit(int u, const Real* p, Real* g) {
  expect(phase_ == Phase::backward && u == next_, "backward_unit");
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.num_heads, L = cfg_.num_layers;
  const int N = static_cast<int>(bt());
  const size_t NC = bt() * C;
  Real* dres = dres_.data();
  if (u == lnf_unit(cfg_)) {
    std::fill(dres_.begin(), dres_.end(), Real(0));
    k::layernorm_backward(dres, g + lnfw_off_, g + lnfb_off_, dln_.data(), res3_.data() + (L - 1) * NC,
                          p + lnfw_off_, lnf_mean_.data(), lnf_rstd_.data(), N, C);
  } else if (u == 0) {
    k::encoder_backward(g, g + wpe_off_, dres, inputs_.data(), B, T, C);
  } else if ((u - 1) % 2 == 0) {  // attention block: res2 = x + proj(attn(ln1(x)))
    const int l = (u - 1) / 2;
    const Real* ln1 = ln1_.data() + l * NC;
    const Real* qkv = qkv_.data() + l * NC * 3;
    const Real* atty = atty_.data() + l * NC;
    k::matmul_backward(datty_.data(), g + ao_.attprojw, g + ao_.attprojb, dres, atty, p + ao_.attprojw, N, C, C);
    std::fill(dqkv_.begin(), dqkv_.end(), Real(0));
    k::attention_backward(dqkv_.data(), datt_.data(), datty_.data(), qkv,
                          att_.data() + static_cast<size_t>(l) * B * NH * T * T, B, T, C, NH);
    k::matmul_backward(dln_.data(), g + ao_.qkvw, g + ao_.qkvb, dqkv_.data(), ln1, p + ao_.qkvw, N, C, 3 * C);
    k::layernorm_backward(dres, g + ao_.ln1w, g + ao_.ln1b, dln_.data(), layer_input(l), p + ao_.ln1w,
                          ln1_mean_.data() + l * bt(), ln1_rstd_.data() + l * bt(), N, C);
  } else {  // MLP block: res3 = res2 + fcproj(gelu(fc(ln2(res2))))
    const int l = (u - 2) / 2;
    const Real* ln2 = ln2_.data() + l * NC;
    const Real* fch = fch_.data() + l * NC * 4;
    const Real* fchg = fch_gelu_.data() + l * NC * 4;
    k::matmul_backward(dfch_.data(), g + mo_.fcprojw, g + mo_.fcprojb, dres, fchg, p + mo_.fcprojw, N, 4 * C, C);
    k::gelu_backward(dfch_.data(), fch, dfch_.data(), NC * 4);
    k::matmul_backward(dln_.data(), g + mo_.fcw, g + mo_.fcb, dfch_.data(), ln2, p + mo_.fcw, N, C, 4 * C);
    k::layernorm_backward(dres, g + mo_.ln2w, g + mo_.ln2b, dln_.data(), res2_.data() + l * NC, p + mo_.ln2w,
                          ln2_mean_.data() + l * bt(), ln2_rstd_.data() + l * bt(), N, C);
  }
  if (--next_ < 0) { phase_ = Phase::forward; next_ = 0; }
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
