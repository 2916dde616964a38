// reducer_catalogue.hpp: the reducers the trainers can build — tagc's default catalogue
// (include/tagc/builder/default_catalogue.hpp, 35 reducer types), compiled once per
// execution space: host_reducers_paper.cpp + host_reducers_beyond.cpp (library
// gpt2_host_reducers) for exec::host + MPI; cuda_reducers_paper.cu + cuda_reducers_beyond.cu
// (tagc-gpt2-cuda) for exec::cuda + NCCL. Nothing else instantiates a tagc::Reducer.
#pragma once

// defines: tagc::reducer_catalogue, tagc::AnyReducer, tagc::reducer_description
#include "tagc/builder.hpp"
#include "tagc/comm/counting.hpp"
#include "tagc/comm/mpi.hpp"
#include "tagc/exec/host.hpp"
#if defined(__CUDACC__)
#include "tagc/comm/nccl.hpp"
#include "tagc/exec/cuda.hpp"
#endif

#include <vector>

namespace train {

// All collectives go through the byte-counting decorator over MPI.
using Comm = tagc::counting_communicator<tagc::mpi_communicator>;

// The host catalogue (gpt2_host_reducers): link it where a host trainer runs.
tagc::reducer_catalogue<tagc::exec::host, Comm> reducer_catalogue_for(const tagc::exec::host&);

#if defined(__CUDACC__)
// The CUDA catalogue (cuda_reducers_beyond.cu, tagc-gpt2-cuda only).
tagc::reducer_catalogue<tagc::exec::cuda, tagc::counting_communicator<tagc::nccl_communicator>> reducer_catalogue_for(
    const tagc::exec::cuda&);
#endif

// What every catalogue of the trainers holds: the default list's descriptions (no
// reducer is instantiated for this), so the command line can be checked anywhere.
const std::vector<tagc::reducer_description>& built_descriptions();

}  // namespace train
