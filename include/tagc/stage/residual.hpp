#pragma once
// defines: tagc::stage::ResidualStore<Residual, Exec> — the error-feedback
//          stage: the residual's storage (float, or bf16 rounded stochastically),
//          its update after the exchange (residual = acc where nothing was
//          delivered, the wire rounding where something was; by the execution
//          space's own implementation, detail/compress_dispatch.hpp), and the
//          estimates an owner owes back (decode.hpp).

#include <cstdint>
#include <type_traits>
#include <vector>

#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/decode_kernels.hpp"
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

  static status can_implement(const reducer_arguments&) { return {}; }
  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    length_ = p.lay.length;
    return impl_.initialize(length_, exec);
  }
  // The residual itself (residual_bytes()) plus, on the host, the acc buffer.
  std::size_t workspace_bytes() const { return impl_.workspace_bytes(); }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    return detail::residual_impl_t<Residual, Exec>::workspace_bytes_for(p.lay.length);
  }
  std::size_t residual_bytes() const { return impl_.size() * sizeof(residual_t); }
  // Where this call's acc = g + residual goes (the select stage writes it; nullptr
  // where the execution space keeps no acc buffer).
  float* acc() { return impl_.acc(); }

  residual_t* data() { return impl_.data(); }
  const residual_t* data() const { return impl_.data(); }
  std::size_t size() const { return impl_.size(); }

  // After the exchange (cannot fail): residual = what was not delivered. `retransmit`:
  // the owners' bitmaps of unresolved entries, or nullptr.
  template <class Wire>
  void commit(const call_view<Residual>& c, const std::uint8_t* retransmit) {
    impl_.template commit<Wire>(detail::commit_inputs{c.grad, c.index.sender_check, retransmit, c.sel.state,
                                                      c.sel.counters, c.lay, c.wire_scale, c.wire_unscale, c.seed,
                                                      c.sel.kept});
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
    std::vector<residual_t> h(size());
    (void)launch_.exec.copy_to_host(data(), h.data(), h.size());
    return h;
  }
  status from_host(const residual_t* h) { return launch_.exec.copy_from_host(h, data(), size()); }

 private:
  detail::launcher<Exec> launch_{};
  std::size_t length_ = 0;
  detail::residual_impl_t<Residual, Exec> impl_{};  // the residual (the state), and the space's commit
};

}  // namespace stage
TAGC_END_NAMESPACE
