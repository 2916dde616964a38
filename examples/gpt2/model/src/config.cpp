// defines: gpt2::Config validation and the dN depth presets.
#include "gpt2/config.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

namespace gpt2 {

int round_up_vocab(int v) { return (v + 127) / 128 * 128; }

Config& Config::with_vocab(int v) {
  vocab_size = v;
  padded_vocab_size = round_up_vocab(v);
  return *this;
}

namespace {
void need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("gpt2::Config: " + msg);
}
std::string val(const char* field, int v) { return std::string(field) + " (" + std::to_string(v) + ")"; }
}  // namespace

void Config::validate() const {
  need(max_seq_len >= 1, val("max_seq_len", max_seq_len) + " must be >= 1");
  need(vocab_size >= 1, val("vocab_size", vocab_size) + " must be >= 1");
  need(padded_vocab_size >= vocab_size,
       val("padded_vocab_size", padded_vocab_size) + " must be >= " + val("vocab_size", vocab_size));
  need(num_layers >= 1, val("num_layers", num_layers) + " must be >= 1");
  need(num_heads >= 1, val("num_heads", num_heads) + " must be >= 1");
  need(channels >= 1, val("channels", channels) + " must be >= 1");
  need(channels % num_heads == 0,
       val("channels", channels) + " must be divisible by " + val("num_heads", num_heads));
}

Config config_for_depth(int depth) {
  if (depth < 1) throw std::invalid_argument("gpt2::config_for_depth: depth (" + std::to_string(depth) + ") must be >= 1");
  Config c;
  c.num_layers = depth;
  c.channels = 64 * depth;
  c.num_heads = depth;
  return c;
}

Config parse_config(std::string_view name) {
  int depth = 0;
  if (name.size() >= 2 && name[0] == 'd') {
    auto [p, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), depth);
    if (ec == std::errc() && p == name.data() + name.size() && depth >= 1) return config_for_depth(depth);
  }
  throw std::invalid_argument("gpt2::parse_config: model name '" + std::string(name) +
                              "' is not of the form d<layers>, e.g. d2, d4, d6, d12");
}

}  // namespace gpt2
