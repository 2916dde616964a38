#pragma once
// defines: tagc::stage::Decode<DecodePolicy, Exec> — the decode stage of a
//          sketch reducer: the owner peels (and estimates) its shard from the
//          summed cells and its reduced index (policy/decode.hpp), then tells
//          every sender which entries it could not resolve (they stay in the
//          senders' residuals and go out again).
//
// A packed or dense reducer sizes no workspace here (initialize with
// `peeled = false`).

#include <cstdint>
#include <span>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/decode_kernels.hpp"
#include "../detail/launch.hpp"
#include "../detail/shard_decoder.hpp"
#include "../policy/decode.hpp"
#include "../stats.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class DecodePolicy, class Exec>
class Decode;

template <decode_mode Mode, class Exec>
class Decode<DecodePolicy<Mode>, Exec> {
 public:
  using decode_policy = DecodePolicy<Mode>;
  template <class T> using vector = typename Exec::template vector<T>;
  struct result {
    std::size_t support = 0, peeled = 0, unresolved = 0;
  };

  static status can_implement(const reducer_arguments&) { return {}; }

  // `peeled`: whether this reducer peels at all (a sketch that is not dense).
  status initialize(const reducer_plan& p, Exec exec, bool peeled) {
    launch_ = {exec};
    plan_ = p;
    last_ = {};
    if (!peeled) return {};
    const layout& l = p.lay;
    entry_state_.assign(l.shard_size, 0);
    mask_bytes_ = (l.shard_size + 7) / 8;
    unresolved_mask_.assign(mask_bytes_ * std::size_t(p.shards), 0);
    unresolved_total_.assign(1, 0);
    TAGC_TRY(decoder_.initialize(l, p.own_shard, exec));
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(entry_state_) + detail::buffer_bytes(unresolved_mask_) +
           detail::buffer_bytes(unresolved_total_) + decoder_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p, bool peeled) {
    if (!peeled) return 0;
    const layout& l = p.lay;
    return l.shard_size + (l.shard_size + 7) / 8 * std::size_t(p.shards) + sizeof(std::int64_t) +
           detail::shard_decoder_t<Exec>::workspace_bytes_for(l);
  }

  // Peel (and estimate) the owner's shard into `out`, unscaled; entry_state()
  // tells afterwards which entries stayed unresolved. The execution space's own
  // decoder does it (detail/shard_decoder.hpp); the counts come back with it.
  status run(float* cells, const std::uint8_t* own_index, float* out) {
    last_ = {};
    detail::decode_counts d;
    TAGC_TRY(decoder_.run(cells, own_index, out, detail::raw(entry_state_), decode_policy::peels,
                          decode_policy::estimates, d));
    last_ = {d.support, d.peeled, d.unresolved};
    return {};
  }

  // Tell every sender which entries of which shard were not resolved: a tiny
  // all-reduce of the count, then (only when it is not zero) an all-gather of
  // one bitmap per shard. Replicated: every rank already knows.
  template <communicator C>
  status publish_unresolved(C& comm, const std::uint8_t*& retransmit) {
    retransmit = nullptr;
    sent_ = 0.0;
    const bool sharded = plan_.args.topo == topology::sharded;
    const int world = plan_.args.world_size;
    std::uint8_t* mine = detail::raw(unresolved_mask_) + (sharded ? plan_.own_shard * mask_bytes_ : 0);
    std::int64_t total = std::int64_t(last_.unresolved);
    if (sharded && world > 1) {
      TAGC_TRY(launch_.exec.copy_from_host(&total, detail::raw(unresolved_total_), 1));
      const std::span<std::int64_t> t(detail::raw(unresolved_total_), 1);
      TAGC_TRY(detail::in_phase(comm.all_reduce(std::span<const std::int64_t>(t), t),
                                "unresolved-entry count (all-reduce)"));
      TAGC_TRY(launch_.exec.copy_to_host(detail::raw(unresolved_total_), &total, 1));
      sent_ = ring_bytes_sent(collective::all_reduce, 8.0, world);
    }
    if (total == 0) return {};
    launch_(mask_bytes_, detail::unresolved_bitmap{detail::raw(entry_state_), mine, plan_.lay.shard_size});
    if (sharded && world > 1) {
      TAGC_TRY(detail::in_phase(
          comm.all_gather(std::span<const std::uint8_t>(mine, mask_bytes_),
                          std::span<std::uint8_t>(detail::raw(unresolved_mask_), unresolved_mask_.size())),
          "unresolved-entry bitmaps (all-gather)"));
      sent_ += ring_bytes_sent(collective::all_gather, double(unresolved_mask_.size()), world);
    }
    retransmit = detail::raw(unresolved_mask_);
    return {};
  }

  // A call that decoded nothing (dense shard): no result, nothing sent.
  void clear() {
    last_ = {};
    sent_ = 0.0;
  }
  const result& last() const { return last_; }
  double retransmit_bytes_sent() const { return sent_; }
  const std::uint8_t* entry_state() const { return detail::raw(entry_state_); }

 private:
  detail::launcher<Exec> launch_{};
  reducer_plan plan_{};
  result last_{};
  double sent_ = 0.0;
  std::size_t mask_bytes_ = 0;
  vector<std::uint8_t> unresolved_mask_;        // [shards][mask_bytes] entries to retransmit
  vector<std::int64_t> unresolved_total_;       // [1]
  vector<std::uint8_t> entry_state_;            // [shard] detail::entry_*
  detail::shard_decoder_t<Exec> decoder_{};     // support list, peeling, estimates (and their workspace)
};

}  // namespace stage
TAGC_END_NAMESPACE
