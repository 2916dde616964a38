#pragma once
// defines: tagc::TwoLevelAllGather<T, Exec> — the parameter all-gather in two levels,
//          the reverse of TwoLevelReducer: among the nodes first, then inside the node.
//
// Why: after the optimizer step rank r holds flat shard r of the parameters (ZeRO-3 /
// FSDP) and every rank needs them whole. A flat ring all-gather sends (W - 1)/W of the
// buffer over every link of its ring, so each node's link to the next node carries
// (W - 1)/W of it (W ranks). Gathering first among the ranks with the same local rank
// (one per node) and then inside the node sends (M - 1)/M of it across nodes (M nodes),
// split evenly over the node's K ranks (and so over its NICs), and the rest over the
// fast links inside the node. This is the gather half of HSDP and of ZeRO++'s
// hierarchical partitioning.
//
// Layout (W = M x K ranks, S = ceil(length / W), the flat shard size):
//   1. cross: the M ranks with local rank l gather their shards l, K + l, 2K + l, ...
//      in node order: block l of the node-major buffer (M x S);
//   2. node:  the node's K ranks gather their blocks: the node-major buffer (K x M x S);
//   3. back to flat order: flat shard m K + l is node-major block (l, m); the last
//      shard's padding is cut off.
// A copy moves no bits, so the result equals a flat all-gather's, bit for bit, for any
// node shape (tests/test_two_level.cpp).
//
// A size mismatch on one rank is refused on every rank: one 8-byte all-reduce per level
// (cross, then node) carries the verdict before any data moves, so no rank is left
// waiting in a gather the others never enter. The verdict travels through the gatherer's
// own Exec memory (NCCL takes device buffers only); on a device that is one stream
// synchronization per gather, where the verdict is read back.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "comm/communicator.hpp"
#include "comm/two_level.hpp"
#include "core/status.hpp"
#include "detail/launch.hpp"
#include "exec/host.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail {
// Device path of step 3: element i of the flat buffer from the node-major one.
template <class T>
struct flat_from_node_major {
  const T* node_major;
  T* out;
  std::size_t shard, nodes, ranks_per_node;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t r = i / shard, e = i - r * shard;  // flat shard r = m K + l
    const std::size_t m = r / ranks_per_node, l = r - m * ranks_per_node;
    out[i] = node_major[(l * nodes + m) * shard + e];
  }
};
}  // namespace detail

template <class T, class Exec = exec::host>
class TwoLevelAllGather {
 public:
  using exec_space = Exec;
  template <class U> using vector = typename Exec::template vector<U>;

  // `length` elements in all, sharded over `shape.world()` ranks as a flat
  // reduce-scatter shards them; this is rank `rank`. Allocates the two staging buffers.
  status initialize(std::size_t length, node_shape shape, int rank, Exec exec = {}) {
    if (shape.nodes < 1 || shape.ranks_per_node < 1)
      return {errc::invalid_argument, "node shape " + std::to_string(shape.nodes) + " x " +
                                          std::to_string(shape.ranks_per_node) + " has no ranks"};
    if (rank < 0 || rank >= shape.world())
      return {errc::invalid_argument,
              "rank " + std::to_string(rank) + " outside [0, " + std::to_string(shape.world()) + ")"};
    shape_ = shape;
    rank_ = rank;
    exec_ = exec;
    length_ = length;
    shard_ = (length + std::size_t(shape.world()) - 1) / std::size_t(shape.world());
    slice_.assign(shard_ * std::size_t(shape.nodes), T{});
    node_major_.assign(shard_ * std::size_t(shape.world()), T{});
    verdict_.assign(3, 0);
    return {};
  }

  std::size_t shard_size() const { return shard_; }
  std::size_t length() const { return length_; }
  node_shape shape() const { return shape_; }
  std::size_t buffer_bytes() const { return detail::buffer_bytes(slice_) + detail::buffer_bytes(node_major_); }

  // `shard`: this rank's flat shard (shard_size() elements); `whole`: length() elements.
  template <communicator C>
  status all_gather(two_level_communicator<C>& comm, std::span<const T> shard, std::span<T> whole) {
    return all_gather(comm.node, comm.cross, shard, whole);
  }
  template <communicator NodeComm, communicator CrossComm>
  status all_gather(NodeComm& node, CrossComm& cross, std::span<const T> shard, std::span<T> whole) {
    if (node.size() != shape_.ranks_per_node || cross.size() != shape_.nodes ||
        node.rank() != shape_.local_rank_of(rank_) || cross.rank() != shape_.node_of(rank_))
      return {errc::invalid_argument,
              "two-level all-gather: communicators are local rank " + std::to_string(node.rank()) + " of " +
                  std::to_string(node.size()) + " and node " + std::to_string(cross.rank()) + " of " +
                  std::to_string(cross.size()) + "; it was planned for rank " + std::to_string(rank_) + " of " +
                  std::to_string(shape_.nodes) + " x " + std::to_string(shape_.ranks_per_node)};
    // The verdict first, on every rank alike (see the file's head).
    const bool sizes_ok = shard.size() == shard_ && whole.size() == length_;
    std::int64_t bad = 0;
    TAGC_TRY(sum_verdict(node, cross, sizes_ok ? 0 : 1, bad));
    if (!sizes_ok)
      return {errc::size_mismatch, "two-level all-gather: this rank gave a shard of " +
                                          std::to_string(shard.size()) + " and a buffer of " +
                                          std::to_string(whole.size()) + " elements (want " +
                                          std::to_string(shard_) + " and " + std::to_string(length_) + ")"};
    if (bad != 0)
      return {errc::size_mismatch, "two-level all-gather: " + std::to_string(bad) +
                                          " rank(s) gave buffers of the wrong size; nothing was gathered"};
    T* slice = detail::raw(slice_);
    T* node_major = detail::raw(node_major_);
    TAGC_TRY(cross.all_gather(shard, std::span<T>(slice, slice_.size())));
    TAGC_TRY(node.all_gather(std::span<const T>(slice, slice_.size()), std::span<T>(node_major, node_major_.size())));
    flat_order(whole);
    return {};
  }

 private:
  // `mine` summed over every rank (cross level, then node level) into `all`, staged in
  // verdict_: [this rank's, its cross sum, everyone's].
  template <communicator NodeComm, communicator CrossComm>
  status sum_verdict(NodeComm& node, CrossComm& cross, std::int64_t mine, std::int64_t& all) {
    std::int64_t* v = detail::raw(verdict_);
    TAGC_TRY(exec_.copy_from_host(&mine, v, 1));
    TAGC_TRY(cross.all_reduce(std::span<const std::int64_t>(v, 1), std::span<std::int64_t>(v + 1, 1)));
    TAGC_TRY(node.all_reduce(std::span<const std::int64_t>(v + 1, 1), std::span<std::int64_t>(v + 2, 1)));
    return exec_.copy_to_host(v + 2, &all, 1);
  }

  // Step 3: flat shard m K + l from node-major block (l, m), cut to the length.
  void flat_order(std::span<T> whole) const {
    const std::size_t M = std::size_t(shape_.nodes), K = std::size_t(shape_.ranks_per_node);
    const T* in = detail::raw(node_major_);
    if constexpr (!Exec::is_device) {
      const std::ptrdiff_t shards = std::ptrdiff_t(M * K);
#pragma omp parallel for schedule(static) if (length_ >= detail::host_inline_below)
      for (std::ptrdiff_t r = 0; r < shards; ++r) {
        const std::size_t m = std::size_t(r) / K, l = std::size_t(r) % K;
        const std::size_t dst = std::size_t(r) * shard_;
        const std::size_t n = dst < length_ ? std::min(shard_, length_ - dst) : 0;
        if (n) std::memcpy(whole.data() + dst, in + (l * M + m) * shard_, n * sizeof(T));
      }
    } else {
      detail::launcher<Exec>{exec_}(length_, detail::flat_from_node_major<T>{in, whole.data(), shard_, M, K});
    }
  }

  node_shape shape_{};
  int rank_ = 0;
  Exec exec_{};
  std::size_t length_ = 0, shard_ = 0;
  vector<T> slice_, node_major_;
  vector<std::int64_t> verdict_;
};

TAGC_END_NAMESPACE
