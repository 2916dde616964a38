// arg_names.cpp: the flags' enum values as the command line spells them (args.hpp).
// Apart from args.cpp so that code that only names values (checkpoint.cpp, and the
// checkpoint parser's fuzz target) links without the flag table and its checks.
// defines: train::to_string, train::index_bits_name
#include "args.hpp"

namespace train {

const char* to_string(CompressMode m) {
  switch (m) {
    case CompressMode::none: return "none";
    case CompressMode::non_attention: return "non-attention";
    case CompressMode::all: return "all";
    case CompressMode::automatic: return "auto";
  }
  return "?";
}
const char* to_string(DecoderMode m) {
  switch (m) {
    case DecoderMode::peel: return "peel";
    case DecoderMode::estimate: return "estimate";
    case DecoderMode::peel_estimate: return "peel-estimate";
  }
  return "?";
}
const char* to_string(Schedule s) { return s == Schedule::constant ? "constant" : "cosine"; }
const char* to_string(ValuesMode v) {
  switch (v) {
    case ValuesMode::sketch: return "sketch";
    case ValuesMode::packed: return "packed";
    case ValuesMode::packed_bf16: return "packed-bf16";
    case ValuesMode::sketch_bf16: return "sketch-bf16";
    case ValuesMode::sketch_fp16: return "sketch-fp16";
    case ValuesMode::packed_fp16: return "packed-fp16";
  }
  return "?";
}
const char* to_string(IndexExchange x) { return x == IndexExchange::all_reduce ? "all-reduce" : "reduce-scatter"; }
std::string index_bits_name(int bits) {
  return bits == index_bits_exact ? "exact" : bits == index_bits_shared ? "shared" : std::to_string(bits);
}

}  // namespace train
