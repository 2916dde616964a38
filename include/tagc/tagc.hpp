#pragma once
// tagc — homomorphic gradient compression for sharded data-parallel training.
//
// Compose a Reducer from policies and hand it a Communicator:
//
//   using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>,
//                           tagc::SketchPolicy<10>, tagc::DecodePolicy<>>;
//   R reducer;
//   if (auto s = reducer.initialize({.length = n, .world_size = N, .rank = r}); !s.ok()) ...
//   reducer.reduce_scatter(comm, gradient, my_shard, &stats);
//
// Headers a user reads, in order:
//   reducer.hpp           the pipeline and its contract
//   plain_reducer.hpp     PlainReducer<Wire>: the uncompressed fp32/bf16 baseline with the same contract
//   two_level_reducer.hpp TwoLevelReducer: plain inside a node, compressed across nodes
//   two_level_all_gather.hpp TwoLevelAllGather: the parameter all-gather, across nodes then inside
//   int8_blocks.hpp       the int8 block code for the parameter all-gather (ZeRO++'s qwZ idea)
//   policy/sparsify.hpp   SparsifyPolicy: threshold + error feedback (SparsifyBf16ResidualPolicy: bf16 residual)
//   policy/index.hpp      IndexPolicy<1|2|4|8|index_auto[, exchange]>: support counters, summed
//   policy/sketch.hpp     SketchPolicy<ratio[, lanes, value]>: block-keyed count sketch (SketchBf16Policy, SketchFp16Policy)
//   policy/decode.hpp     DecodePolicy<mode>: peeling, estimation, carry
//   policy/packed.hpp     PackedPolicy: exact union values instead of a sketch (PackedBf16Policy, PackedFp16Policy)
//   policy/shared_index.hpp SharedIndexPolicy: one selection for all ranks (shared_reducer.hpp), no union
//                         (Pooled, Gathered; RoutedIndexPolicy: each rank's own picks to their owners)
//   policy/wire_value.hpp 16-bit values on the wire: rounding, the fp16 range scale
//   core/bfloat16.hpp, core/float16.hpp  the 16-bit types
//   comm/communicator.hpp the Communicator concepts (routing_communicator: all_to_all_v); comm/local.hpp, comm/mpi.hpp,
//                         comm/nccl.hpp backends; comm/counting.hpp byte accounting
//   shard/layout.hpp      how a buffer is cut into shards, blocks and lanes
//   exec/host.hpp         execution spaces (exec/cuda.hpp under nvcc)

#include "core/config.hpp"
#include "core/status.hpp"
#include "comm/communicator.hpp"
#include "comm/counting.hpp"
#include "comm/local.hpp"
#include "comm/local_cluster.hpp"
#include "comm/two_level.hpp"
#include "cost_model.hpp"
#include "exec/host.hpp"
#include "int8_blocks.hpp"
#include "policy/decode.hpp"
#include "policy/index.hpp"
#include "policy/packed.hpp"
#include "policy/sketch.hpp"
#include "policy/sparsify.hpp"
#include "plain_reducer.hpp"
#include "reducer.hpp"
#include "shared_reducer.hpp"
#include "shard/layout.hpp"
#include "stats.hpp"
#include "two_level_all_gather.hpp"
#include "two_level_reducer.hpp"
