// device_reducer.hpp: one gradient segment's reduce-scatter on an execution space,
// behind a runtime interface — train/unit_reducer.hpp's UnitReducer, with the buffers
// in Exec memory and the communicator a template parameter.
//
// The compile-time choices (index bits 1|4, sketch ratio 2|4|10, decoder) are
// instantiated once per space, in device_reducers_host.cpp and device_reducers_cuda.cu
// (each pulls in the whole Thrust pipeline: those are the slow files to build).
// Every reducer computes the MEAN over ranks and delivers this rank's shard
// (output_size() elements, the padding zero), launching on the space it was made for
// (the side stream of comm_queue.hpp on a GPU).
#pragma once

// defines: train::CompressOptions, train::deferred_entries
#include "unit_reducer.hpp"

#include "tagc/comm/counting.hpp"
#include "tagc/stats.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace train_device {

template <class Exec, class Comm>
class DeviceUnitReducer {
 public:
  // Every collective goes through the byte-counting decorator (the step's traffic).
  using Counted = tagc::counting_communicator<Comm>;

  virtual ~DeviceUnitReducer() = default;
  virtual bool compressed() const = 0;
  virtual size_t output_size() const = 0;
  // grad: the segment's full local gradient (unpadded), shard: output_size() elements,
  // both in Exec memory.
  virtual tagc::status reduce_scatter(Counted& comm, std::span<const float> grad, std::span<float> shard,
                                      tagc::reduce_stats* stats) = 0;
  // Error-feedback state, host bytes in tagc::Reducer::save_state()'s format (the same
  // on every space, so checkpoints move between the CPU and CUDA builds); empty for the
  // plain paths.
  virtual std::vector<std::byte> save_state() const = 0;
  virtual tagc::status load_state(std::span<const std::byte> state) = 0;
  // Per-stage seconds in reduce_stats::seconds; each stage then synchronizes, which on
  // a GPU costs the overlap, so the trainer turns it on for host spaces only.
  virtual void set_profiling(bool on) = 0;
};

template <class Exec, class Comm>
using ReducerPtr = std::unique_ptr<DeviceUnitReducer<Exec, Comm>>;

// A tagc::Reducer (topology::sharded, reduce_op::mean) for a segment of `length`.
// Throws std::runtime_error with tagc's message if the configuration is rejected.
template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_tagc_reducer(const train::CompressOptions& opt, size_t length, int world, int rank,
                                         const Exec& exec);
// The fp32 baseline: pad, reduce-scatter, divide by world.
template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_plain_reducer(size_t length, int world, const Exec& exec);
// The llm.c baseline: round to bf16, bf16 reduce-scatter (the communicator's bf16 SUM
// rounds at every step, as NCCL's does), divide by world in fp32.
template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_plain_bf16_reducer(size_t length, int world, const Exec& exec);

}  // namespace train_device
