// test_text_shard.cpp: llm.c token shards: round trip, the exact on-disk bytes, and
// every way a bad file is rejected (with a message naming the file and the problem).
#include <doctest/doctest.h>

#include "text_test_support.hpp"

#include "text/text_error.hpp"
#include "text/token_shard.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

using text_test::scratch_dir;

namespace {

// Writes a shard byte by byte the way llm.c's dev/data scripts lay it out (a numpy
// int32[256] header, then numpy uint16 tokens), independently of write_shard.
void write_llmc_style(const fs::path& path, int32_t magic, int32_t version, int32_t count,
                      const std::vector<uint16_t>& tokens) {
  std::vector<unsigned char> bytes(1024 + 2 * tokens.size(), 0);
  auto put32 = [&](size_t at, int32_t v) {
    const auto u = static_cast<uint32_t>(v);
    for (int k = 0; k < 4; ++k) bytes[at + k] = static_cast<unsigned char>(u >> (8 * k));
  };
  put32(0, magic);
  put32(4, version);
  put32(8, count);
  for (size_t i = 0; i < tokens.size(); ++i) {
    bytes[1024 + 2 * i] = static_cast<unsigned char>(tokens[i] & 0xFF);
    bytes[1024 + 2 * i + 1] = static_cast<unsigned char>(tokens[i] >> 8);
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const fs::path& path) {
  try {
    (void)gpt2::read_shard(path);
  } catch (const gpt2::TextError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("gpt2_text shard: write then read gives the same tokens") {
  const fs::path dir = scratch_dir("shard_roundtrip");
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 10000; ++i) tokens.push_back((i * 7919u) % 50257u);
  tokens.push_back(65535);
  tokens.push_back(0);
  gpt2::write_shard(dir / "a.bin", tokens);
  CHECK(fs::file_size(dir / "a.bin") == 1024 + 2 * tokens.size());
  CHECK(gpt2::read_shard_header(dir / "a.bin") == tokens.size());
  const auto back = gpt2::read_shard(dir / "a.bin");
  REQUIRE(back.size() == tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) CHECK_MESSAGE(back[i] == tokens[i], "at " << i);
  CHECK_FALSE(fs::exists(dir / "a.bin.tmp"));

  // Empty shard: header only.
  gpt2::write_shard(dir / "empty.bin", {});
  CHECK(gpt2::read_shard(dir / "empty.bin").empty());
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text shard: bytes match llm.c's layout, and llm.c's shards load") {
  const fs::path dir = scratch_dir("shard_llmc");
  const std::vector<uint16_t> tokens = {50256, 15496, 995, 0, 65535, 258};
  write_llmc_style(dir / "llmc.bin", 20240520, 1, 6, tokens);
  CHECK(gpt2::read_shard(dir / "llmc.bin") == tokens);

  const std::vector<uint32_t> wide(tokens.begin(), tokens.end());
  gpt2::write_shard(dir / "ours.bin", wide);
  std::ifstream a(dir / "llmc.bin", std::ios::binary), b(dir / "ours.bin", std::ios::binary);
  const std::string sa((std::istreambuf_iterator<char>(a)), {});
  const std::string sb((std::istreambuf_iterator<char>(b)), {});
  CHECK(sa == sb);
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text shard: bad files are rejected with a message naming file and problem") {
  const fs::path dir = scratch_dir("shard_bad");
  const std::vector<uint16_t> tokens(100, 42);

  SUBCASE("missing file") {
    CHECK(error_of(dir / "missing.bin").find((dir / "missing.bin").string() + ": cannot read it") !=
          std::string::npos);
  }
  SUBCASE("truncated: count says more tokens than the file has") {
    write_llmc_style(dir / "t.bin", 20240520, 1, 100, tokens);
    fs::resize_file(dir / "t.bin", 1024 + 2 * 100 - 1);
    const std::string e = error_of(dir / "t.bin");
    INFO(e);
    CHECK(e.find((dir / "t.bin").string()) != std::string::npos);
    CHECK(e.find("header says 100 tokens") != std::string::npos);
    CHECK(e.find("(truncated)") != std::string::npos);
    CHECK_THROWS_AS((void)gpt2::read_shard_header(dir / "t.bin"), gpt2::TextError);
  }
  SUBCASE("shorter than the header") {
    write_llmc_style(dir / "h.bin", 20240520, 1, 0, {});
    fs::resize_file(dir / "h.bin", 500);
    const std::string e = error_of(dir / "h.bin");
    INFO(e);
    CHECK(e.find("file is 500 bytes, shorter than the 1024-byte header") != std::string::npos);
  }
  SUBCASE("trailing bytes: count says fewer tokens than the file has") {
    write_llmc_style(dir / "p.bin", 20240520, 1, 99, tokens);
    const std::string e = error_of(dir / "p.bin");
    INFO(e);
    CHECK(e.find("header says 99 tokens") != std::string::npos);
    CHECK(e.find("(trailing bytes)") != std::string::npos);
  }
  SUBCASE("wrong magic: an llm.c model checkpoint") {
    write_llmc_style(dir / "ckpt.bin", 20240326, 3, 100, tokens);
    const std::string e = error_of(dir / "ckpt.bin");
    INFO(e);
    CHECK(e.find((dir / "ckpt.bin").string() + ": bad magic 20240326, expected 20240520") !=
          std::string::npos);
  }
  SUBCASE("wrong version") {
    write_llmc_style(dir / "v.bin", 20240520, 2, 100, tokens);
    const std::string e = error_of(dir / "v.bin");
    INFO(e);
    CHECK(e.find("unsupported version 2, expected 1") != std::string::npos);
  }
  SUBCASE("negative count") {
    write_llmc_style(dir / "n.bin", 20240520, 1, -5, tokens);
    const std::string e = error_of(dir / "n.bin");
    INFO(e);
    CHECK(e.find("negative token count -5") != std::string::npos);
  }
  SUBCASE("a foreign file (text)") {
    std::ofstream f(dir / "foreign.bin", std::ios::binary);
    for (int i = 0; i < 100; ++i) f << "This is not a token shard, just some text.\n";
    f.close();
    const std::string e = error_of(dir / "foreign.bin");
    INFO(e);
    CHECK(e.find((dir / "foreign.bin").string() + ": bad magic") != std::string::npos);
    CHECK(e.find("not an llm.c token shard") != std::string::npos);
  }
  SUBCASE("writing a token that does not fit in uint16") {
    const std::vector<uint32_t> big = {1, 2, 70000};
    CHECK_THROWS_WITH_AS(gpt2::write_shard(dir / "big.bin", big),
                         doctest::Contains("token 70000 at position 2 does not fit in uint16"),
                         gpt2::TextError);
  }
  fs::remove_all(dir);
}
