#pragma once
// defines: gpt2::device_blas::Blas<Exec> — the gemm backend of DeviceModel, one
// specialization per execution space (declared here, defined next to the explicit
// instantiation that needs it):
//   Blas<tagc::exec::host>  src/device_model_host.cpp: CBLAS (the CPU model's gemm
//                           splitter from src/kernels.hpp: one slab per OpenMP thread)
//   Blas<tagc::exec::cuda>  src/device_model_cuda.cu: cuBLAS on exec.stream
// Private to gpt2_device_model.
//
// Interface, row-major like the CPU kernels (weights [out, in], out = inp @ W^T):
//   explicit Blas(const Exec&);                     // creates handles once; throws on failure
//   void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
//             const float* B, int ldb, float beta, float* C, int ldc);
//       C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C
//   void gemm_strided_batched(bool ta, bool tb, int M, int N, int K, float alpha,
//             const float* A, int lda, long long strideA, const float* B, int ldb,
//             long long strideB, float beta, float* C, int ldc, long long strideC, int batch);
//       the same for i in [0, batch) with A + i*strideA, B + i*strideB, C + i*strideC
// Every call is enqueued on the space (ordered with the Thrust launches on
// exec.policy()); errors are thrown as std::runtime_error naming the failing call.
namespace gpt2::device_blas {

template <class Exec>
class Blas;

}  // namespace gpt2::device_blas
