// device_reducer.hpp: one gradient segment's reduce-scatter on an execution space — a
// tagc::AnyReducer built from this build's catalogue for the space (the same reducer
// types on every space: tagc::default_catalogue), with its buffers in Exec memory,
// launching on the space it was made for (the side stream of comm_queue.hpp on a GPU).
//
// The catalogues: exec::host + MPI is the CPU trainer's (train/host_reducers_*.cpp,
// library gpt2_host_reducers); exec::cuda + NCCL is cuda_reducers_{paper,beyond}.cu
// (tagc-gpt2-cuda). Both trainers take the same flags to the same reducers.
// Every reducer computes the MEAN over ranks and delivers this rank's shard
// (output_size() elements, the padding zero). save_state() is tagc::Reducer's format,
// the same on every space, so checkpoints move between the CPU and CUDA builds.
#pragma once

// defines: train::CompressOptions, train::build_segment_reducer, train::reducer_catalogue_for(exec::host)
#include "unit_reducer.hpp"

#include "tagc/builder.hpp"
#include "tagc/comm/counting.hpp"

#if defined(__CUDACC__)
#include "tagc/comm/nccl.hpp"
#include "tagc/exec/cuda.hpp"
namespace train {
// cuda_reducers_beyond.cu
tagc::reducer_catalogue<tagc::exec::cuda, tagc::counting_communicator<tagc::nccl_communicator>> reducer_catalogue_for(
    const tagc::exec::cuda&);
}  // namespace train
#endif

#include <cstddef>
#include <memory>

namespace train_device {

// Every collective goes through the byte-counting decorator (the step's traffic).
template <class Exec, class Comm>
using DeviceUnitReducer = tagc::AnyReducer<Exec, tagc::counting_communicator<Comm>>;

template <class Exec, class Comm>
using ReducerPtr = std::unique_ptr<DeviceUnitReducer<Exec, Comm>>;

// The reducer `d` describes (o.reducer or o.plain) for a segment of `length`, on `exec`.
// Throws std::runtime_error naming the flags and tagc's refusal.
template <class Exec, class Comm>
ReducerPtr<Exec, Comm> make_segment_reducer(const train::CompressOptions& o, const tagc::reducer_description& d,
                                            size_t length, int world, int rank, const Exec& exec) {
  return std::make_unique<DeviceUnitReducer<Exec, Comm>>(
      train::build_segment_reducer(train::reducer_catalogue_for(exec), d, o, length, world, rank, exec));
}

}  // namespace train_device
