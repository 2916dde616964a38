// fuzz_checkpoint.cpp: libFuzzer target — the trainer's checkpoint file parser
// (train::parse_checkpoint) on arbitrary bytes. Any input must end in a CheckpointData
// or a CheckpointDamaged / CheckpointMismatch exception: no crash, no read past the
// input, no allocation beyond what the bytes can hold, no UB (ASan + UBSan).
// The expected header is the one the seed corpus was written with (make_corpus).
// defines: LLVMFuzzerTestOneInput
#include "checkpoint.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  train::CheckpointHeader expect;
  expect.world = 2;
  expect.rank = 1;
  expect.owned_size = 100;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (const bool plan_only : {false, true}) {
    std::istringstream in(bytes);
    try {
      const train::CheckpointData d = train::parse_checkpoint(in, "fuzz", expect, nullptr, plan_only);
      // What parsed must be what the header promised.
      if (!plan_only && d.params.size() != d.header.owned_size) __builtin_trap();
    } catch (const train::CheckpointDamaged&) {
    } catch (const train::CheckpointMismatch&) {
    }
  }
  return 0;
}
