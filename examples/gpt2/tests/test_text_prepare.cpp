// test_text_prepare.cpp: gpt2::prepare: stream layout (EOT before each document), the
// document-level train/val split, and the real corpus end to end (fetch_data.sh output
// -> shards -> DataLoader).
#include <doctest/doctest.h>

#include "text_test_support.hpp"

#include "text/data_loader.hpp"
#include "text/prepare.hpp"
#include "text/text_error.hpp"
#include "text/token_shard.hpp"
#include "text/tokenizer.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

using text_test::kDataDir;
using text_test::scratch_dir;
using text_test::tokenizer;

namespace {

std::vector<uint32_t> widen(const std::vector<uint16_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("gpt2_text prepare: EOT precedes every document; the last documents are val") {
  const fs::path dir = scratch_dir("prepare_small");
  const std::vector<std::string> docs = {"First document.\n", "Second one, café.\n",
                                         "Third: 42 things\n", "Fourth and last."};
  std::vector<fs::path> files;
  for (size_t i = 0; i < docs.size(); ++i) {
    files.push_back(dir / ("doc" + std::to_string(i) + ".txt"));
    std::ofstream(files.back(), std::ios::binary) << docs[i];
  }
  CHECK(gpt2::list_text_files(dir) == files);

  // ceil(0.3 * 4) = 2 documents to val.
  const auto r = gpt2::prepare(tokenizer(), files, dir / "out", {"tiny", 0.3});
  CHECK(r.train_path == dir / "out" / "tiny_train.bin");
  CHECK(r.val_path == dir / "out" / "tiny_val.bin");
  CHECK(r.train_documents == 2);
  CHECK(r.val_documents == 2);

  auto stream = [&](size_t from, size_t to) {
    std::vector<uint32_t> s;
    for (size_t i = from; i < to; ++i) {
      s.push_back(gpt2::kEotToken);
      const auto ids = tokenizer().encode(docs[i]);
      s.insert(s.end(), ids.begin(), ids.end());
    }
    return s;
  };
  CHECK(widen(gpt2::read_shard(r.train_path)) == stream(0, 2));
  CHECK(widen(gpt2::read_shard(r.val_path)) == stream(2, 4));
  CHECK(r.train_tokens == stream(0, 2).size());
  CHECK(r.val_tokens == stream(2, 4).size());
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text prepare: one document is split by tokens; bad input is named") {
  const fs::path dir = scratch_dir("prepare_one");
  std::string text;
  for (int i = 0; i < 50; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  std::ofstream(dir / "one.txt", std::ios::binary) << text;
  const std::vector<fs::path> files{dir / "one.txt"};
  const auto r = gpt2::prepare(tokenizer(), files, dir / "out", {"one", 0.1});
  const auto train = widen(gpt2::read_shard(r.train_path));
  const auto val = widen(gpt2::read_shard(r.val_path));
  // train + val (minus val's leading EOT) is the whole stream.
  std::vector<uint32_t> whole{gpt2::kEotToken};
  const auto ids = tokenizer().encode(text);
  whole.insert(whole.end(), ids.begin(), ids.end());
  REQUIRE(val.size() >= 2);
  CHECK(val[0] == gpt2::kEotToken);
  std::vector<uint32_t> joined = train;
  joined.insert(joined.end(), val.begin() + 1, val.end());
  CHECK(joined == whole);
  CHECK(val.size() - 1 == (whole.size() + 9) / 10);

  std::ofstream(dir / "bad.txt", std::ios::binary) << "fine, then \xC3\x28 broken";
  const std::vector<fs::path> bad{dir / "one.txt", dir / "bad.txt"};
  CHECK_THROWS_WITH_AS(gpt2::prepare(tokenizer(), bad, dir / "out"),
                       doctest::Contains((dir / "bad.txt").string().append(": gpt2::Pretokenizer: input text is not valid UTF-8 near byte offset 11").c_str()),
                       gpt2::TextError);
  const std::vector<fs::path> missing{dir / "nope.txt"};
  CHECK_THROWS_WITH_AS(gpt2::prepare(tokenizer(), missing, dir / "out"),
                       doctest::Contains("cannot open text file"), gpt2::TextError);
  CHECK_THROWS_WITH_AS(gpt2::prepare(tokenizer(), files, dir / "out", {"x", 1.0}),
                       doctest::Contains("val_fraction"), gpt2::TextError);
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text prepare: the fetched corpus becomes shards the loader reads") {
  const fs::path corpus = kDataDir / "corpus";
  if (!fs::is_directory(corpus)) {
    FAIL(corpus.string() << " not found: run scripts/fetch_data.sh " << kDataDir.string());
  }
  const auto files = gpt2::list_text_files(corpus);
  CHECK(files.size() == 234);  // 233 speeches + Moby Dick
  const fs::path dir = scratch_dir("prepare_corpus");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = gpt2::prepare(tokenizer(), files, dir, {"sotu_moby", 0.05});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("prepared " << r.train_tokens << " train + " << r.val_tokens << " val tokens from "
          << files.size() << " files in " << secs << " s");
  CHECK(r.val_documents == 12);  // ceil(0.05 * 234)
  CHECK(r.train_documents == 222);
  CHECK(r.train_tokens > 2'000'000);
  CHECK(r.val_tokens > 50'000);

  // Deterministic: a second run writes identical shards.
  const auto r2 = gpt2::prepare(tokenizer(), files, dir / "again", {"sotu_moby", 0.05});
  CHECK(gpt2::read_shard(r.val_path) == gpt2::read_shard(r2.val_path));

  gpt2::DataLoader train(gpt2::list_shards(dir, "train"), 4, 64, 0, 1);
  gpt2::DataLoader val(gpt2::list_shards(dir, "val"), 4, 64, 0, 1);
  std::vector<int32_t> x(4 * 64), y(4 * 64);
  val.next_batch(x, y);
  CHECK(x[0] == int32_t(gpt2::kEotToken));  // the val stream starts a document
  train.next_batch(x, y);
  CHECK(x[0] == int32_t(gpt2::kEotToken));
  const std::vector<uint32_t> ids(x.begin() + 1, x.begin() + 4);
  CHECK(tokenizer().decode(ids).size() > 0);
  fs::remove_all(dir);
}
