// tokenizer.hpp: GPT-2's byte-level BPE tokenizer (text <-> token ids).
//
// Usage:
//   auto tok = gpt2::Tokenizer::load_dir("data/gpt2");   // encoder.json + vocab.bpe
//   std::vector<uint32_t> ids = tok.encode("Hello world"); // {15496, 995}
//   std::string text = tok.decode(ids);                    // "Hello world"
//
// How GPT-2 tokenizes, in three steps:
//   1. the pre-tokenisation regex cuts the text into words (pretokenizer.hpp);
//   2. each word's UTF-8 bytes become single-byte tokens;
//   3. the ranked merges of vocab.bpe are applied, lowest rank first, until no adjacent
//      pair in the word has a merge; the remaining tokens are the word's ids.
// encoder.json spells tokens in GPT-2's "byte to unicode" alphabet (each byte as one
// printable character) rather than as raw bytes; we translate it to bytes at load time,
// so everything after loading works on bytes and ids only.
//
// "<|endoftext|>" in the input text is encoded as ordinary text (as the npm
// gpt-3-encoder and OpenAI's encoder.py do); documents are separated by inserting
// eot_token() ids directly (see prepare.hpp).
#pragma once

#include "pretokenizer.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpt2 {

// The end-of-text token of GPT-2's vocabulary, "<|endoftext|>" (the last id, 50256).
inline constexpr uint32_t kEotToken = 50256;

class Tokenizer {
 public:
  // Loads the two OpenAI files. Throws TextError naming the file (and line, for
  // vocab.bpe) if one is missing, unreadable, or not in the expected format.
  static Tokenizer load(const std::filesystem::path& encoder_json,
                        const std::filesystem::path& vocab_bpe);
  // Same, with dir/encoder.json and dir/vocab.bpe (scripts/fetch_data.sh -> data/gpt2).
  static Tokenizer load_dir(const std::filesystem::path& dir);

  // Text (UTF-8) -> token ids. Throws TextError if `text` is not valid UTF-8.
  // Const and thread-safe: no cache is shared between calls.
  std::vector<uint32_t> encode(std::string_view text) const;
  // Same, appending to `out` (avoids a copy when concatenating many documents).
  void encode_append(std::string_view text, std::vector<uint32_t>& out) const;

  // Token ids -> the bytes they stand for. Throws TextError on an id >= vocab_size().
  // The result is raw bytes: ids cut from the middle of a sequence can end inside a
  // UTF-8 character; nothing is replaced with U+FFFD.
  std::string decode(std::span<const uint32_t> ids) const;
  // The bytes of one token (e.g. for streaming samples token by token).
  const std::string& token_bytes(uint32_t id) const;

  uint32_t vocab_size() const { return static_cast<uint32_t>(id_to_bytes_.size()); }
  uint32_t eot_token() const { return eot_; }

 private:
  Tokenizer() = default;
  void bpe(std::vector<uint32_t>& word) const;

  // One merge of vocab.bpe: its rank (line order) and the id of the merged token.
  struct Merge {
    uint32_t rank;
    uint32_t id;
  };
  static uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

  Pretokenizer pretokenizer_;
  std::vector<std::string> id_to_bytes_;           // id -> raw bytes
  uint32_t byte_to_id_[256] = {};                  // single byte -> its token id
  std::unordered_map<uint64_t, Merge> merges_;     // (left id, right id) -> merge
  uint32_t eot_ = kEotToken;
};

}  // namespace gpt2
