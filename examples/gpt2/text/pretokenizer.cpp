// pretokenizer.cpp: PCRE2 behind gpt2::Pretokenizer (see the header for the pattern).
#define PCRE2_CODE_UNIT_WIDTH 8
// defines: pcre2_compile, pcre2_match, pcre2_jit_compile, PCRE2_UTF, PCRE2_UCP
#include <pcre2.h>

#include "pretokenizer.hpp"
#include "text_error.hpp"

#include <string>

namespace gpt2 {
namespace {

// JavaScript's \s, spelled out (see the header for why). WS goes inside a class.
#define GPT2_WS "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

constexpr const char* kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d"
    "| ?\\p{L}+"
    "| ?\\p{N}+"
    "| ?[^" GPT2_WS "\\p{L}\\p{N}]+"
    "|[" GPT2_WS "]+(?![^" GPT2_WS "])"
    "|[" GPT2_WS "]+";

#undef GPT2_WS

// Returns the offset of the first byte that does not start a valid UTF-8 character
// (overlong forms, surrogates and code points above U+10FFFF are invalid too), or
// text.size() if the text is valid. We check here rather than let PCRE2 do it so the
// error can name the exact offset.
size_t first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return n;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer() : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (!impl_->code) {
    throw TextError("gpt2::Pretokenizer: PCRE2 rejected the GPT-2 pattern at offset " +
                    std::to_string(err_offset) + ": " + pcre2_message(err));
  }
  // JIT is only speed; if this PCRE2 was built without it, the interpreter is used.
  (void)pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  if (const size_t bad = first_invalid_utf8(text); bad != text.size()) {
    throw TextError("gpt2::Pretokenizer: input text is not valid UTF-8 near byte offset " +
                    std::to_string(bad));
  }
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!md) throw TextError("gpt2::Pretokenizer: out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE pos = 0;
  while (pos < text.size()) {
    // Validated above, so PCRE2 need not re-check the whole subject on every call.
    const int rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md,
                               nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;  // cannot happen: every character matches
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw TextError("gpt2::Pretokenizer: PCRE2 match failed at byte offset " +
                      std::to_string(pos) + ": " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    // ov[0] > pos would mean characters no alternative matched; the pattern covers
    // every character, so this only guards against a future edit of the pattern.
    if (ov[1] == ov[0]) break;
    pieces.emplace_back(text.data() + ov[0], ov[1] - ov[0]);
    pos = ov[1];
  }
  pcre2_match_data_free(md);
  return pieces;
}

}  // namespace gpt2
