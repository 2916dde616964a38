#pragma once
// defines: tagc::exec::host — the CPU execution space (Thrust's OpenMP system),
//          and tagc::exec::host_portable — the same space restricted to the
//          portable single-source path (the code a GPU runs), for tests that
//          hold the host's own paths to it.
//
// An execution space is what the Reducer is parameterised on besides its
// policies: where its workspaces live (vector<T>) and how kernels are launched
// (policy()). exec::cuda (exec/cuda.hpp) has the same shape for a CUDA stream,
// so the functors in detail/ run unchanged on either. Where a stage has an
// implementation for the host system besides the portable one (as Thrust and
// CUB dispatch one algorithm per system), `host_paths` selects it
// (detail::uses_host_paths; the compress side's table: detail/compress_dispatch.hpp).

#include <cstddef>
#include <cstring>

#include <thrust/system/omp/execution_policy.h>
#include <thrust/system/omp/vector.h>

#include "../core/status.hpp"

TAGC_BEGIN_NAMESPACE
namespace exec {

struct host {
  template <class T> using vector = thrust::omp::vector<T>;
  static constexpr bool is_device = false;
  // The stages' host implementations (detail/host/*.hpp): acc = g + residual
  // computed once per call, chunk-private histograms, the sketch from the kept
  // list. Same results as the portable path, bit for bit (tests/test_paths.cpp).
  static constexpr bool host_paths = true;
  // Tuning: a CPU thread builds a whole sketch row (1024 lanes) per call, so the
  // per-block hashing is shared by all lanes. Measured: 0.77 s -> see bench/ for
  // the figure at 4M elements.
  static constexpr std::size_t sketch_lanes_per_call = 1024;

  auto policy() const { return thrust::omp::par; }
  status synchronize() const { return {}; }

  // Copies between the space's memory and the host; they complete before returning.
  template <class T> status copy_to_host(const T* src, T* dst, std::size_t n) const {
    if (n) std::memcpy(dst, src, n * sizeof(T));
    return {};
  }
  template <class T> status copy_from_host(const T* src, T* dst, std::size_t n) const {
    if (n) std::memcpy(dst, src, n * sizeof(T));
    return {};
  }
};

// The host system running only the portable single-source functors.
struct host_portable : host {
  static constexpr bool host_paths = false;
};

}  // namespace exec
TAGC_END_NAMESPACE
