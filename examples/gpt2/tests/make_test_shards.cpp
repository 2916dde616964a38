// make_test_shards.cpp: gpt2_make_test_shards DIR [--bad-token OFFSET] — writes the
// learnable synthetic token shards of train_test_harness.hpp (DIR/t_train.bin, 40000
// tokens; DIR/t_val.bin, 8000) for the shell-driven trainer tests; --bad-token puts
// the id 65535 (beyond GPT-2's vocabulary) at token OFFSET of t_train.bin.
// defines: main
#include "token_shard.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::strcmp(argv[2], "--bad-token") == 0)) {
    std::fprintf(stderr, "usage: gpt2_make_test_shards DIR [--bad-token OFFSET]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  std::vector<uint32_t> tokens;
  uint32_t x = 12345;
  for (int i = 0; i < 40000; ++i) {
    if (i % 16 == 0) x = x * 1103515245u + 12345u;  // a new "sentence" start
    tokens.push_back(100 + ((x >> 8) % 23 + uint32_t(i % 16) * 5) % 200);
  }
  const std::vector<uint32_t> val(tokens.begin(), tokens.begin() + 8000);
  if (argc == 4) tokens.at(std::strtoul(argv[3], nullptr, 10)) = 65535;
  gpt2::write_shard(dir / "t_train.bin", tokens);
  gpt2::write_shard(dir / "t_val.bin", val);
  return 0;
}
