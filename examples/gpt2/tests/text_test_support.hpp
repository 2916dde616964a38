#pragma once
// defines: what the gpt2_text_* tests share: kDataDir (scripts/fetch_data.sh's directory,
// GPT2_DATA_DIR), scratch_dir (an empty directory of this process), tokenizer (GPT-2's
// BPE files loaded once; a test that needs them FAILs naming the script to run).
#include <doctest/doctest.h>

#include "text/tokenizer.hpp"

#include <unistd.h>

#include <filesystem>
#include <string>

namespace text_test {

namespace fs = std::filesystem;

inline const fs::path kDataDir = GPT2_DATA_DIR;

// <tmp>/gpt2_text_test_<pid>_<name>, emptied: a rerun after a crash starts clean.
inline fs::path scratch_dir(const char* name) {
  fs::path d = fs::temp_directory_path() / ("gpt2_text_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline const gpt2::Tokenizer& tokenizer() {
  static const gpt2::Tokenizer tok = [] {
    const fs::path dir = kDataDir / "gpt2";
    if (!fs::exists(dir / "encoder.json") || !fs::exists(dir / "vocab.bpe")) {
      FAIL("GPT-2 tokenizer files not found in " << dir.string()
           << ": run scripts/fetch_data.sh " << kDataDir.string() << " first");
    }
    return gpt2::Tokenizer::load_dir(dir);
  }();
  return tok;
}

}  // namespace text_test
