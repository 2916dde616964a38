// unit_reducer.hpp: one gradient segment's reduce-scatter, chosen at run time.
//
// tagc::Reducer is a compile-time composition of policies; the trainer picks them from
// the command line. tagc's builder bridges the two: a UnitReducer holds a
// tagc::AnyReducer built from the trainers' catalogue (reducer_catalogue.hpp) for the
// description the flags give (compress_options.hpp), compressed or the plain fp32/bf16
// baseline alike, so the trainer treats every segment the same way.
//
// Every reducer computes the MEAN over ranks and delivers this rank's shard
// (output_size() elements, the padding zero).
#pragma once

#include "compress_options.hpp"
#include "reducer_catalogue.hpp"

#include "tagc/stats.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace train {

class UnitReducer {
 public:
  explicit UnitReducer(tagc::AnyReducer<tagc::exec::host, Comm> r);
  bool compressed() const { return r_.compressed(); }
  size_t output_size() const { return r_.output_size(); }
  // grad: the segment's full local gradient (unpadded); shard: output_size() elements.
  // TAGC_GPT2_VERIFY=1: also checks "result == dense mean reduce-scatter of what was
  // sent" (sent = grad + residual before - residual after) and prints the error.
  tagc::status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                              tagc::reduce_stats* stats);
  // Error-feedback state (empty for the plain path).
  std::vector<std::byte> save_state() const { return r_.save_state(); }
  tagc::status load_state(std::span<const std::byte> state) { return r_.load_state(state); }
  // Per-stage seconds in reduce_stats::seconds (host timing is cheap).
  void set_profiling(bool on) { r_.set_profiling(on); }
  std::string describe() const { return r_.describe(); }

 private:
  tagc::AnyReducer<tagc::exec::host, Comm> r_;
  bool verify_ = false;
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

// The compressed segments' reducer (o.reducer) on the host.
std::unique_ptr<UnitReducer> make_tagc_reducer(const CompressOptions& o, size_t length, int world, int rank);
// The uncompressed segments' reducer (o.plain: fp32, or bf16 as llm.c) on the host.
std::unique_ptr<UnitReducer> make_plain_reducer(const CompressOptions& o, size_t length, int world, int rank);

}  // namespace train
