#pragma once
// defines: tagc::stage::Values<PackedValuesPolicy<Value>, Residual, Exec> — the
//          values stage of a packed reducer: every rank holds the whole reduced
//          index, so each writes its values at the union positions of every
//          shard densely (slot = prefix count of marks) and the slots are
//          reduce-scattered; the owner unpacks the exact sums. No decode stage.
//          The slots are the execution space's own implementation's
//          (detail/compress_dispatch.hpp).
//
// A reduce-scatter needs equal parts, so each shard's slots are padded to the
// largest shard's union: (N - 1) x largest union per rank. Gradients are skewed
// (the embedding rows of frequent tokens make one shard "hot": at 16 ranks one
// shard held 30 % of the union), and then every rank pays for the hot shard.
// When one shard holds more than twice the mean, the unions are laid back to
// back instead and all-reduced, 2 (N - 1) / N x union per rank, and the owner
// reads its own range (detail::unions_back_to_back). Every rank holds the same
// reduced index, so every rank makes the same choice with no message; the sums
// are exact either way.

#include <cstdint>
#include <span>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/launch.hpp"
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
    plan_ = p;
    // Worst case every entry of a shard is in the union: room for whole shards
    // (and for the whole union back to back, all-reduced, when sharded).
    values_send_.assign(p.lay.padded(), wire_t(0.0f));
    values_recv_.assign(p.shards > 1 ? p.lay.padded() : p.lay.shard_size, wire_t(0.0f));
    return impl_.initialize(p.lay, p.shards, exec);
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(values_send_) + detail::buffer_bytes(values_recv_) + impl_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    return (p.lay.padded() + (p.shards > 1 ? p.lay.padded() : p.lay.shard_size)) * sizeof(wire_t) +
           detail::packed_impl_t<wire_t, Exec>::workspace_bytes_for(p.lay, p.shards);
  }
  std::size_t max_cell_terms() const { return 1; }  // a packed slot holds one value per rank

  // Slots per shard = marks in the whole all-reduced index (every rank computes
  // all of them alike); this rank's values at the union positions.
  void encode(const call_view<Residual>& c, bool) {
    slots_ = impl_.pack(c.index.reduced, c.contribution(), c.sel.kept, c.wire_scale, plan_.own_shard,
                        detail::raw(values_send_));
  }

  template <communicator C>
  status exchange(C& comm) {
    const std::size_t send_count = sent_size();
    value_bytes_ = send_count * sizeof(wire_t);
    const std::span<const wire_t> send(detail::raw(values_send_), send_count);
    if (slots_.back_to_back)
      return detail::in_phase(comm.all_reduce(send, std::span<wire_t>(detail::raw(values_recv_), send_count)),
                              "value exchange (all-reduce of the unions back to back)");
    const std::span<wire_t> recv(detail::raw(values_recv_), slots_.largest);
    if (plan_.args.topo == topology::sharded)
      return detail::in_phase(comm.reduce_scatter(send, recv), "value exchange (reduce-scatter)");
    return detail::in_phase(comm.all_reduce(send, recv), "value exchange (all-reduce)");
  }
  // The collective the last call's values took (the ring model counts its bytes).
  collective value_collective() const {
    return plan_.args.topo == topology::sharded && !slots_.back_to_back ? collective::reduce_scatter
                                                                         : collective::all_reduce;
  }

  template <communicator C, class Decoder>
  status decode(C&, const call_view<Residual>& c, Decoder&, const std::uint8_t*& retransmit) {
    retransmit = nullptr;
    const wire_t* own_slots = detail::raw(values_recv_) + (slots_.back_to_back ? slots_.before_own : 0);
    impl_.unpack(c.index.reduced, plan_.own_shard, own_slots, c.scale * c.wire_unscale, c.out);
    return {};
  }
  template <class Decoder>
  void finish(const call_view<Residual>&, ResidualStore<Residual, Exec>&, const Decoder&) {}

  template <class Decoder>
  void fill_stats(reduce_stats& s, const call_view<Residual>& c, const Decoder&) const {
    s.support = impl_.support(c.index.own, plan_.own_shard);
    s.peeled = s.support;
    s.packed_slots = slots_.largest;
    s.packed_union = slots_.whole_union;
    s.packed_back_to_back = slots_.back_to_back;
  }
  std::size_t value_bytes_sent() const { return value_bytes_; }
  // What this rank sent last call ([shards][slots], or the unions back to back; in
  // the space's memory): tests compare paths with it.
  const wire_t* sent() const { return detail::raw(values_send_); }
  std::size_t sent_size() const {
    return slots_.back_to_back ? slots_.whole_union : std::size_t(plan_.shards) * slots_.largest;
  }
  bool sent_back_to_back() const { return slots_.back_to_back; }
  double unfed_rounding() const { return 0.0; }

 private:
  reducer_plan plan_{};
  detail::packed_layout slots_{};  // this call's
  std::size_t value_bytes_ = 0;
  vector<wire_t> values_send_;  // [shards][slots], or the unions back to back
  vector<wire_t> values_recv_;  // this shard's summed slots (or every shard's, back to back)
  detail::packed_impl_t<wire_t, Exec> impl_{};  // the slots: the execution space's implementation
};

}  // namespace stage
TAGC_END_NAMESPACE
