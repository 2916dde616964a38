// defines: llm.c checkpoint read/write and the llm.c-order <-> unit-layout permutation.
#include "gpt2/checkpoint.hpp"

#include "gpt2/layout.hpp"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <unordered_map>

namespace gpt2 {

namespace {
constexpr int32_t kMagic = 20240326;
constexpr int32_t kVersion = 3;  // fp32 parameters, padded vocab in header[7]
constexpr int kHeaderInts = 256;

// llm.c's tensor order; per-layer ones (prefix "h<l>.") stacked over layers.
struct Kind { const char* name; bool per_layer; };
constexpr Kind kOrder[] = {{"wte", false},    {"wpe", false},     {"ln1w", true},     {"ln1b", true},
                           {"qkvw", true},    {"qkvb", true},     {"attprojw", true}, {"attprojb", true},
                           {"ln2w", true},    {"ln2b", true},     {"fcw", true},      {"fcb", true},
                           {"fcprojw", true}, {"fcprojb", true},  {"lnfw", false},    {"lnfb", false}};

struct Span { size_t flat_offset, size; };
// For every tensor in llm.c order: where it lives in the flat unit layout.
std::vector<Span> llmc_sequence(const Config& cfg) {
  const std::vector<UnitInfo> us = units(cfg);
  const std::vector<size_t> off = unit_offsets(us);
  std::unordered_map<std::string, Span> where;
  for (size_t u = 0; u < us.size(); ++u)
    for (const TensorInfo& t : us[u].tensors) where[t.name] = {off[u] + t.offset, t.size};
  std::vector<Span> seq;
  for (const Kind& k : kOrder) {
    if (!k.per_layer) { seq.push_back(where.at(k.name)); continue; }
    for (int l = 0; l < cfg.num_layers; ++l) seq.push_back(where.at("h" + std::to_string(l) + "." + k.name));
  }
  return seq;
}

struct FileCloser { void operator()(std::FILE* f) const { if (f) std::fclose(f); } };
using File = std::unique_ptr<std::FILE, FileCloser>;
[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("gpt2 checkpoint '" + path + "': " + what);
}
}  // namespace

std::vector<float> to_llmc_order(const Config& cfg, std::span<const float> params) {
  const size_t n = num_parameters(cfg);
  if (params.size() != n) throw std::invalid_argument("gpt2::to_llmc_order: expected " + std::to_string(n) + " parameters");
  std::vector<float> out;
  out.reserve(n);
  for (const Span& s : llmc_sequence(cfg)) out.insert(out.end(), params.begin() + s.flat_offset, params.begin() + s.flat_offset + s.size);
  return out;
}

std::vector<float> from_llmc_order(const Config& cfg, std::span<const float> llmc) {
  const size_t n = num_parameters(cfg);
  if (llmc.size() != n) throw std::invalid_argument("gpt2::from_llmc_order: expected " + std::to_string(n) + " parameters");
  std::vector<float> out(n);
  size_t pos = 0;
  for (const Span& s : llmc_sequence(cfg)) {
    std::copy(llmc.begin() + pos, llmc.begin() + pos + s.size, out.begin() + s.flat_offset);
    pos += s.size;
  }
  return out;
}

void save_checkpoint(const std::string& path, const Config& cfg, std::span<const float> params) {
  const std::vector<float> llmc = to_llmc_order(cfg, params);
  int32_t header[kHeaderInts] = {};
  header[0] = kMagic;
  header[1] = kVersion;
  header[2] = cfg.max_seq_len;
  header[3] = cfg.vocab_size;
  header[4] = cfg.num_layers;
  header[5] = cfg.num_heads;
  header[6] = cfg.channels;
  header[7] = cfg.padded_vocab_size;
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) fail(path, "cannot open for writing");
  if (std::fwrite(header, sizeof(int32_t), kHeaderInts, f.get()) != kHeaderInts ||
      std::fwrite(llmc.data(), sizeof(float), llmc.size(), f.get()) != llmc.size())
    fail(path, "write failed");
  if (std::fclose(f.release()) != 0) fail(path, "write failed on close");
}

// Reads and checks the header; leaves f at the first parameter.
static Config read_header(std::FILE* f, const std::string& path) {
  int32_t header[kHeaderInts];
  if (std::fread(header, sizeof(int32_t), kHeaderInts, f) != kHeaderInts)
    fail(path, "truncated: shorter than the 1024-byte header");
  if (header[0] != kMagic)
    fail(path, "bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kMagic) + "): not an llm.c GPT-2 checkpoint");
  if (header[1] != kVersion)
    fail(path, "unsupported version " + std::to_string(header[1]) + " (only 3 = fp32 with padded vocab is supported)");
  Config c;
  c.max_seq_len = header[2];
  c.vocab_size = header[3];
  c.num_layers = header[4];
  c.num_heads = header[5];
  c.channels = header[6];
  c.padded_vocab_size = header[7];
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, std::string("invalid header: ") + e.what());
  }
  constexpr int kMaxDim = 1 << 20;  // keeps the parameter count far from overflow
  for (int i = 2; i <= 7; ++i)
    if (header[i] > kMaxDim) fail(path, "invalid header: field " + std::to_string(i) + " = " + std::to_string(header[i]) + " is implausibly large");
  return c;
}

Config load_checkpoint_config(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, "cannot open for reading");
  return read_header(f.get(), path);
}

Checkpoint load_checkpoint(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, "cannot open for reading");
  Checkpoint ck;
  ck.config = read_header(f.get(), path);
  const size_t n = num_parameters(ck.config);
  // Compare with the file size before allocating, so a foreign or damaged file cannot
  // make us allocate what the header claims.
  const long here = std::ftell(f.get());
  if (here < 0 || std::fseek(f.get(), 0, SEEK_END) != 0) fail(path, "cannot determine the file size");
  const long end = std::ftell(f.get());
  if (end < 0 || std::fseek(f.get(), here, SEEK_SET) != 0) fail(path, "cannot determine the file size");
  const size_t have = static_cast<size_t>(end - here), want = n * sizeof(float);
  if (have < want)
    fail(path, "truncated: header promises " + std::to_string(n) + " fp32 parameters (" + std::to_string(want) +
                   " bytes), file holds " + std::to_string(have) + " bytes after the header");
  if (have > want) fail(path, "trailing bytes: " + std::to_string(have - want) + " bytes after the " + std::to_string(n) + " parameters");
  std::vector<float> llmc(n);
  if (std::fread(llmc.data(), sizeof(float), n, f.get()) != n) fail(path, "read failed");
  ck.params = from_llmc_order(ck.config, llmc);
  return ck;
}

}  // namespace gpt2
