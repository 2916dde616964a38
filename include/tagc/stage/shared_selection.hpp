#pragma once
// defines: tagc::stage::SharedSelection<Exec> — the selection stage of a
//          shared-index reducer (policy/shared_index.hpp), on every rank the same
//          list of slots (ascending positions, free slots last) that the values
//          are packed by:
//   select  the rotating leader's k largest |acc|, broadcast as a sorted
//           position list or a bitmap, whichever is smaller (SharedIndexPolicy)
//   pool    every rank's share of the call's picks (picks / N; picks mod N ranks,
//           rotating with the call, one more), all-gathered as lists coded in
//           16-bit offsets (detail::coded_list_words) or, when a share is about
//           n / 16 or more, as bitmaps; their union (PooledIndexPolicy).
//           The reducer sizes the picks: so that the union comes out near k
//           (between k and pooled_picks_factor k picks), or N k, k from every
//           rank (GatheredIndexPolicy)
//   pick_own this rank's own k largest, listed; nothing is exchanged (RoutedIndexPolicy:
//           the picks go to their shards' owners as entries, stage/routed_exchange.hpp)
//
// Sized at initialize for the largest k the reducer may ask for (`capacity`; pooled,
// for `picks_per_k` x capacity picks and their union) and for the one rule the reducer
// uses (selection_rule); nothing is allocated per call. The execution space's own
// implementation marks the leader's bitmap and turns bitmaps into lists
// (detail/compress_dispatch.hpp): the radix select's launches, whose threshold never
// leaves the space's memory, or on the host a sampled bracket and the marks in one
// pass. Both give the same threshold and positions, bit for bit (tests/test_paths.cpp).
// The threshold travels with the positions (one trailing word), so every rank can count
// what it holds back at the leader's threshold; a pooling rank counts at its own.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include <thrust/fill.h>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/launch.hpp"
#include "../detail/shared_kernels.hpp"
#include "../shard/layout.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

// Which of the three ways a reducer selects: select(), pool() or pick_own().
enum class selection_rule { leader, pool, own };

template <class Exec>
class SharedSelection {
 public:
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) {
    if (a.length >= std::size_t(detail::no_position))
      return {errc::invalid_argument, "length " + std::to_string(a.length) + " >= 2^32 - 1 elements; split the unit"};
    return {};
  }

  // `capacity`: the largest k of any call (from the densest theta the schedule reaches);
  // `picks_per_k` (pool only): the most picks pool() is given per position of k (it needs
  // the shares' exchange buffer).
  status initialize(const reducer_plan& p, std::size_t capacity, selection_rule rule, std::size_t picks_per_k,
                    Exec exec) {
    const bool pooled = rule == selection_rule::pool;
    if (!pooled) picks_per_k = 0;
    launch_ = {exec};
    n_ = p.lay.length;
    rank_ = p.args.rank;
    world_ = std::size_t(std::max(p.args.world_size, 1));
    capacity_ = std::min(capacity, n_);
    words_ = ceil_div(n_, 32);
    // [this rank's share | every rank's share][its threshold]
    if (pooled) pool_.assign(pool_words(capacity_ * picks_per_k, world_, n_), detail::no_position);
    listed_.assign(3, 0ull);
    // The broadcast buffer: the list (capacity) or the bitmap (words), whichever a call
    // uses, plus the leader's threshold; pick_own() keeps only its threshold there.
    if (!pooled) wire_.assign(wire_words(rule, capacity_, words_), detail::no_position);
    bitmap_.assign(words_, 0u);
    list_.assign(slots_for(capacity_, n_, picks_per_k), detail::no_position);
    if (pooled) {  // the count of the gathered shares' picks (over the bitmaps' words, or the ranks)
      const std::size_t b = largest_pool_block(capacity_ * picks_per_k, world_, n_);
      TAGC_TRY(picks_sum_.template reserve<unsigned long long>(exec, world_ * std::max<std::size_t>(b, 1),
                                                               detail::pooled_picks{}));
    }
    return impl_.initialize(n_, exec);
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(wire_) + detail::buffer_bytes(bitmap_) + detail::buffer_bytes(list_) +
           detail::buffer_bytes(pool_) + detail::buffer_bytes(listed_) + picks_sum_.workspace_bytes() +
           impl_.workspace_bytes();
  }
  // What initialize(p, capacity, ...) allocates, before it does (the reducers' workspace
  // query; on a device, but for CUB's scan temporary, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p, std::size_t capacity, selection_rule rule,
                                         std::size_t picks_per_k) {
    const std::size_t n = p.lay.length, cap = std::min(capacity, n), words = ceil_div(n, 32);
    const std::size_t world = std::size_t(std::max(p.args.world_size, 1));
    const bool pooled = rule == selection_rule::pool;
    if (!pooled) picks_per_k = 0;
    const std::size_t pool = pooled ? pool_words(cap * picks_per_k, world, n) : 0;
    const std::size_t wire = pooled ? 0 : wire_words(rule, cap, words);
    return (wire + words + slots_for(cap, n, picks_per_k) + pool) * sizeof(std::uint32_t) +
           3 * sizeof(unsigned long long) + impl_t::workspace_bytes_for(n);
  }
  std::size_t capacity() const { return capacity_; }
  // The most slots a call's selection may hold: k (select), the union of the picks (pool).
  static std::size_t slots_for(std::size_t capacity, std::size_t n, std::size_t picks_per_k) {
    return std::min(capacity * std::max<std::size_t>(picks_per_k, 1), n);
  }

  // Pooled: a call keeping k picks between k and pooled_picks_factor k positions (at
  // most k from each rank), so that where the ranks' picks overlap the union still
  // comes near k. The factor bounds the lists' bytes (4 bytes a pick) whatever N is.
  static constexpr std::size_t pooled_picks_factor = 4;
  static std::size_t pooled_picks_per_k(std::size_t world) { return std::min(world, pooled_picks_factor); }

  // A list of k positions is sent when it is smaller than the bitmap (k < n / 32);
  // every rank decides alike from k.
  bool sends_list(std::size_t k) const { return list_words(k) < words_; }
  // Bytes the broadcast carries for a call keeping k (the threshold word included).
  std::size_t broadcast_bytes(std::size_t k) const {
    return ((sends_list(k) ? list_words(k) : words_) + 1) * sizeof(std::uint32_t);
  }
  // Pooled: a rank's share goes as a coded list of positions (16 bits each, and a word per
  // 65536 positions) while that is smaller than its bitmap (a share under about n / 16);
  // every rank decides alike from the picks.
  bool pools_lists(std::size_t picks) const { return detail::coded_list_words(block(picks), n_) < words_; }
  // Bytes this rank sends for the positions of a call keeping k (pooled: with `picks`).
  double index_bytes_sent(std::size_t k, bool pooled, std::size_t picks = 0) const {
    const int n = int(world_);
    if (!pooled) return ring_bytes_sent(collective::broadcast, double(broadcast_bytes(k)), n);
    if (k >= n_) return 0.0;  // dense: every position, nothing to exchange
    return ring_bytes_sent(collective::all_gather, double(world_ * pool_block(picks) * sizeof(std::uint32_t)), n);
  }

  // The call's selection: the leader picks, everyone receives. `acc` is this
  // rank's g + residual; k <= capacity(). Afterwards positions() holds k slots.
  template <communicator C>
  status select(C& comm, const float* acc, std::size_t k, int leader) {
    const bool list = sends_list(k);
    std::uint32_t* wire = detail::raw(wire_);
    const std::size_t payload = list ? list_words(k) : words_;
    if (rank_ == leader) {
      std::uint32_t* marks = list ? detail::raw(bitmap_) : wire;
      impl_.mark(acc, k, marks, wire + payload);
      if (list) impl_.to_list(marks, wire, k);
    }
    const std::span<std::uint8_t> bytes(reinterpret_cast<std::uint8_t*>(wire), (payload + 1) * sizeof(std::uint32_t));
    TAGC_TRY(detail::in_phase(comm.broadcast(bytes, leader), "shared index (broadcast of the leader's positions)"));
    threshold_ = wire + payload;
    if (list) {
      positions_ = wire;
    } else {
      impl_.to_list(wire, detail::raw(list_), k);
      positions_ = detail::raw(list_);
    }
    slots_ = k;
    return {};
  }

  // The call's selection pooled: this rank picks its share of `picks` (k <= picks <=
  // the reducer's picks_per_k x k), the shares are all-gathered, and positions() holds their union
  // (slots() <= picks of them, the same on every rank). k >= length: every position,
  // without an exchange. `call` (the reducer's step, agreed) rotates which ranks pick
  // the picks mod N extra entries, so with picks < N no rank is left out for good.
  template <communicator C>
  status pool(C& comm, const float* acc, std::size_t k, std::size_t picks, std::uint64_t call) {
    const bool dense = k >= n_;
    if (dense) picks = n_;
    const std::size_t entries = block(picks);  // the most a share lists
    const std::size_t b = pool_block(picks);   // words per rank in the all-gather
    const bool lists = pools_lists(picks);
    std::uint32_t* mine = detail::raw(pool_);
    std::uint32_t* all = mine + b;
    std::uint32_t* own_threshold = all + world_ * b;
    std::uint32_t* bitmap = detail::raw(bitmap_);
    const std::size_t turn = (std::size_t(rank_) + world_ - std::size_t(call % world_)) % world_;
    const std::size_t share = dense ? n_ : picks / world_ + (turn < picks % world_ ? 1 : 0);
    unsigned long long picked = n_;
    impl_.mark(acc, share, dense || lists ? bitmap : mine, own_threshold);
    if (!dense && b > 0) {
      if (lists) {  // its share (fewer on ties at the threshold), free slots last, coded
        std::uint32_t* share_list = detail::raw(list_);  // scratch until the union is listed there
        impl_.to_list(bitmap, share_list, entries);
        const std::size_t blocks = detail::coded_list_blocks(n_);
        launch_(blocks + 1, detail::list_starts<std::uint32_t>{share_list, entries, detail::coded_block_positions, mine});
        launch_(ceil_div(entries, 2), detail::code_list_offsets{share_list, entries, mine + blocks + 1});
      }
      TAGC_TRY(detail::in_phase(comm.all_gather(std::span<const std::uint32_t>(mine, b),
                                                std::span<std::uint32_t>(all, world_ * b)),
                                "pooled index (all-gather of every rank's positions)"));
      const detail::pooled_picks count_picks{all, lists, b, entries, n_};
      if (lists) {
        thrust::fill(launch_.exec.policy(), bitmap_.begin(), bitmap_.end(), 0u);
        launch_(world_ * entries, detail::pool_coded_position{all, b, entries, n_, bitmap});
        TAGC_TRY(picks_sum_.template sum<unsigned long long>(launch_, world_, count_picks, picked));
      } else {
        launch_(words_, detail::pool_bitmaps{all, world_, words_, n_, bitmap});
        TAGC_TRY(picks_sum_.template sum<unsigned long long>(launch_, world_ * b, count_picks, picked));
      }
    }
    const std::size_t cap = std::min(picks, n_);
    std::uint32_t* list = detail::raw(list_);
    impl_.to_list(bitmap, list, cap);
    // how many: the union's size, the same on every rank. The values' all-reduce is
    // sized by it, so a device waits for it here (the leader's select does not).
    unsigned long long* listed = detail::raw(listed_);
    launch_(1, detail::count_positions{list, cap, 0, 0, listed});
    unsigned long long count = 0;
    TAGC_TRY(launch_.exec.copy_to_host(listed, &count, 1));
    slots_ = std::size_t(std::min<unsigned long long>(count, cap));
    picked_ = std::size_t(picked);
    positions_ = list;
    threshold_ = own_threshold;
    return {};
  }
  // This rank's own k largest |acc| as the call's list (RoutedIndexPolicy: nothing is
  // exchanged; its picks go to their owners as entries). Afterwards positions() holds
  // k slots (fewer listed on ties at the threshold, free slots last).
  void pick_own(const float* acc, std::size_t k) {
    std::uint32_t* threshold = detail::raw(wire_) + (wire_.size() - 1);
    impl_.mark(acc, k, detail::raw(bitmap_), threshold);
    impl_.to_list(detail::raw(bitmap_), detail::raw(list_), k);
    positions_ = detail::raw(list_);
    threshold_ = threshold;
    slots_ = k;
  }

  // Pooled: how many positions the ranks picked in all for the last pool() (at most
  // its picks; fewer where a rank held fewer nonzero entries than its share, or had
  // ties at its threshold), the same on every rank.
  std::size_t picked() const { return picked_; }

  // slots() slots: ascending positions, then detail::no_position (select: k slots;
  // pool: the union's size, which every rank computes alike).
  const std::uint32_t* positions() const { return positions_; }
  std::size_t slots() const { return slots_; }
  // The leader's threshold (pooled: this rank's own) as bits of |acc|; entries strictly
  // above it were picked. In the space's memory.
  const std::uint32_t* threshold_bits() const { return threshold_; }

 private:
  using impl_t = detail::shared_select_impl_t<Exec>;
  static std::size_t list_words(std::size_t k) { return k; }
  static std::size_t wire_words(selection_rule rule, std::size_t capacity, std::size_t words) {
    return rule == selection_rule::own ? 1 : std::max(list_words(capacity), words) + 1;
  }
  // A pooling rank's largest share of `picks`.
  std::size_t block(std::size_t picks) const {
    return ceil_div(std::min(picks, world_ * n_), world_);
  }
  // A pooling rank's block of the all-gather, in words: its coded list, or its bitmap when
  // that is smaller.
  std::size_t pool_block(std::size_t picks) const {
    const std::size_t entries = block(picks);
    return entries == 0 ? 0 : std::min(detail::coded_list_words(entries, n_), words_);
  }
  // The largest block any call pooling at most `most_picks` gathers per rank (the coded
  // list's words grow with its entries).
  static std::size_t largest_pool_block(std::size_t most_picks, std::size_t world, std::size_t n) {
    return std::min(detail::coded_list_words(ceil_div(most_picks, world), n), ceil_div(n, 32));
  }
  static std::size_t pool_words(std::size_t most_picks, std::size_t world, std::size_t n) {
    const std::size_t b = largest_pool_block(most_picks, world, n);
    return b + world * b + 1;
  }

  detail::launcher<Exec> launch_{};
  std::size_t n_ = 0, words_ = 0, capacity_ = 0, world_ = 1, slots_ = 0, picked_ = 0;
  int rank_ = 0;
  vector<std::uint32_t> wire_;    // what is broadcast: [list | bitmap][threshold] (own: [threshold])
  vector<std::uint32_t> bitmap_;  // the leader's marks before they become a list
  vector<std::uint32_t> list_;    // the list expanded from a received bitmap, or the pooled union
  vector<std::uint32_t> pool_;    // pool(): [this rank's share | all ranks' shares][its threshold]
  vector<unsigned long long> listed_;  // pool(): count_positions' counts of the union's list
  impl_t impl_{};                 // the leader's marks and the lists, per execution space
  detail::sum_workspace<Exec> picks_sum_;  // pool(): the count of the gathered shares' picks
  const std::uint32_t* positions_ = nullptr;
  const std::uint32_t* threshold_ = nullptr;
};

}  // namespace stage
TAGC_END_NAMESPACE
