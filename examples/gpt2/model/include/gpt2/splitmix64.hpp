// splitmix64.hpp: the splitmix64 generator (Steele, Lea, Flood 2014), for the streams
// the GPT-2 example draws: weight initialisation (init.cpp) and the shuffled data order
// (text/data_loader.cpp). Its every output is fixed by its definition, unlike
// std::shuffle or the std:: distributions, whose results differ between standard
// libraries: a run must replay the same on any build.
#pragma once

#include <cstdint>

namespace gpt2 {

// Advances `state` and returns the next output.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace gpt2
