#pragma once
// defines: tagc::PlainReducer<Wire, Exec> — the uncompressed baseline with the
//          Reducer's contract (initialize, reduce_scatter / all_reduce, state).
//
// The gradient is copied into a zero-padded send buffer (world x shard elements;
// the padding is never written), converted to Wire (float, or tagc::bfloat16 as
// llm.c sends gradients), summed by the communicator (a bf16 SUM adds in float and
// rounds back to bf16 at every reduction step, as NCCL's does) and, for
// reduce_op::mean, divided by the world size in float by the receiver.
// It keeps no error-feedback state: save_state() is empty, and a non-empty state
// is refused, so a checkpoint cannot be loaded into the wrong kind of reducer.
// Sized once by initialize(); the step path allocates nothing.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/transform.h>

#include "comm/communicator.hpp"
#include "core/bfloat16.hpp"
#include "core/status.hpp"
#include "exec/host.hpp"
#include "reducer/entry_points.hpp"
#include "reducer/unit_label.hpp"
#include "reducer_arguments.hpp"
#include "stats.hpp"

TAGC_BEGIN_NAMESPACE

namespace kernels {
struct to_wire_bf16 {
  TAGC_HOST_DEVICE bfloat16 operator()(float x) const { return bfloat16(x); }
};
struct from_wire_bf16_scaled {
  float s;
  TAGC_HOST_DEVICE float operator()(bfloat16 x) const { return x.to_float() * s; }
};
struct scale_by {
  float s;
  TAGC_HOST_DEVICE float operator()(float x) const { return x * s; }
};
}  // namespace kernels

template <class Wire = float, class Exec = exec::host>
class PlainReducer : public reducer_entry_points<PlainReducer<Wire, Exec>> {
  static_assert(std::is_same_v<Wire, float> || std::is_same_v<Wire, bfloat16>,
                "tagc: PlainReducer<Wire>: Wire is float or tagc::bfloat16");

 public:
  using wire_type = Wire;
  using exec_space = Exec;
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) { return check_placement(a); }
  // Sends every element as it is (compressed reducers: true).
  static constexpr bool compressed() { return false; }

  status initialize(const reducer_arguments& args, Exec exec = {}) {
    unit_.assign(args.name);
    if (auto s = can_implement(args); !s.ok()) return unit_(std::move(s));
    args_ = args;
    args_.name = {};  // kept in unit_: the caller's string need not outlive the reducer
    exec_ = exec;
    shard_ = output_size_for(args);
    send_.assign(send_size_for(args), Wire(0.0f));
    if constexpr (!std::is_same_v<Wire, float>) recv_.assign(shard_, Wire(0.0f));
    initialized_ = true;
    return {};
  }

  // Length of the shard a rank receives (sharded) or of the whole buffer (replicated).
  std::size_t output_size() const { return shard_; }
  // The bytes initialize(args) allocates (the send buffer; bf16: and the received shard),
  // before it does; 0 for arguments can_implement refuses.
  static std::size_t workspace_bytes_for(const reducer_arguments& args) {
    if (!can_implement(args).ok()) return 0;
    return (send_size_for(args) + (std::is_same_v<Wire, float> ? 0 : output_size_for(args))) * sizeof(Wire);
  }
  std::size_t workspace_bytes() const { return (send_.size() + recv_.size()) * sizeof(Wire); }
  const reducer_arguments& arguments() const { return args_; }  // (its name is empty: see name())
  std::string_view name() const { return unit_.name(); }
  // reduce_scatter and all_reduce: reducer/entry_points.hpp.

  // No error-feedback state.
  std::vector<std::byte> save_state() const { return {}; }
  status load_state(std::span<const std::byte> s) const {
    if (!s.empty())
      return unit_({errc::io, "plain reducer: the state holds " + std::to_string(s.size()) +
                                     " bytes of reducer state, a plain reducer keeps none"});
    return {};
  }

 private:
  friend class reducer_entry_points<PlainReducer>;
  static constexpr const char* contract_name = "PlainReducer";

  template <communicator C>
  status run(C& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) {
    if (!initialized_) return {errc::invalid_argument, "plain reducer used before initialize"};
    if (grad.size() != args_.length || out.size() != shard_)
      return {errc::size_mismatch, std::string("plain ") + wire_name() + " reducer: gradient of " +
                                       std::to_string(grad.size()) + " and output of " + std::to_string(out.size()) +
                                       " elements, expected " + std::to_string(args_.length) + " and " +
                                       std::to_string(shard_)};
    const bool sharded = args_.topo == topology::sharded;
    const float scale = args_.op == reduce_op::mean ? 1.0f / float(args_.world_size) : 1.0f;
    Wire* send = thrust::raw_pointer_cast(send_.data());
    if constexpr (std::is_same_v<Wire, float>) {
      thrust::copy(exec_.policy(), grad.data(), grad.data() + grad.size(), send);
      const std::span<const float> s(send, send_.size());
      TAGC_TRY(sharded ? comm.reduce_scatter(s, out) : comm.all_reduce(s, out));
      if (scale != 1.0f) thrust::transform(exec_.policy(), out.data(), out.data() + out.size(), out.data(),
                                           kernels::scale_by{scale});
    } else {
      thrust::transform(exec_.policy(), grad.data(), grad.data() + grad.size(), send, kernels::to_wire_bf16{});
      Wire* recv = thrust::raw_pointer_cast(recv_.data());
      const std::span<const Wire> s(send, send_.size());
      const std::span<Wire> r(recv, shard_);
      TAGC_TRY(sharded ? comm.reduce_scatter(s, r) : comm.all_reduce(s, r));
      thrust::transform(exec_.policy(), recv, recv + shard_, out.data(), kernels::from_wire_bf16_scaled{scale});
    }
    if (stats) {
      *stats = reduce_stats{};
      stats->elements = args_.length;
      stats->kept = args_.length;
      stats->value_type_bytes = int(sizeof(Wire));
      stats->value_bytes = ring_bytes_sent(sharded ? collective::reduce_scatter : collective::all_reduce,
                                           double(send_.size() * sizeof(Wire)), args_.world_size);
    }
    return {};
  }

  static std::size_t output_size_for(const reducer_arguments& a) {
    const std::size_t world = std::size_t(a.world_size);
    return a.topo == topology::sharded ? (a.length + world - 1) / world : a.length;
  }
  // Zero-padded to world x shard when sharded (the padding is never written).
  static std::size_t send_size_for(const reducer_arguments& a) {
    return a.topo == topology::sharded ? output_size_for(a) * std::size_t(a.world_size) : a.length;
  }
  static const char* wire_name() { return std::is_same_v<Wire, float> ? "fp32" : "bf16"; }
  // A refusal names the unit (no step: a plain reducer does not count its calls).
  status label(status s) const { return unit_(std::move(s)); }

  reducer_arguments args_{};
  unit_label unit_{nullptr};
  Exec exec_{};
  std::size_t shard_ = 0;
  bool initialized_ = false;
  vector<Wire> send_, recv_;  // recv_ only for bf16 (float sums land in the caller's output)
};

TAGC_END_NAMESPACE
