// pretokenizer.hpp: GPT-2's pre-tokenisation, the regex that cuts text into words
// before BPE runs on each word separately (so no token ever spans "dog." -> "dog" ".").
//
// The pattern is GPT-2's
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// run by PCRE2 in UTF + UCP mode, with one change: \s is spelled out as the exact set
// JavaScript's \s matches (ECMAScript WhiteSpace + LineTerminator: TAB LF VT FF CR,
// the Unicode Zs spaces, U+2028, U+2029, U+FEFF). PCRE2's own \s differs from it on
// U+0085 and U+FEFF, and our reference encoder (npm gpt-3-encoder) is JavaScript.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

namespace gpt2 {

class Pretokenizer {
 public:
  // Compiles the pattern (and JIT-compiles it where PCRE2 supports that).
  Pretokenizer();
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Splits valid UTF-8 text into pieces that concatenate back to the text exactly;
  // the views point into `text`. Throws TextError naming the byte offset if `text` is
  // not valid UTF-8. Thread-safe: each call uses its own match data.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt2
