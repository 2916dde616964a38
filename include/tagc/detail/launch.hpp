#pragma once
// defines: tagc::detail::launcher<Exec> (run a functor over [0, n) on an
//          execution space, or inline on the host when n is small),
//          tagc::detail::raw, tagc::detail::buffer_bytes.
//
// Single source: the same functor runs on every execution space. On the host a
// launch below host_inline_below iterations runs inline on the calling thread:
// an OpenMP fork/join costs more than the work (and a scheduler slice when the
// cores are shared). Sums on the host are OpenMP reductions, not
// thrust::transform_reduce, whose OpenMP backend allocates its partial sums on
// every call (the step path allocates nothing: tests/test_step_alloc.cpp).
// Sums on a device space go through sum_workspace (below): CUB into storage sized
// at initialize, where thrust::transform_reduce would cudaMalloc / cudaFree its
// temporaries on every call.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>

#include "../core/config.hpp"
#include "../core/status.hpp"

#if defined(__CUDACC__)
#  include <cub/device/device_reduce.cuh>
#  include <cuda/std/functional>

#  include "../exec/cuda.hpp"  // TAGC_CUDA_TRY
#endif

TAGC_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t host_inline_below = std::size_t(1) << 15;

// A failed collective's status, naming the reducer's phase it failed in.
inline status in_phase(status s, std::string_view phase) {
  if (s.ok()) return s;
  return {s.code(), std::string(phase) + ": " + s.message()};
}

template <class V> auto raw(V& v) { return thrust::raw_pointer_cast(v.data()); }
template <class V> auto raw(const V& v) { return thrust::raw_pointer_cast(v.data()); }
// Bytes a workspace buffer holds.
template <class V> std::size_t buffer_bytes(const V& v) { return v.size() * sizeof(typename V::value_type); }

inline auto index_range(std::size_t n) {
  return std::pair{thrust::counting_iterator<std::size_t>(0), thrust::counting_iterator<std::size_t>(n)};
}

template <class Exec>
struct launcher {
  Exec exec{};

  template <class F> void operator()(std::size_t n, F f) const {
    if (n == 0) return;
    if constexpr (!Exec::is_device) {
      if (n < host_inline_below) {
        for (std::size_t i = 0; i < n; ++i) f(i);
        return;
      }
    }
    auto [b, e] = index_range(n);
    thrust::for_each(exec.policy(), b, e, f);
  }
  // Host spaces: sum of f(i) over [0, n) in T, an OpenMP reduction (floating sums
  // may differ from a device's in the last bits: used for statistics only).
  template <class T, class F> T sum_of(std::size_t n, F f) const {
    static_assert(!Exec::is_device, "a device sum goes through sum_workspace (its storage is sized at initialize)");
    T s = T(0);
#pragma omp parallel for schedule(static) reduction(+ : s) if (n >= host_inline_below)
    for (std::size_t i = 0; i < n; ++i) s += f(i);
    return s;
  }
};

// Sums of f(i) over [0, n) (T: 8 bytes) that allocate nothing per call: on a
// device, CUB's temporary storage and the result's slot are sized by reserve()
// at initialize, for the largest n and each functor type summed; on the host,
// the launcher's OpenMP reduction (nothing to reserve).
template <class Exec>
class sum_workspace {
 public:
  template <class T> using vector = typename Exec::template vector<T>;

  template <class T, class F> status reserve([[maybe_unused]] const Exec& exec, [[maybe_unused]] std::size_t most,
                                             [[maybe_unused]] F f) {
    static_assert(sizeof(T) == sizeof(unsigned long long));
#if defined(__CUDACC__)
    if constexpr (Exec::is_device) {
      std::size_t bytes = 0;
      if (result_.empty()) result_.assign(1, 0ull);
      TAGC_CUDA_TRY(cub::DeviceReduce::TransformReduce(nullptr, bytes, thrust::counting_iterator<std::size_t>(0),
                                                       reinterpret_cast<T*>(raw(result_)), most, ::cuda::std::plus<T>{},
                                                       f, T(0), exec.stream));
      if (bytes > temp_.size()) temp_.assign(bytes, 0);
    }
#endif
    return {};
  }
  std::size_t workspace_bytes() const { return buffer_bytes(temp_) + buffer_bytes(result_); }

  // out = the sum; a device error comes back as the status.
  template <class T, class F> status sum(const launcher<Exec>& launch, std::size_t n, F f, T& out) const {
    out = T(0);
    if (n == 0) return {};
    if constexpr (!Exec::is_device) {
      out = launch.template sum_of<T>(n, f);
    } else {
#if defined(__CUDACC__)
      std::size_t bytes = temp_.size();
      T* result = reinterpret_cast<T*>(raw(result_));
      TAGC_CUDA_TRY(cub::DeviceReduce::TransformReduce(raw(temp_), bytes, thrust::counting_iterator<std::size_t>(0),
                                                       result, n, ::cuda::std::plus<T>{}, f, T(0), launch.exec.stream));
      TAGC_TRY(launch.exec.copy_to_host(result, &out, 1));
#endif
    }
    return {};
  }
  // The sum, for statistics: a device error reads 0 here and shows at the
  // space's synchronize() or next copy.
  template <class T, class F> T sum(const launcher<Exec>& launch, std::size_t n, F f) const {
    T out = T(0);
    (void)sum(launch, n, f, out);
    return out;
  }

 private:
  mutable vector<unsigned char> temp_;        // CUB's temporary storage (device spaces)
  mutable vector<unsigned long long> result_;  // [1] the sum (device spaces)
};

}  // namespace detail
TAGC_END_NAMESPACE
