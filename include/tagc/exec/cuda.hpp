#pragma once
// defines: tagc::exec::cuda (the GPU execution space: a stream),
//          TAGC_CUDA_TRY, tagc::detail::cuda_status.
//
// An execution space is what a Reducer is instantiated on. Both spaces have the
// same shape, so the single-source functors run unchanged on either:
//   policy()       the Thrust execution policy to launch algorithms with
//   vector<T>      an owning buffer in that space's memory
//   synchronize()  wait for everything launched so far; errors come back as a status
//   copy_to_host / copy_from_host, is_device
// exec::cuda launches with thrust::cuda::par_nosync.on(stream): no algorithm
// synchronizes behind the caller's back, so a step can be enqueued end to end
// and overlapped with the communication stream (see comm/nccl.hpp).
//
// The error helpers need only the CUDA runtime header, so comm/nccl.hpp can use
// them from a host compiler; the execution space itself needs nvcc.
//
// Note: inside namespace tagc::exec the name `cuda` is this struct, so code there
// spells libcu++ as `::cuda::std::...`.

#include "../core/status.hpp"

#if defined(__CUDACC__) || __has_include(<cuda_runtime.h>)
#  include <cuda_runtime.h>

#  include <cstddef>
#  include <string>

TAGC_BEGIN_NAMESPACE
namespace detail {
// "cudaStreamSynchronize(s): an illegal memory access was encountered (cudaErrorIllegalAddress)"
inline status cuda_status(cudaError_t e, std::string_view expr, errc code = errc::internal) {
  std::string m(expr);
  m += ": ";
  m += cudaGetErrorString(e);
  m += " (";
  m += cudaGetErrorName(e);
  m += ")";
  return {code, std::move(m)};
}
}  // namespace detail
TAGC_END_NAMESPACE

// Return a status from the enclosing function when a CUDA runtime call fails:
// `TAGC_CUDA_TRY(cudaStreamSynchronize(stream));`. The message names the call.
#  define TAGC_CUDA_TRY(...)                                                               \
    do {                                                                                   \
      if (const ::cudaError_t tagc_ce_ = (__VA_ARGS__); tagc_ce_ != ::cudaSuccess)         \
        return ::tagc::detail::cuda_status(tagc_ce_, #__VA_ARGS__);                        \
    } while (0)
#endif  // CUDA runtime available

#if defined(__CUDACC__)
#  include <thrust/execution_policy.h>
#  include <thrust/system/cuda/execution_policy.h>
#  include <thrust/system/cuda/vector.h>

TAGC_BEGIN_NAMESPACE
namespace exec {

struct cuda {
  static constexpr bool is_device = true;

  // Work is launched on this stream; 0 is the legacy default stream.
  cudaStream_t stream = nullptr;

  // par_nosync: Thrust neither synchronizes nor checks errors after a launch,
  // so the host runs ahead; synchronize() reports what went wrong.
  auto policy() const { return thrust::cuda::par_nosync.on(stream); }

  // Device memory of the CUDA system (not thrust::device_vector, whose system
  // follows THRUST_DEVICE_SYSTEM and is OpenMP in host builds). Allocate these
  // when a plan is made, never in the step loop: construction synchronizes.
  template <class T>
  using vector = thrust::cuda::vector<T>;

  status synchronize() const {
    TAGC_CUDA_TRY(cudaStreamSynchronize(stream));
    // A launch error that par_nosync did not check shows up here as well.
    TAGC_CUDA_TRY(cudaGetLastError());
    return {};
  }

  // Copies between device memory and the host, ordered on the stream; they
  // complete before returning (as exec::host's do). Not for the step loop.
  template <class T>
  status copy_to_host(const T* src, T* dst, std::size_t n) const {
    return copy_and_wait(src, dst, n * sizeof(T), cudaMemcpyDeviceToHost);
  }
  template <class T>
  status copy_from_host(const T* src, T* dst, std::size_t n) const {
    return copy_and_wait(src, dst, n * sizeof(T), cudaMemcpyHostToDevice);
  }

 private:  // a member function only: the struct stays an aggregate (exec::cuda{stream})
  status copy_and_wait(const void* src, void* dst, std::size_t bytes, cudaMemcpyKind kind) const {
    if (bytes == 0) return {};
    TAGC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    TAGC_CUDA_TRY(cudaStreamSynchronize(stream));
    return {};
  }
};

}  // namespace exec
TAGC_END_NAMESPACE
#endif  // __CUDACC__
