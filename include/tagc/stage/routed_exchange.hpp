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
// An all-reduce (replicated) call has no shards, so the buffer is dealt to N owners in
// chunks of `dealt_chunk` positions, round-robin (chunk c to owner c mod N, so that a run
// of large entries, the embedding's frequent rows, loads every owner alike, where a
// shard's owner takes them all); the owners sum their regions as above, then share them:
//   union    each owner lists its region's nonzero sums                 (one scan)
//   sizes    every rank learns each owner's count             (all-gather, one int64 each)
//   blocks   the owners' sums as entries on the wire type: one all-gather of blocks
//            padded to the fullest, where that pads the union by at most a quarter
//            (the dealt chunks, and a union bound, keep the owners' counts close), else
//            a broadcast per owner (N collectives, nothing padded)
//   output   every rank writes the whole buffer from the N blocks, its own included, so
//            that every replica holds the same bits (bf16: the sums rounded once)
// With reducer_arguments::union_bound B > 0 an owner lists only its ceil(B k / N) largest
// sums (the second selection of Ok-Topk), so every rank receives about B k entries at
// any N; each rank finds in the blocks which of its own picks were forwarded
// (`settled`) and keeps the others in its residual, as if it had not picked them.
// The round-robin dealing makes the owners' shares of the large sums alike, so a
// per-owner count stands in for a global threshold without another collective.
//
// A rank sends its k picks, about (N - 1) / N k entries, whatever the number of ranks:
// there is no union to grow with N, and an owner receives only what falls into its
// shard. A hot shard (one owner receiving most entries) costs that owner's incoming
// link, not every rank's bytes. The blocks add in rank order on every execution space,
// so the host and a device give the same sums. An all-reduce also delivers the union
// of the ranks' picks to every rank: (N - 1) / N of it per rank (at most a quarter more
// when padded), and that union grows with N (docs/results.md, Scaling: 1.7 k at 2 ranks,
// 6.1 k at 16) unless a union bound holds it near B k.
//
// Sized at initialize for the largest k of any call (`capacity`); nothing is allocated
// per call. The counts travel through the host (each side needs them to size the
// entries' exchange), so a device call synchronises there.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <thrust/fill.h>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
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
  // Replicated: the positions dealt to one owner at a time (a 768-wide embedding row
  // and a bit more; the frequent rows span many chunks).
  static constexpr std::size_t dealt_chunk = 1024;

  static status can_implement(const reducer_arguments&) { return {}; }

  // `capacity`: the most picks of any call (k).
  status initialize(const reducer_plan& p, std::size_t capacity, Exec exec) {
    launch_ = {exec};
    world_ = std::size_t(std::max(p.args.world_size, 1));
    rank_ = std::size_t(p.args.rank);
    replicated_ = p.args.topo != topology::sharded;
    bound_ = replicated_ ? p.args.union_bound : 0.0;
    shard_ = region_size(p);
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
    if (replicated_) {
      chunks_ = ceil_div(p.lay.length, dealt_chunk);
      chunk_bounds_.assign(chunks_ + 1, 0ull);
      chunk_first_.assign(chunks_, 0ull);
      chunk_bounds_host_.assign(chunks_ + 1, 0ull);
      chunk_first_host_.assign(chunks_, 0ull);
      region_sums_.assign(shard_, 0.0f);
      marks_.assign(ceil_div(shard_, 32), 0u);
      union_.assign(shard_, detail::no_position);
      listed_.assign(3, 0ull);
      union_counts_.assign(1 + world_, 0);
      union_counts_host_.assign(world_, 0);
      union_starts_.assign(world_ + 1, 0);
      union_starts_host_.assign(2 * world_, 0ull);
      shared_.assign(most_shared(world_, capacity_, p.lay.length) * entry_bytes, 0);
      threshold_.assign(1, 0u);
      if (bound_ > 0.0) {
        settled_.assign(capacity_, detail::no_position);
        union_starts_dev_.assign(2 * world_, 0ull);
      }
      TAGC_TRY(list_.initialize(shard_, exec));
    }
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(bounds_) + detail::buffer_bytes(counts_) + detail::buffer_bytes(send_) +
           detail::buffer_bytes(recv_) + detail::buffer_bytes(region_sums_) + detail::buffer_bytes(marks_) +
           detail::buffer_bytes(union_) + detail::buffer_bytes(listed_) + detail::buffer_bytes(union_counts_) +
           detail::buffer_bytes(shared_) + detail::buffer_bytes(chunk_bounds_) + detail::buffer_bytes(chunk_first_) +
           detail::buffer_bytes(threshold_) + detail::buffer_bytes(settled_) + detail::buffer_bytes(union_starts_dev_) +
           (replicated_ ? list_.workspace_bytes() : 0);
  }
  static std::size_t workspace_bytes_for(const reducer_plan& p, std::size_t capacity) {
    const std::size_t world = std::size_t(std::max(p.args.world_size, 1)), cap = std::min(capacity, p.lay.length);
    const std::size_t region = region_size(p);
    const std::size_t routing = (world + 1) * sizeof(unsigned long long) + 2 * world * sizeof(std::int64_t) +
                                (cap + most_received(world, cap, region)) * entry_bytes;
    if (p.args.topo == topology::sharded) return routing;
    return routing + region * (sizeof(float) + sizeof(std::uint32_t)) + ceil_div(region, 32) * sizeof(std::uint32_t) +
           3 * sizeof(unsigned long long) + (1 + world) * sizeof(std::int64_t) +
           most_shared(world, cap, p.lay.length) * entry_bytes + list_t::workspace_bytes_for(region) +
           (2 * ceil_div(p.lay.length, dealt_chunk) + 1) * sizeof(unsigned long long) + sizeof(std::uint32_t) +
           (p.args.union_bound > 0.0 ? cap * sizeof(std::uint32_t) + 2 * world * sizeof(unsigned long long) : 0);
  }

  // The call's exchange: `list` holds this rank's picks (k slots, ascending, free slots
  // last), `acc` their values. Sharded, out[0, size) then holds the owner's shard, the
  // sum over ranks of the entries that fall into it (times `scale`), zeros elsewhere;
  // replicated, out[0, size) is the whole buffer, every owner's sums (the same bits on
  // every rank). out is written only after every exchange succeeded.
  template <routing_communicator C>
  status exchange(C& comm, const float* acc, const std::uint32_t* list, std::size_t k, float* out, std::size_t size,
                  float scale) {
    unsigned long long* bounds = detail::raw(bounds_);
    if (replicated_) {
      TAGC_TRY(deal(list, k));
    } else {
      launch_(world_ + 1, detail::list_starts<unsigned long long>{list, k, shard_, bounds});
      TAGC_TRY(launch_.exec.copy_to_host(bounds, bounds_host_.data(), world_ + 1));
    }
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
    if (replicated_)
      launch_(listed, detail::pack_routed_dealt<Value>{acc, list, detail::raw(chunk_bounds_), detail::raw(chunk_first_),
                                                      bounds, world_, dealt_chunk, send});
    else
      launch_(listed, detail::pack_routed<Value>{acc, list, bounds, shard_, send});
    TAGC_TRY(detail::in_phase(
        comm.all_to_all_v(std::span<const std::uint8_t>(send, listed * entry_bytes), std::span<const std::size_t>(send_counts_),
                          std::span<std::uint8_t>(recv, received * entry_bytes), std::span<const std::size_t>(recv_counts_)),
        "routed index (all-to-all of the entries to their shards' owners)"));

    // The owner's sums: into its shard of out, or (replicated) into its region, to share.
    float* sums = replicated_ ? detail::raw(region_sums_) : out;
    const std::size_t extent = replicated_ ? shard_ : size;
    thrust::fill(launch_.exec.policy(), sums, sums + extent, 0.0f);
    const std::uint8_t* block = recv;
    for (std::size_t q = 0; q < world_; ++q) {
      const std::size_t c = recv_counts_[q] / entry_bytes;
      launch_(c, detail::add_routed<Value>{block, c, sums, extent});
      block += recv_counts_[q];
    }
    last_ = {listed, received, listed - std::size_t(counts_host_[rank_]), 0};
    if (replicated_) TAGC_TRY(share_sums(comm, list, k, out, size));
    if (scale != 1.0f) launch_(size, detail::scale_output{out, scale});
    return {};
  }

  // What the last exchange() moved: this rank's entries, the entries it received for
  // its shard, and those of its entries that went to other ranks; replicated, also every
  // owner's shared sums (the union, which every rank received).
  struct traffic {
    std::size_t sent = 0, received = 0, to_others = 0, shared = 0;
    std::size_t padded = 0;  // replicated: the all-gathered slots, when the blocks went padded (else 0: broadcasts)
  };
  const traffic& last() const { return last_; }
  // The positions where this rank's values were delivered in the last exchange, which
  // its residual settles: its picks (`list`), or, bounded, those its owners forwarded
  // (k slots, no_position where an owner held the sum back).
  const std::uint32_t* delivered(const std::uint32_t* list) const {
    return bound_ > 0.0 ? detail::raw(settled_) : list;
  }
  // Bounded: the most sums an owner forwards in a call keeping k (else its whole region).
  std::size_t forwarded_at_most(std::size_t k) const {
    return bound_ > 0.0 ? std::min(shard_, std::size_t(std::ceil(bound_ * double(k) / double(world_)))) : shard_;
  }
  // Bytes this rank sent in the last exchange: the counts (index_bytes) and the entries'
  // offsets (index) and values (value_bytes) for other ranks; replicated, its share of the
  // owners' counts and of their blocks' broadcasts (ring model: (N - 1) / N of each).
  double index_bytes_sent() const {
    return double((world_ - 1) * sizeof(std::int64_t) + last_.to_others * sizeof(std::uint32_t)) +
           (replicated_ ? ring_bytes_sent(collective::all_gather, double(world_ * sizeof(std::int64_t)), int(world_)) +
                              shared_bytes_sent(sizeof(std::uint32_t))
                        : 0.0);
  }
  double value_bytes_sent() const {
    return double(last_.to_others * sizeof(Value)) + (replicated_ ? shared_bytes_sent(sizeof(Value)) : 0.0);
  }

 private:
  using list_t = detail::shared_select_impl_t<Exec>;

  // Replicated: where the sorted list's entries go, owner by owner (their chunks in
  // order): bounds_ / bounds_host_ the owners' blocks, chunk_first_ each chunk's first
  // entry among them. The chunks' bounds travel through the host (a device synchronises).
  status deal(const std::uint32_t* list, std::size_t k) {
    unsigned long long* starts = detail::raw(chunk_bounds_);
    launch_(chunks_ + 1, detail::list_starts<unsigned long long>{list, k, dealt_chunk, starts});
    TAGC_TRY(launch_.exec.copy_to_host(starts, chunk_bounds_host_.data(), chunks_ + 1));
    unsigned long long at = 0;
    for (std::size_t d = 0; d < world_; ++d) {
      bounds_host_[d] = at;
      for (std::size_t c = d; c < chunks_; c += world_) {
        chunk_first_host_[c] = at;
        at += chunk_bounds_host_[c + 1] - chunk_bounds_host_[c];
      }
    }
    bounds_host_[world_] = at;
    TAGC_TRY(launch_.exec.copy_from_host(chunk_first_host_.data(), detail::raw(chunk_first_), chunks_));
    return launch_.exec.copy_from_host(bounds_host_.data(), detail::raw(bounds_), world_ + 1);
  }

  // Replicated: every owner's nonzero sums (bounded: its largest) to every rank. The
  // owner lists them, the owners' counts are all-gathered, each owner broadcasts its
  // block (offsets, then values on the wire type) from where it lies in the gathered
  // buffer, and every rank adds the N blocks into its zeroed output; bounded, it also
  // marks which of its own picks (`picks`, k slots) were forwarded.
  template <routing_communicator C>
  status share_sums(C& comm, const std::uint32_t* picks, std::size_t k, float* out, std::size_t size) {
    const float* sums = detail::raw(region_sums_);
    std::uint32_t* list = detail::raw(union_);
    const std::size_t most = forwarded_at_most(k);
    if (bound_ > 0.0)
      list_.mark(sums, most, detail::raw(marks_), detail::raw(threshold_));  // nonzero only: the (most+1)-th is >= 0
    else
      launch_(ceil_div(shard_, 32), detail::mark_nonzero{sums, shard_, detail::raw(marks_)});
    list_.to_list(detail::raw(marks_), list, shard_);
    unsigned long long* listed = detail::raw(listed_);
    launch_(1, detail::count_positions{list, shard_, 0, 0, listed});
    unsigned long long mine = 0;
    TAGC_TRY(launch_.exec.copy_to_host(listed, &mine, 1));
    std::int64_t* counts = detail::raw(union_counts_);
    const std::int64_t count = std::int64_t(mine);
    TAGC_TRY(launch_.exec.copy_from_host(&count, counts, 1));
    TAGC_TRY(detail::in_phase(comm.all_gather(std::span<const std::int64_t>(counts, 1),
                                              std::span<std::int64_t>(counts + 1, world_)),
                              "routed index (all-gather of the owners' counts)"));
    TAGC_TRY(launch_.exec.copy_to_host(counts + 1, union_counts_host_.data(), world_));
    std::size_t total = 0, fullest = 0;
    for (std::size_t q = 0; q < world_; ++q) {
      const std::int64_t c = union_counts_host_[q];
      if (c < 0 || std::size_t(c) > most || total + std::size_t(c) > shared_.size() / entry_bytes)
        return {errc::communication, "routed index: owner " + std::to_string(q) + " announced " + std::to_string(c) +
                                         " summed entries, more than its region or the ranks' picks can hold"};
      total += std::size_t(c);
      fullest = std::max(fullest, std::size_t(c));
    }
    // Every rank decides alike from the same counts: one all-gather of blocks padded to the
    // fullest where that pads little (1 collective, where broadcasts are N), else a
    // broadcast per owner (nothing padded, whatever the spread).
    const bool padded = padded_gather(total, fullest);
    const std::size_t slot = padded ? fullest : 0;
    for (std::size_t q = 0, at = 0; q < world_; ++q) {
      union_starts_[q] = padded ? q * slot : at;
      at += std::size_t(union_counts_host_[q]);
    }
    union_starts_[world_] = padded ? world_ * slot : total;
    std::uint8_t* gathered = detail::raw(shared_);
    launch_(std::size_t(mine), detail::pack_sums<Value>{sums, list, std::size_t(mine), gathered + union_starts_[rank_] * entry_bytes});
    if (padded) {
      if (slot > 0)
        TAGC_TRY(detail::in_phase(
            comm.all_gather(std::span<const std::uint8_t>(gathered + rank_ * slot * entry_bytes, slot * entry_bytes),
                            std::span<std::uint8_t>(gathered, world_ * slot * entry_bytes)),
            "routed index (all-gather of the owners' sums)"));
    } else {
      for (std::size_t q = 0; q < world_; ++q) {
        const std::size_t c = std::size_t(union_counts_host_[q]);
        if (c == 0) continue;
        TAGC_TRY(detail::in_phase(comm.broadcast(std::span<std::uint8_t>(gathered + union_starts_[q] * entry_bytes, c * entry_bytes), int(q)),
                                  "routed index (broadcast of an owner's sums)"));
      }
    }
    if (bound_ > 0.0) {
      for (std::size_t q = 0; q < world_; ++q) {
        union_starts_host_[q] = union_starts_[q];
        union_starts_host_[world_ + q] = std::uint64_t(union_counts_host_[q]);
      }
      TAGC_TRY(launch_.exec.copy_from_host(union_starts_host_.data(), detail::raw(union_starts_dev_), 2 * world_));
      launch_(k, detail::keep_forwarded<Value>{picks, size, gathered, detail::raw(union_starts_dev_),
                                               detail::raw(union_starts_dev_) + world_, world_, dealt_chunk,
                                               detail::raw(settled_)});
    }
    thrust::fill(launch_.exec.policy(), out, out + size, 0.0f);
    for (std::size_t q = 0; q < world_; ++q) {
      const std::size_t c = std::size_t(union_counts_host_[q]);
      launch_(c, detail::place_dealt<Value>{gathered + union_starts_[q] * entry_bytes, c, out, size, q, world_, dealt_chunk});
    }
    last_.padded = padded ? world_ * slot : 0;
    last_.shared = total;
    return {};
  }
  // Bytes this rank sends of the owners' blocks, `bytes` per entry (ring model): the
  // broadcasts' (N - 1) / N of the union, or the padded all-gather's of its slots.
  double shared_bytes_sent(std::size_t bytes) const {
    if (last_.padded) return ring_bytes_sent(collective::all_gather, double(last_.padded * bytes), int(world_));
    return ring_bytes_sent(collective::broadcast, double(last_.shared * bytes), int(world_));
  }
  // The owners' blocks all-gathered in slots of the fullest block's size: when that pads
  // the union by at most a quarter (the dealt chunks and a union bound keep the owners'
  // counts close; shared_ holds the slots then).
  bool padded_gather(std::size_t total, std::size_t fullest) const {
    const std::size_t slots = world_ * fullest;
    return 4 * slots <= 5 * total && slots <= shared_.size() / entry_bytes;
  }

  // The owners' extent: the shard (sharded), or (replicated) the most chunks any owner is
  // dealt; an owner's region holds its chunks in order (the last may be partial or absent).
  static std::size_t region_size(const reducer_plan& p) {
    if (p.args.topo == topology::sharded) return p.lay.shard_size;
    const std::size_t world = std::size_t(std::max(p.args.world_size, 1));
    return ceil_div(ceil_div(p.lay.length, dealt_chunk), world) * dealt_chunk;
  }
  // The most entries an owner can receive in one call: from every rank at most its k
  // and at most the shard.
  static std::size_t most_received(std::size_t world, std::size_t capacity, std::size_t shard) {
    return world * std::min(capacity, shard);
  }
  // Replicated: the most summed entries all owners share in one call (the union of the
  // ranks' picks: at most every rank's k, at most the buffer), and a quarter more for the
  // slots of a padded all-gather (padded_gather).
  static std::size_t most_shared(std::size_t world, std::size_t capacity, std::size_t length) {
    const std::size_t u = std::min(world * capacity, length);
    return u + ceil_div(u, 4);
  }

  detail::launcher<Exec> launch_{};
  // shard_: an owner's extent (its shard, or its dealt region: region_size)
  std::size_t world_ = 1, rank_ = 0, shard_ = 0, capacity_ = 0, chunks_ = 0;
  bool replicated_ = false;
  double bound_ = 0.0;                 // replicated: reducer_arguments::union_bound (0: unbounded)
  vector<unsigned long long> bounds_;  // [world + 1] where the list splits by shard
  vector<std::int64_t> counts_;        // [world sent | world received] entry counts
  vector<std::uint8_t> send_;          // [capacity entries] this rank's blocks, in owner order
  vector<std::uint8_t> recv_;          // [world x min(capacity, shard) entries] the blocks received
  // replicated only (empty otherwise):
  vector<unsigned long long> chunk_bounds_;  // [chunks + 1] where the list splits by chunk
  vector<unsigned long long> chunk_first_;   // [chunks] each chunk's first entry in owner order
  vector<float> region_sums_;          // [region] this owner's sums
  vector<std::uint32_t> marks_;        // [region / 32] its nonzero sums
  vector<std::uint32_t> union_;        // [region] their offsets, ascending
  vector<unsigned long long> listed_;  // count_positions' counts of that list
  vector<std::int64_t> union_counts_;  // [1 + world] this owner's count, then every owner's
  vector<std::uint8_t> shared_;        // [most shared entries] every owner's block, in owner order
  vector<std::uint32_t> threshold_;    // [1] bounded: the owner's threshold (bits of |sum|)
  vector<std::uint32_t> settled_;      // [capacity] bounded: this rank's picks that were forwarded (delivered())
  vector<unsigned long long> union_starts_dev_;  // [2 world] bounded: each owner's block start and count
  list_t list_{};                      // the marks as a list
  std::vector<unsigned long long> bounds_host_, chunk_bounds_host_, chunk_first_host_;
  std::vector<std::int64_t> counts_host_, union_counts_host_;
  std::vector<std::size_t> send_counts_, recv_counts_, ones_;  // bytes per peer; 1 per peer for the counts
  std::vector<std::size_t> union_starts_;                      // [world + 1] where each owner's block starts (entries)
  std::vector<unsigned long long> union_starts_host_;          // [2 world] starts and counts, staged for union_starts_dev_
  traffic last_{};
};

}  // namespace stage
TAGC_END_NAMESPACE
