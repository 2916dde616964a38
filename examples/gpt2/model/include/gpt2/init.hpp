#pragma once
// defines: gpt2::init_unit, gpt2::init_params — GPT-2 initialisation from a seed.
//
// As GPT-2 / llm.c: weights normal(0, 0.02), the residual projections (attprojw, fcprojw)
// normal(0, 0.02 / sqrt(2L)), LayerNorm weights 1, biases 0; wpe normal(0, 0.02); the
// padded wte rows V..Vp-1 are 0. Each tensor draws from its own stream (splitmix64 keyed
// by seed and tensor name, Box-Muller), so a unit initialises the same whether alone or
// as part of the whole model, on any rank: same seed -> bit-identical parameters.
#include "gpt2/config.hpp"

#include <cstdint>
#include <span>

namespace gpt2 {

// Fills unit u (size units(cfg)[u].size) of the model.
void init_unit(const Config& cfg, int u, uint64_t seed, std::span<float> unit_params);
// Fills the flat layout (all units concatenated; size num_parameters(cfg)).
void init_params(const Config& cfg, uint64_t seed, std::span<float> params);

}  // namespace gpt2
