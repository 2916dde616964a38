// test_text_tokenizer.cpp: gpt2::Tokenizer against the reference encoder (npm
// gpt-3-encoder, run under node by scripts/tokenize_reference.js), and its errors.
//
// Needs `scripts/fetch_data.sh` to have filled GPT2_DATA_DIR and `node` on the machine.
// If either is missing the tests FAIL saying so: a green run must mean we compared.
#include <doctest/doctest.h>

#include "text_test_support.hpp"

#include "text/text_error.hpp"
#include "text/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

using text_test::kDataDir;
using text_test::scratch_dir;
using text_test::tokenizer;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Encodes all `texts` with the node reference in one call.
std::vector<std::vector<uint32_t>> reference_encode(const std::vector<std::string>& texts) {
  const fs::path dir = scratch_dir("reference");
  const fs::path in = dir / "in.json", out = dir / "out.json", err = dir / "err.txt";
  {
    std::ofstream f(in, std::ios::binary);
    f << nlohmann::json(texts).dump();
  }
  const std::string cmd = std::string("\"") + GPT2_NODE + "\" \"" + GPT2_REFERENCE_SCRIPT +
                          "\" \"" + kDataDir.string() + "\" < \"" + in.string() + "\" > \"" +
                          out.string() + "\" 2> \"" + err.string() + "\"";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    const std::string hint =
        code == 127 ? "node not found: install node (it runs the reference encoder)\n" : "";
    FAIL("the reference encoder failed (exit " << code << "): " << cmd << "\n"
         << hint << slurp(err) << "(run scripts/fetch_data.sh " << kDataDir.string()
         << " if the data is missing)");
  }
  auto parsed = nlohmann::json::parse(slurp(out));
  fs::remove_all(dir);
  return parsed.get<std::vector<std::vector<uint32_t>>>();
}

// Cuts a long text into pieces of roughly `target` bytes, only at places where the
// GPT-2 regex must also cut: before a space that follows a non-space and precedes an
// ASCII letter (" word" always starts a new pre-token there). Encoding the pieces
// separately then gives the same ids as encoding the whole. We do this because the
// reference encoder's output grows with Array.concat, quadratic in the token count:
// a whole book takes minutes in one piece, a second in pieces.
std::vector<std::string> cut_at_word_starts(const std::string& text, size_t target) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
                                      c == '\v' || c == '\f'; };
  auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t i = start + target; i + 1 < text.size(); ++i) {
    // A byte >= 0x80 before the space could end a multi-byte whitespace character
    // (e.g. U+00A0), so require an ASCII non-space there.
    const auto prev = static_cast<unsigned char>(text[i - 1]);
    if (text[i] == ' ' && prev < 0x80 && !is_space(text[i - 1]) && is_alpha(text[i + 1])) {
      pieces.push_back(text.substr(start, i - start));
      start = i;
      i = start + target;
    }
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

// reference_encode for long texts: each is cut with cut_at_word_starts, all pieces go
// to node in one call, and each text's ids are the concatenation of its pieces' ids.
std::vector<std::vector<uint32_t>> reference_encode_long(const std::vector<std::string>& texts) {
  std::vector<std::string> pieces;
  std::vector<size_t> first_piece;  // texts[i] is pieces[first_piece[i] .. first_piece[i+1])
  for (const auto& text : texts) {
    first_piece.push_back(pieces.size());
    for (auto& p : cut_at_word_starts(text, 4096)) pieces.push_back(std::move(p));
  }
  first_piece.push_back(pieces.size());
  const auto piece_ids = reference_encode(pieces);
  REQUIRE(piece_ids.size() == pieces.size());
  std::vector<std::vector<uint32_t>> ids(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    for (size_t p = first_piece[i]; p < first_piece[i + 1]; ++p) {
      ids[i].insert(ids[i].end(), piece_ids[p].begin(), piece_ids[p].end());
    }
  }
  return ids;
}

// The varied texts the byte-level BPE must agree with the reference on.
std::vector<std::string> varied_texts() {
  return {
      "Hello world",
      "",
      " ",
      "   ",
      "\n",
      "\n\n\n",
      "a\n\nb",
      "   leading spaces",
      "trailing spaces   ",
      "two  spaces, three   spaces, then a tab\tand\t\ttabs",
      "line one\nline two\r\nwindows line\r\n",
      "    indented\n        code(x);\n\n",
      "I'm sure you're right; they've said we'd go, she'll see it's done.",
      "Don't SHOUT: I'M NOT, it'S 'tis 'twas o'clock rock'n'roll",
      "'s't're've'm'll'd '' ' '",
      "Numbers: 0 7 42 123 4567 89012345 3.14159 -2.5e-10 1,000,000 2024-05-20 $19.99 50%",
      "phone 555-0100, 1st 2nd 3rd 4th, x86_64, 0xDEADBEEF",
      "Punctuation!!! Really??? Yes... --- *** ((( ))) [[ ]] {{ }} <|endoftext|>",
      "café naïve résumé Ångström façade jalapeño Zürich",
      "combining: e\xCC\x81 a\xCC\x8A n\xCC\x83",
      "日本語のテキスト、中文文本。한국어 텍스트",
      "Ελληνικά Русский текст العربية עברית हिन्दी ไทย",
      "emoji 🙂👍🏽 🇺🇸 👨‍👩‍👧 ❤️ ✨🚀",
      "math ∑∫√∞ ≠ ≤ ≥ ± × ÷ → ⇒",
      "digits in other scripts: ٣٤٥ ० १ ½ ¾ Ⅻ ²³",
      "no-break\xC2\xA0space and\xE3\x80\x80ideographic space\xE2\x80\x83" "em space",
      "zero\xE2\x80\x8Bwidth space, BOM \xEF\xBB\xBF here",
      "line\xE2\x80\xA8separator and\xE2\x80\xA9paragraph",
      "controls \x01\x02\x1b[0m \x7f end",
      "mixed 123abc abc123 ab12cd 12ab",
      "URLs https://example.com/a/b?c=d&e=f#g and e-mail a.b@c.org",
      "a,,,,b ,,,, ;;;; ....",
  };
}

}  // namespace

TEST_CASE("gpt2_text tokenizer: Hello world is [15496, 995]") {
  CHECK(tokenizer().encode("Hello world") == std::vector<uint32_t>{15496, 995});
  CHECK(tokenizer().vocab_size() == 50257);
  CHECK(tokenizer().eot_token() == gpt2::kEotToken);
  CHECK(tokenizer().token_bytes(gpt2::kEotToken) == "<|endoftext|>");
}

TEST_CASE("gpt2_text tokenizer: ids equal the node reference on varied text") {
  const auto texts = varied_texts();
  const auto expected = reference_encode(texts);
  REQUIRE(expected.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO("text #" << i << ": \"" << texts[i] << "\"");
    CHECK(tokenizer().encode(texts[i]) == expected[i]);
  }
}

TEST_CASE("gpt2_text tokenizer: ids equal the node reference on real corpus files") {
  const fs::path corpus = kDataDir / "corpus";
  const std::vector<fs::path> files = {
      corpus / "moby_dick.txt",
      corpus / "sotu_1790_george_washington_n.txt",
      corpus / "sotu_1890_benjamin_harrison_r.txt",  // the one `file` calls "data"
      corpus / "sotu_2021_joseph_r_biden_d.txt",
  };
  std::vector<std::string> texts;
  for (const auto& f : files) {
    if (!fs::exists(f)) {
      FAIL(f.string() << " not found: run scripts/fetch_data.sh " << kDataDir.string());
    }
    texts.push_back(slurp(f));
  }
  const auto expected = reference_encode_long(texts);
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(files[i].string());
    const auto got = tokenizer().encode(texts[i]);
    CHECK(got.size() == expected[i].size());
    if (got != expected[i]) {
      size_t at = 0;
      while (at < got.size() && at < expected[i].size() && got[at] == expected[i][at]) ++at;
      FAIL_CHECK("first difference at token " << at);
    }
    CHECK(tokenizer().decode(got) == texts[i]);
  }
}

TEST_CASE("gpt2_text tokenizer: decode(encode(x)) == x") {
  for (const auto& text : varied_texts()) {
    INFO("\"" << text << "\"");
    CHECK(tokenizer().decode(tokenizer().encode(text)) == text);
  }
  // Every single byte token decodes to one byte, and every token to its bytes.
  std::string all;
  for (uint32_t id = 0; id < tokenizer().vocab_size(); ++id) {
    all += tokenizer().token_bytes(id);
  }
  std::vector<uint32_t> ids(tokenizer().vocab_size());
  for (uint32_t id = 0; id < ids.size(); ++id) ids[id] = id;
  CHECK(tokenizer().decode(ids) == all);
}

TEST_CASE("gpt2_text tokenizer: errors name the input") {
  SUBCASE("invalid UTF-8 text") {
    CHECK_THROWS_WITH_AS(tokenizer().encode("ok \xff\xfe bad"),
                         doctest::Contains("not valid UTF-8 near byte offset 3"),
                         gpt2::TextError);
  }
  SUBCASE("token id out of range") {
    const std::vector<uint32_t> ids = {15496, 50257};
    CHECK_THROWS_WITH_AS(tokenizer().decode(ids), doctest::Contains("token id 50257 is out of range"),
                         gpt2::TextError);
  }
  const fs::path dir = scratch_dir("bad_files");
  const fs::path good_enc = kDataDir / "gpt2" / "encoder.json";
  const fs::path good_bpe = kDataDir / "gpt2" / "vocab.bpe";
  SUBCASE("missing encoder.json") {
    CHECK_THROWS_WITH_AS(gpt2::Tokenizer::load(dir / "nope.json", good_bpe),
                         doctest::Contains((dir / "nope.json").string().append(" (expected GPT-2's encoder.json").c_str()),
                         gpt2::TextError);
  }
  SUBCASE("encoder.json that is not JSON") {
    std::ofstream(dir / "enc.json") << "<html>not json</html>";
    CHECK_THROWS_WITH_AS(gpt2::Tokenizer::load(dir / "enc.json", good_bpe),
                         doctest::Contains((dir / "enc.json").string().append(" is not a JSON object").c_str()),
                         gpt2::TextError);
  }
  SUBCASE("vocab.bpe with a malformed line") {
    std::ofstream(dir / "vocab.bpe") << "#version: 0.2\nĠ t\nthree tokens here\n";
    CHECK_THROWS_WITH_AS(gpt2::Tokenizer::load(good_enc, dir / "vocab.bpe"),
                         doctest::Contains((dir / "vocab.bpe").string().append(":3: expected \"left right\"").c_str()),
                         gpt2::TextError);
  }
  SUBCASE("vocab.bpe naming a token encoder.json lacks") {
    std::ofstream(dir / "vocab.bpe") << "#version: 0.2\nĠ t\nzzzzzzzz qqqqqqqq\n";
    CHECK_THROWS_WITH_AS(gpt2::Tokenizer::load(good_enc, dir / "vocab.bpe"),
                         doctest::Contains(":3: merge \"zzzzzzzz qqqqqqqq\" uses a token missing"),
                         gpt2::TextError);
  }
  fs::remove_all(dir);
}
