#pragma once
// defines: tagc::detail::portable_residual<Residual, Exec> — the residual's
//          storage and its commit as a bulk launch of the single-source functor
//          (detail/index_kernels.hpp update_residual): g + residual recomputed per
//          entry, what was not delivered stays. What a GPU runs, and
//          exec::host_portable on a CPU.

#include <cstddef>
#include <cstdint>

#include "../core/status.hpp"
#include "index_kernels.hpp"
#include "launch.hpp"
#include "compress_handoff.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

template <class Residual, class Exec>
class portable_residual {
 public:
  status initialize(std::size_t length, Exec exec) {
    launch_ = {exec};
    residual_.assign(length, Residual(0.0f));
    return {};
  }
  std::size_t workspace_bytes() const { return buffer_bytes(residual_); }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(std::size_t length) { return length * sizeof(Residual); }
  Residual* data() { return raw(residual_); }
  const Residual* data() const { return raw(residual_); }
  std::size_t size() const { return residual_.size(); }
  // No acc buffer: the functors add g + residual where they read it.
  float* acc() { return nullptr; }

  template <class Wire>
  void commit(const commit_inputs& c) {
    launch_(residual_.size(), update_residual<Wire, Residual>{c.grad, data(), c.sender_check, c.retransmit, c.state,
                                                              c.counters, c.lay, c.wire_scale, c.wire_unscale,
                                                              c.seed});
  }

 private:
  launcher<Exec> launch_{};
  typename Exec::template vector<Residual> residual_;  // [length] error feedback
};

}  // namespace detail
TAGC_END_NAMESPACE
