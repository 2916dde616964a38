// token_shard.cpp: llm.c's token shard format (see the header for the layout).
#include "token_shard.hpp"
#include "text_error.hpp"

#include <bit>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>

namespace gpt2 {
namespace {

// The format is little-endian on disk; we write memory as it is, so say so loudly
// rather than produce byte-swapped shards on a big-endian host.
static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian; add byte swapping for this host");

// Opens the file and validates its header against its size; leaves `in` positioned
// at the first token.
uint64_t open_and_check(const std::filesystem::path& path, std::ifstream& in) {
  const std::string name = path.string();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw TextError("token shard " + name + ": cannot read it (" + ec.message() + ")");
  in.open(path, std::ios::binary);
  if (!in) throw TextError("token shard " + name + ": cannot open it");
  if (size < kShardHeaderBytes) {
    throw TextError("token shard " + name + ": file is " + std::to_string(size) +
                    " bytes, shorter than the 1024-byte header (truncated, or not a shard)");
  }
  int32_t header[kShardHeaderInts];
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) {
    throw TextError("token shard " + name + ": error reading the header");
  }
  if (header[0] != kShardMagic) {
    throw TextError("token shard " + name + ": bad magic " + std::to_string(header[0]) +
                    ", expected " + std::to_string(kShardMagic) +
                    " (not an llm.c token shard; a model checkpoint has magic 20240326)");
  }
  if (header[1] != kShardVersion) {
    throw TextError("token shard " + name + ": unsupported version " +
                    std::to_string(header[1]) + ", expected " + std::to_string(kShardVersion));
  }
  if (header[2] < 0) {
    throw TextError("token shard " + name + ": negative token count " + std::to_string(header[2]));
  }
  const auto count = static_cast<uint64_t>(header[2]);
  const uint64_t expected = kShardHeaderBytes + count * sizeof(uint16_t);
  if (size != expected) {
    throw TextError("token shard " + name + ": header says " + std::to_string(count) +
                    " tokens, i.e. " + std::to_string(expected) + " bytes, but the file has " +
                    std::to_string(size) + " bytes" +
                    (size < expected ? " (truncated)" : " (trailing bytes)"));
  }
  return count;
}

}  // namespace

void write_shard(const std::filesystem::path& path, std::span<const uint32_t> tokens) {
  const std::string name = path.string();
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw TextError("token shard " + name + ": " + std::to_string(tokens.size()) +
                    " tokens is more than the int32 count in the header can hold");
  }
  std::vector<uint16_t> narrow(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > std::numeric_limits<uint16_t>::max()) {
      throw TextError("token shard " + name + ": token " + std::to_string(tokens[i]) +
                      " at position " + std::to_string(i) + " does not fit in uint16");
    }
    narrow[i] = static_cast<uint16_t>(tokens[i]);
  }
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw TextError("token shard " + name + ": cannot create " + tmp.string());
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(narrow.data()),
              static_cast<std::streamsize>(narrow.size() * sizeof(uint16_t)));
    out.flush();
    if (!out) throw TextError("token shard " + name + ": error writing " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw TextError("token shard " + name + ": cannot rename from " + tmp.string() +
                          " (" + ec.message() + ")");
}

uint64_t read_shard_header(const std::filesystem::path& path) {
  std::ifstream in;
  return open_and_check(path, in);
}

std::vector<uint16_t> read_shard(const std::filesystem::path& path) {
  std::ifstream in;
  const uint64_t count = open_and_check(path, in);
  std::vector<uint16_t> tokens(count);
  if (!in.read(reinterpret_cast<char*>(tokens.data()),
               static_cast<std::streamsize>(count * sizeof(uint16_t)))) {
    throw TextError("token shard " + path.string() + ": error reading " +
                    std::to_string(count) + " tokens");
  }
  return tokens;
}

}  // namespace gpt2
