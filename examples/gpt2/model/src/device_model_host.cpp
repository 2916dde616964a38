// defines: gpt2::DeviceModel<tagc::exec::host> and the optimizer pieces on exec::host
// (explicit instantiations), with the CBLAS gemm backend device_blas::Blas<exec::host>;
// the same on tagc::exec::host_portable, which launches with the GPU's shapes (one column
// per thread, one element per bias add), so the CPU test runs what a GPU runs.
#include <tagc/exec/host.hpp>

#include "device_blas.hpp"
#include "kernels.hpp"  // the CPU model's gemm splitter and BLAS setup

#include <omp.h>

#include <cstddef>

namespace gpt2::device_blas {

template <>
class Blas<tagc::exec::host> {
 public:
  // The CPU model's policy: BLAS single-threaded, our OpenMP threads split each gemm.
  explicit Blas(const tagc::exec::host&) { kernels::set_blas_single_threaded(); }

  void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) {
    kernels::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }

  // The batch members are small (attention: [T, hs] x [hs, T]), so the threads take
  // whole members instead of splitting each one.
  void gemm_strided_batched(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                            long long strideA, const float* B, int ldb, long long strideB, float beta, float* C,
                            int ldc, long long strideC, int batch) {
    const double flops = 2.0 * M * N * K * batch;
#pragma omp parallel for if (batch > 1 && flops >= 8e6)
    for (int i = 0; i < batch; ++i)
      kernels::gemm1(ta, tb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
  }
};

template <>
class Blas<tagc::exec::host_portable> : public Blas<tagc::exec::host> {
 public:
  using Blas<tagc::exec::host>::Blas;
};

}  // namespace gpt2::device_blas

#include "device_model_impl.hpp"

namespace gpt2 {
GPT2_INSTANTIATE_DEVICE_MODEL(tagc::exec::host)
GPT2_INSTANTIATE_DEVICE_MODEL(tagc::exec::host_portable)
}  // namespace gpt2
