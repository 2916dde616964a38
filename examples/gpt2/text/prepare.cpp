// prepare.cpp: see the header for the stream layout and the split rule.
#include "prepare.hpp"
#include "text_error.hpp"
#include "token_shard.hpp"
#include "tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace gpt2 {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TextError("prepare: cannot open text file " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw TextError("prepare: error reading " + path.string());
  return std::move(ss).str();
}

}  // namespace

PrepareResult prepare(const Tokenizer& tokenizer, std::span<const std::filesystem::path> files,
                      const std::filesystem::path& out_dir, const PrepareOptions& options) {
  if (files.empty()) throw TextError("prepare: no text files given");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0)) {
    throw TextError("prepare: val_fraction is " + std::to_string(options.val_fraction) +
                    "; expected a value strictly between 0 and 1");
  }
  if (options.name.empty() || options.name.find('/') != std::string::npos) {
    throw TextError("prepare: shard name \"" + options.name + "\" must be non-empty, no '/'");
  }
  const size_t n = files.size();
  size_t n_val = 0;
  if (n >= 2) {
    n_val = static_cast<size_t>(std::ceil(options.val_fraction * double(n)));
    n_val = std::clamp<size_t>(n_val, 1, n - 1);
  }

  PrepareResult result;
  std::vector<uint32_t> train, val;
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint32_t>& dst = (i < n - n_val) ? train : val;
    dst.push_back(tokenizer.eot_token());
    try {
      tokenizer.encode_append(read_text(files[i]), dst);
    } catch (const TextError& e) {
      throw TextError("prepare: " + files[i].string() + ": " + e.what());
    }
  }
  result.train_documents = n - n_val;
  result.val_documents = n_val;

  if (n == 1) {
    // One document: split its tokens. train keeps [0, cut), val is EOT + [cut, end).
    const size_t total = train.size();
    size_t n_tok = static_cast<size_t>(std::ceil(options.val_fraction * double(total)));
    n_tok = std::clamp<size_t>(n_tok, 1, total > 1 ? total - 1 : 1);
    const size_t cut = total - n_tok;
    val.push_back(tokenizer.eot_token());
    val.insert(val.end(), train.begin() + static_cast<std::ptrdiff_t>(cut), train.end());
    train.resize(cut);
    result.val_documents = 1;  // the same document's tail
  }

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw TextError("prepare: cannot create " + out_dir.string() + " (" + ec.message() + ")");
  result.train_path = out_dir / (options.name + "_train.bin");
  result.val_path = out_dir / (options.name + "_val.bin");
  write_shard(result.train_path, train);
  write_shard(result.val_path, val);
  result.train_tokens = train.size();
  result.val_tokens = val.size();
  return result;
}

std::vector<std::filesystem::path> list_text_files(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw TextError("prepare: " + dir.string() + " is not a directory (run scripts/fetch_data.sh)");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw TextError("prepare: no *.txt files in " + dir.string());
  return files;
}

}  // namespace gpt2
