// token_shard.hpp: llm.c's token shard files (*.bin), read and written.
//
// Layout, little-endian (the same bytes llm.c's dev/data scripts write, so shards made
// by llm.c load here and ours load there):
//   int32 header[256]: [0] magic 20240520, [1] version 1, [2] number of tokens N,
//                      the rest zero
//   uint16 tokens[N]
// File size is therefore exactly 1024 + 2*N bytes; anything else is rejected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace gpt2 {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int kShardHeaderInts = 256;
inline constexpr uint64_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// Writes `tokens` as a shard at `path` (via "<path>.tmp" + rename, so a crash never
// leaves a half-written shard under the real name). Throws TextError if a token does
// not fit in uint16, there are more than INT32_MAX tokens, or the file cannot be written.
void write_shard(const std::filesystem::path& path, std::span<const uint32_t> tokens);

// Reads only the header and checks it against the file size; returns the token count.
// Throws TextError naming the file and the problem: missing file, shorter than the
// header, wrong magic (not a token shard), unsupported version, negative count, or a
// count that disagrees with the file size (truncated or padded file).
uint64_t read_shard_header(const std::filesystem::path& path);

// Reads and validates a whole shard (same checks as read_shard_header).
std::vector<uint16_t> read_shard(const std::filesystem::path& path);

}  // namespace gpt2
