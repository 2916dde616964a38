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

#include <thrust/copy.h>
#include <thrust/iterator/counting_iterator.h>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/decode_kernels.hpp"
#include "../detail/launch.hpp"
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
    count_.assign(l.cells, 0u);
    ids_.assign(l.cells, 0u);
    writer_.assign(l.cells, 0u);
    entry_state_.assign(l.shard_size, 0);
    mask_bytes_ = (l.shard_size + 7) / 8;
    unresolved_mask_.assign(mask_bytes_ * std::size_t(p.shards), 0);
    unresolved_total_.assign(1, 0);
    support_.assign(l.shard_size, 0u);
    edges_.assign(3 * l.shard_size, 0u);
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(count_) + detail::buffer_bytes(ids_) + detail::buffer_bytes(writer_) +
           detail::buffer_bytes(entry_state_) + detail::buffer_bytes(unresolved_mask_) +
           detail::buffer_bytes(unresolved_total_) + detail::buffer_bytes(support_) + detail::buffer_bytes(edges_);
  }

  // Peel (and estimate) the owner's shard into `out`, unscaled; entry_state()
  // tells afterwards which entries stayed unresolved.
  void run(float* cells, const std::uint8_t* own_index, float* out) {
    const std::size_t S = plan_.lay.shard_size, C = plan_.lay.cells;
    const detail::decode_view v{plan_.lay, plan_.own_shard, own_index,         cells,             detail::raw(count_),
                                detail::raw(ids_), detail::raw(writer_), detail::raw(entry_state_),
                                detail::raw(support_), detail::raw(edges_), out};
    result d;
    launch_(S, detail::mark_support{v});
    const auto last = thrust::copy_if(launch_.exec.policy(), thrust::counting_iterator<std::uint32_t>(0),
                                      thrust::counting_iterator<std::uint32_t>(std::uint32_t(S)), support_.begin(),
                                      detail::is_support_entry{detail::raw(entry_state_)});
    const std::size_t m = std::size_t(last - support_.begin());
    launch_(C, detail::reset_cells{v});
    launch_(m, detail::add_edges{v});
    if constexpr (decode_policy::peels) apply_rounds(v, m);
    d.support = m;
    d.unresolved = launch_.sum_list(detail::raw(support_), m, detail::count_state{v, detail::entry_unresolved});
    d.peeled = m - d.unresolved;
    if constexpr (decode_policy::estimates)
      if (d.unresolved) launch_(m, detail::estimate_round{v});
    last_ = d;
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
      TAGC_TRY(comm.all_reduce(std::span<const std::int64_t>(t), t));
      TAGC_TRY(launch_.exec.copy_to_host(detail::raw(unresolved_total_), &total, 1));
      sent_ = ring_bytes_sent(collective::all_reduce, 8.0, world);
    }
    if (total == 0) return {};
    launch_(mask_bytes_, detail::unresolved_bitmap{detail::raw(entry_state_), mine, plan_.lay.shard_size});
    if (sharded && world > 1) {
      TAGC_TRY(comm.all_gather(std::span<const std::uint8_t>(mine, mask_bytes_),
                               std::span<std::uint8_t>(detail::raw(unresolved_mask_), unresolved_mask_.size())));
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
  static constexpr std::size_t check_every = 4;  // peeling rounds between progress checks

  // Serialised subtraction rounds until every resolved entry has been subtracted
  // from its cells, or nothing moves any more.
  void apply_rounds(const detail::decode_view& v, std::size_t m) {
    const std::uint32_t* list = detail::raw(support_);
    unsigned long long before = launch_.sum_list(list, m, detail::work_left{v});
    const std::size_t max_rounds = 2 * m + 8;  // each productive round retires at least one unit of work
    for (std::size_t round = 0; before != 0 && round < max_rounds; ++round) {
      launch_(m, detail::peel_round{v});
      launch_(m, detail::claim_cells{v});
      launch_(m, detail::apply_resolved{v});
      launch_(m, detail::release_cells{v});
      if (round % check_every == check_every - 1) {  // not every round: each check is a host round trip on a GPU
        const unsigned long long now = launch_.sum_list(list, m, detail::work_left{v});
        // Only unresolved entries with no lone cell left: a stopping set.
        if (now == before && launch_.sum_list(list, m, detail::count_state{v, detail::entry_resolved}) == 0) break;
        before = now;
      }
    }
  }

  detail::launcher<Exec> launch_{};
  reducer_plan plan_{};
  result last_{};
  double sent_ = 0.0;
  std::size_t mask_bytes_ = 0;
  vector<std::uint32_t> count_, ids_, writer_;  // peeling workspace [cells]
  vector<std::uint8_t> unresolved_mask_;        // [shards][mask_bytes] entries to retransmit
  vector<std::int64_t> unresolved_total_;       // [1]
  vector<std::uint8_t> entry_state_;            // [shard]
  vector<std::uint32_t> support_;               // [shard] compacted support list
  vector<std::uint32_t> edges_;                 // [3 * shard] cached cells and signs of the support
};

}  // namespace stage
TAGC_END_NAMESPACE
