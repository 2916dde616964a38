#pragma once
// defines: gpt2::device_kernels — the element-wise and row kernels of GPT-2 as
// TAGC_HOST_DEVICE functors, one call per output element, row or column.
//
// Private to gpt2_device_model. DeviceModel launches each functor with
// thrust::for_each_n(exec.policy(), counting_iterator(0), n, f): on exec::host that is an
// OpenMP loop, on exec::cuda a kernel on the stream. The numerics are those of the CPU
// kernels (src/kernels.hpp), written once for both: fp32 throughout, except the
// LayerNorm rstd (double, as the CPU model) and the loss sum (double, in DeviceModel).
//
// Row reductions (LayerNorm, the two softmaxes) run one thread per row. That is
// deterministic and good enough on a CPU; on a GPU it leaves bandwidth on the table: a
// row of C = 768 floats (or V = 50257 logits) read by one thread is serial, and the 32
// threads of a warp read 32 different rows. The GPU version would use one block (or
// warp) per row with cub::BlockReduce / warp shuffles for the mean, variance, max and
// sum. Not done in this first version: a block-cooperative kernel has no counterpart on
// Thrust's OpenMP system, so the CPU tests could no longer run the code the GPU runs
// (it needs a second, GPU-only kernel checked against these on a GPU machine).
//
// Column reductions over the N rows (bias and LayerNorm weight gradients) run in two
// deterministic passes instead of one thread per column: partial sums over chunks of
// kRowsPerChunk rows (one thread per (chunk, column), adjacent threads on adjacent
// columns, so a warp's reads coalesce), then one thread per column adding the chunks in
// order. With C = 768 and N = 8192 that is 49k threads instead of 768. The token scatter
// of the embedding backward stays one thread per column (a token may repeat within any
// chunk; atomics would make it non-deterministic).
//
// Column kernels take `cols`, the adjacent columns one thread owns: 1 on a GPU (adjacent
// threads on adjacent columns, so a warp's reads coalesce), a block on the host (one
// thread walks a contiguous stretch of each row, which vectorizes; DeviceModel picks it per
// space). Each column is still summed over the same rows in the same order, so the result
// does not depend on cols. Likewise the transcendental functions are fast_math's (the CPU
// model's too), which vectorize on the host.
//
// Conventions as the CPU kernels: activations row-major, N = B*T rows; backward kernels
// ACCUMULATE (+=) into parameter gradients and into dinp unless a comment says otherwise.
#include <tagc/core/config.hpp>

#include "fast_math.hpp"

#include <cmath>
#include <cstddef>
#include <math.h>

namespace gpt2::device_kernels {

using std::size_t;

// ---- embeddings ------------------------------------------------------------------
// out[bt, c] = wte[tok[bt], c] + wpe[t, c]; one thread per element of out [N, C].
struct EncoderForward {
  float* out;
  const int* tok;
  const float* wte;
  const float* wpe;
  int T, C;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    const size_t bt = i / C, c = i % C;
    const size_t t = bt % T;
    out[i] = wte[static_cast<size_t>(tok[bt]) * C + c] + wpe[t * C + c];
  }
};

// Columns [c0, c1) of block `blk` when each thread owns `cols` of W columns.
struct ColumnBlock {
  int c0, c1;
  TAGC_HOST_DEVICE ColumnBlock(size_t blk, int cols, int W)
      : c0(static_cast<int>(blk) * cols), c1(c0 + cols < W ? c0 + cols : W) {}
};
TAGC_HOST_DEVICE inline int column_blocks(int W, int cols) { return (W + cols - 1) / cols; }

// dwte[tok[bt], c] += dout[bt, c]. One thread per block of `cols` channels, walking the
// rows in order: a token may repeat, so a thread must own columns, not rows (the CPU
// kernel's split, which also keeps the sums deterministic). column_blocks(C, cols) threads.
struct EncoderBackwardTokens {
  float* dwte;
  const float* dout;
  const int* tok;
  int N, C, cols;
  TAGC_HOST_DEVICE void operator()(size_t blk) const {
    const ColumnBlock cb(blk, cols, C);
    for (int bt = 0; bt < N; ++bt) {
      float* w = dwte + static_cast<size_t>(tok[bt]) * C;
      const float* d = dout + static_cast<size_t>(bt) * C;
      for (int c = cb.c0; c < cb.c1; ++c) w[c] += d[c];
    }
  }
};

// dwpe[t, c] += sum_b dout[b, t, c]; one thread per element of dwpe[:T].
struct EncoderBackwardPositions {
  float* dwpe;
  const float* dout;
  int B, T, C;
  TAGC_HOST_DEVICE void operator()(size_t i) const {  // i = t * C + c
    float s = dwpe[i];
    for (int b = 0; b < B; ++b) s += dout[static_cast<size_t>(b) * T * C + i];
    dwpe[i] = s;
  }
};

// ---- column sums in two passes (see the header comment) ------------------------------
constexpr int kRowsPerChunk = 128;
inline int row_chunks(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

// What pass-1 thread idx of row_chunks(N) * column_blocks(W, cols) sums: rows [i0, i1) of
// row chunk `chunk`, in columns cb.
struct ChunkCell {
  int chunk, i0, i1;
  ColumnBlock cb;
  TAGC_HOST_DEVICE ChunkCell(size_t idx, int N, int W, int cols)
      : chunk(static_cast<int>(idx / column_blocks(W, cols))),
        i0(chunk * kRowsPerChunk),
        i1(i0 + kRowsPerChunk < N ? i0 + kRowsPerChunk : N),
        cb(idx % column_blocks(W, cols), cols, W) {}
};

// Pass 2: dst[j] += sum over chunks of partial[chunk * W + j], chunks in order. Columns
// [0, split) go to dst_lo, [split, W) to dst_hi (LayerNorm: dw then db); one thread per j.
struct AddColumnPartials {
  float* dst_lo;
  float* dst_hi;
  const float* partial;
  int chunks, W, split;
  TAGC_HOST_DEVICE void operator()(size_t j) const {
    float s = 0;
    for (int k = 0; k < chunks; ++k) s += partial[static_cast<size_t>(k) * W + j];
    if (static_cast<int>(j) < split) dst_lo[j] += s;
    else dst_hi[j - split] += s;
  }
};

// ---- LayerNorm (eps 1e-5) ----------------------------------------------------------
// One thread per row (see the header comment for the block-per-row GPU version).
struct LayerNormForward {
  float* out;
  float* mean;
  float* rstd;
  const float* inp;
  const float* w;
  const float* b;
  int C;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    const float* x = inp + i * C;
    float m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    float v = 0;
    for (int c = 0; c < C; ++c) {
      const float d = x[c] - m;
      v += d * d;
    }
    v /= C;
    // in double as the CPU kernel does (once per row: free even on a GPU)
    const float s = static_cast<float>(1.0 / ::sqrt(static_cast<double>(v) + 1e-5));
    float* o = out + i * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[i] = m;
    rstd[i] = s;
  }
};

// dinp[i, :] += d(LayerNorm)/d(inp) . dout[i, :]; one thread per row.
struct LayerNormBackwardInput {
  float* dinp;
  const float* dout;
  const float* inp;
  const float* w;
  const float* mean;
  const float* rstd;
  int C;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    const float* d = dout + i * C;
    const float* x = inp + i * C;
    const float m = mean[i], s = rstd[i];
    float dn_mean = 0, dn_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const float dn = w[c] * d[c];
      dn_mean += dn;
      dn_norm_mean += dn * (x[c] - m) * s;
    }
    dn_mean /= C;
    dn_norm_mean /= C;
    float* di = dinp + i * C;
    for (int c = 0; c < C; ++c) {
      const float norm = (x[c] - m) * s;
      di[c] += (w[c] * d[c] - dn_mean - norm * dn_norm_mean) * s;
    }
  }
};

// Pass 1 of dw[c] += sum_i dout[i,c] * xhat[i,c], db[c] += sum_i dout[i,c]: one thread
// per (chunk, block of cols columns) writes partial[chunk * 2C + c] (dw) and
// partial[chunk * 2C + C + c] (db); row_chunks(N) * column_blocks(C, cols) threads.
struct LayerNormParamsPartial {
  float* partial;
  const float* dout;
  const float* inp;
  const float* mean;
  const float* rstd;
  int N, C, cols;
  TAGC_HOST_DEVICE void operator()(size_t idx) const {
    const ChunkCell cell(idx, N, C, cols);
    const ColumnBlock& cb = cell.cb;
    float* pw = partial + static_cast<size_t>(cell.chunk) * 2 * C;
    float* pb = pw + C;
    for (int c = cb.c0; c < cb.c1; ++c) pw[c] = pb[c] = 0.0f;
    for (int i = cell.i0; i < cell.i1; ++i) {
      const float* d = dout + static_cast<size_t>(i) * C;
      const float* x = inp + static_cast<size_t>(i) * C;
      const float m = mean[i], s = rstd[i];
      for (int c = cb.c0; c < cb.c1; ++c) {
        pw[c] += d[c] * (x[c] - m) * s;
        pb[c] += d[c];
      }
    }
  }
};

// ---- linear-layer helpers (the products themselves are gemm calls) ------------------
// out[i, c] += bias[c] over [N, OC]; one thread per (row, block of cols columns):
// N * column_blocks(OC, cols) threads (cols = 1: one per element).
struct BiasAdd {
  float* out;
  const float* bias;
  int OC, cols;
  TAGC_HOST_DEVICE void operator()(size_t idx) const {
    const int nblk = column_blocks(OC, cols);
    const ColumnBlock cb(idx % nblk, cols, OC);
    float* o = out + (idx / nblk) * OC;
    for (int c = cb.c0; c < cb.c1; ++c) o[c] += bias[c];
  }
};

// Pass 1 of dbias[c] += sum_i dout[i, c]: one thread per (chunk, block of cols columns)
// writes partial[chunk * OC + c]; row_chunks(N) * column_blocks(OC, cols) threads.
struct BiasGradPartial {
  float* partial;
  const float* dout;
  int N, OC, cols;
  TAGC_HOST_DEVICE void operator()(size_t idx) const {
    const ChunkCell cell(idx, N, OC, cols);
    const ColumnBlock& cb = cell.cb;
    float* p = partial + static_cast<size_t>(cell.chunk) * OC;
    for (int c = cb.c0; c < cb.c1; ++c) p[c] = 0.0f;
    for (int i = cell.i0; i < cell.i1; ++i) {
      const float* d = dout + static_cast<size_t>(i) * OC;
      for (int c = cb.c0; c < cb.c1; ++c) p[c] += d[c];
    }
  }
};

// ---- GELU, tanh approximation (GPT-2's) --------------------------------------------
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

struct GeluForward {
  float* out;
  const float* inp;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + fast_math::tanh_fast(kGeluScale * (x + 0.044715f * x * x * x)));
  }
};

// dinp = gelu'(inp) * dout (OVERWRITES dinp; dinp may alias dout: each thread reads its
// own element before writing it).
struct GeluBackward {
  float* dinp;
  const float* inp;
  const float* dout;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    const float x = inp[i];
    const float th = fast_math::tanh_fast(kGeluScale * (x + 0.044715f * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = g * dout[i];
  }
};

struct ResidualForward {
  float* out;
  const float* a;
  const float* b;
  TAGC_HOST_DEVICE void operator()(size_t i) const { out[i] = a[i] + b[i]; }
};

// ---- causal attention softmax --------------------------------------------------------
// att [B,NH,T,T] holds scale * q.k (written by a gemm) on entry and the probabilities on
// exit, zero above the diagonal (the att @ v gemm and the backward read the full square).
// One thread per row (b, h, t).
struct CausalSoftmaxForward {
  float* att;
  int T;
  TAGC_HOST_DEVICE void operator()(size_t row) const {
    const int t = static_cast<int>(row % T);
    float* a = att + row * T;
    float maxv = a[0];
    for (int t2 = 1; t2 <= t; ++t2) maxv = a[t2] > maxv ? a[t2] : maxv;
    float sum = 0;
    for (int t2 = 0; t2 <= t; ++t2) {
      a[t2] = fast_math::exp_fast(a[t2] - maxv);
      sum += a[t2];
    }
    const float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
    for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
  }
};

// In place: datt (d loss / d probabilities) -> d loss / d(q.k), i.e. through the softmax
// and the 1/sqrt(hs) scale: d[t2] = scale * a[t2] * (d[t2] - sum_j a[j] d[j]) for t2 <= t,
// 0 above the diagonal (so the dq / dk gemms can read the full square).
struct CausalSoftmaxBackward {
  float* datt;
  const float* att;
  int T;
  float scale;
  TAGC_HOST_DEVICE void operator()(size_t row) const {
    const int t = static_cast<int>(row % T);
    const float* a = att + row * T;
    float* d = datt + row * T;
    float dot = 0;
    for (int t2 = 0; t2 <= t; ++t2) dot += a[t2] * d[t2];
    for (int t2 = 0; t2 <= t; ++t2) d[t2] = a[t2] * (d[t2] - dot) * scale;
    for (int t2 = t + 1; t2 < T; ++t2) d[t2] = 0.0f;
  }
};

// ---- softmax + cross-entropy over the first V of Vp columns ----------------------------
// In place: logits -> probabilities (columns >= V untouched); losses[i] = -log p[target]
// when targets != nullptr. One thread per row of V ~ 5e4: the row reduction a GPU
// version most needs a block for (see the header comment).
struct SoftmaxCrossEntropyForward {
  float* logits;
  float* losses;
  const int* targets;
  int V, Vp;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    float* p = logits + i * Vp;
    float maxv = p[0];
    GPT2_SIMD_REDUCE(max, maxv)
    for (int v = 1; v < V; ++v) maxv = p[v] > maxv ? p[v] : maxv;
    float sum = 0;  // per-lane partial sums on the host (as the CPU model): fine for V ~ 5e4
    GPT2_SIMD_REDUCE(+, sum)
    for (int v = 0; v < V; ++v) {
      p[v] = fast_math::exp_fast(p[v] - maxv);
      sum += p[v];
    }
    const float inv = 1.0f / sum;
    GPT2_SIMD
    for (int v = 0; v < V; ++v) p[v] *= inv;
    if (targets) losses[i] = -::logf(p[targets[i]]);
  }
};

// In place: probabilities -> (p - onehot(target)); the caller folds loss_scale / N into
// the gemm alpha, so this touches N entries, not [N, V]. One thread per row.
struct SoftmaxCrossEntropyBackward {
  float* probs;
  const int* targets;
  int Vp;
  TAGC_HOST_DEVICE void operator()(size_t i) const { probs[i * Vp + targets[i]] -= 1.0f; }
};

// ---- token check -----------------------------------------------------------------------
struct TokenOutOfRange {
  int V;
  TAGC_HOST_DEVICE bool operator()(int tok) const { return tok < 0 || tok >= V; }
};

// ---- optimizer ----------------------------------------------------------------------
// AdamW, optim.cpp's formula; bc1 = 1 - beta1^t and bc2 = 1 - beta2^t come from the host.
struct AdamWStep {
  float* p;
  const float* g;
  float* m;
  float* v;
  float b1, b2, lr, eps, wd, bc1, bc2;
  TAGC_HOST_DEVICE void operator()(size_t i) const {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (::sqrtf(vi / bc2) + eps) + wd * p[i]);
  }
};

struct SquareToDouble {
  TAGC_HOST_DEVICE double operator()(float x) const { return static_cast<double>(x) * x; }
};
struct ToDouble {
  TAGC_HOST_DEVICE double operator()(float x) const { return static_cast<double>(x); }
};

}  // namespace gpt2::device_kernels
