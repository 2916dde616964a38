// fuzz_token_shard.cpp: libFuzzer target — the llm.c token shard reader
// (gpt2::read_shard_header, gpt2::read_shard) and the data loader's token id check on
// arbitrary file contents. Any input must load or throw gpt2::TextError naming the
// problem: no crash, no read past the file, no UB (ASan + UBSan).
// defines: LLVMFuzzerTestOneInput
#include "data_loader.hpp"
#include "text_error.hpp"
#include "token_shard.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tagc_fuzz_shard_" + std::to_string(getpid()) + ".bin");
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const uint64_t n = gpt2::read_shard_header(path);
    const std::vector<uint16_t> tokens = gpt2::read_shard(path);
    if (tokens.size() != n) __builtin_trap();
    gpt2::DataLoader loader({path}, 1, 4, 0, 1);
    loader.set_vocab_size(50257);
    loader.preload();
    std::vector<int32_t> x(4), y(4);
    loader.next_batch(x, y);
  } catch (const gpt2::TextError&) {
  }
  return 0;
}
