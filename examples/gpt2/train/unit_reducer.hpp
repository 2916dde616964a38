// unit_reducer.hpp: one gradient segment's reduce-scatter behind a runtime interface.
//
// tagc::Reducer is a compile-time composition of policies (index width and exchange,
// values: sketch or packed, decoder). The trainer picks them from the command line, so a
// chosen set of combinations is instantiated, in unit_reducer.cpp (float values) and
// bf16_reducer.cpp (bf16 values) only — those are the slow files to build — behind the
// small virtual base UnitReducer. Not the whole cartesian product: each instantiation
// costs compile time; unbuilt_combination() names what is built and refuses the rest.
// The plain (uncompressed) reduce-scatter (fp32, or bf16 as llm.c; plain_reducer.cpp)
// implements the same interface, so the trainer treats every segment alike.
//
// Every reducer computes the MEAN over ranks and delivers this rank's shard
// (output_size() elements, the padding zero).
#pragma once

#include "args.hpp"

#include "tagc/comm/counting.hpp"
#include "tagc/comm/mpi.hpp"
#include "tagc/stats.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace train {

// All collectives go through the byte-counting decorator over MPI.
using Comm = tagc::counting_communicator<tagc::mpi_communicator>;

class UnitReducer {
 public:
  virtual ~UnitReducer() = default;
  virtual bool compressed() const = 0;
  virtual size_t output_size() const = 0;
  // grad: the segment's full local gradient (unpadded); shard: output_size() elements.
  virtual tagc::status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                                      tagc::reduce_stats* stats) = 0;
  // Error-feedback state (empty for the plain path).
  virtual std::vector<std::byte> save_state() const = 0;
  virtual tagc::status load_state(std::span<const std::byte> state) = 0;
  // Per-stage seconds in reduce_stats::seconds (tagc::Reducer only; host timing is cheap).
  virtual void set_profiling(bool on) = 0;
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

struct CompressOptions {
  ValuesMode values = ValuesMode::sketch;
  int ratio = 10;                 // sketch only
  int index_bits = 4;             // 1, 4 or index_bits_exact
  IndexExchange index_exchange = IndexExchange::all_reduce;
  DecoderMode decoder = DecoderMode::peel_estimate;  // sketch only
  double sparsity = -1.0;  // < 0: the paper's pairing for the ratio (the start, when adaptive)
  bool adaptive = false;   // sketch only (it steers the sketch load)
  double target_load = 0.6;
  int sparsity_warmup = 0;  // tagc::sparsity_schedule (0: off)
  bool sparsity_linear = false;
  double sparsity_start = 0.75;
};

CompressOptions compress_options(const Args& a);

// Empty when make_tagc_reducer builds this combination; otherwise a message naming the
// offending flags and listing the built combinations (built_combinations()).
std::string unbuilt_combination(const CompressOptions& opt);
std::string built_combinations();

// A tagc::Reducer (topology::sharded, reduce_op::mean) for a segment of `length`.
// Throws std::runtime_error with tagc's message if the configuration is rejected, or
// unbuilt_combination()'s if it is not built.
std::unique_ptr<UnitReducer> make_tagc_reducer(const CompressOptions& opt, size_t length, int world, int rank);
// The baseline: pad, fp32 reduce-scatter, divide by world (plain_reducer.cpp).
std::unique_ptr<UnitReducer> make_plain_reducer(size_t length, int world, int rank);
// The llm.c baseline: bf16 reduce-scatter, divide by world in fp32 (plain_reducer.cpp).
std::unique_ptr<UnitReducer> make_plain_bf16_reducer(size_t length, int world, int rank);

}  // namespace train
