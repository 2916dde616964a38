#pragma once
// defines: the template definitions of gpt2::DeviceModel<Exec>, gpt2::adamw_update<Exec>
// and gpt2::sum_of_squares<Exec>. Included by the one translation unit per execution
// space that instantiates them (device_model_host.cpp, device_model_cuda.cu), after that
// unit has defined device_blas::Blas<Exec> and included the space's header.
//
// The step logic mirrors model.cpp line by line (same phases, same buffers, same
// kernels in the same order), so a difference between the two models in a test is a
// difference in a kernel, not in the plumbing. Differences from model.cpp:
//   * attention is three gemms per batch row (strided-batched over heads) around the two
//     softmax kernels, instead of the CPU model's fused loop over (b, h, t): the same
//     math, and what cuBLAS wants on a GPU;
//   * bias and LayerNorm weight gradients are summed over row chunks first, then over
//     the chunks (device_kernels.hpp says why), another summation order;
//   * inputs/targets live in Exec memory, so the token check is a find_if on the space
//     followed by one small copy back (a synchronization per check on a GPU).
// exp/tanh are the CPU model's polynomials (fast_math.hpp) on every space.
//
// Per space, only the launch shape differs (never the arithmetic or its order): on the
// host a loop below kHostParallelMin element-operations runs on the calling thread, as
// the CPU model's kernels do (on a loaded 2-core machine an OpenMP fork/join can cost a
// scheduler slice; at d2 every per-layer loop is below it), and column kernels give each
// thread a block of columns (kHostCols) instead of one.
#include "gpt2/call_order.hpp"
#include "gpt2/device_model.hpp"
#include "gpt2/tensor_offsets.hpp"

#include "device_blas.hpp"
#include "device_kernels.hpp"

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/find.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace gpt2 {

namespace device_detail {

// A status from tagc's space (synchronize, copies) as an exception naming what failed.
template <class Status>
void check_status(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string("gpt2::DeviceModel: ") + what + ": " + st.what());
}

}  // namespace device_detail

template <class Exec>
struct DeviceModel<Exec>::Impl {
  template <class T>
  using vec = typename Exec::template vector<T>;

  Config cfg;
  int B, T;
  Exec exec;
  device_blas::Blas<Exec> blas;
  std::vector<UnitInfo> units;
  std::vector<size_t> offsets;
  TensorOffsets at;  // where each tensor sits inside its unit
  CallOrder order;   // progress through the step sequence
  float loss = 0.0f;

  // Exec memory; shapes as model.hpp (per layer l at [l * size]).
  vec<int> inputs, targets;                 // [B,T]
  vec<float> encoded;                       // [B,T,C]
  vec<float> ln1, ln1_mean, ln1_rstd;       // [L,B,T,C], [L,B,T]
  vec<float> qkv;                           // [L,B,T,3C]
  vec<float> att;                           // [L,B,NH,T,T] softmax probabilities
  vec<float> atty;                          // [L,B,T,C]
  vec<float> res2;                          // [L,B,T,C]
  vec<float> ln2, ln2_mean, ln2_rstd;       // [L,B,T,C], [L,B,T]
  vec<float> fch, fch_gelu;                 // [L,B,T,4C]
  vec<float> res3;                          // [L,B,T,C]
  vec<float> lnf, lnf_mean, lnf_rstd;       // [B,T,C], [B,T]
  vec<float> logits;                        // [B,T,Vp] logits -> probs -> dlogits
  vec<float> losses;                        // [B,T]
  vec<float> dres, dln, datty, dqkv;        // [B,T,C] x3, [B,T,3C]
  vec<float> datt;                          // [B,NH,T,T] one layer's attention gradient
  vec<float> dfch;                          // [B,T,4C]
  vec<float> scratch;                       // [B,T,4C] forward scratch (attproj/fcproj out)
  vec<float> column_partials;               // [row_chunks(B*T), 4C] column-sum pass 1 (bias, LayerNorm grads)

  static void check_shape(const Config& c, int B, int T) {
    c.validate();
    if (B < 1) throw std::invalid_argument("gpt2::DeviceModel: batch size B (" + std::to_string(B) + ") must be >= 1");
    if (T < 1 || T > c.max_seq_len)
      throw std::invalid_argument("gpt2::DeviceModel: sequence length T (" + std::to_string(T) +
                                  ") must be in [1, max_seq_len=" + std::to_string(c.max_seq_len) + "]");
  }
  // Launch shapes per space (see the header comment). host_paths as tagc's stages read it:
  // exec::host_portable keeps the GPU's shapes on the CPU, so a test can run them.
  static constexpr bool host_shapes = [] {
    if constexpr (requires { Exec::host_paths; }) return !Exec::is_device && Exec::host_paths;
    else return false;
  }();
  static constexpr size_t kHostParallelMin = size_t(1) << 22;  // kernels.hpp's kParallelMin
  static constexpr int kHostCols = 64;                         // kernels.hpp's kColBlock
  static constexpr int column_width() { return host_shapes ? kHostCols : 1; }

  static const Config& checked(const Config& c, int B, int T) {
    check_shape(c, B, T);
    return c;
  }

  Impl(const Config& c, int B_, int T_, Exec e)
      : cfg(checked(c, B_, T_)), B(B_), T(T_), exec(e), blas(exec), units(gpt2::units(cfg)),
        offsets(unit_offsets(units)), order("gpt2::DeviceModel", gpt2::num_units(cfg)) {
    at = tensor_offsets(cfg, units);

    const size_t L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, N = bt();
    const size_t TT = static_cast<size_t>(T) * T;
    inputs.resize(N);
    targets.resize(N);
    encoded.resize(N * C);
    ln1.resize(L * N * C);
    ln1_mean.resize(L * N);
    ln1_rstd.resize(L * N);
    qkv.resize(L * N * 3 * C);
    att.resize(L * B * NH * TT);
    atty.resize(L * N * C);
    res2.resize(L * N * C);
    ln2.resize(L * N * C);
    ln2_mean.resize(L * N);
    ln2_rstd.resize(L * N);
    fch.resize(L * N * 4 * C);
    fch_gelu.resize(L * N * 4 * C);
    res3.resize(L * N * C);
    lnf.resize(N * C);
    lnf_mean.resize(N);
    lnf_rstd.resize(N);
    logits.resize(N * cfg.padded_vocab_size);
    losses.resize(N);
    dres.resize(N * C);
    dln.resize(N * C);
    datty.resize(N * C);
    dqkv.resize(N * 3 * C);
    datt.resize(B * NH * TT);
    dfch.resize(N * 4 * C);
    scratch.resize(N * 4 * C);
    // widest column sum: the fc bias (4C columns); LayerNorm's dw|db is 2C
    column_partials.resize(static_cast<size_t>(device_kernels::row_chunks(static_cast<int>(N))) * 4 * C);
    // resize value-initializes on either space; wait for it once here, so that no
    // later step can race with the allocation's fill kernels.
    device_detail::check_status(exec.synchronize(), "allocating activations");
  }

  size_t bt() const { return static_cast<size_t>(B) * T; }
  template <class T_>
  static T_* raw(vec<T_>& v) { return thrust::raw_pointer_cast(v.data()); }

  // One thread per index in [0, n) of functor f, on the space's stream/threads. `work` is
  // the element-operations per index: on the host, n * work below kHostParallelMin runs
  // serially on the calling thread (the loop over f inlines and vectorizes).
  template <class F>
  void launch(size_t n, const F& f, size_t work = 1) {
    if (!n) return;
    if constexpr (!Exec::is_device) {
      if (n * work < kHostParallelMin) {
        for (size_t i = 0; i < n; ++i) f(i);
        return;
      }
    }
    thrust::for_each_n(exec.policy(), thrust::counting_iterator<size_t>(0), n, f);
  }
  void zero(float* p, size_t n) {
    if constexpr (!Exec::is_device) {
      if (n < kHostParallelMin) {
        std::fill_n(p, n, 0.0f);
        return;
      }
    }
    thrust::fill_n(exec.policy(), p, n, 0.0f);
  }

  // Copies n token ids (Exec memory) into dst after checking them on the space: the
  // first id outside [0, V) is fetched to the host for the message.
  void take_tokens(const int* tok, vec<int>& dst, const char* what) {
    const size_t n = bt();
    const int V = cfg.vocab_size;
    if constexpr (!Exec::is_device) {  // B*T ids: a loop on the calling thread, no fork
      const int* bad = std::find_if(tok, tok + n, device_kernels::TokenOutOfRange{V});
      if (bad != tok + n)
        throw std::out_of_range(std::string("gpt2::DeviceModel: ") + what + "[" + std::to_string(bad - tok) +
                                "] = " + std::to_string(*bad) + " is outside [0, vocab_size=" + std::to_string(V) +
                                ")");
      std::copy_n(tok, n, raw(dst));
      return;
    }
    const int* bad = thrust::find_if(exec.policy(), tok, tok + n, device_kernels::TokenOutOfRange{V});
    if (bad != tok + n) {
      int value = 0;
      device_detail::check_status(exec.copy_to_host(bad, &value, 1), "reading a token id");
      throw std::out_of_range(std::string("gpt2::DeviceModel: ") + what + "[" + std::to_string(bad - tok) +
                              "] = " + std::to_string(value) + " is outside [0, vocab_size=" + std::to_string(V) +
                              ")");
    }
    thrust::copy_n(exec.policy(), tok, n, dst.begin());
  }

  float* layer_input(int l) { return l == 0 ? raw(encoded) : raw(res3) + static_cast<size_t>(l - 1) * bt() * cfg.channels; }

  // ---- layers (the kernels of src/kernels.hpp, as functor launches + gemms) ----------
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b) {
    launch(bt(), device_kernels::LayerNormForward{out, mean, rstd, inp, w, b, cfg.channels}, 4 * cfg.channels);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                          const float* mean, const float* rstd) {
    const int C = cfg.channels, N = static_cast<int>(bt()), chunks = device_kernels::row_chunks(N);
    const int cols = column_width();
    launch(bt(), device_kernels::LayerNormBackwardInput{dinp, dout, inp, w, mean, rstd, C}, 4 * C);
    launch(static_cast<size_t>(chunks) * device_kernels::column_blocks(C, cols),
           device_kernels::LayerNormParamsPartial{raw(column_partials), dout, inp, mean, rstd, N, C, cols},
           static_cast<size_t>(device_kernels::kRowsPerChunk) * 2 * cols);
    launch(2 * C, device_kernels::AddColumnPartials{dw, db, raw(column_partials), chunks, 2 * C, C}, chunks);
  }
  // out[N,OC] = inp[N,IC] @ W[OC,IC]^T + bias
  void matmul_forward(float* out, const float* inp, const float* W, const float* bias, int IC, int OC) {
    const int N = static_cast<int>(bt());
    blas.gemm(false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC);
    const int cols = host_shapes ? OC : 1;  // host: a row per thread
    launch(bt() * device_kernels::column_blocks(OC, cols), device_kernels::BiasAdd{out, bias, OC, cols}, cols);
  }
  // dinp = dout @ W (OVERWRITES); dW += dout^T @ inp; dbias += colsum(dout)
  void matmul_backward(float* dinp, float* dW, float* dbias, const float* dout, const float* inp, const float* W,
                       int IC, int OC) {
    const int N = static_cast<int>(bt());
    blas.gemm(false, false, N, IC, OC, 1.0f, dout, OC, W, IC, 0.0f, dinp, IC);
    blas.gemm(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
    const int chunks = device_kernels::row_chunks(N), cols = column_width();
    launch(static_cast<size_t>(chunks) * device_kernels::column_blocks(OC, cols),
           device_kernels::BiasGradPartial{raw(column_partials), dout, N, OC, cols},
           static_cast<size_t>(device_kernels::kRowsPerChunk) * cols);
    launch(OC, device_kernels::AddColumnPartials{dbias, dbias, raw(column_partials), chunks, OC, OC}, chunks);
  }

  // Causal self-attention of one layer. Per batch row b, the heads are one strided batch:
  // head h of q/k/v is the [T, hs] block at column h*hs of qkv (leading dimension 3C),
  // of out at column h*hs (leading dimension C); att[b, h] is [T, T]. The (b, h) pairs
  // are not one stride apart (b jumps T*3C, h jumps hs), hence B calls rather than one;
  // llm.c instead permutes q, k, v into [B, NH, T, hs] copies first.
  float attention_scale() const {
    const int hs = cfg.channels / cfg.num_heads;
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  }
  void attention_forward(float* out, float* a, const float* qkv_l) {
    const int C = cfg.channels, NH = cfg.num_heads, hs = C / NH, C3 = 3 * C;
    const long long TT = static_cast<long long>(T) * T;
    for (int b = 0; b < B; ++b) {
      const float* q = qkv_l + static_cast<size_t>(b) * T * C3;
      float* ab = a + b * NH * TT;
      // pre-softmax scores, scaled: att = scale * q @ k^T (the full square; the softmax
      // zeroes what lies above the diagonal)
      blas.gemm_strided_batched(false, true, T, T, hs, attention_scale(), q, C3, hs, q + C, C3, hs, 0.0f, ab, T, TT,
                                NH);
    }
    launch(static_cast<size_t>(B) * NH * T, device_kernels::CausalSoftmaxForward{a, T}, 8 * static_cast<size_t>(T));
    for (int b = 0; b < B; ++b) {
      const float* v = qkv_l + static_cast<size_t>(b) * T * C3 + 2 * C;
      blas.gemm_strided_batched(false, false, T, hs, T, 1.0f, a + b * NH * TT, T, TT, v, C3, hs, 0.0f,
                                out + static_cast<size_t>(b) * T * C, C, hs, NH);
    }
  }
  // dqkv OVERWRITTEN (all three of q, k, v are written by beta = 0 gemms).
  void attention_backward(float* dqkv_, float* datt_, const float* dout, const float* qkv_l, const float* a) {
    const int C = cfg.channels, NH = cfg.num_heads, hs = C / NH, C3 = 3 * C;
    const long long TT = static_cast<long long>(T) * T;
    for (int b = 0; b < B; ++b) {
      const size_t row0 = static_cast<size_t>(b) * T;
      const float* d = dout + row0 * C;
      const float* v = qkv_l + row0 * C3 + 2 * C;
      // through out = att @ v: datt = dout @ v^T, dv = att^T @ dout
      blas.gemm_strided_batched(false, true, T, T, hs, 1.0f, d, C, hs, v, C3, hs, 0.0f, datt_ + b * NH * TT, T, TT,
                                NH);
      blas.gemm_strided_batched(true, false, T, hs, T, 1.0f, a + b * NH * TT, T, TT, d, C, hs, 0.0f,
                                dqkv_ + row0 * C3 + 2 * C, C3, hs, NH);
    }
    launch(static_cast<size_t>(B) * NH * T, device_kernels::CausalSoftmaxBackward{datt_, a, T, attention_scale()},
           4 * static_cast<size_t>(T));
    for (int b = 0; b < B; ++b) {
      const size_t row0 = static_cast<size_t>(b) * T;
      const float* q = qkv_l + row0 * C3;
      const float* dpre = datt_ + b * NH * TT;
      // through scores = scale * q @ k^T (scale already in dpre): dq = dpre @ k, dk = dpre^T @ q
      blas.gemm_strided_batched(false, false, T, hs, T, 1.0f, dpre, T, TT, q + C, C3, hs, 0.0f, dqkv_ + row0 * C3, C3,
                                hs, NH);
      blas.gemm_strided_batched(true, false, T, hs, T, 1.0f, dpre, T, TT, q, C3, hs, 0.0f, dqkv_ + row0 * C3 + C, C3,
                                hs, NH);
    }
  }

  // ---- the step sequence (model.cpp) ---------------------------------------------------
  void forward_unit(int u, const float* p, const int* in) {
    order.check_forward_unit(u);
    const int C = cfg.channels, NH = cfg.num_heads, L = cfg.num_layers;
    const size_t NC = bt() * C;
    if (u == 0) {
      if (!in) throw std::invalid_argument("gpt2::DeviceModel::forward_unit(0): inputs must not be null");
      take_tokens(in, inputs, "inputs");
      launch(NC, device_kernels::EncoderForward{raw(encoded), raw(inputs), p, p + at.wpe, T, C});
    } else if (u == lnf_unit(cfg)) {
      layernorm_forward(raw(lnf), raw(lnf_mean), raw(lnf_rstd), raw(res3) + (L - 1) * NC, p + at.lnfw, p + at.lnfb);
    } else if ((u - 1) % 2 == 0) {  // attention block of layer l
      const int l = (u - 1) / 2;
      float* l1 = raw(ln1) + l * NC;
      float* q = raw(qkv) + l * NC * 3;
      float* y = raw(atty) + l * NC;
      layernorm_forward(l1, raw(ln1_mean) + l * bt(), raw(ln1_rstd) + l * bt(), layer_input(l), p + at.attn.ln1w,
                        p + at.attn.ln1b);
      matmul_forward(q, l1, p + at.attn.qkvw, p + at.attn.qkvb, C, 3 * C);
      attention_forward(y, raw(att) + static_cast<size_t>(l) * B * NH * T * T, q);
      matmul_forward(raw(scratch), y, p + at.attn.attprojw, p + at.attn.attprojb, C, C);
      launch(NC, device_kernels::ResidualForward{raw(res2) + l * NC, layer_input(l), raw(scratch)});
    } else {  // MLP block of layer l
      const int l = (u - 2) / 2;
      float* l2 = raw(ln2) + l * NC;
      float* h = raw(fch) + l * NC * 4;
      float* hg = raw(fch_gelu) + l * NC * 4;
      const float* r2 = raw(res2) + l * NC;
      layernorm_forward(l2, raw(ln2_mean) + l * bt(), raw(ln2_rstd) + l * bt(), r2, p + at.mlp.ln2w, p + at.mlp.ln2b);
      matmul_forward(h, l2, p + at.mlp.fcw, p + at.mlp.fcb, C, 4 * C);
      launch(NC * 4, device_kernels::GeluForward{hg, h}, 8);
      matmul_forward(raw(scratch), hg, p + at.mlp.fcprojw, p + at.mlp.fcprojb, 4 * C, C);
      launch(NC, device_kernels::ResidualForward{raw(res3) + l * NC, r2, raw(scratch)});
    }
    order.forward_unit_done();
  }

  float forward_head(const float* p, const int* tg) {
    order.check_forward_head();
    const int N = static_cast<int>(bt()), C = cfg.channels, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    if (tg) take_tokens(tg, targets, "targets");
    // Only the first V rows of wte make logits: the padded rows never count.
    blas.gemm(false, true, N, V, C, 1.0f, raw(lnf), C, p, C, 0.0f, raw(logits), Vp);
    launch(bt(), device_kernels::SoftmaxCrossEntropyForward{raw(logits), raw(losses), tg ? raw(targets) : nullptr, V, Vp},
           8 * static_cast<size_t>(V));
    order.forward_head_done(tg != nullptr);
    if (!tg) return 0.0f;
    // the mean in double, as the CPU model; reduce returns to the host, i.e. waits. On the
    // host, in the CPU model's order (B*T values: no fork).
    double sum = 0;
    if constexpr (!Exec::is_device) {
      for (int i = 0; i < N; ++i) sum += raw(losses)[i];
    } else {
      sum = thrust::transform_reduce(exec.policy(), raw(losses), raw(losses) + N, device_kernels::ToDouble{}, 0.0,
                                     thrust::plus<double>());
    }
    loss = static_cast<float>(sum / N);
    return loss;
  }

  void backward_head(const float* p, float* g, float loss_scale) {
    order.check_backward_head();
    const int N = static_cast<int>(bt()), C = cfg.channels, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    // d(loss_scale * mean loss)/d(logits) = s * (probs - onehot), s = loss_scale / N in the
    // gemm alpha. dlnf = dlogits @ wte[:V];  dwte[:V] += dlogits^T @ lnf
    launch(bt(), device_kernels::SoftmaxCrossEntropyBackward{raw(logits), raw(targets), Vp});
    const float s = loss_scale / N;
    blas.gemm(false, false, N, C, V, s, raw(logits), Vp, p, C, 0.0f, raw(dln), C);
    blas.gemm(true, false, V, C, N, s, raw(logits), Vp, raw(lnf), C, 1.0f, g, C);
    order.backward_head_done();
  }

  void backward_unit(int u, const float* p, float* g) {
    order.check_backward_unit(u);
    const int C = cfg.channels, NH = cfg.num_heads, L = cfg.num_layers;
    const size_t NC = bt() * C;
    float* dr = raw(dres);
    if (u == lnf_unit(cfg)) {
      zero(dr, NC);
      layernorm_backward(dr, g + at.lnfw, g + at.lnfb, raw(dln), raw(res3) + (L - 1) * NC, p + at.lnfw,
                         raw(lnf_mean), raw(lnf_rstd));
    } else if (u == 0) {
      const int cols = column_width();
      launch(device_kernels::column_blocks(C, cols),
             device_kernels::EncoderBackwardTokens{g, dr, raw(inputs), static_cast<int>(bt()), C, cols},
             bt() * cols);
      launch(static_cast<size_t>(T) * C, device_kernels::EncoderBackwardPositions{g + at.wpe, dr, B, T, C}, B);
    } else if ((u - 1) % 2 == 0) {  // attention block: res2 = x + proj(attn(ln1(x)))
      const int l = (u - 1) / 2;
      const float* l1 = raw(ln1) + l * NC;
      const float* q = raw(qkv) + l * NC * 3;
      const float* y = raw(atty) + l * NC;
      matmul_backward(raw(datty), g + at.attn.attprojw, g + at.attn.attprojb, dr, y, p + at.attn.attprojw, C, C);
      attention_backward(raw(dqkv), raw(datt), raw(datty), q, raw(att) + static_cast<size_t>(l) * B * NH * T * T);
      matmul_backward(raw(dln), g + at.attn.qkvw, g + at.attn.qkvb, raw(dqkv), l1, p + at.attn.qkvw, C, 3 * C);
      layernorm_backward(dr, g + at.attn.ln1w, g + at.attn.ln1b, raw(dln), layer_input(l), p + at.attn.ln1w,
                         raw(ln1_mean) + l * bt(), raw(ln1_rstd) + l * bt());
    } else {  // MLP block: res3 = res2 + fcproj(gelu(fc(ln2(res2))))
      const int l = (u - 2) / 2;
      const float* l2 = raw(ln2) + l * NC;
      const float* h = raw(fch) + l * NC * 4;
      const float* hg = raw(fch_gelu) + l * NC * 4;
      matmul_backward(raw(dfch), g + at.mlp.fcprojw, g + at.mlp.fcprojb, dr, hg, p + at.mlp.fcprojw, 4 * C, C);
      launch(NC * 4, device_kernels::GeluBackward{raw(dfch), h, raw(dfch)}, 8);
      matmul_backward(raw(dln), g + at.mlp.fcw, g + at.mlp.fcb, raw(dfch), l2, p + at.mlp.fcw, C, 4 * C);
      layernorm_backward(dr, g + at.mlp.ln2w, g + at.mlp.ln2b, raw(dln), raw(res2) + l * NC, p + at.mlp.ln2w,
                         raw(ln2_mean) + l * bt(), raw(ln2_rstd) + l * bt());
    }
    order.backward_unit_done();
  }
};

template <class Exec>
DeviceModel<Exec>::DeviceModel(const Config& cfg, int B, int T, Exec exec)
    : impl_(std::make_unique<Impl>(cfg, B, T, exec)) {}
template <class Exec>
DeviceModel<Exec>::~DeviceModel() = default;

template <class Exec>
const Config& DeviceModel<Exec>::config() const { return impl_->cfg; }
template <class Exec>
int DeviceModel<Exec>::batch() const { return impl_->B; }
template <class Exec>
int DeviceModel<Exec>::seq_len() const { return impl_->T; }
template <class Exec>
int DeviceModel<Exec>::num_units() const { return static_cast<int>(impl_->units.size()); }
template <class Exec>
const std::vector<UnitInfo>& DeviceModel<Exec>::unit_infos() const { return impl_->units; }
template <class Exec>
const Exec& DeviceModel<Exec>::exec() const { return impl_->exec; }

template <class Exec>
void DeviceModel<Exec>::forward_unit(int u, const float* unit_params, const int* inputs) {
  impl_->forward_unit(u, unit_params, inputs);
}
template <class Exec>
float DeviceModel<Exec>::forward_head(const float* embed_params, const int* targets) {
  return impl_->forward_head(embed_params, targets);
}
template <class Exec>
void DeviceModel<Exec>::backward_head(const float* embed_params, float* embed_grads, float loss_scale) {
  impl_->backward_head(embed_params, embed_grads, loss_scale);
}
template <class Exec>
void DeviceModel<Exec>::backward_unit(int u, const float* unit_params, float* unit_grads) {
  impl_->backward_unit(u, unit_params, unit_grads);
}
template <class Exec>
const float* DeviceModel<Exec>::probs() const {
  if (!impl_->order.after_forward_head())
    throw std::logic_error("gpt2::DeviceModel::probs: no probabilities now; they exist from forward_head until "
                           "backward_head (which turns them into dlogits)");
  return Impl::raw(impl_->logits);
}
template <class Exec>
void DeviceModel<Exec>::copy_probs(int b, int t, float* out) const {
  const float* p = probs();
  if (b < 0 || b >= impl_->B || t < 0 || t >= impl_->T)
    throw std::out_of_range("gpt2::DeviceModel::copy_probs: position (b=" + std::to_string(b) + ", t=" +
                            std::to_string(t) + ") is outside [0, B=" + std::to_string(impl_->B) + ") x [0, T=" +
                            std::to_string(impl_->T) + ")");
  const size_t row = static_cast<size_t>(b) * impl_->T + static_cast<size_t>(t);
  device_detail::check_status(
      impl_->exec.copy_to_host(p + row * impl_->cfg.padded_vocab_size, out, static_cast<size_t>(impl_->cfg.vocab_size)),
      "copying probabilities to the host");
}
template <class Exec>
float DeviceModel<Exec>::forward(const float* params, const int* inputs, const int* targets) {
  for (int u = 0; u < num_units(); ++u) forward_unit(u, params + impl_->offsets[u], u == 0 ? inputs : nullptr);
  return forward_head(params, targets);
}
template <class Exec>
void DeviceModel<Exec>::backward(const float* params, float* grads, float loss_scale) {
  backward_head(params, grads, loss_scale);
  for (int u = num_units() - 1; u >= 0; --u) backward_unit(u, params + impl_->offsets[u], grads + impl_->offsets[u]);
}

template <class Exec>
void adamw_update(const Exec& exec, float* params, const float* grads, float* m, float* v, std::size_t n,
                  const AdamW& o, int t) {
  if (t < 1) throw std::invalid_argument("gpt2::adamw_update: step t (" + std::to_string(t) + ") must be >= 1");
  if (n == 0) return;
  // bias corrections on the host, exactly as optim.cpp computes them
  const float bc1 = 1.0f - std::pow(o.beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(o.beta2, static_cast<float>(t));
  thrust::for_each_n(exec.policy(), thrust::counting_iterator<std::size_t>(0), n,
                     device_kernels::AdamWStep{params, grads, m, v, o.beta1, o.beta2, o.lr, o.eps, o.weight_decay,
                                               bc1, bc2});
}

template <class Exec>
double sum_of_squares(const Exec& exec, const float* x, std::size_t n) {
  if (n == 0) return 0.0;
  return thrust::transform_reduce(exec.policy(), x, x + n, device_kernels::SquareToDouble{}, 0.0,
                                  thrust::plus<double>());
}

// One line per space: the class and the two optimizer pieces.
#define GPT2_INSTANTIATE_DEVICE_MODEL(EXEC)                                                                   \
  template class DeviceModel<EXEC>;                                                                           \
  template void adamw_update<EXEC>(const EXEC&, float*, const float*, float*, float*, std::size_t,            \
                                   const AdamW&, int);                                                        \
  template double sum_of_squares<EXEC>(const EXEC&, const float*, std::size_t);

}  // namespace gpt2
