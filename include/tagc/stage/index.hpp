#pragma once
// defines: tagc::stage::IndexExchange<IndexPolicy, Residual, Exec> — the index
//          stage: this rank's marks of kept entries (one counter per element,
//          policy/index.hpp), summed across ranks by an all-reduce or (exact
//          index) a reduce-scatter, and repaired to the exact union for a 1-bit
//          index at two ranks.

#include <cstdint>
#include <span>
#include <string>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/index_kernels.hpp"
#include "../detail/host/select_marks.hpp"
#include "../detail/host/support_list.hpp"
#include "../detail/host_compress.hpp"
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
  static constexpr bool host_paths = detail::uses_host_paths<Exec>;
  // Host: the kept entries are listed (for the sketch and the sparse residual
  // commit) when there are at most length / 4 (theta >= 0.75).
  static std::size_t kept_capacity(std::size_t n) { return n / 4 + 1; }

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
    const std::size_t all = p.lay.index_bytes * std::size_t(p.shards);
    local_.assign(all, 0);
    reduced_.assign(p.scatter_index ? p.lay.index_bytes : all, 0);
    if constexpr (Exec::is_device)  // received_marks() on a device
      TAGC_TRY(sums_.template reserve<unsigned long long>(exec, reduced_.size(),
                                                          detail::count_marks{nullptr, p.lay, 0}));
    if constexpr (host_paths) {
      kept_.assign(kept_capacity(p.lay.length), 0u);
      kept_values_.assign(kept_.size(), 0.0f);
    }
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(local_) + detail::buffer_bytes(reduced_) + detail::buffer_bytes(kept_) +
           detail::buffer_bytes(kept_values_) + sums_.workspace_bytes();
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    const std::size_t all = p.lay.index_bytes * std::size_t(p.shards);
    std::size_t b = all + (p.scatter_index ? p.lay.index_bytes : all);
    if constexpr (host_paths) b += kept_capacity(p.lay.length) * (sizeof(std::uint32_t) + sizeof(float));
    return b;
  }

  // This rank's marks (counter = 1 where |acc| is above the threshold); counts the kept entries.
  // Host paths: the threshold select marked them already (`marker`, into
  // marks_target()) and staged them (kept_target()); this lists the kept entries
  // from the stage, or from the index when they did not fit there.
  // `acc`: g + residual (host paths), whose kept values are listed beside the positions.
  void build(const float* g, const Residual* r, detail::select_state* st, unsigned long long* kept,
             detail::host::threshold_marker* marker, const float* acc) {
    if constexpr (host_paths) {
      *kept = marker->kept();
      listed_ = marker->list(detail::raw(local_), detail::raw(kept_), kept_.size(), acc, detail::raw(kept_values_));
      kept_count_ = listed_ ? std::size_t(*kept) : 0;
      return;
    }
    (void)marker;
    (void)acc;
    launch_(local_.size(), detail::build_index<Residual>{g, r, st, detail::raw(local_), kept, plan_.lay});
  }

  template <communicator C>
  status exchange(C& comm) {
    std::uint8_t* local = detail::raw(local_);
    std::uint8_t* idx = detail::raw(reduced_);
    const std::span<const std::uint8_t> send(local, local_.size());
    if (plan_.scatter_index)
      TAGC_TRY(detail::in_phase(comm.reduce_scatter(send, std::span<std::uint8_t>(idx, reduced_.size())),
                                "index exchange (reduce-scatter)"));
    else
      TAGC_TRY(detail::in_phase(comm.all_reduce(send, std::span<std::uint8_t>(idx, reduced_.size())),
                                "index exchange (all-reduce)"));
    if (plan_.pair_repair) {
      const std::uint8_t* mine = plan_.scatter_index ? local + plan_.own_shard * plan_.lay.index_bytes : local;
      if constexpr (host_paths) {  // a byte loop the compiler vectorises (16 bytes an instruction)
        const std::size_t bytes = reduced_.size();
#pragma omp simd
        for (std::size_t b = 0; b < bytes; ++b) idx[b] = std::uint8_t(mine[b] | std::uint8_t(idx[b] - mine[b]));
      } else {
        launch_(reduced_.size(), detail::repair_pair_index{mine, idx});
      }
    }
    return {};
  }

  // Host paths: where the threshold select writes this rank's marks, and stages
  // the kept entries (build() then filters them instead of reading the index).
  std::uint8_t* marks_target() { return host_paths ? detail::raw(local_) : nullptr; }
  detail::host::kept_stage kept_target() {
    if constexpr (host_paths) return {detail::raw(kept_), detail::raw(kept_values_), kept_.size()};
    return {};
  }

  // What this rank received: the whole reduced index, or its shard's part.
  const std::uint8_t* reduced() const { return detail::raw(reduced_); }
  // This rank's own marks, [shards][index_bytes] (in the space's memory).
  const std::uint8_t* local() const { return detail::raw(local_); }
  std::size_t reduced_bytes() const { return reduced_.size(); }
  std::size_t local_bytes() const { return local_.size(); }
  // What the owner decodes with.
  const std::uint8_t* own_index() const {
    return plan_.scatter_index ? reduced() : reduced() + plan_.own_shard * plan_.lay.index_bytes;
  }
  // What senders check their entries against: nothing when the index is exact
  // (every kept entry is then marked).
  const std::uint8_t* sender_check() const { return plan_.exact_index ? nullptr : reduced(); }

  // Host paths: the kept entries' positions, ascending (valid when kept_listed()).
  const std::uint32_t* kept_list() const { return detail::raw(kept_); }
  std::size_t kept_count() const { return kept_count_; }
  // Host paths: acc at those positions (valid when kept_listed()).
  const float* kept_values() const { return detail::raw(kept_values_); }
  bool kept_listed() const { return listed_; }

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
  vector<std::uint8_t> local_;    // [shards][index_bytes] this rank's marks
  vector<std::uint8_t> reduced_;  // summed: all shards, or this shard's (index reduce-scatter)
  vector<std::uint32_t> kept_;    // host paths: kept positions, ascending
  vector<float> kept_values_;     // host paths: acc at the kept positions
  std::size_t kept_count_ = 0;
  bool listed_ = false;
};

}  // namespace stage
TAGC_END_NAMESPACE
