// unit_reducer.hpp: one gradient segment's reduce-scatter, chosen at run time, on an
// execution space.
// defines: train::UnitReducer<Exec, C>, train::make_segment_reducer, train::build_segment_reducer,
//          train::deferred_entries
//
// tagc::Reducer is a compile-time composition of policies; the trainer picks them from
// the command line. tagc's builder bridges the two: a UnitReducer holds a
// tagc::AnyReducer built from this space's catalogue (reducer_catalogue.hpp: the same
// reducer types on every space) for the description the flags give
// (compress_options.hpp), compressed or the plain fp32/bf16 baseline alike, so the
// trainer treats every segment the same way. Its buffers are in Exec memory and it
// launches on the space it was made for (the side stream of comm_queue.hpp on a GPU).
//
// Every reducer computes the MEAN over ranks and delivers this rank's shard
// (output_size() elements, the padding zero). With --grad-all-reduce a flat reducer
// all-reduces the whole segment and this rank keeps its shard of the sums (two levels: the
// cross stage all-reduces the node's slice), so the bytes and the sums are replicated
// training's (DDP, HSDP) while the optimizer stays sharded. save_state() is tagc::Reducer's format,
// the same on every space, so checkpoints move between the CPU and CUDA builds.
#pragma once

#include "compress_options.hpp"
#include "reducer_catalogue.hpp"

#include "tagc/comm/two_level.hpp"
#include "tagc/stats.hpp"
#include "tagc/two_level_reducer.hpp"

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/memory.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace train {

template <class Exec, class C>
class UnitReducer {
 public:
  using Any = tagc::AnyReducer<Exec, C>;
  // --ranks-per-node K > 1: plain inside the node, this segment's reducer across nodes.
  using TwoLevel = tagc::TwoLevelReducer<Any, Any>;

  UnitReducer(Any r, const Exec& exec)
      : r_(std::move(r)), exec_(exec), verify_(r_.compressed() && std::getenv("TAGC_GPT2_VERIFY") != nullptr) {}
  // A flat reducer initialised for all-reduce (topology::replicated): `shard` elements of
  // its output from rank x shard on are this rank's.
  UnitReducer(Any r, const Exec& exec, size_t shard, int rank)
      : r_(std::move(r)), exec_(exec), shard_(shard), rank_(rank), sums_(r_.output_size()) {}
  UnitReducer(std::unique_ptr<TwoLevel> two, const Exec& exec) : exec_(exec), two_(std::move(two)) {}
  bool compressed() const { return two_ ? two_->cross_stage().compressed() : r_.compressed(); }
  size_t output_size() const { return two_ ? two_->output_size() : sums_.empty() ? r_.output_size() : shard_; }
  // grad: the segment's full local gradient (unpadded); shard: output_size() elements,
  // both in Exec memory; levels: the node and cross communicators (two-level only).
  // TAGC_GPT2_VERIFY=1 (flat): also checks "result == dense mean reduce-scatter of what
  // was sent" (sent = grad + residual before - residual after) and prints the error.
  tagc::status reduce_scatter(C& comm, tagc::two_level_communicator<C>* levels, std::span<const float> grad,
                              std::span<float> shard, tagc::reduce_stats* stats) {
    if (two_) {
      if (!levels) return {tagc::errc::internal, "two-level reducer without its node and cross communicators"};
      return two_->reduce_scatter(*levels, grad, shard, stats);
    }
    if (!sums_.empty()) return all_reduced_shard(comm, grad, shard, stats);
    if (!verify_) return r_.reduce_scatter(comm, grad, shard, stats);
    return verified_reduce_scatter(comm, grad, shard, stats);
  }
  // Error-feedback state (empty for the flat plain path; a two-level state otherwise).
  std::vector<std::byte> save_state() const { return two_ ? two_->save_state() : r_.save_state(); }
  tagc::status load_state(std::span<const std::byte> state) {
    return two_ ? two_->load_state(state) : r_.load_state(state);
  }
  // Per-stage seconds in reduce_stats::seconds (they synchronize after each stage:
  // cheap on the CPU, lost overlap on a GPU).
  void set_profiling(bool on) {
    if (!two_) return r_.set_profiling(on);
    two_->node_stage().set_profiling(on);
    two_->cross_stage().set_profiling(on);
  }
  std::string describe() const {
    if (!two_) return r_.description_text();
    const auto shape = two_->shape();
    return "two-level " + std::to_string(shape.nodes) + " nodes x " + std::to_string(shape.ranks_per_node) +
           ": node " + two_->node_stage().description_text() + "; across nodes " + two_->cross_stage().description_text();
  }

 private:
  tagc::status verified_reduce_scatter(C& comm, std::span<const float> grad, std::span<float> shard,
                                       tagc::reduce_stats* stats);
  // Replicated: the whole segment's sums, then this rank's shard of them (zero past the end).
  tagc::status all_reduced_shard(C& comm, std::span<const float> grad, std::span<float> shard,
                                 tagc::reduce_stats* stats) {
    if (shard.size() != shard_)
      return {tagc::errc::size_mismatch, "shard of " + std::to_string(shard.size()) + " elements, expected " +
                                             std::to_string(shard_)};
    float* sums = thrust::raw_pointer_cast(sums_.data());
    TAGC_TRY(r_.all_reduce(comm, grad, std::span<float>(sums, sums_.size()), stats));
    const size_t first = std::min(size_t(rank_) * shard_, sums_.size()), n = std::min(shard_, sums_.size() - first);
    thrust::copy_n(exec_.policy(), sums + first, n, shard.data());
    thrust::fill(exec_.policy(), shard.data() + n, shard.data() + shard_, 0.0f);
    return {};
  }

  Any r_;
  Exec exec_;
  bool verify_ = false;
  size_t shard_ = 0;                          // replicated: this rank's shard size
  int rank_ = 0;
  typename Exec::template vector<float> sums_;  // replicated: the segment's sums (else empty)
  std::unique_ptr<TwoLevel> two_;
};

// Entries of this rank's shard whose delivery was deferred to a later step: the
// owner's carried remainders ("pending") in tagc versions that carry, or the entries
// sent back to the residual for retransmission ("retransmitted") in those that do not.
// Written against both, so the trainer builds while the library evolves.
template <class Stats>
double deferred_entries(const Stats& s) {
  if constexpr (requires { s.retransmitted; }) return double(s.retransmitted);
  else if constexpr (requires { s.pending; }) return double(s.pending);
  else return 0.0;
}

// The reducer `d` describes from `catalogue`, initialised for a segment of `length`
// (sharded, the mean over ranks, o's run-time arguments). Throws std::runtime_error
// naming the flags and tagc's refusal (not in the catalogue, or rejected arguments).
template <class Exec, class C>
tagc::AnyReducer<Exec, C> build_segment_reducer(const tagc::reducer_catalogue<Exec, C>& catalogue,
                                                const tagc::reducer_description& d, const CompressOptions& o,
                                                size_t length, int world, int rank, const Exec& exec) {
  tagc::AnyReducer<Exec, C> r;
  if (const tagc::status s = tagc::build_reducer(catalogue, d, r); !s.ok())
    throw std::runtime_error(reducer_flags(d) + ": " + s.message());
  if (const tagc::status s = r.initialize(segment_arguments(o, length, world, rank), exec); !s.ok())
    throw std::runtime_error("tagc reducer (" + reducer_flags(d) + "): " + s.what());
  return r;
}

// The reducer `d` describes (o.reducer for the compressed segments, o.plain: fp32, or
// bf16 as llm.c, for the others) for a segment of `length`, on `exec`, from this
// space's catalogue (reducer_catalogue_for). With a node shape of more than one rank per
// node: two levels, o.plain among the node's ranks and `d` across the nodes. Throws
// std::runtime_error as above.
template <class Exec, class C>
std::unique_ptr<UnitReducer<Exec, C>> make_segment_reducer(const CompressOptions& o, const tagc::reducer_description& d,
                                                           size_t length, int world, int rank, const Exec& exec,
                                                           tagc::node_shape shape = {}) {
  const auto& catalogue = reducer_catalogue_for(exec);
  const bool replicated = o.grad_topology != tagc::topology::sharded;
  if (shape.ranks_per_node <= 1 && replicated) {
    CompressOptions all = o;
    all.arguments.topo = o.grad_topology;
    const size_t shard = (length + size_t(world) - 1) / size_t(world);
    return std::make_unique<UnitReducer<Exec, C>>(build_segment_reducer(catalogue, d, all, length, world, rank, exec),
                                                  exec, shard, rank);
  }
  if (shape.ranks_per_node <= 1)
    return std::make_unique<UnitReducer<Exec, C>>(build_segment_reducer(catalogue, d, o, length, world, rank, exec),
                                                  exec);
  using Two = typename UnitReducer<Exec, C>::TwoLevel;
  tagc::AnyReducer<Exec, C> node, cross;
  for (auto [desc, out] : {std::pair{&o.plain, &node}, std::pair{&d, &cross}})
    if (const tagc::status s = tagc::build_reducer(catalogue, *desc, *out); !s.ok())
      throw std::runtime_error(reducer_flags(*desc) + ": " + s.message());
  auto two = std::make_unique<Two>(std::move(node), std::move(cross));
  if (const tagc::status s = two->initialize(segment_arguments(o, length, world, rank), shape, exec,
                                             tagc::lane_layout::automatic, o.grad_topology);
      !s.ok())
    throw std::runtime_error("tagc two-level reducer (" + reducer_flags(d) + ", " + std::to_string(shape.nodes) +
                             " nodes x " + std::to_string(shape.ranks_per_node) + " ranks): " + s.what());
  return std::make_unique<UnitReducer<Exec, C>>(std::move(two), exec);
}

template <class Exec, class C>
tagc::status UnitReducer<Exec, C>::verified_reduce_scatter(C& comm, std::span<const float> grad,
                                                          std::span<float> shard, tagc::reduce_stats* stats) {
  // Everything staged through the host: a check, not a fast path.
  std::vector<float> sent = r_.residual_to_host(), g(grad.size());
  TAGC_TRY(exec_.copy_to_host(grad.data(), g.data(), g.size()));
  for (size_t i = 0; i < sent.size(); ++i) sent[i] += g[i];
  TAGC_TRY(r_.reduce_scatter(comm, grad, shard, stats));
  const std::vector<float> after = r_.residual_to_host();
  const size_t S = shard.size(), N = size_t(comm.size());
  std::vector<float> padded(S * N, 0.0f), want(S), got(S);
  for (size_t i = 0; i < sent.size(); ++i) padded[i] = sent[i] - after[i];
  typename Exec::template vector<float> padded_x(S * N), want_x(S);
  float* px = thrust::raw_pointer_cast(padded_x.data());
  float* wx = thrust::raw_pointer_cast(want_x.data());
  TAGC_TRY(exec_.copy_from_host(padded.data(), px, padded.size()));
  TAGC_TRY(comm.reduce_scatter(std::span<const float>(px, S * N), std::span<float>(wx, S)));
  TAGC_TRY(exec_.copy_to_host(wx, want.data(), S));
  TAGC_TRY(exec_.copy_to_host(shard.data(), got.data(), S));
  double err = 0, ref = 0;
  for (size_t i = 0; i < S; ++i) {
    err = std::max(err, double(std::abs(want[i] / float(N) - got[i])));
    ref = std::max(ref, double(std::abs(want[i] / float(N))));
  }
  std::fprintf(stderr, "verify rank %d len %zu: max |tagc - dense| = %.3g (max |dense| %.3g)%s\n", comm.rank(),
               grad.size(), err, ref,
               stats ? (" support " + std::to_string(stats->support) + " load " + std::to_string(stats->load) +
                        " unresolved " + std::to_string(stats->unresolved) + " deferred " +
                        std::to_string(deferred_entries(*stats)) + (stats->dense ? " dense" : ""))
                           .c_str()
                     : "");
  return {};
}

}  // namespace train
