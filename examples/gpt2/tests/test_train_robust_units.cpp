// test_train_robust_units.cpp: the pieces of issue 14 that need no MPI — CRC-32C, the
// checkpoint file's checksums and bounds, the configuration fields and their
// comparison across ranks and against a checkpoint, the world-size and memory checks,
// optimizer argument checks, the non-finite verdict, the token id check.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "args.hpp"
#include "checkpoint.hpp"
#include "crc32c.hpp"
#include "data_loader.hpp"
#include "preflight.hpp"
#include "run_config.hpp"
#include "step_checks.hpp"
#include "token_shard.hpp"
#include "trainer.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace fs = std::filesystem;
using namespace train;

namespace {

Args parse(std::vector<std::string> words) {
  words.insert(words.begin(), {"tagc-gpt2", "train"});
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  return parse_args(int(argv.size()), argv.data());
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

CheckpointData sample_checkpoint() {
  CheckpointData d;
  d.header.world = 2;
  d.header.rank = 1;
  d.header.owned_size = 100;
  d.header.step = 7;
  d.segment_paths = {1, 2, 0};
  for (int i = 0; i < 100; ++i) {
    d.params.push_back(float(i));
    d.m.push_back(float(i) * 0.5f);
    d.v.push_back(float(i) * 0.25f);
  }
  d.reducer_states = {std::vector<std::byte>(40, std::byte{3}), std::vector<std::byte>(8, std::byte{9})};
  return d;
}

fs::path scratch() {
  static const fs::path p = fs::temp_directory_path() / ("tagc_robust_units_" + std::to_string(getpid()));
  fs::create_directories(p);
  return p;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_CASE("crc32c: the standard check value, incremental = one shot") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  Crc32c c;
  c.update("1234", 4);
  c.update("56789", 5);
  CHECK(c.value() == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
}

TEST_CASE("checkpoint file: round trip, and every damage is named as damage") {
  const CheckpointData d = sample_checkpoint();
  const fs::path p = scratch() / "rank1.ckpt";
  const FileDigest digest = write_checkpoint_file(p, d);
  CHECK(digest.bytes == fs::file_size(p));
  const std::string bytes = file_bytes(p);
  CHECK(digest.crc32c == crc32c(bytes.data(), bytes.size()));
  CHECK_FALSE(fs::exists(p.string() + ".tmp"));

  const CheckpointData back = read_checkpoint_file(p, d.header, &digest);
  CHECK(back.params == d.params);
  CHECK(back.v == d.v);
  CHECK(back.reducer_states == d.reducer_states);
  CHECK(back.header.step == 7);

  const auto parse_bytes = [&](const std::string& b, const FileDigest* w) {
    std::istringstream in(b);
    return parse_checkpoint(in, "X", d.header, w);
  };
  SUBCASE("a flipped byte in the params: the section is named, also without the manifest") {
    std::string b = bytes;
    b[sizeof(CheckpointHeader) + 8 + 3 + 8 + 4 * 50 + 3] ^= 0x40;  // params[50]'s exponent byte
    CHECK_THROWS_WITH_AS(parse_bytes(b, nullptr), doctest::Contains("section 'params' fails its checksum"),
                         CheckpointDamaged);
  }
  SUBCASE("a flipped byte in a reducer state") {
    std::string b = bytes;
    b[b.size() - 44 - 3] ^= 1;  // inside the last reducer state (8 bytes), before the 44-byte trailer
    CHECK_THROWS_WITH_AS(parse_bytes(b, nullptr), doctest::Contains("reducer state 1"), CheckpointDamaged);
  }
  SUBCASE("a flipped byte in the header reads as damage, not as another configuration") {
    std::string b = bytes;
    b[offsetof(CheckpointHeader, B)] ^= 2;
    CHECK_THROWS_AS(parse_bytes(b, nullptr), CheckpointDamaged);
  }
  SUBCASE("truncated at every length: damage, never a crash or a huge allocation") {
    for (size_t n = 0; n < bytes.size(); n += 7) CHECK_THROWS_AS(parse_bytes(bytes.substr(0, n), nullptr), CheckpointDamaged);
  }
  SUBCASE("a size that disagrees with the manifest") {
    FileDigest w = digest;
    w.bytes += 1;
    CHECK_THROWS_WITH_AS(parse_bytes(bytes, &w), doctest::Contains("the manifest records"), CheckpointDamaged);
  }
  SUBCASE("another configuration is a mismatch, naming the flag") {
    CheckpointHeader want = d.header;
    want.B = 8;
    std::istringstream in(bytes);
    CHECK_THROWS_WITH_AS(parse_checkpoint(in, "X", want, &digest), doctest::Contains("--B 0, this run 8"),
                         CheckpointMismatch);
  }
  SUBCASE("a different --sparsity is refused") {
    CheckpointHeader got = d.header, want = d.header;
    got.compress = want.compress = int32_t(CompressMode::all);
    got.sparsity = 0.9;
    want.sparsity = 0.95;
    CheckpointData c = d;
    c.header = got;
    const fs::path q = scratch() / "sp.ckpt";
    write_checkpoint_file(q, c);
    CHECK_THROWS_WITH_AS(read_checkpoint_file(q, want), doctest::Contains("--sparsity 0.9, this run 0.95"),
                         CheckpointMismatch);
  }
}

TEST_CASE("config fields: every flag classified; records compared across ranks") {
  const Args a = parse({});
  for (const ConfigField& f : config_fields(a)) CHECK_MESSAGE(f.value != "?", "flag --", f.flag, " is not classified");
  CHECK(config_fields(a).size() == flag_names().size());
  const auto r0 = config_record(parse({"--steps", "3"}));
  CHECK(r0.size() == config_record_bytes);
  CHECK(compare_records({r0, r0}).empty());
  const std::string m = compare_records({r0, config_record(parse({"--steps", "5", "--B", "8"}))});
  CHECK(m.find("--steps: '3' on rank 0, '5' on rank 1") != std::string::npos);
  CHECK(m.find("--B: '4' on rank 0, '8' on rank 1") != std::string::npos);
  // --log is local: it may differ
  CHECK(compare_records({config_record(parse({"--log", "a"})), config_record(parse({"--log", "b"}))}).empty());
  // three ranks, one differs: the groups are named
  const std::string m3 = compare_records({r0, r0, config_record(parse({"--steps", "4"}))});
  CHECK(m3.find("--steps: '3' on ranks 0, 1, '4' on rank 2") != std::string::npos);
  const std::string mg = compare_records({r0, config_record(parse({"--steps", "3", "--gather-dtype", "bf16"}))});
  CHECK(mg.find("--gather-dtype: 'fp32' on rank 0, 'bf16' on rank 1") != std::string::npos);
}

TEST_CASE("resume against the checkpoint's configuration") {
  const auto saved = config_json(parse({"--lr", "0.001"}));
  const auto notes = resume_differences(saved, config_json(parse({"--lr", "0.002", "--steps", "80"})));
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].find("--lr: 0.001 in the checkpoint, 0.002 in this run") != std::string::npos);
  CHECK_THROWS_WITH_AS(resume_differences(saved, config_json(parse({"--lr", "0.001", "--sparsity", "0.95"}))),
                       doctest::Contains("--sparsity: default in the checkpoint, 0.95 in this run"),
                       CheckpointMismatch);
  CHECK_THROWS_WITH_AS(resume_differences(saved, config_json(parse({"--lr", "0.001", "--T", "16"}))),
                       doctest::Contains("--T: 64 in the checkpoint, 16 in this run"), CheckpointMismatch);
  // --gather-dtype must match; a checkpoint older than the flag gathered fp32
  const auto g16 = config_json(parse({"--gather-dtype", "bf16"}));
  CHECK_THROWS_WITH_AS(resume_differences(g16, config_json(parse({}))),
                       doctest::Contains("--gather-dtype: bf16 in the checkpoint, fp32 in this run"), CheckpointMismatch);
  auto old = config_json(parse({}));
  old.erase("gather-dtype");
  CHECK(resume_differences(old, config_json(parse({}))).empty());
  CHECK_THROWS_WITH_AS(resume_differences(old, g16), doctest::Contains("--gather-dtype: fp32 in the checkpoint, bf16"),
                       CheckpointMismatch);
}

TEST_CASE("optimizer arguments and world size: refused in the command line's words") {
  CHECK_THROWS_WITH_AS(parse({"--lr", "-1"}), doctest::Contains("--lr: expected a learning rate >= 0"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--beta1", "2"}), doctest::Contains("--beta1: expected a value in [0, 1)"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--eps", "-1"}), doctest::Contains("--eps: expected a value > 0"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--clip", "-1"}), doctest::Contains("--clip"), ArgsError);
  CHECK_NOTHROW(parse({"--clip", "none", "--lr", "0"}));
  CHECK_THROWS_WITH_AS(check_world(parse({"--index-bits", "4"}), 16), doctest::Contains("use --index-bits exact"),
                       ArgsError);
  CHECK_NOTHROW(check_world(parse({"--index-bits", "4"}), 15));
  CHECK_NOTHROW(check_world(parse({"--index-bits", "4", "--compress", "none"}), 16));
}

TEST_CASE("memory estimate: d99 refused with figures, d2 fits") {
  Args a = parse({"--model", "d99"});
  const MemoryEstimate e = estimate_memory(model_config(a), a, 2);
  CHECK(e.total() > (uint64_t(100) << 30));  // ~48 G parameters
  const std::string m = error_of([&] { check_memory(e, 2, uint64_t(24) << 30, "d99"); });
  CHECK(m.find("--model d99 needs about") != std::string::npos);
  CHECK(m.find("24.00 GiB are available") != std::string::npos);
  Args b = parse({});
  CHECK_NOTHROW(check_memory(estimate_memory(model_config(b), b, 2), 2, uint64_t(24) << 30, "d2"));
}

TEST_CASE("non-finite verdict: loss first, then the units by name") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::string> names = {"embed", "attn.0", "mlp.0"};
  const std::vector<double> fine_loss = {1.0, 2.0}, fine_units = {1, 2, 3};
  CHECK(nonfinite_message(3, fine_loss, fine_units, names).empty());
  const std::vector<double> bad_loss = {1.0, nan}, bad_units = {1, inf, 3};
  CHECK(nonfinite_message(3, bad_loss, bad_units, names).find("step 3: the loss is not finite on rank(s) 1") == 0);
  CHECK(nonfinite_message(4, fine_loss, bad_units, names).find("step 4: the gradient of unit(s) attn.0") == 0);
}

TEST_CASE("token ids beyond the vocabulary: file and offset named when the shard is read") {
  std::vector<uint32_t> tokens(300, 5);
  tokens[123] = 60000;
  const fs::path p = scratch() / "bad_train.bin";
  gpt2::write_shard(p, tokens);
  gpt2::DataLoader l({p}, 2, 8, 0, 1);
  l.set_vocab_size(50257);
  CHECK_THROWS_WITH(l.preload(), doctest::Contains("bad_train.bin: token id 60000 at token offset 123 (byte 1270)"));
  fs::remove_all(scratch());
}
