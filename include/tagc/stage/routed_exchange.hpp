#pragma once
// defines: tagc::stage::RoutedExchange<Value, Exec> — the value exchange of a routed
//          index (RoutedIndexPolicy, policy/shared_index.hpp): each rank sends its own
//          picks, as (offset, value) entries, to the owners of their shards only, and
//          each owner adds what it received into its shard:
//   bounds   where this rank's sorted list of picks splits by shard       (one launch)
//   counts   every rank learns how many entries each rank sends it
//                                                  (all_to_all_v, one int64 per pair)
//   entries  the entries to their owners                 (all_to_all_v, 4 + sizeof(Value)
//                                                  bytes per entry, only to other shards)
//   sum      the owner adds the blocks into its zeroed shard in rank order (scaled for mean)
//
// A rank sends its k picks, about (N - 1) / N k entries, whatever the number of ranks:
// there is no union to grow with N, and an owner receives only what falls into its
// shard. A hot shard (one owner receiving most entries) costs that owner's incoming
// link, not every rank's bytes. The blocks add in rank order on every execution space,
// so the host and a device give the same sums.
//
// Sized at initialize for the largest k of any call (`capacity`); nothing is allocated
// per call. The counts travel through the host (each side needs them to size the
// entries' exchange), so a device call synchronises there.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <thrust/fill.h>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/launch.hpp"
#include "../detail/routed_kernels.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Value, class Exec>
class RoutedExchange {
 public:
  template <class T> using vector = typename Exec::template vector<T>;
  static constexpr std::size_t entry_bytes = detail::routed_entry_bytes<Value>;

  static status can_implement(const reducer_arguments& a) {
    if (a.topo != topology::sharded)
      return {errc::invalid_argument,
              "a routed index sends each entry to its shard's owner; an all-reduce (replicated) has no owners (use "
              "the gathered index)"};
    return {};
  }

  // `capacity`: the most picks of any call (k).
  status initialize(const reducer_plan& p, std::size_t capacity, Exec exec) {
    launch_ = {exec};
    world_ = std::size_t(std::max(p.args.world_size, 1));
    rank_ = std::size_t(p.args.rank);
    shard_ = p.lay.shard_size;
    capacity_ = std::min(capacity, p.lay.length);
    bounds_.assign(world_ + 1, 0ull);
    counts_.assign(2 * world_, 0);
    send_.assign(capacity_ * entry_bytes, 0);
    recv_.assign(most_received(world_, capacity_, shard_) * entry_bytes, 0);
    bounds_host_.assign(world_ + 1, 0ull);
    counts_host_.assign(2 * world_, 0);
    send_counts_.assign(world_, 0);
    recv_counts_.assign(world_, 0);
    ones_.assign(world_, 1);
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(bounds_) + detail::buffer_bytes(counts_) + detail::buffer_bytes(send_) +
           detail::buffer_bytes(recv_);
  }
  static std::size_t workspace_bytes_for(const reducer_plan& p, std::size_t capacity) {
    const std::size_t world = std::size_t(std::max(p.args.world_size, 1)), cap = std::min(capacity, p.lay.length);
    return (world + 1) * sizeof(unsigned long long) + 2 * world * sizeof(std::int64_t) +
           (cap + most_received(world, cap, p.lay.shard_size)) * entry_bytes;
  }

  // The call's exchange: `list` holds this rank's picks (k slots, ascending, free slots
  // last), `acc` their values; afterwards out[0, size) holds the owner's shard, the
  // sum over ranks of the entries that fall into it (times `scale`), zeros elsewhere.
  // out is written only after both exchanges succeeded.
  template <routing_communicator C>
  status exchange(C& comm, const float* acc, const std::uint32_t* list, std::size_t k, float* out, std::size_t size,
                  float scale) {
    unsigned long long* bounds = detail::raw(bounds_);
    launch_(world_ + 1, detail::list_starts<unsigned long long>{list, k, shard_, bounds});
    TAGC_TRY(launch_.exec.copy_to_host(bounds, bounds_host_.data(), world_ + 1));
    for (std::size_t d = 0; d < world_; ++d) counts_host_[d] = std::int64_t(bounds_host_[d + 1] - bounds_host_[d]);
    std::int64_t* counts = detail::raw(counts_);
    TAGC_TRY(launch_.exec.copy_from_host(counts_host_.data(), counts, world_));
    const std::span<const std::size_t> ones(ones_);
    TAGC_TRY(detail::in_phase(comm.all_to_all_v(std::span<const std::int64_t>(counts, world_), ones,
                                                std::span<std::int64_t>(counts + world_, world_), ones),
                              "routed index (all-to-all of the entry counts)"));
    TAGC_TRY(launch_.exec.copy_to_host(counts + world_, counts_host_.data() + world_, world_));
    std::size_t received = 0;
    for (std::size_t q = 0; q < world_; ++q) {
      const std::int64_t c = counts_host_[world_ + q];
      if (c < 0 || std::size_t(c) > std::min(capacity_, shard_))
        return {errc::communication, "routed index: rank " + std::to_string(q) + " announced " + std::to_string(c) +
                                         " entries for this rank's shard, more than any call can send"};
      recv_counts_[q] = std::size_t(c) * entry_bytes;
      received += std::size_t(c);
    }
    const std::size_t listed = std::size_t(bounds_host_[world_]);
    for (std::size_t d = 0; d < world_; ++d) send_counts_[d] = std::size_t(counts_host_[d]) * entry_bytes;
    std::uint8_t* send = detail::raw(send_);
    std::uint8_t* recv = detail::raw(recv_);
    launch_(listed, detail::pack_routed<Value>{acc, list, bounds, shard_, send});
    TAGC_TRY(detail::in_phase(
        comm.all_to_all_v(std::span<const std::uint8_t>(send, listed * entry_bytes), std::span<const std::size_t>(send_counts_),
                          std::span<std::uint8_t>(recv, received * entry_bytes), std::span<const std::size_t>(recv_counts_)),
        "routed index (all-to-all of the entries to their shards' owners)"));

    thrust::fill(launch_.exec.policy(), out, out + size, 0.0f);
    const std::uint8_t* block = recv;
    for (std::size_t q = 0; q < world_; ++q) {
      const std::size_t c = recv_counts_[q] / entry_bytes;
      launch_(c, detail::add_routed<Value>{block, c, out, size});
      block += recv_counts_[q];
    }
    if (scale != 1.0f) launch_(size, detail::scale_output{out, scale});
    last_ = {listed, received, listed - std::size_t(counts_host_[rank_])};
    return {};
  }

  // What the last exchange() moved: this rank's entries, the entries it received for
  // its shard, and those of its entries that went to other ranks.
  struct traffic {
    std::size_t sent = 0, received = 0, to_others = 0;
  };
  const traffic& last() const { return last_; }
  // Bytes this rank sent in the last exchange: the counts (index_bytes) and the entries'
  // offsets (index) and values (value_bytes) for other ranks.
  double index_bytes_sent() const {
    return double((world_ - 1) * sizeof(std::int64_t) + last_.to_others * sizeof(std::uint32_t));
  }
  double value_bytes_sent() const { return double(last_.to_others * sizeof(Value)); }

 private:
  // The most entries an owner can receive in one call: from every rank at most its k
  // and at most the shard.
  static std::size_t most_received(std::size_t world, std::size_t capacity, std::size_t shard) {
    return world * std::min(capacity, shard);
  }

  detail::launcher<Exec> launch_{};
  std::size_t world_ = 1, rank_ = 0, shard_ = 0, capacity_ = 0;
  vector<unsigned long long> bounds_;  // [world + 1] where the list splits by shard
  vector<std::int64_t> counts_;        // [world sent | world received] entry counts
  vector<std::uint8_t> send_;          // [capacity entries] this rank's blocks, in owner order
  vector<std::uint8_t> recv_;          // [world x min(capacity, shard) entries] the blocks received
  std::vector<unsigned long long> bounds_host_;
  std::vector<std::int64_t> counts_host_;
  std::vector<std::size_t> send_counts_, recv_counts_, ones_;  // bytes per peer; 1 per peer for the counts
  traffic last_{};
};

}  // namespace stage
TAGC_END_NAMESPACE
