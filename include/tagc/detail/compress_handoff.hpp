#pragma once
// defines: tagc::detail::select_inputs<Residual> (what the threshold select reads
//          in one call), tagc::detail::kept_entries (what the host's select lists
//          for the later stages) and tagc::detail::commit_inputs (what the residual
//          commit reads) — the values both implementations of the compress side
//          (detail/compress_dispatch.hpp) take and give.

#include <cstddef>
#include <cstdint>

#include "../core/config.hpp"
#include "../shard/layout.hpp"
#include "select_kernels.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail {

// One call's inputs: the gradient, the residual, and where acc = g + residual
// goes (the residual stage's buffer; used by the host implementation only, which
// computes acc once per call).
template <class Residual>
struct select_inputs {
  const float* grad = nullptr;
  const Residual* residual = nullptr;
  float* acc = nullptr;
};

// The entries this rank keeps, listed (host implementation; `listed` false
// elsewhere, and where they did not fit the list's capacity): ascending
// positions and acc at them, so the sketch and the residual commit read the kept
// values in order instead of one cache miss each. `acc` is the whole g + residual
// (host implementation; nullptr elsewhere).
struct kept_entries {
  const float* acc = nullptr;
  const std::uint32_t* positions = nullptr;
  const float* values = nullptr;
  std::size_t count = 0;
  bool listed = false;
};

// One call's residual commit: which kept entries were delivered (the reduced index
// senders check, the owners' bitmaps of unresolved entries), the threshold that
// kept them, the wire's scale and a bf16 residual's rounding seed; the kept
// entries listed (host implementation) and the counters the commit adds to
// ([1] deferred, [2] retransmitted).
struct commit_inputs {
  const float* grad = nullptr;
  const std::uint8_t* sender_check = nullptr;  // nullptr when the index is exact
  const std::uint8_t* retransmit = nullptr;    // [shards][mask bytes] or nullptr
  const select_state* state = nullptr;
  unsigned long long* counters = nullptr;
  layout lay{};
  float wire_scale = 1.0f, wire_unscale = 1.0f;
  std::uint32_t seed = 0;
  kept_entries kept{};
};

}  // namespace detail
TAGC_END_NAMESPACE
