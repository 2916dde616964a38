#pragma once
// defines: gpt2::save_checkpoint, gpt2::load_checkpoint, gpt2::load_checkpoint_config — llm.c's GPT-2 checkpoint format.
//
// File: 256 x int32 header {20240326, 3, maxT, V, L, NH, C, Vp, 0...}, then fp32
// parameters in llm.c's order (wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w,
// ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb; per-layer tensors stacked over layers).
// In memory the parameters are in our flat unit layout (layout.hpp); these functions
// convert. Errors (cannot open, wrong magic/version, truncated or oversized, invalid
// shape) throw std::runtime_error whose message names the file and the problem.
#include "gpt2/config.hpp"

#include <span>
#include <string>
#include <vector>

namespace gpt2 {

struct Checkpoint {
  Config config;
  std::vector<float> params;  // flat unit layout
};

void save_checkpoint(const std::string& path, const Config& cfg, std::span<const float> params);
Checkpoint load_checkpoint(const std::string& path);
// The model shape of a checkpoint, from its header alone (checked as load_checkpoint does).
Config load_checkpoint_config(const std::string& path);

// The permutation itself, for tests and tools: llm.c order <-> unit layout.
std::vector<float> to_llmc_order(const Config& cfg, std::span<const float> params);
std::vector<float> from_llmc_order(const Config& cfg, std::span<const float> llmc);

}  // namespace gpt2
