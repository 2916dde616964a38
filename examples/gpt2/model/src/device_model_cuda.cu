// defines: gpt2::DeviceModel<tagc::exec::cuda> and the optimizer pieces on exec::cuda
// (explicit instantiations), with the cuBLAS gemm backend device_blas::Blas<exec::cuda>.
//
// Everything but the gemms is the code the CPU tests run (device_kernels.hpp functors,
// device_model_impl.hpp step logic), compiled here for the GPU. What a first GPU run
// must check, in this order (none of it can be run on the CPU-only machines):
//   1. the cuBLAS operand swap below (row-major -> column-major) on one rectangular,
//      transposed gemm against the host result;
//   2. DeviceModel<exec::cuda> vs DeviceModel<exec::host> on the test's tiny config: loss
//      and every gradient (the CPU test's tolerances, or TF32's when GPT2_CUDA_TF32 is on);
//   3. that nothing synchronizes per step except forward_head's loss and the two token
//      checks (nsys: no cudaStreamSynchronize between them).
#include <tagc/exec/cuda.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "device_blas.hpp"

#include <stdexcept>
#include <string>

namespace gpt2::device_blas {

namespace {
void cublas_check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("gpt2::DeviceModel: ") + call + " failed: " + cublasGetStatusName(s) +
                             " (" + cublasGetStatusString(s) + ")");
}
cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }
}  // namespace

template <>
class Blas<tagc::exec::cuda> {
 public:
  explicit Blas(const tagc::exec::cuda& exec) {
    cublas_check(cublasCreate(&handle_), "cublasCreate");
    try {
      cublas_check(cublasSetStream(handle_, exec.stream), "cublasSetStream");
    } catch (...) {
      cublasDestroy(handle_);
      throw;
    }
  }
  ~Blas() { cublasDestroy(handle_); }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Row-major C = op(A) @ op(B) is, read column-major, C^T = op(B)^T @ op(A)^T: cuBLAS
  // gets the operands swapped and M, N exchanged; the leading dimensions stay.
  void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) {
    cublas_check(cublasGemmEx(handle_, op(tb), op(ta), N, M, K, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta,
                              C, CUDA_R_32F, ldc, kCompute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
  void gemm_strided_batched(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                            long long strideA, const float* B, int ldb, long long strideB, float beta, float* C,
                            int ldc, long long strideC, int batch) {
    cublas_check(cublasGemmStridedBatchedEx(handle_, op(tb), op(ta), N, M, K, &alpha, B, CUDA_R_32F, ldb, strideB, A,
                                            CUDA_R_32F, lda, strideA, &beta, C, CUDA_R_32F, ldc, strideC, batch,
                                            kCompute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  }

 private:
  // fp32 in, fp32 out. -DGPT2_CUDA_TF32=ON (CMake option) lets the tensor cores round the
  // inputs to TF32 (10-bit mantissa, fp32 accumulate): several times the throughput on
  // A100/H100, at ~1e-3 relative error per product, as llm.c's fp32 CUDA trainer does.
#ifdef GPT2_CUDA_TF32
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F_FAST_TF32;
#else
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
#endif
  cublasHandle_t handle_ = nullptr;
};

}  // namespace gpt2::device_blas

#include "device_model_impl.hpp"

namespace gpt2 {
GPT2_INSTANTIATE_DEVICE_MODEL(tagc::exec::cuda)
}  // namespace gpt2
