#pragma once
// defines: tagc::stage::ResidualStore<Residual, Exec> — the error-feedback
//          stage: the residual's storage (float, or bf16 rounded stochastically),
//          its update after the exchange (residual = acc where nothing was
//          delivered, the wire rounding where something was), and the estimates
//          an owner owes back (decode.hpp).

#include <cstdint>
#include <type_traits>
#include <vector>

#include "../core/status.hpp"
#include "../detail/decode_kernels.hpp"
#include "../detail/index_kernels.hpp"
#include "../detail/host_compress.hpp"
#include "../detail/launch.hpp"
#include "../detail/select_kernels.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Residual, class Exec>
class ResidualStore {
  static_assert(detail::entry_unresolved == 1, "owe_estimates_stored (detail/select_kernels.hpp) spells it as 1");

 public:
  using residual_t = Residual;
  template <class T> using vector = typename Exec::template vector<T>;
  static constexpr bool host_paths = detail::uses_host_paths<Exec>;

  static status can_implement(const reducer_arguments&) { return {}; }
  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    length_ = p.lay.length;
    residual_.assign(length_, residual_t(0.0f));
    if constexpr (host_paths) acc_.assign(length_, 0.0f);
    return {};
  }
  // The residual itself (residual_bytes()) plus, on host paths, the acc buffer.
  std::size_t workspace_bytes() const { return detail::buffer_bytes(residual_) + detail::buffer_bytes(acc_); }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    return p.lay.length * (sizeof(residual_t) + (host_paths ? sizeof(float) : 0));
  }
  std::size_t residual_bytes() const { return detail::buffer_bytes(residual_); }
  // Host paths: where this call's acc = g + residual goes (nullptr elsewhere).
  float* acc() { return host_paths ? detail::raw(acc_) : nullptr; }

  residual_t* data() { return detail::raw(residual_); }
  const residual_t* data() const { return detail::raw(residual_); }
  std::size_t size() const { return residual_.size(); }

  // After the exchange (cannot fail): residual = what was not delivered. `retransmit`:
  // the owners' bitmaps of unresolved entries, or nullptr.
  // Host paths: from acc; a float residual *becomes* the acc buffer (swapped in,
  // no copy) after its kept entries are settled.
  template <class Wire>
  void commit(const call_view<Residual>& c, const std::uint8_t* retransmit) {
    if constexpr (host_paths) {
      const detail::host_commit_entry what{c.sender_check, retransmit, c.lay};
      const std::uint32_t threshold = c.state->threshold;
      if constexpr (std::is_same_v<residual_t, float>) {
        detail::host_commit_float<Wire>(detail::raw(acc_), c.kept, c.kept_values, c.kept_count, c.kept_listed,
                                        length_, threshold, what, c.wire_scale, c.wire_unscale, c.counters);
        residual_.swap(acc_);
      } else {
        detail::host_commit_residual(detail::host_commit_stored<Wire, residual_t>{detail::raw(acc_), data(), threshold,
                                                                                  what, c.wire_scale, c.wire_unscale,
                                                                                  c.seed, nullptr},
                                     length_, c.counters);
      }
      return;
    }
    launch_(length_, detail::update_residual<Wire, residual_t>{c.grad, c.residual, c.sender_check, retransmit, c.state,
                                                               c.counters, c.lay, c.wire_scale, c.wire_unscale, c.seed});
  }

  // The owner's estimates go into its residual with the opposite sign.
  void owe_estimates(const std::uint8_t* entry_state, const float* out, std::size_t first, std::size_t shard_size,
                     std::uint32_t seed) {
    if constexpr (std::is_same_v<residual_t, float>)
      launch_(shard_size, detail::owe_estimates{entry_state, out, data(), first, length_});
    else
      launch_(shard_size, detail::owe_estimates_stored<residual_t>{entry_state, out, data(), first, length_, seed});
  }

  std::vector<residual_t> to_host() const {
    std::vector<residual_t> h(residual_.size());
    (void)launch_.exec.copy_to_host(data(), h.data(), h.size());
    return h;
  }
  status from_host(const residual_t* h) { return launch_.exec.copy_from_host(h, data(), residual_.size()); }

 private:
  detail::launcher<Exec> launch_{};
  std::size_t length_ = 0;
  vector<residual_t> residual_;  // [length] error feedback (the state)
  vector<float> acc_;            // host paths: [length] g + residual of the current call
};

}  // namespace stage
TAGC_END_NAMESPACE
