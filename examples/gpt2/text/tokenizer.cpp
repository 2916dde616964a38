// tokenizer.cpp: loading OpenAI's encoder.json / vocab.bpe, and the BPE merge loop.
#include "tokenizer.hpp"
#include "text_error.hpp"

// defines: nlohmann::json (parsing encoder.json)
#include <nlohmann/json.hpp>

#include <array>
#include <fstream>
#include <limits>
#include <sstream>

namespace gpt2 {
namespace {

// GPT-2's byte <-> unicode table. The 188 printable bytes (! to ~, ¡ to ¬, ® to ÿ)
// stand for themselves (code point == byte); the other 68 bytes (controls, space,
// DEL, C1 controls, NBSP, soft hyphen) take code points 256, 257, ... in byte order.
// The point of the table is that vocab.bpe is whitespace-separated text, so a token
// that contains a space byte must spell it as something else (U+0120 'Ġ').
// Returns code point -> byte, with -1 for code points that stand for no byte.
std::array<int, 256 + 68> unicode_to_byte_table() {
  std::array<int, 256 + 68> table;
  table.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[static_cast<size_t>(printable ? b : next++)] = b;
  }
  return table;
}

std::string read_file(const std::filesystem::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw TextError("cannot open " + path.string() + " (expected " + what +
                    "; run scripts/fetch_data.sh to fetch it)");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw TextError("error reading " + path.string());
  return std::move(ss).str();
}

// Decodes one token spelled in GPT-2's byte alphabet (UTF-8 text) into raw bytes.
// Returns false if it contains a character that stands for no byte.
bool alphabet_to_bytes(std::string_view s, std::string& out) {
  static const std::array<int, 256 + 68> table = unicode_to_byte_table();
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < s.size()) {
      // Every character of the alphabet is below U+0800, i.e. at most two UTF-8 bytes.
      cp = ((c0 & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;
    }
    if (cp >= table.size() || table[cp] < 0) return false;
    out.push_back(static_cast<char>(table[cp]));
  }
  return true;
}

}  // namespace

Tokenizer Tokenizer::load_dir(const std::filesystem::path& dir) {
  return load(dir / "encoder.json", dir / "vocab.bpe");
}

Tokenizer Tokenizer::load(const std::filesystem::path& encoder_json,
                          const std::filesystem::path& vocab_bpe) {
  Tokenizer tok;

  // encoder.json: {"token in byte alphabet": id, ...}, ids dense from 0.
  const std::string enc_text = read_file(encoder_json, "GPT-2's encoder.json");
  nlohmann::json enc = nlohmann::json::parse(enc_text, nullptr, /*allow_exceptions=*/false);
  const std::string enc_name = encoder_json.string();
  if (enc.is_discarded() || !enc.is_object()) {
    throw TextError(enc_name + " is not a JSON object (expected GPT-2's encoder.json: "
                    "{\"token\": id, ...})");
  }
  if (enc.size() > std::numeric_limits<uint16_t>::max() + 1u) {
    // Token shards store ids as uint16 (llm.c's format), so a larger vocabulary could
    // not be written out anyway.
    throw TextError(enc_name + " has " + std::to_string(enc.size()) +
                    " tokens; expected at most 65536 (GPT-2 has 50257)");
  }
  tok.id_to_bytes_.assign(enc.size(), std::string());
  std::vector<bool> seen(enc.size(), false);
  std::unordered_map<std::string, uint32_t> bytes_to_id;
  bytes_to_id.reserve(enc.size() * 2);
  std::string bytes;
  for (auto it = enc.begin(); it != enc.end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= enc.size()) {
      throw TextError(enc_name + ": token \"" + it.key() + "\" has id " + it.value().dump() +
                      "; expected an integer in [0, " + std::to_string(enc.size()) + ")");
    }
    const auto id = it.value().get<uint32_t>();
    if (seen[id]) throw TextError(enc_name + ": id " + std::to_string(id) + " is used twice");
    seen[id] = true;
    if (!alphabet_to_bytes(it.key(), bytes)) {
      throw TextError(enc_name + ": token \"" + it.key() +
                      "\" contains a character outside GPT-2's byte alphabet");
    }
    tok.id_to_bytes_[id] = bytes;
    bytes_to_id.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    auto found = bytes_to_id.find(std::string(1, static_cast<char>(b)));
    if (found == bytes_to_id.end()) {
      throw TextError(enc_name + ": no token for byte " + std::to_string(b) +
                      "; a byte-level BPE vocabulary needs all 256");
    }
    tok.byte_to_id_[b] = found->second;
  }
  auto eot = enc.find("<|endoftext|>");
  if (eot == enc.end()) throw TextError(enc_name + ": no \"<|endoftext|>\" token");
  tok.eot_ = eot->get<uint32_t>();

  // vocab.bpe: "#version: 0.2" then one merge per line, "left right", best first.
  const std::string bpe_text = read_file(vocab_bpe, "GPT-2's vocab.bpe");
  const std::string bpe_name = vocab_bpe.string();
  std::istringstream lines(bpe_text);
  std::string line, left, right;
  size_t line_no = 0;
  uint32_t rank = 0;
  tok.merges_.reserve(60000);
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line[0] == '#')) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos) {
      throw TextError(bpe_name + ":" + std::to_string(line_no) + ": expected \"left right\" "
                      "(two tokens and one space), got \"" + line + "\"");
    }
    std::string lb, rb;
    if (!alphabet_to_bytes(std::string_view(line).substr(0, sp), lb) ||
        !alphabet_to_bytes(std::string_view(line).substr(sp + 1), rb)) {
      throw TextError(bpe_name + ":" + std::to_string(line_no) +
                      ": a character outside GPT-2's byte alphabet in \"" + line + "\"");
    }
    auto l = bytes_to_id.find(lb), r = bytes_to_id.find(rb), m = bytes_to_id.find(lb + rb);
    if (l == bytes_to_id.end() || r == bytes_to_id.end() || m == bytes_to_id.end()) {
      throw TextError(bpe_name + ":" + std::to_string(line_no) + ": merge \"" + line +
                      "\" uses a token missing from " + enc_name +
                      " (are the two files from the same tokenizer?)");
    }
    // A pair listed twice keeps its last rank, as the dict built by OpenAI's encoder.py
    // (and the npm port) does. GPT-2's own file lists no pair twice.
    tok.merges_.insert_or_assign(pair_key(l->second, r->second), Merge{rank, m->second});
    ++rank;
  }
  if (rank == 0) throw TextError(bpe_name + ": no merges found (expected GPT-2's vocab.bpe)");
  return tok;
}

// Applies the merges to one word, in place. Each round finds the adjacent pair with the
// lowest rank and merges every occurrence of it, left to right and non-overlapping
// ("a a a" with merge "a a" -> "aa a"), exactly as OpenAI's encoder.py does.
// Quadratic in the word length, which is fine: words are short, and even a long run of
// spaces collapses in a few rounds.
void Tokenizer::bpe(std::vector<uint32_t>& word) const {
  while (word.size() > 1) {
    uint32_t best_rank = std::numeric_limits<uint32_t>::max();
    uint32_t left = 0, right = 0, merged = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto m = merges_.find(pair_key(word[i], word[i + 1]));
      if (m != merges_.end() && m->second.rank < best_rank) {
        best_rank = m->second.rank;
        left = word[i];
        right = word[i + 1];
        merged = m->second.id;
      }
    }
    if (best_rank == std::numeric_limits<uint32_t>::max()) break;
    size_t out = 0;
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        word[out++] = merged;
        ++i;
      } else {
        word[out++] = word[i];
      }
    }
    word.resize(out);
  }
}

void Tokenizer::encode_append(std::string_view text, std::vector<uint32_t>& out) const {
  std::vector<uint32_t> word;
  for (std::string_view piece : pretokenizer_.split(text)) {
    word.clear();
    for (char c : piece) word.push_back(byte_to_id_[static_cast<unsigned char>(c)]);
    bpe(word);
    out.insert(out.end(), word.begin(), word.end());
  }
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 1);  // English runs ~4 bytes per token
  encode_append(text, out);
  return out;
}

const std::string& Tokenizer::token_bytes(uint32_t id) const {
  if (id >= id_to_bytes_.size()) {
    throw TextError("gpt2::Tokenizer: token id " + std::to_string(id) +
                    " is out of range; the vocabulary has " +
                    std::to_string(id_to_bytes_.size()) + " tokens");
  }
  return id_to_bytes_[id];
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (uint32_t id : ids) out += token_bytes(id);
  return out;
}

}  // namespace gpt2
