// prepare.hpp: text files -> a train shard and a val shard (llm.c's format).
//
// Each file is one document. The token stream is, as in llm.c's data scripts,
//   EOT doc0 EOT doc1 EOT doc2 ...
// i.e. every document is *preceded* by the end-of-text token (50256), so the model
// learns that what follows EOT is the start of a fresh document.
//
// Train/val split, deterministic and at document granularity, so no document is
// split across train and val: the LAST ceil(val_fraction * n) documents, in the order
// given, go to val, the rest to train (with n >= 2 at least one document each side).
// With list_text_files' sorted order on data/corpus that is moby_dick.txt plus the
// early speeches for train and the most recent speeches for val.
// With a single document there is nothing to split by, so its last
// ceil(val_fraction * tokens) tokens go to val instead, and the val shard starts with
// its own EOT.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace gpt2 {

class Tokenizer;

struct PrepareOptions {
  std::string name = "corpus";  // shards are <out_dir>/<name>_train.bin, <name>_val.bin
  double val_fraction = 0.05;   // in (0, 1)
};

struct PrepareResult {
  std::filesystem::path train_path, val_path;
  uint64_t train_tokens = 0, val_tokens = 0;  // including the EOT separators
  size_t train_documents = 0, val_documents = 0;
};

// Tokenizes `files` (UTF-8 text; at least one) and writes the two shards into `out_dir`
// (created if missing). Throws TextError naming the file on an unreadable or non-UTF-8
// input, or a bad option.
PrepareResult prepare(const Tokenizer& tokenizer, std::span<const std::filesystem::path> files,
                      const std::filesystem::path& out_dir, const PrepareOptions& options = {});

// Every "*.txt" file directly in `dir`, sorted by name (so the split is the same on every
// machine). Throws TextError if `dir` is missing or holds none.
std::vector<std::filesystem::path> list_text_files(const std::filesystem::path& dir);

}  // namespace gpt2
