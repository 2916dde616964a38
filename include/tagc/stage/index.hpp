#pragma once
// defines: tagc::stage::IndexExchange<IndexPolicy, Residual, Exec> — the index
//          stage: this rank's marks of kept entries (one counter per element,
//          policy/index.hpp; the select stage's hand-off, stage/select.hpp),
//          summed across ranks by an all-reduce or (exact index) a
//          reduce-scatter, and repaired to the exact union for a 1-bit index at
//          two ranks. What it received goes on as handoff() (plan.hpp).

#include <cstdint>
#include <span>
#include <string>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/compress_dispatch.hpp"
#include "../detail/host/support_list.hpp"
#include "../detail/index_kernels.hpp"
#include "../detail/launch.hpp"
#include "../policy/index.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class IndexPolicy, class Residual, class Exec>
class IndexExchange;

template <int Bits, index_exchange IX, class Residual, class Exec>
class IndexExchange<IndexPolicy<Bits, IX>, Residual, Exec> {
 public:
  using index_policy = IndexPolicy<Bits, IX>;
  template <class T> using vector = typename Exec::template vector<T>;

  static status can_implement(const reducer_arguments& a) {
    const int width = index_policy::width_for(a.world_size);
    if (width == 0)
      return {errc::unsupported_world_size, "no byte-packed exact index counts " + std::to_string(a.world_size) +
                                                " ranks (at most 255)"};
    if (Bits >= 2 && !index_policy::exact(width, a.world_size))
      return {errc::unsupported_world_size,
              "IndexPolicy<" + std::to_string(Bits) + "> counts at most " + std::to_string((1 << Bits) - 1) +
                  " ranks per element, world size is " + std::to_string(a.world_size) +
                  "; its counters would overflow (use ExactIndexPolicy)"};
    if (IX == index_exchange::reduce_scatter && !index_policy::exact(width, a.world_size))
      return {errc::unsupported_world_size,
              "index_exchange::reduce_scatter needs an exact index, and IndexPolicy<1> is exact only up to 2 ranks "
              "(world size " + std::to_string(a.world_size) + ")"};
    return {};
  }

  status initialize(const reducer_plan& p, Exec exec) {
    launch_ = {exec};
    plan_ = p;
    marks_bytes_ = p.lay.index_bytes * std::size_t(p.shards);
    reduced_.assign(p.scatter_index ? p.lay.index_bytes : marks_bytes_, 0);
    if constexpr (Exec::is_device)  // received_marks() on a device
      TAGC_TRY(sums_.template reserve<unsigned long long>(exec, reduced_.size(),
                                                          detail::count_marks{nullptr, p.lay, 0}));
    return {};
  }
  std::size_t workspace_bytes() const { return detail::buffer_bytes(reduced_) + sums_.workspace_bytes(); }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    return p.scatter_index ? p.lay.index_bytes : p.lay.index_bytes * std::size_t(p.shards);
  }

  // Sum this rank's marks `local` ([shards][index_bytes], the select stage's) across ranks.
  template <communicator C>
  status exchange(C& comm, const std::uint8_t* local) {
    std::uint8_t* idx = detail::raw(reduced_);
    const std::span<const std::uint8_t> send(local, marks_bytes_);
    if (plan_.scatter_index)
      TAGC_TRY(detail::in_phase(comm.reduce_scatter(send, std::span<std::uint8_t>(idx, reduced_.size())),
                                "index exchange (reduce-scatter)"));
    else
      TAGC_TRY(detail::in_phase(comm.all_reduce(send, std::span<std::uint8_t>(idx, reduced_.size())),
                                "index exchange (all-reduce)"));
    if (plan_.pair_repair) {
      const std::uint8_t* mine = plan_.scatter_index ? local + plan_.own_shard * plan_.lay.index_bytes : local;
      detail::pair_repair_t<Exec>::run(launch_, mine, idx, reduced_.size());
    }
    return {};
  }

  // What this rank received: the whole reduced index, or its shard's part.
  const std::uint8_t* reduced() const { return detail::raw(reduced_); }
  std::size_t reduced_bytes() const { return reduced_.size(); }
  // What each rank sends: its marks of every shard.
  std::size_t local_bytes() const { return marks_bytes_; }
  // What the owner decodes with.
  const std::uint8_t* own_index() const {
    return plan_.scatter_index ? reduced() : reduced() + plan_.own_shard * plan_.lay.index_bytes;
  }
  // What senders check their entries against: nothing when the index is exact
  // (every kept entry is then marked).
  const std::uint8_t* sender_check() const { return plan_.exact_index ? nullptr : reduced(); }

  // What the later stages read (plan.hpp).
  received_index handoff() const { return {reduced(), own_index(), sender_check()}; }

  // Marks in what this rank received (stats).
  unsigned long long received_marks() const {
    const std::size_t first_shard = plan_.scatter_index ? plan_.own_shard : 0;
    if constexpr (!Exec::is_device)  // 64 marks per popcount, not a loop per entry
      return plan_.lay.index_bytes ? detail::host::count_marks(reduced(), plan_.lay, first_shard,
                                                               reduced_.size() / plan_.lay.index_bytes)
                                   : 0;
    return sums_.template sum<unsigned long long>(launch_, reduced_.size(),
                                                  detail::count_marks{reduced(), plan_.lay, first_shard});
  }

 private:
  detail::launcher<Exec> launch_{};
  detail::sum_workspace<Exec> sums_;  // received_marks() on a device
  reducer_plan plan_{};
  std::size_t marks_bytes_ = 0;   // [shards][index_bytes]: what each rank sends
  vector<std::uint8_t> reduced_;  // summed: all shards, or this shard's (index reduce-scatter)
};

}  // namespace stage
TAGC_END_NAMESPACE
