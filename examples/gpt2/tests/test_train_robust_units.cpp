// test_train_robust_units.cpp: the pieces of issue 14 that need no MPI — CRC-32C, the
// checkpoint file's checksums and bounds, the configuration fields and their
// comparison across ranks and against a checkpoint, the world-size and memory checks,
// optimizer argument checks, the non-finite verdict, the token id check; issue 30's:
// the divergence guard, the directory lock, saves that never remove a complete step,
// run ids (foreign steps skipped, pruning of this run's older steps only), the
// manifest's own checksum.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "args.hpp"
#include "checkpoint.hpp"
#include "checkpoint_store.hpp"
#include "compress_options.hpp"
#include "reducer_catalogue.hpp"
#include "dir_lock.hpp"
#include "divergence_guard.hpp"
#include "crc32c.hpp"
#include "data_loader.hpp"
#include "preflight.hpp"
#include "run_config.hpp"
#include "step_checks.hpp"
#include "token_shard.hpp"
#include "trainer.hpp"

#include <unistd.h>

#include <algorithm>
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

TEST_CASE("checkpoint header: the choices' codes are fixed, and a mismatch names them as the flags do") {
  // The codes version 3-6 files hold (ValuesMode's order when they were written): a file
  // of any version must read as the same configuration.
  CHECK(header_code(tagc::values_kind::sketch) == 0);
  CHECK(header_code(tagc::values_kind::packed) == 1);
  CHECK(header_code(tagc::values_kind::packed_bf16) == 2);
  CHECK(header_code(tagc::values_kind::sketch_bf16) == 3);
  CHECK(header_code(tagc::values_kind::sketch_fp16) == 4);
  CHECK(header_code(tagc::values_kind::packed_fp16) == 5);
  CHECK(header_code(tagc::index_exchange::reduce_scatter) == 1);
  CHECK(header_code(tagc::decode_mode::peel_then_estimate) == 2);
  CHECK(header_code(tagc::schedule_shape::linear) == 1);
  // every value --values takes has its own code
  std::vector<int32_t> codes;
  for (const auto& row : tagc::values_kinds)
    if (!tagc::is_plain(row.value)) codes.push_back(header_code(row.value));
  std::sort(codes.begin(), codes.end());
  CHECK(std::adjacent_find(codes.begin(), codes.end()) == codes.end());
  CHECK(codes.front() >= 0);
  // run_header stores the codes; the mismatch names them (packed-fp16 read as "?(5)" once)
  const CheckpointData d = sample_checkpoint();
  const auto mismatch_of = [&](Args got, Args want) {
    CheckpointData c = d;
    c.header = run_header(gpt2::Config{}, got, d.header.world, d.header.rank, d.header.owned_size);
    const CheckpointHeader expect = run_header(gpt2::Config{}, want, d.header.world, d.header.rank, d.header.owned_size);
    c.params.resize(c.header.owned_size);
    c.m.resize(c.header.owned_size);
    c.v.resize(c.header.owned_size);
    const fs::path q = scratch() / "codes.ckpt";
    write_checkpoint_file(q, c);
    try {
      read_checkpoint_file(q, expect);
    } catch (const CheckpointMismatch& e) {
      return std::string(e.what());
    }
    return std::string("no mismatch");
  };
  Args fp16 = parse({"--values", "packed-fp16", "--index-bits", "exact"});
  Args bf16 = parse({"--values", "packed-bf16", "--index-bits", "exact"});
  CHECK(run_header(gpt2::Config{}, fp16, 1, 0, 0).values == 5);
  CHECK(mismatch_of(fp16, bf16).find("--values packed-fp16, this run packed-bf16") != std::string::npos);
  Args scatter = parse({"--index-bits", "exact", "--index-exchange", "reduce-scatter"});
  Args estimate = scatter, all_reduce = scatter;
  estimate.decoder = tagc::decode_mode::estimate;
  all_reduce.index_exchange = tagc::index_exchange::all_reduce;
  CHECK(mismatch_of(scatter, all_reduce).find("--index-exchange reduce-scatter, this run all-reduce") !=
        std::string::npos);
  CHECK(mismatch_of(estimate, scatter).find("--decoder estimate, this run peel-estimate") != std::string::npos);
  Args linear = parse({"--sparsity-warmup", "10", "--sparsity-schedule", "linear"});
  CHECK(mismatch_of(linear, parse({"--sparsity-warmup", "10"})).find("--sparsity-schedule linear") != std::string::npos);
  // a code no row has (a newer program's file) is shown as the number, not read as a value
  CHECK(header_code_name(tagc::values_kind{}, 99) == "?(99)");
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

TEST_CASE("--reducer: tagc's description language, each key the same setting as its flag") {
  const std::string text = "values=packed-bf16 index=exact theta=0.9875 warmup=300";
  const Args by_text = parse({"--reducer", text});
  const Args by_flags =
      parse({"--values", "packed-bf16", "--index-bits", "exact", "--sparsity", "0.9875", "--sparsity-warmup", "300"});
  CHECK(config_json(by_text) == config_json(by_flags));
  tagc::reducer_description d;
  REQUIRE(tagc::parse_reducer_description(text, d).ok());
  CHECK(compress_options(by_text).reducer == tagc::normalized(d));
  CHECK(reducer_text(by_flags) == tagc::description_text(tagc::normalized(d)));
  // in command-line order: a later flag overrides a key, a later key a flag
  CHECK(parse({"--reducer", "values=packed index=exact", "--values", "packed-bf16"}).values == tagc::values_kind::packed_bf16);
  CHECK(parse({"--values", "packed-bf16", "--reducer", "values=packed index=exact"}).values == tagc::values_kind::packed);
  const Args adaptive = parse({"--reducer", "adaptive-load=0.5"});
  CHECK(adaptive.adaptive);
  CHECK(adaptive.target_load == 0.5);
  // every built reducer: its description and its flags (reducer_flags) choose it again
  for (const tagc::reducer_description& b : built_descriptions()) {
    if (tagc::is_plain(b.values)) continue;
    CAPTURE(tagc::description_text(b));
    CHECK(compress_options(parse({"--reducer", tagc::description_text(b)})).reducer == tagc::normalized(b));
    std::vector<std::string> words;
    std::istringstream flags(reducer_flags(b));
    for (std::string w; flags >> w;) words.push_back(w);
    CHECK(tagc::type_of(compress_options(parse(words)).reducer) == tagc::type_of(b));
  }
  // refusals: the library's for a malformed text, the flag's for a value the trainer does
  // not take, and a key the trainer has no setting for
  CHECK_THROWS_WITH_AS(parse({"--reducer", "values=fp8"}), doctest::Contains("--reducer: reducer description: values=fp8"),
                       ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--reducer", "index=2"}),
                       doctest::Contains("--reducer index=2: --index-bits: expected 1|4|exact|shared"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--reducer", "lanes=512"}), doctest::Contains("lanes is not a setting of tagc-gpt2"),
                       ArgsError);
}

TEST_CASE("optimizer arguments and world size: refused in the command line's words") {
  CHECK_THROWS_WITH_AS(parse({"--lr", "-1"}), doctest::Contains("--lr: expected a learning rate >= 0"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--beta1", "2"}), doctest::Contains("--beta1: expected a value in [0, 1)"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--eps", "-1"}), doctest::Contains("--eps: expected a value > 0"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--clip", "-1"}), doctest::Contains("--clip: expected a norm > 0, or 'none'"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--clip", "0"}), doctest::Contains("--clip: expected a norm > 0, or 'none'"), ArgsError);
  CHECK_THROWS_WITH_AS(parse({"--sparsity", "1"}), doctest::Contains("--sparsity: expected a value in [0, 1)"),
                       ArgsError);
  CHECK_NOTHROW(parse({"--sparsity", "0.999"}));
  CHECK_THROWS_WITH_AS(parse({"--guard-loss-spike", "-1"}), doctest::Contains("--guard-loss-spike: expected a value >= 0"),
                       ArgsError);
  CHECK_NOTHROW(parse({"--clip", "none", "--lr", "0"}));
  CHECK_THROWS_WITH_AS(check_world(parse({"--index-bits", "4"}), 16), doctest::Contains("use --index-bits exact"),
                       ArgsError);
  CHECK_NOTHROW(check_world(parse({"--index-bits", "4"}), 15));
  CHECK_NOTHROW(check_world(parse({"--index-bits", "4", "--compress", "none"}), 16));
}

TEST_CASE("node count note: the gathered index is flagged where the cost model puts it above bf16's 16 bits") {
  const Args gathered = parse({"--values", "packed-bf16", "--index-bits", "gathered", "--sparsity", "0.9875"});
  CHECK(node_count_note(gathered, 32).empty());  // 10.3 bits
  const std::string at_64 = node_count_note(gathered, 64);  // 18.8 bits
  CHECK(at_64.find("across 64 nodes sends about 19 bits") != std::string::npos);
  CHECK(at_64.find("--index-bits routed sends the same sums in about 0.6") != std::string::npos);
  CHECK(node_count_note(parse({"--values", "packed-bf16", "--index-bits", "shared", "--sparsity", "0.9875"}), 1024)
            .empty());
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

namespace {
// One rank: the store's collectives are identities.
RankGroup solo() {
  return {0, 1, [](std::span<double>) {}};
}
CheckpointData solo_checkpoint(uint64_t step, uint64_t run, float value) {
  CheckpointData d = sample_checkpoint();
  d.header.world = 1;
  d.header.rank = 0;
  d.header.step = step;
  d.header.run_id = run;
  for (float& x : d.params) x = value;
  return d;
}
}  // namespace

TEST_CASE("divergence guard: loss spike against the best healthy loss, gradient-norm spike after warm-up") {
  Args a = parse({});
  DivergenceGuard g(a);
  CHECK(g.judge(1, 10.0, 1.0).empty());
  CHECK(g.judge(2, 6.0, 1.0).empty());
  CHECK(g.judge(3, 11.0, 1.0).empty());  // below 2 x 6
  const std::string spike = g.judge(4, 13.0, 1.0);
  CHECK(spike.find("step 4: loss 13 is above --guard-loss-spike 2 x the best healthy loss 6") != std::string::npos);
  CHECK(g.judge(5, 6.5, 1.0).empty());  // an unhealthy step did not move the reference
  CHECK(g.judge(6, 6.5, 1.0).empty());
  CHECK(g.judge(7, 6.5, 1.0).empty());
  CHECK(g.judge(8, 6.5, 150.0).find("gradient norm 150 is above --guard-grad-spike 100") != std::string::npos);
  a.guard_loss_spike = 0;
  a.guard_grad_spike = 0;
  DivergenceGuard off(a);
  CHECK(off.judge(1, 1.0, 1.0).empty());
  CHECK(off.judge(2, 1e9, 1e9).empty());
}

TEST_CASE("directory lock: a second holder is refused naming the first; a dead pid's lock is replaced") {
  const fs::path dir = scratch() / "locked";
  fs::remove_all(dir);
  {
    auto lock = DirLock::acquire(dir, nullptr);
    lock->set_run("00000000000000ab");
    const std::string e = error_of([&] { DirLock::acquire(dir, nullptr); });
    CHECK(e.find("is in use by another run (run 00000000000000ab, pid " + std::to_string(::getpid())) !=
          std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "LOCK"));  // released
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::ofstream(dir / "LOCK") << "host " << host << "\npid 999999999\nrun 0000000000000001\n";
  std::string note;
  auto lock = DirLock::acquire(dir, &note);
  CHECK(note.find("stale lock of pid 999999999") != std::string::npos);
}

TEST_CASE("checkpoint store: replacing a step, run ids, pruning, foreign steps, the manifest's checksum") {
  const fs::path dir = scratch() / "store";
  fs::remove_all(dir);
  RankGroup g = solo();
  CheckpointHeader expect = solo_checkpoint(0, 0, 0).header;
  const uint64_t run = 0x1234, other = 0x9999;
  SaveInfo info{2, 1.0, 1.0, nlohmann::json::object(), run, 1e3};
  claim_checkpoint_dir(dir, run, g);
  for (uint64_t s : {2, 4, 6}) CHECK(save_step(dir, solo_checkpoint(s, run, float(s)), info, g).empty());
  CHECK_FALSE(fs::exists(dir / "step_00000002"));  // keep 2
  CHECK(fs::exists(dir / "step_00000006" / "MANIFEST.json"));
  // re-saving step 6 replaces it whole; nothing partial is left
  CHECK(save_step(dir, solo_checkpoint(6, run, 66.0f), info, g).empty());
  CHECK(load_newest(dir, expect, nlohmann::json::object(), g).data.params[0] == 66.0f);
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename().string().find(".partial") == std::string::npos);
  // a save of an older step never removes a newer one
  CHECK(save_step(dir, solo_checkpoint(3, run, 3.0f), info, g).empty());
  CHECK(fs::exists(dir / "step_00000006" / "MANIFEST.json"));
  // the guard's parameter bound: not saved, nothing changed
  CHECK(save_step(dir, solo_checkpoint(8, run, 5e3f), info, g).find("exceeds --guard-param-max") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "step_00000008"));
  // another run's step, newer: skipped by the resume, refused to a fresh run, kept aside
  const fs::path odir = scratch() / "store_other";
  fs::remove_all(odir);
  CHECK(save_step(odir, solo_checkpoint(10, other, 10.0f), {2, 1.0, 1.0, {}, other, 0}, g).empty());
  fs::rename(odir / "step_00000010", dir / "step_00000010");
  const Resumed r = load_newest(dir, expect, nlohmann::json::object(), g);
  CHECK(r.data.header.step == 6);
  CHECK(r.run_id == run);
  CHECK(std::string(r.notes.at(0)).find("step_00000010 (run 0000000000009999) is another run's") != std::string::npos);
  CHECK(error_of([&] { claim_checkpoint_dir(dir, 0x5555, g); }).find("holds step_00000010 of another run") !=
        std::string::npos);
  CHECK(save_step(dir, solo_checkpoint(10, run, 11.0f), info, g).empty());
  CHECK(fs::exists(dir / "step_00000010.run-0000000000009999" / "MANIFEST.json"));
  // a changed value in the manifest is damage: the previous complete step is taken
  {
    const fs::path m = dir / "step_00000010" / "MANIFEST.json";
    std::string text = file_bytes(m);
    const size_t at = text.find("\"loss\": 1.0");
    REQUIRE(at != std::string::npos);
    text.replace(at, 11, "\"loss\": 2.0");
    std::ofstream(m, std::ios::binary | std::ios::trunc) << text;
  }
  const Resumed back = load_newest(dir, expect, nlohmann::json::object(), g);
  CHECK(back.data.header.step == 6);
  CHECK(std::string(back.notes.back()).find("step_00000010 is damaged") != std::string::npos);
}
