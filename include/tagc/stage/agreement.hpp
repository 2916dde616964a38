#pragma once
// defines: tagc::stage::Agreement<Wire, Exec> — the agreement check: every rank
//          contributes {grad length, output length, non-finite count, config
//          hash, load of its last decode (ppm), entries it left unresolved[, top
//          histogram bin]} in one small all-gather, and every rank reaches the
//          same verdict (and the same fp16 scale and adaptive-theta inputs) from
//          the gathered table, so no rank is left waiting in a collective.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../comm/communicator.hpp"
#include "../core/status.hpp"
#include "../detail/launch.hpp"
#include "../policy/wire_value.hpp"
#include "plan.hpp"

TAGC_BEGIN_NAMESPACE
namespace stage {

template <class Wire, class Exec>
class Agreement {
 public:
  template <class T> using vector = typename Exec::template vector<T>;
  // fp16 values add the top histogram bin for their range scale.
  static constexpr std::size_t words = wire_scaled<Wire> ? 7 : 6;

  struct contribution {
    std::size_t grad_length = 0, out_length = 0;
    std::uint32_t nonfinite = 0, top_bin = 0;
    std::uint64_t config = 0;  // hash of the policies and options every rank must share
    std::int64_t load_ppm = 0, unresolved = 0;
  };
  struct verdict {
    int wire_exp = 0;             // fp16: values travel as x * 2^wire_exp
    std::int64_t max_load_ppm = 0;  // largest load any rank decoded last call
    std::int64_t unresolved = 0;    // entries all ranks left unresolved last call
  };

  static status can_implement(const reducer_arguments& a) {
    if (wire_scaled<Wire> && !a.check_inputs)
      return {errc::invalid_argument, "fp16 values agree their range scale through the agreement check: keep "
                                      "check_inputs (or use bf16 values, which need no scale)"};
    if (a.adapt.enabled && !a.check_inputs)
      return {errc::invalid_argument, "adaptive sparsity publishes loads through the agreement check: keep check_inputs"};
    return {};
  }

  status initialize(const reducer_plan& p, Exec exec) {
    exec_ = exec;
    world_ = p.args.world_size;
    send_.assign(words, 0);
    recv_.assign(words * std::size_t(world_), 0);
    table_.assign(words * std::size_t(world_), 0);  // host mirror of recv_: read without allocating
    return {};
  }
  std::size_t workspace_bytes() const {
    return detail::buffer_bytes(send_) + detail::buffer_bytes(recv_) + table_.size() * sizeof(std::int64_t);
  }
  // What initialize(p, ...) allocates, before it does (the reducers' workspace query;
  // on a device, but for CUB's temporaries, a few KiB queried there).
  static std::size_t workspace_bytes_for(const reducer_plan& p) {
    return (words + 2 * words * std::size_t(p.args.world_size)) * sizeof(std::int64_t);
  }
  // Bytes one call's all-gather holds per rank (for the traffic stats).
  static constexpr std::size_t bytes_per_rank() { return words * 8; }

  // `length`, `out_length`: what this reducer was planned for; `cell_terms`:
  // the most values one rank adds into one cell or slot (bounds the fp16 scale).
  template <communicator C>
  status check(C& comm, const contribution& mine, std::size_t length, std::size_t out_length,
               [[maybe_unused]] std::uint64_t cell_terms, verdict& v) {
    std::int64_t w[words] = {std::int64_t(mine.grad_length), std::int64_t(mine.out_length),
                             std::int64_t(mine.nonfinite),   std::int64_t(mine.config),
                             mine.load_ppm,                  mine.unresolved};
    if constexpr (wire_scaled<Wire>) w[6] = std::int64_t(mine.top_bin);
    TAGC_TRY(exec_.copy_from_host(w, detail::raw(send_), words));
    TAGC_TRY(detail::in_phase(comm.all_gather(std::span<const std::int64_t>(detail::raw(send_), words),
                                              std::span<std::int64_t>(detail::raw(recv_), recv_.size())),
                              "agreement check (all-gather of lengths, config and NaN/Inf counts)"));
    TAGC_TRY(exec_.copy_to_host(detail::raw(recv_), table_.data(), table_.size()));
    const auto at = [&](int r, std::size_t i) { return table_[std::size_t(r) * words + i]; };
    const int n = world_;
    for (int r = 0; r < n; ++r) {
      if (at(r, 0) != std::int64_t(length))
        return {errc::size_mismatch, "rank " + std::to_string(r) + " passed a gradient of " +
                                         std::to_string(at(r, 0)) + " elements, the reducer was planned for " +
                                         std::to_string(length)};
      if (at(r, 1) != std::int64_t(out_length))
        return {errc::size_mismatch, "rank " + std::to_string(r) + " passed an output of " +
                                         std::to_string(at(r, 1)) + " elements, expected " +
                                         std::to_string(out_length)};
      if (at(r, 3) != at(0, 3))
        return {errc::invalid_argument, "rank " + std::to_string(r) +
                                            " uses a different reducer configuration (index, values policy, "
                                            "topology or op) than rank 0"};
    }
    std::string bad;
    for (int r = 0; r < n; ++r)
      if (at(r, 2) != 0)
        bad += (bad.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " has " +
               std::to_string(at(r, 2)) + " NaN/Inf entries";
    if (!bad.empty())
      return {errc::non_finite, "gradient + residual is not finite: " + bad +
                                    " (found by the agreement check, before any value was exchanged); residual left "
                                    "unchanged"};
    v = {};
    if constexpr (wire_scaled<Wire>) {
      std::int64_t top = 0;
      for (int r = 0; r < n; ++r) top = std::max(top, at(r, 6));
      const std::uint64_t terms = std::uint64_t(n) * cell_terms;
      if (!fp16_scale_fits(std::uint32_t(top), terms))
        return {errc::invalid_argument, "fp16 values cannot carry this call: max |gradient + residual| is near float's "
                                        "largest values and " + std::to_string(terms) +
                                        " of them may be summed; use bf16 values; residual left unchanged"};
      v.wire_exp = fp16_scale_exponent(std::uint32_t(top), terms);
    }
    for (int r = 0; r < n; ++r) {
      v.max_load_ppm = std::max(v.max_load_ppm, at(r, 4));
      v.unresolved += at(r, 5);
    }
    return {};
  }

 private:
  Exec exec_{};
  int world_ = 1;
  vector<std::int64_t> send_, recv_;
  std::vector<std::int64_t> table_;
};

}  // namespace stage
TAGC_END_NAMESPACE
