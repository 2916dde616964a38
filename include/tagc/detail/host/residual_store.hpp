#pragma once
// defines: tagc::detail::host::residual_store<Residual> — the residual's storage
//          and its commit on the host (exec::host), the portable commit's
//          results bit for bit (tests/test_paths.cpp): acc = g + residual is
//          written once per call (by the select's pass 0, into acc()); a float
//          residual *becomes* the acc buffer (swapped in, no copy) after its kept
//          entries are settled, over the kept list when there is one; a bf16
//          residual is stored from acc, rounded stochastically.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../core/status.hpp"
#include "../../exec/host.hpp"
#include "../host_compress.hpp"
#include "../launch.hpp"
#include "../compress_handoff.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

template <class Residual>
class residual_store {
 public:
  template <class T> using vector = exec::host::vector<T>;

  template <class Exec>
  status initialize(std::size_t length, const Exec&) {
    residual_.assign(length, Residual(0.0f));
    acc_.assign(length, 0.0f);
    return {};
  }
  // The residual and the acc buffer.
  std::size_t workspace_bytes() const { return buffer_bytes(residual_) + buffer_bytes(acc_); }
  // What initialize allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(std::size_t length) { return length * (sizeof(Residual) + sizeof(float)); }
  Residual* data() { return raw(residual_); }
  const Residual* data() const { return raw(residual_); }
  std::size_t size() const { return residual_.size(); }
  // Where this call's acc = g + residual goes (the select stage writes it).
  float* acc() { return raw(acc_); }

  template <class Wire>
  void commit(const commit_inputs& c) {
    const host_commit_entry what{c.sender_check, c.retransmit, c.lay};
    const std::uint32_t threshold = c.state->threshold;
    const std::size_t n = residual_.size();
    if constexpr (std::is_same_v<Residual, float>) {
      host_commit_float<Wire>(raw(acc_), c.kept.positions, c.kept.values, c.kept.count, c.kept.listed, n, threshold,
                              what, c.wire_scale, c.wire_unscale, c.counters);
      residual_.swap(acc_);
    } else {
      host_commit_residual(host_commit_stored<Wire, Residual>{raw(acc_), data(), threshold, what, c.wire_scale,
                                                              c.wire_unscale, c.seed, nullptr},
                           n, c.counters);
    }
  }

 private:
  vector<Residual> residual_;  // [length] error feedback
  vector<float> acc_;          // [length] g + residual of the current call
};

}  // namespace detail::host
TAGC_END_NAMESPACE
