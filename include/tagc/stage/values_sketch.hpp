#pragma once
// defines: tagc::stage::Values<SketchPolicy<Ratio, Lanes, Value>, Residual, Exec>
//          — the values stage of a sketch reducer: a count sketch of each shard
//          (gathered per cell in a fixed order: bit-for-bit deterministic),
//          reduce-scattered to its owner, widened and peeled by stage::Decode.
//          16-bit cells are summed in fp32 and rounded once for the wire.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/decode_kernels.hpp"
#include "../detail/launch.hpp"
#include "../detail/sketch_kernels.hpp"
#include "../detail/wire_kernels.hpp"
#include "../policy/sketch.hpp"
#include "../stats.hpp"
#include "plan.hpp"
#include "residual.hpp"
#include "values.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <int Ratio, int Lanes, class Value, class Residual, class Exec>
class Values<SketchPolicy<Ratio, Lanes, Value>, Residual, Exec> {
 public:
  using wire_t = Value;
  static constexpr int ratio = Ratio, lanes = Lanes;
  static constexpr bool sketched = true;
  static constexpr bool narrow_cells = !std::is_same_v<wire_t, float>;  // 16-bit sketch cells
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) {
    if (a.adapt.enabled) {
      const auto& p = a.adapt;
      if (!(p.target_load > 0.0 && p.target_load < 0.82 && p.min_sparsity >= 0.0 && p.min_sparsity <= p.max_sparsity &&
            p.max_sparsity <= 1.0))
        return {errc::invalid_argument, "adaptive sparsity wants 0 < target_load < 0.82 and "
                                        "0 <= min_sparsity <= max_sparsity <= 1"};
    }
    return {};
  }

  // The layout: a sketch of shard_size / ratio cells per shard (dense when that would not be smaller).
  static layout make_plan_layout(std::size_t length, int shards, int index_width) {
    return make_layout(length, shards, std::size_t(Lanes), Ratio, index_width);
  }
  // Whether stage::Decode peels for this layout.
  static bool peels(const layout& l) { return !l.dense; }

  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    plan_ = p;
    const layout& l = p.lay;
    const std::size_t shards = std::size_t(p.shards);
    const std::size_t cells = l.dense ? l.shard_size : l.cells;
    max_cell_terms_ = 1;  // a dense cell holds one value per rank
    if constexpr (narrow_cells) {
      sketch_f32_.assign(cells * shards, 0.0f);
      // the unfed rounding in encode(measure) on a device
      TAGC_TRY(sums_.template reserve<double>(exec, cells * shards, detail::cell_rounding<wire_t>{nullptr, nullptr}));
    }
    values_send_.assign(cells * shards, wire_t(0.0f));
    values_recv_.assign(cells, wire_t(0.0f));
    if (!l.dense) {
      const auto b = detail::make_sketch_buckets(l);
      max_cell_terms_ = b.max_row_blocks();
      bucket_start_.resize(b.start.size());
      bucket_order_.resize(b.order.size());
      TAGC_TRY(exec.copy_from_host(b.start.data(), detail::raw(bucket_start_), b.start.size()));
      TAGC_TRY(exec.copy_from_host(b.order.data(), detail::raw(bucket_order_), b.order.size()));
    }
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(values_send_) + detail::buffer_bytes(values_recv_) +
           detail::buffer_bytes(sketch_f32_) + detail::buffer_bytes(bucket_start_) +
           detail::buffer_bytes(bucket_order_) + sums_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    const layout& l = p.lay;
    const std::size_t shards = std::size_t(p.shards), cells = l.dense ? l.shard_size : l.cells;
    std::size_t b = (cells * shards + cells) * sizeof(wire_t);
    if constexpr (narrow_cells) b += cells * shards * sizeof(float);
    if (!l.dense && l.blocks != 0) b += (l.sketch_rows() + 1 + 3 * std::size_t(l.blocks)) * sizeof(std::uint32_t);
    return b;
  }
  // The most values one rank adds into one cell (bounds the fp16 range scale).
  std::size_t max_cell_terms() const { return max_cell_terms_; }

  // Build this rank's sketch of every shard. `measure`: also sum the cell
  // roundings no residual gets back (reduce_stats::unfed_rounding).
  void encode(const call_view<Residual>& c, [[maybe_unused]] bool measure) {
    unfed_rounding_ = 0.0;
    // The fp32 sums: the cells themselves, or (16-bit cells) their sums before rounding.
    float* sums = narrow_cells ? detail::raw(sketch_f32_) : float_send();
    // The execution space's own way when it has one (the host: from the kept list,
    // 1-10 % of the entries), else the gather build over every entry.
    if (!detail::sketch_builder_t<Exec>::template from_kept<wire_t>(c.sel.kept, plan_.lay, c.index.sender_check, sums,
                                                                     c.wire_scale)) {
      const std::size_t chunk = sketch_chunk();
      using build_t = detail::build_sketch<wire_t, detail::contribution<Residual>>;
      launch_(build_t::calls(plan_.lay, chunk), build_t{c.contribution(), detail::raw(bucket_start_),
                                                        detail::raw(bucket_order_), sums, chunk, c.wire_scale});
    }
    if constexpr (narrow_cells) {
      // Cells are summed in fp32 from values already rounded to wire_t (that
      // rounding goes back to the residual), then rounded once for the wire.
      launch_(values_send_.size(), detail::round_cells<wire_t>{detail::raw(sketch_f32_), detail::raw(values_send_)});
      if (measure) {
        unfed_rounding_ = double(c.wire_unscale) *
            sums_.template sum<double>(launch_, values_send_.size(),
                                       detail::cell_rounding<wire_t>{detail::raw(sketch_f32_), detail::raw(values_send_)});
      }
    }
  }

  template <communicator C>
  status exchange(C& comm) {
    value_bytes_ = values_send_.size() * sizeof(wire_t);
    const std::span<const wire_t> send(detail::raw(values_send_), values_send_.size());
    const std::span<wire_t> recv(detail::raw(values_recv_), values_recv_.size());
    if (plan_.args.topo == topology::sharded)
      return detail::in_phase(comm.reduce_scatter(send, recv), "value exchange (reduce-scatter)");
    return detail::in_phase(comm.all_reduce(send, recv), "value exchange (all-reduce)");
  }

  template <communicator C, class Decoder>
  status decode(C& comm, const call_view<Residual>& c, Decoder& dec, const std::uint8_t*& retransmit) {
    retransmit = nullptr;
    if constexpr (narrow_cells)  // decode in fp32: widen (and unscale) the owner's summed cells
      launch_(values_recv_.size(),
              detail::widen_cells<wire_t>{detail::raw(values_recv_), detail::raw(sketch_f32_), c.wire_unscale});
    if (plan_.lay.dense) {
      launch_(plan_.lay.shard_size, detail::decode_dense{decode_cells(), c.out, 1.0f});
      dec.clear();
      return {};
    }
    TAGC_TRY(dec.run(decode_cells(), c.index.own, c.out));
    return dec.publish_unresolved(comm, retransmit);
  }

  // After the residual is committed: owe the estimates, apply the op's scale.
  template <class Decoder>
  void finish(const call_view<Residual>& c, ResidualStore<Residual, Exec>& residual, const Decoder& dec) {
    if (dec.last().unresolved && Decoder::decode_policy::estimates && plan_.owes_estimates())
      residual.owe_estimates(dec.entry_state(), c.out, plan_.own_shard * plan_.lay.shard_size, plan_.lay.shard_size,
                             c.seed);
    if (c.scale != 1.0f) launch_(plan_.lay.shard_size, detail::scale_output{c.out, c.scale});
  }

  template <class Decoder>
  void fill_stats(reduce_stats& s, const call_view<Residual>&, const Decoder& dec) const {
    if (plan_.lay.dense) return;
    s.support = dec.last().support;
    s.peeled = dec.last().peeled;
    s.unresolved = dec.last().unresolved;
    s.load = plan_.lay.cells ? double(s.support) / double(plan_.lay.cells) : 0.0;
  }
  std::size_t value_bytes_sent() const { return value_bytes_; }
  collective value_collective() const {
    return plan_.args.topo == topology::sharded ? collective::reduce_scatter : collective::all_reduce;
  }
  // What this rank sent last call ([shards][cells], in the space's memory): tests compare paths with it.
  const wire_t* sent() const { return detail::raw(values_send_); }
  std::size_t sent_size() const { return values_send_.size(); }
  double unfed_rounding() const { return unfed_rounding_; }

 private:
  // Lanes per sketch-building call: the execution space's tuning, 1 if it has none.
  std::size_t sketch_chunk() const {
    std::size_t c = 1;
    if constexpr (requires { Exec::sketch_lanes_per_call; }) c = Exec::sketch_lanes_per_call;
    return std::max<std::size_t>(1, std::min(c, plan_.lay.lanes));
  }
  // float cells to send (only meaningful when the wire type is float).
  float* float_send() {
    if constexpr (narrow_cells) return nullptr;
    else return detail::raw(values_send_);
  }
  // The owner's summed cells in fp32, as peeling consumes them: the received
  // cells themselves, or their fp32 widening when they travel in 16 bits.
  float* decode_cells() {
    if constexpr (narrow_cells) return detail::raw(sketch_f32_);
    else return detail::raw(values_recv_);
  }

  detail::launcher<Exec> launch_{};
  reducer_plan plan_{};
  std::size_t max_cell_terms_ = 1;
  std::size_t value_bytes_ = 0;
  double unfed_rounding_ = 0.0;
  vector<wire_t> values_send_;  // [shards][cells]
  vector<wire_t> values_recv_;  // this shard's summed cells
  vector<float> sketch_f32_;    // 16-bit cells: fp32 sums before rounding; then the owner's widened cells
  vector<std::uint32_t> bucket_start_, bucket_order_;  // sketch gather map (constant)
  detail::sum_workspace<Exec> sums_;                   // 16-bit cells: the unfed rounding on a device
};

}  // namespace stage
TAGC_END_NAMESPACE
