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
// On CUDA these sums still take Thrust's temporary storage; they serve the
// statistics only. The decoder's per-call counts use CUB reductions into its own
// workspace instead (detail/portable_decode.hpp).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include "../core/config.hpp"
#include "../core/status.hpp"

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
  // sum of f(i) over [0, n)
  template <class F> unsigned long long sum(std::size_t n, F f) const { return sum_of<unsigned long long>(n, f); }
  // sum of f(i) over [0, n) in T (the host adds in a fixed order per chunk; floating sums
  // may differ from the device's in the last bits: used for statistics only)
  template <class T, class F> T sum_of(std::size_t n, F f) const {
    if (n == 0) return T(0);
    if constexpr (!Exec::is_device) {
      T s = T(0);
#pragma omp parallel for schedule(static) reduction(+ : s) if (n >= host_inline_below)
      for (std::size_t i = 0; i < n; ++i) s += f(i);
      return s;
    } else {
      auto [b, e] = index_range(n);
      return thrust::transform_reduce(exec.policy(), b, e, f, T(0), thrust::plus<T>());
    }
  }
};

}  // namespace detail
TAGC_END_NAMESPACE
