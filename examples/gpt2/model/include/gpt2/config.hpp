#pragma once
// defines: gpt2::Config (model shape), gpt2::config_for_depth, gpt2::parse_config.
//
// Depth convention (documented choice): dN has L = N layers, C = 64*N channels and
// NH = N heads, i.e. a fixed head size of 64. This reproduces llm.c's d12 exactly
// (L=12, C=768, NH=12, 124M parameters) and gives d2 = (2, 128, 2), d4 = (4, 256, 4),
// d6 = (6, 384, 6). max_seq_len 1024, vocab 50257 padded to 50304 (next multiple of 128).
// Any field may be overridden afterwards; call validate() (the model does) to check.
#include <string_view>

namespace gpt2 {

struct Config {
  int max_seq_len = 1024;          // maxT: rows of the position embedding
  int vocab_size = 50257;          // V: tokens that exist; softmax/loss cover only these
  int padded_vocab_size = 50304;   // Vp: rows of wte; rows V..Vp-1 are never used for logits
  int num_layers = 12;             // L
  int num_heads = 12;              // NH
  int channels = 768;              // C

  // Sets vocab_size and padded_vocab_size = round_up(v, 128), as llm.c pads.
  Config& with_vocab(int v);
  // Throws std::invalid_argument with a message naming the offending field.
  void validate() const;
  bool operator==(const Config&) const = default;
};

// dN as documented above. Throws std::invalid_argument for depth < 1.
Config config_for_depth(int depth);
// "d2", "d4", "d6", "d12" (any "d<N>"). Throws std::invalid_argument otherwise.
Config parse_config(std::string_view name);

int round_up_vocab(int v);  // next multiple of 128

}  // namespace gpt2
