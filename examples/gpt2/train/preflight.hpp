// preflight.hpp: checks made before anything big is allocated or any rank waits for
// another, in the command line's words: optimizer values in range, the world size
// against --index-bits, and the memory a rank will need against what the host has.
// defines: train::validate_args (declared in args.hpp), train::check_world, train::node_count_note,
//          train::MemoryEstimate, train::estimate_memory, train::check_memory
#pragma once

#include "args.hpp"

#include "gpt2/config.hpp"

#include <cstdint>
#include <string>

namespace train {

// Throws ArgsError if the flags cannot run at this world size (e.g. --index-bits 4 on
// 16 ranks: its 4-bit counters overflow; the message names --index-bits exact).
void check_world(const Args& a, int world);

// A note for the log when the flags work but send more than they save at this many nodes
// (each rank its own node when flat): --index-bits gathered all-gathers every node's list,
// so its bytes grow with the nodes; the cost model (tagc/cost_model.hpp, with the union
// measured on d2) projects them against bf16's 16 bits. Empty when there is nothing to say.
std::string node_count_note(const Args& a, int nodes);

// Bytes one rank allocates, by kind (the trainer's layout, in Exec memory on a GPU).
struct MemoryEstimate {
  uint64_t optimizer = 0;    // params, grad shard, AdamW m and v: 4 owned shards
  uint64_t gradients = 0;    // full-unit gradient buffers (every unit, accumulated)
  uint64_t gathered = 0;     // gathered parameter slots (all units with --zero2)
  uint64_t reducers = 0;     // every segment's reducer workspace (tagc's workspace query)
  uint64_t activations = 0;  // the model's forward/backward buffers for B x T
  uint64_t total() const { return optimizer + gradients + gathered + reducers + activations; }
  std::string describe() const;  // "2.1 GiB (optimizer 0.5 GiB, gradients ...)"
};
MemoryEstimate estimate_memory(const gpt2::Config& cfg, const Args& a, int world);

// Bytes the OS says are available (MemAvailable of /proc/meminfo; 0 if unknown).
uint64_t available_memory();

// Throws std::runtime_error with the figures when ranks_on_host ranks of this estimate
// exceed `available` (unknown (0): no check).
void check_memory(const MemoryEstimate& e, int ranks_on_host, uint64_t available, const std::string& model);

}  // namespace train
