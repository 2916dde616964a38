#pragma once
// defines: tagc::stage::SharedSelection<Exec> — the selection stage of a
//          shared-index reducer (policy/shared_index.hpp): the leader's k
//          largest |acc|, broadcast to every rank as a sorted position list or a
//          bitmap, whichever is smaller, and on every rank the same list of k
//          slots (ascending positions, free slots last) that the values are
//          packed by.
//
// Sized at initialize for the largest k the reducer may ask for (`capacity`);
// nothing is allocated per call. The execution space's own implementation marks
// the leader's bitmap and turns bitmaps into lists (detail/compress_dispatch.hpp):
// the radix select's launches, whose threshold never leaves the space's memory,
// or on the host a sampled bracket and the marks in one pass. Both give the same
// threshold and positions, bit for bit (tests/test_paths.cpp). The threshold
// travels with the positions (one trailing word), so every rank can count what it
// holds back at the leader's threshold.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/launch.hpp"
#include "../detail/shared_kernels.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Exec>
class SharedSelection {
 public:
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) {
    if (a.length >= std::size_t(detail::no_position))
      return {errc::invalid_argument, "length " + std::to_string(a.length) + " >= 2^32 - 1 elements; split the unit"};
    return {};
  }

  // `capacity`: the largest k of any call (from the densest theta the schedule reaches).
  status initialize(const reducer_plan& p, std::size_t capacity, Exec exec) {
    n_ = p.lay.length;
    rank_ = p.args.rank;
    capacity_ = std::min(capacity, n_);
    words_ = (n_ + 31) / 32;
    // The broadcast buffer: the list (capacity) or the bitmap (words), whichever a call
    // uses, plus the leader's threshold.
    wire_.assign(std::max(list_words(capacity_), words_) + 1, detail::no_position);
    bitmap_.assign(words_, 0u);
    list_.assign(capacity_, detail::no_position);
    return impl_.initialize(n_, exec);
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(wire_) + detail::buffer_bytes(bitmap_) + detail::buffer_bytes(list_) +
           impl_.workspace_bytes();
  }
  // What initialize(p, capacity, ...) allocates, before it does (the reducers' workspace
  // query; on a device, but for CUB's scan temporary, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p, std::size_t capacity) {
    const std::size_t n = p.lay.length, cap = std::min(capacity, n), words = (n + 31) / 32;
    return (std::max(list_words(cap), words) + 1 + words + cap) * sizeof(std::uint32_t) +
           impl_t::workspace_bytes_for(n);
  }
  std::size_t capacity() const { return capacity_; }

  // A list of k positions is sent when it is smaller than the bitmap (k < n / 32);
  // every rank decides alike from k.
  bool sends_list(std::size_t k) const { return list_words(k) < words_; }
  // Bytes the broadcast carries for a call keeping k (the threshold word included).
  std::size_t broadcast_bytes(std::size_t k) const {
    return ((sends_list(k) ? list_words(k) : words_) + 1) * sizeof(std::uint32_t);
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
    return {};
  }

  // k slots: ascending positions, then detail::no_position.
  const std::uint32_t* positions() const { return positions_; }
  // The leader's threshold (bits of |acc|; entries strictly above it were picked), in the space's memory.
  const std::uint32_t* threshold_bits() const { return threshold_; }

 private:
  using impl_t = detail::shared_select_impl_t<Exec>;
  static std::size_t list_words(std::size_t k) { return k; }

  std::size_t n_ = 0, words_ = 0, capacity_ = 0;
  int rank_ = 0;
  vector<std::uint32_t> wire_;    // what is broadcast: [list | bitmap][threshold]
  vector<std::uint32_t> bitmap_;  // the leader's marks before they become a list
  vector<std::uint32_t> list_;    // the list expanded from a received bitmap
  impl_t impl_{};                 // the leader's marks and the lists, per execution space
  const std::uint32_t* positions_ = nullptr;
  const std::uint32_t* threshold_ = nullptr;
};

}  // namespace stage
TAGC_END_NAMESPACE
