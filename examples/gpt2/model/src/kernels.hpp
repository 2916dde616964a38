#pragma once
// defines: the GPT-2 layer kernels (forward and backward), templated on the scalar type.
// Private to gpt2_model. Matmuls go to BLAS (row-major, weights [out, in] as llm.c:
// out = inp @ W^T); everything else is an OpenMP loop. Backward kernels ACCUMULATE (+=)
// into parameter gradients and into input gradients unless a comment says otherwise.
#include "fast_math.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace gpt2::kernels {

// ---- BLAS dispatch ---------------------------------------------------------------
// One thread pool: BLAS runs single-threaded (set_blas_single_threaded, called by the
// Model constructor) and gemm() splits a large product into one slab per OpenMP thread.
// A second pool (OpenBLAS's pthreads) would compete with OpenMP's spinning workers for
// the same two cores after every parallel region.
inline void set_blas_single_threaded() {
#ifdef GPT2_HAVE_OPENBLAS
  openblas_set_num_threads(1);
#endif
}

inline void gemm1(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
              alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm1(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
                  const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
              alpha, A, lda, B, ldb, beta, C, ldc);
}

// Products below this many flops run on one thread. A fork/join is cheap on idle cores but on
// a loaded machine every barrier can wait a whole scheduler slice for the thread that lost
// its core (measured on the shared 2-core VM at load ~11: splitting d2's 8-33 MFLOP layer
// products doubled the step's CPU time). 64 MFLOP is ~1 ms on one core.
constexpr double kGemmSplitMinFlops = 64e6;
// Products above this are cut into kChunksPerThread chunks per thread, handed out
// dynamically: when one thread is descheduled the other takes its chunks instead of
// waiting at the barrier. Only where that is cheap: every chunk packs the whole operand
// that is not split again (so it must be small, <= kFineRepackMax elements) and a chunk
// narrower than kFineChunkMin runs the micro-kernel less efficiently. d2: the LM head's
// logits and dwte products (3.3 GFLOP, split along the vocabulary), not dlnf (it would
// repack all of wte per chunk); d12: also the qkv/fc products and their weight gradients.
constexpr double kGemmFineSplitFlops = 256e6;
constexpr int kChunksPerThread = 4;
constexpr int kFineChunkMin = 256;
constexpr double kFineRepackMax = 1 << 20;

// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, row-major. Splits the larger of M, N
// into slabs (multiples of 64) across the OpenMP threads; small products stay serial. Each
// element of C is computed by exactly one slab, so the result does not depend on the split.
template <class R>
void gemm(bool ta, bool tb, int M, int N, int K, R alpha, const R* A, int lda, const R* B, int ldb, R beta,
          R* C, int ldc) {
  const int nt = omp_get_max_threads();
  const double flops = 2.0 * M * N * K;
  const bool split_m = M >= N;
  const int dim = split_m ? M : N;
  if (nt <= 1 || flops < kGemmSplitMinFlops || dim < 128) {
    gemm1(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const double repacked = static_cast<double>(K) * (split_m ? N : M);  // the operand not split
  const bool fine = flops >= kGemmFineSplitFlops && repacked <= kFineRepackMax &&
                    dim / (nt * kChunksPerThread) >= kFineChunkMin;
  const int per_thread = fine ? kChunksPerThread : 1;
  const int slabs = std::max(1, std::min(nt * per_thread, dim / 64));
  const int step = ((dim + slabs - 1) / slabs + 63) / 64 * 64;  // ceil, then a multiple of 64
  const int nslab = (dim + step - 1) / step;                    // rounding up may leave fewer
#pragma omp parallel for num_threads(std::min(nt, nslab)) schedule(dynamic, 1)
  for (int s = 0; s < nslab; ++s) {
    const int d0 = s * step, d1 = std::min(dim, d0 + step);
    if (split_m) {  // rows of op(A) and of C
      const R* As = ta ? A + d0 : A + static_cast<size_t>(d0) * lda;
      gemm1(ta, tb, d1 - d0, N, K, alpha, As, lda, B, ldb, beta, C + static_cast<size_t>(d0) * ldc, ldc);
    } else {        // columns of op(B) and of C
      const R* Bs = tb ? B + static_cast<size_t>(d0) * ldb : B + d0;
      gemm1(ta, tb, M, d1 - d0, K, alpha, A, lda, Bs, ldb, beta, C + d0, ldc);
    }
  }
}

// Channel blocks for reductions over rows (bias / LayerNorm weight gradients): each
// thread owns a block of columns and walks the rows, so no atomics and rows stay contiguous.
constexpr int kColBlock = 64;

// Below this many element-operations (~1 ms) a loop runs on one thread: a fork/join costs
// more than the loop, and on a loaded 2-core machine every barrier can wait a whole
// scheduler slice for the thread that lost its core. At d2 every per-layer loop is below
// it (only the softmax over the vocabulary runs in parallel, and AdamW in optim.cpp); at d12
// attention and GELU are above.
constexpr size_t kParallelMin = size_t(1) << 22;
inline bool par(size_t work) { return work >= kParallelMin; }

// exp / tanh in float: the shared polynomial (fast_math.hpp, also what DeviceModel's
// functors call), so loops over them vectorize. Double stays libm's.
using fast_math::exp_fast;
using fast_math::tanh_fast;
inline double exp_fast(double x) { return std::exp(x); }
inline double tanh_fast(double y) { return std::tanh(y); }

// ---- embeddings ------------------------------------------------------------------
template <class R>
void encoder_forward(R* out, const int* tok, const R* wte, const R* wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2) if (par(size_t(B) * T * C))
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      R* o = out + (static_cast<size_t>(b) * T + t) * C;
      const R* we = wte + static_cast<size_t>(tok[b * T + t]) * C;
      const R* pe = wpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) o[c] = we[c] + pe[c];
    }
}

template <class R>
void encoder_backward(R* dwte, R* dwpe, const R* dout, const int* tok, int B, int T, int C) {
  // Column blocks: a token may repeat, so a thread owns channels, not rows.
  const int nblk = (C + kColBlock - 1) / kColBlock;
#pragma omp parallel for if (par(size_t(B) * T * C))
  for (int blk = 0; blk < nblk; ++blk) {
    const int c0 = blk * kColBlock, c1 = std::min(C, c0 + kColBlock);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const R* d = dout + (static_cast<size_t>(b) * T + t) * C;
        R* we = dwte + static_cast<size_t>(tok[b * T + t]) * C;
        R* pe = dwpe + static_cast<size_t>(t) * C;
        for (int c = c0; c < c1; ++c) { we[c] += d[c]; pe[c] += d[c]; }
      }
  }
}

// ---- LayerNorm -------------------------------------------------------------------
template <class R>
void layernorm_forward(R* out, R* mean, R* rstd, const R* inp, const R* w, const R* b, int N, int C) {
  constexpr double eps = 1e-5;
#pragma omp parallel for if (par(size_t(N) * C * 4))
  for (int i = 0; i < N; ++i) {
    const R* x = inp + static_cast<size_t>(i) * C;
    R m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    R v = 0;
    for (int c = 0; c < C; ++c) { R d = x[c] - m; v += d * d; }
    v /= C;
    const R s = static_cast<R>(1.0 / std::sqrt(static_cast<double>(v) + eps));
    R* o = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <class R>
void layernorm_backward(R* dinp, R* dw, R* db, const R* dout, const R* inp, const R* w,
                        const R* mean, const R* rstd, int N, int C) {
#pragma omp parallel for if (par(size_t(N) * C * 4))
  for (int i = 0; i < N; ++i) {
    const R* d = dout + static_cast<size_t>(i) * C;
    const R* x = inp + static_cast<size_t>(i) * C;
    const R m = mean[i], s = rstd[i];
    R dn_mean = 0, dn_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const R dn = w[c] * d[c];
      dn_mean += dn;
      dn_norm_mean += dn * (x[c] - m) * s;
    }
    dn_mean /= C;
    dn_norm_mean /= C;
    R* di = dinp + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) {
      const R norm = (x[c] - m) * s;
      di[c] += (w[c] * d[c] - dn_mean - norm * dn_norm_mean) * s;
    }
  }
  const int nblk = (C + kColBlock - 1) / kColBlock;
#pragma omp parallel for if (par(size_t(N) * C * 2))
  for (int blk = 0; blk < nblk; ++blk) {
    const int c0 = blk * kColBlock, c1 = std::min(C, c0 + kColBlock);
    for (int i = 0; i < N; ++i) {
      const R* d = dout + static_cast<size_t>(i) * C;
      const R* x = inp + static_cast<size_t>(i) * C;
      const R m = mean[i], s = rstd[i];
      for (int c = c0; c < c1; ++c) {
        dw[c] += d[c] * (x[c] - m) * s;
        db[c] += d[c];
      }
    }
  }
}

// ---- linear layers ---------------------------------------------------------------
// out[N,OC] = inp[N,IC] @ W[OC,IC]^T (+ bias)
template <class R>
void matmul_forward(R* out, const R* inp, const R* W, const R* bias, int N, int IC, int OC) {
  gemm(false, true, N, OC, IC, R(1), inp, IC, W, IC, R(0), out, OC);
  if (bias) {
#pragma omp parallel for if (par(size_t(N) * OC))
    for (int i = 0; i < N; ++i) {
      R* o = out + static_cast<size_t>(i) * OC;
      for (int c = 0; c < OC; ++c) o[c] += bias[c];
    }
  }
}

// dinp[N,IC] = dout @ W (OVERWRITES dinp); dW[OC,IC] += dout^T @ inp; dbias += colsum(dout)
template <class R>
void matmul_backward(R* dinp, R* dW, R* dbias, const R* dout, const R* inp, const R* W, int N, int IC, int OC) {
  gemm(false, false, N, IC, OC, R(1), dout, OC, W, IC, R(0), dinp, IC);
  gemm(true, false, OC, IC, N, R(1), dout, OC, inp, IC, R(1), dW, IC);
  if (dbias) {
    const int nblk = (OC + kColBlock - 1) / kColBlock;
#pragma omp parallel for if (par(size_t(N) * OC))
    for (int blk = 0; blk < nblk; ++blk) {
      const int c0 = blk * kColBlock, c1 = std::min(OC, c0 + kColBlock);
      for (int i = 0; i < N; ++i) {
        const R* d = dout + static_cast<size_t>(i) * OC;
        for (int c = c0; c < c1; ++c) dbias[c] += d[c];
      }
    }
  }
}

// ---- attention -------------------------------------------------------------------
// qkv [B,T,3C] (q | k | v, heads contiguous inside each), att [B,NH,T,T] (softmax
// probabilities, zero above the diagonal), out [B,T,C].
template <class R>
void attention_forward(R* out, R* att, const R* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const R scale = static_cast<R>(1.0 / std::sqrt(static_cast<double>(hs)));
#pragma omp parallel for collapse(2) if (par(size_t(B) * T * T * C))
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        const R* q = qkv + (static_cast<size_t>(b) * T + t) * C3 + h * hs;
        R* a = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        R maxv = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const R* k = qkv + (static_cast<size_t>(b) * T + t2) * C3 + C + h * hs;
          R s = 0;
#pragma omp simd reduction(+ : s)
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          s *= scale;
          a[t2] = s;
          maxv = std::max(maxv, s);
        }
        R sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) { a[t2] = exp_fast(a[t2] - maxv); sum += a[t2]; }
        const R inv = R(1) / sum;
        for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
        for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0;
        R* o = out + (static_cast<size_t>(b) * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const R* v = qkv + (static_cast<size_t>(b) * T + t2) * C3 + 2 * C + h * hs;
          const R p = a[t2];
          for (int i = 0; i < hs; ++i) o[i] += p * v[i];
        }
      }
    }
}

// dqkv must be zeroed by the caller (accumulated here). scratch: [B*NH*T].
template <class R>
void attention_backward(R* dqkv, R* scratch, const R* dout, const R* qkv, const R* att, int B, int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const R scale = static_cast<R>(1.0 / std::sqrt(static_cast<double>(hs)));
#pragma omp parallel for collapse(2) if (par(size_t(B) * T * T * C))
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      R* da = scratch + (static_cast<size_t>(b) * NH + h) * T;
      for (int t = 0; t < T; ++t) {
        const R* a = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        const R* d = dout + (static_cast<size_t>(b) * T + t) * C + h * hs;
        // through out = att @ v
        R dot = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const R* v = qkv + (static_cast<size_t>(b) * T + t2) * C3 + 2 * C + h * hs;
          R* dv = dqkv + (static_cast<size_t>(b) * T + t2) * C3 + 2 * C + h * hs;
          R s = 0;
#pragma omp simd reduction(+ : s)
          for (int i = 0; i < hs; ++i) { s += d[i] * v[i]; dv[i] += a[t2] * d[i]; }
          da[t2] = s;
          dot += a[t2] * s;
        }
        // through softmax, then the scaled q.k
        const R* q = qkv + (static_cast<size_t>(b) * T + t) * C3 + h * hs;
        R* dq = dqkv + (static_cast<size_t>(b) * T + t) * C3 + h * hs;
        for (int t2 = 0; t2 <= t; ++t2) {
          const R dpre = a[t2] * (da[t2] - dot) * scale;
          const R* k = qkv + (static_cast<size_t>(b) * T + t2) * C3 + C + h * hs;
          R* dk = dqkv + (static_cast<size_t>(b) * T + t2) * C3 + C + h * hs;
          for (int i = 0; i < hs; ++i) { dq[i] += dpre * k[i]; dk[i] += dpre * q[i]; }
        }
      }
    }
}

// ---- GELU (tanh approximation) ---------------------------------------------------
template <class R>
void gelu_forward(R* out, const R* inp, size_t n) {
  const R s = static_cast<R>(std::sqrt(2.0 / M_PI));
#pragma omp parallel for simd if (par(n * 8))
  for (size_t i = 0; i < n; ++i) {
    const R x = inp[i];
    out[i] = R(0.5) * x * (R(1) + tanh_fast(s * (x + R(0.044715) * x * x * x)));
  }
}

// dinp = gelu'(inp) * dout (OVERWRITES dinp; dinp may alias dout)
template <class R>
void gelu_backward(R* dinp, const R* inp, const R* dout, size_t n) {
  const R s = static_cast<R>(std::sqrt(2.0 / M_PI));
#pragma omp parallel for simd if (par(n * 8))
  for (size_t i = 0; i < n; ++i) {
    const R x = inp[i];
    const R th = tanh_fast(s * (x + R(0.044715) * x * x * x));
    const R sech2 = R(1) - th * th;
    const R g = R(0.5) * (R(1) + th) + R(0.5) * x * sech2 * s * (R(1) + R(3 * 0.044715) * x * x);
    dinp[i] = g * dout[i];
  }
}

template <class R>
void residual_forward(R* out, const R* a, const R* b, size_t n) {
#pragma omp parallel for simd if (par(n))
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// ---- softmax + cross-entropy over the first V of Vp columns ----------------------
// In place: logits -> probabilities. losses[i] = -log p[target] when targets != nullptr.
template <class R>
void softmax_ce_forward(R* logits, R* losses, const int* targets, int N, int V, int Vp) {
#pragma omp parallel for if (par(size_t(N) * V * 8))
  for (int i = 0; i < N; ++i) {
    R* p = logits + static_cast<size_t>(i) * Vp;
    R maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
    for (int v = 0; v < V; ++v) maxv = p[v] > maxv ? p[v] : maxv;
    R sum = 0;  // the simd reduction keeps many partial sums: fine in float for V ~ 5e4
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; ++v) { p[v] = exp_fast(p[v] - maxv); sum += p[v]; }
    const R inv = R(1) / sum;
#pragma omp simd
    for (int v = 0; v < V; ++v) p[v] *= inv;
    if (targets) losses[i] = -std::log(p[targets[i]]);
  }
}

// In place: probabilities -> (p - onehot(target)). The caller folds scale/N into the
// gemm alpha, so this touches N entries instead of the whole [N,V] matrix.
template <class R>
void softmax_ce_backward(R* probs, const int* targets, int N, int Vp) {
  for (int i = 0; i < N; ++i) probs[static_cast<size_t>(i) * Vp + targets[i]] -= R(1);
}

}  // namespace gpt2::kernels
