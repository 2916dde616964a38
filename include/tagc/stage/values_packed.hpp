#pragma once
// defines: tagc::stage::Values<PackedValuesPolicy<Value>, Residual, Exec> — the
//          values stage of a packed reducer: every rank holds the whole reduced
//          index, so each writes its values at the union positions of every
//          shard densely (slot = prefix count of marks) and the slots are
//          reduce-scattered; the owner unpacks the exact sums. No decode stage.
//
// A reduce-scatter needs equal parts, so each shard's slots are padded to the
// largest shard's union: (N - 1) x largest union per rank. Gradients are skewed
// (the embedding rows of frequent tokens make one shard "hot": at 16 ranks one
// shard held 30 % of the union), and then every rank pays for the hot shard.
// When one shard holds more than twice the mean, the unions are laid back to
// back instead and all-reduced, 2 (N - 1) / N x union per rank, and the owner
// reads its own range. Every rank holds the same reduced index, so every rank
// makes the same choice with no message; the sums are exact either way.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/scan.h>
#if defined(__CUDACC__)
#  include <cub/device/device_scan.cuh>

#  include "../exec/cuda.hpp"  // TAGC_CUDA_TRY
#endif

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/index_kernels.hpp"
#include "../detail/host/packed_slots.hpp"
#include "../detail/host/support_list.hpp"
#include "../detail/host_compress.hpp"
#include "../detail/launch.hpp"
#include "../detail/packed_kernels.hpp"
#include "../policy/packed.hpp"
#include "../stats.hpp"
#include "plan.hpp"
#include "residual.hpp"
#include "values.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Value, class Residual, class Exec>
class Values<PackedValuesPolicy<Value>, Residual, Exec> {
 public:
  using wire_t = Value;
  static constexpr int ratio = 1, lanes = 1024;
  static constexpr bool sketched = false;
  static constexpr bool host_paths = detail::uses_host_paths<Exec>;
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) {
    if (a.adapt.enabled) return {errc::invalid_argument, "adaptive sparsity steers the sketch load; PackedPolicy has none"};
    return {};
  }
  // No sketch cells; packed slots are sized per call.
  static layout make_plan_layout(std::size_t length, int shards, int index_width) {
    layout l = make_layout(length, shards, std::size_t(lanes), ratio, index_width);
    l.dense = true;
    return l;
  }
  static bool peels(const layout&) { return false; }

  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    plan_ = p;
    const std::size_t index_all = p.lay.index_bytes * std::size_t(p.shards);
    // Worst case every entry of a shard is in the union: room for whole shards
    // (and for the whole union back to back, all-reduced, when sharded).
    values_send_.assign(p.lay.padded(), wire_t(0.0f));
    values_recv_.assign(p.shards > 1 ? p.lay.padded() : p.lay.shard_size, wire_t(0.0f));
    if constexpr (host_paths) {
      host_.initialize(p.lay, p.shards);  // the slots from word popcounts per chunk: no scan over index bytes
    } else {
      offsets_.assign(index_all + 1, 0u);
      starts_.assign(std::size_t(p.shards) + 1, 0u);
      starts_host_.assign(starts_.size(), 0u);
#if defined(__CUDACC__)
      if constexpr (Exec::is_device) {
        std::size_t bytes = 0;
        TAGC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, marks_of(nullptr), detail::raw(offsets_),
                                                    int(index_all + 1), exec.stream));
        scan_temp_.assign(bytes ? bytes : 1, 0);
      }
#endif
      // the support in fill_stats()
      TAGC_TRY(sums_.template reserve<unsigned long long>(exec, p.lay.index_bytes,
                                                          detail::count_marks{nullptr, p.lay, 0}));
    }
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(values_send_) + detail::buffer_bytes(values_recv_) + detail::buffer_bytes(offsets_) +
           detail::buffer_bytes(starts_) + starts_host_.size() * sizeof(std::uint32_t) + host_.workspace_bytes() +
           detail::buffer_bytes(scan_temp_) + sums_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    std::size_t b = (p.lay.padded() + (p.shards > 1 ? p.lay.padded() : p.lay.shard_size)) * sizeof(wire_t);
    if constexpr (host_paths) {
      b += detail::host::packed_slots::workspace_bytes_for(p.lay, p.shards);
    } else {
      b += (p.lay.index_bytes * std::size_t(p.shards) + 1 + 2 * (std::size_t(p.shards) + 1)) * sizeof(std::uint32_t);
    }
    return b;
  }
  std::size_t max_cell_terms() const { return 1; }  // a packed slot holds one value per rank

  // Slots per shard = marks in it; every rank computes all of them alike.
  void encode(const call_view<Residual>& c, bool) {
    const std::uint8_t* idx = c.reduced_index;  // the whole all-reduced index
    if constexpr (host_paths) {
      slots_ = host_.count(idx);
      choose_layout(host_.union_before(std::size_t(plan_.shards)), host_.union_before(plan_.own_shard));
      const std::size_t slots = back_to_back_ ? 0 : slots_;
      if (c.kept_listed)  // the kept entries' values were listed by the marking pass: no read of acc per union entry
        host_.pack_kept(idx, c.kept, c.kept_values, c.kept_count, c.sender_check, c.wire_scale,
                        detail::raw(values_send_), slots);
      else
        host_.pack(idx, c.acc, c.state->threshold, c.sender_check, c.wire_scale, detail::raw(values_send_), slots);
      return;
    }
    const std::size_t index_all = offsets_.size() - 1;
    // The slots' offsets: marks per index byte, scanned. On CUDA by CUB into
    // scan_temp_ (thrust::exclusive_scan would cudaMalloc / cudaFree its
    // temporaries on every call); an error shows at the space's synchronize().
    if constexpr (Exec::is_device) {
#if defined(__CUDACC__)
      std::size_t bytes = scan_temp_.size();
      (void)cub::DeviceScan::ExclusiveSum(detail::raw(scan_temp_), bytes, marks_of(idx), detail::raw(offsets_),
                                          int(index_all + 1), launch_.exec.stream);
#endif
    } else {
      const auto marks = marks_of(idx);
      thrust::exclusive_scan(launch_.exec.policy(), marks, marks + std::ptrdiff_t(index_all + 1), offsets_.begin(), 0u);
    }
    launch_(starts_.size(), detail::shard_starts{detail::raw(offsets_), detail::raw(starts_), plan_.lay.index_bytes});
    (void)launch_.exec.copy_to_host(detail::raw(starts_), starts_host_.data(), starts_host_.size());
    std::size_t slots = 0;
    for (std::size_t s = 0; s + 1 < starts_host_.size(); ++s)
      slots = std::max<std::size_t>(slots, starts_host_[s + 1] - starts_host_[s]);
    slots_ = slots;
    const std::size_t shards = std::size_t(plan_.shards);
    choose_layout(starts_host_[shards], starts_host_[plan_.own_shard]);
    if (back_to_back_)
      slots = 0;
    else
      launch_(shards * slots, detail::zero_padding_slots<wire_t>{detail::raw(starts_), detail::raw(values_send_), slots});
    launch_(index_all, detail::pack_values<wire_t, detail::contribution<Residual>>{
                           c.contribution(), idx, detail::raw(offsets_), detail::raw(starts_),
                           detail::raw(values_send_), slots, c.wire_scale});
  }

  template <communicator C>
  status exchange(C& comm) {
    const std::size_t send_count = sent_size();
    value_bytes_ = send_count * sizeof(wire_t);
    const std::span<const wire_t> send(detail::raw(values_send_), send_count);
    if (back_to_back_)
      return detail::in_phase(comm.all_reduce(send, std::span<wire_t>(detail::raw(values_recv_), send_count)),
                              "value exchange (all-reduce of the unions back to back)");
    const std::span<wire_t> recv(detail::raw(values_recv_), slots_);
    if (plan_.args.topo == topology::sharded)
      return detail::in_phase(comm.reduce_scatter(send, recv), "value exchange (reduce-scatter)");
    return detail::in_phase(comm.all_reduce(send, recv), "value exchange (all-reduce)");
  }
  // The collective the last call's values took (the ring model counts its bytes).
  collective value_collective() const {
    return plan_.args.topo == topology::sharded && !back_to_back_ ? collective::reduce_scatter : collective::all_reduce;
  }

  template <communicator C, class Decoder>
  status decode(C&, const call_view<Residual>& c, Decoder&, const std::uint8_t*& retransmit) {
    retransmit = nullptr;
    const wire_t* own_slots = detail::raw(values_recv_) + (back_to_back_ ? own_base_ : 0);
    if constexpr (host_paths) {
      host_.unpack(c.reduced_index, plan_.own_shard, own_slots, c.scale * c.wire_unscale, c.out);
      return {};
    }
    launch_(plan_.lay.index_bytes,
            detail::unpack_values<wire_t>{c.reduced_index, detail::raw(offsets_), detail::raw(starts_), own_slots,
                                          c.out, c.scale * c.wire_unscale, plan_.lay, plan_.own_shard});
    return {};
  }
  template <class Decoder>
  void finish(const call_view<Residual>&, ResidualStore<Residual, Exec>&, const Decoder&) {}

  template <class Decoder>
  void fill_stats(reduce_stats& s, const call_view<Residual>& c, const Decoder&) const {
    if constexpr (!Exec::is_device)  // 64 marks per popcount, not a loop per entry
      s.support = detail::host::count_marks(c.own_index, plan_.lay, plan_.own_shard, 1);
    else
      s.support = sums_.template sum<unsigned long long>(
          launch_, plan_.lay.index_bytes, detail::count_marks{c.own_index, plan_.lay, plan_.own_shard});
    s.peeled = s.support;
    s.packed_slots = slots_;
    s.packed_union = union_;
    s.packed_back_to_back = back_to_back_;
  }
  std::size_t value_bytes_sent() const { return value_bytes_; }
  // What this rank sent last call ([shards][slots], or the unions back to back; in
  // the space's memory): tests compare paths with it.
  const wire_t* sent() const { return detail::raw(values_send_); }
  std::size_t sent_size() const { return back_to_back_ ? union_ : std::size_t(plan_.shards) * slots_; }
  bool sent_back_to_back() const { return back_to_back_; }
  double unfed_rounding() const { return 0.0; }

 private:
  detail::launcher<Exec> launch_{};
  reducer_plan plan_{};
  std::size_t slots_ = 0, value_bytes_ = 0;
  bool back_to_back_ = false;             // this call's layout (see the file's head)
  std::size_t union_ = 0, own_base_ = 0;  // the whole union, and the union before this rank's shard

  // Ring bytes per rank: reduce-scatter (N - 1)/N x N x largest, all-reduce 2 (N - 1)/N x union.
  void choose_layout(std::size_t whole_union, std::size_t before_own) {
    union_ = whole_union;
    own_base_ = before_own;
    back_to_back_ = plan_.args.topo == topology::sharded && plan_.shards > 1 &&
                    2 * whole_union < std::size_t(plan_.shards) * slots_;
  }
  vector<wire_t> values_send_;  // [shards][slots]
  vector<wire_t> values_recv_;  // this shard's summed slots
  // Marks in each byte of the whole index `idx` (0 past its end): the scan's input.
  auto marks_of(const std::uint8_t* idx) const {
    return thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0),
                                           detail::marks_in_byte{idx, plan_.lay, plan_.lay.index_bytes *
                                                                                     std::size_t(plan_.shards)});
  }

  vector<std::uint32_t> offsets_, starts_;  // scan over index bytes, shard starts
  vector<unsigned char> scan_temp_;         // CUB's scan workspace (CUDA only)
  detail::sum_workspace<Exec> sums_;        // the support in fill_stats() on a device
  std::vector<std::uint32_t> starts_host_;  // host copy of starts_ (sized once)
  detail::host::packed_slots host_;         // host paths: the slots from index words (instead of the three above)
};

}  // namespace stage
TAGC_END_NAMESPACE
