// checkpoint.cpp: see checkpoint.hpp.
// defines: train::write_checkpoint, train::read_checkpoint, train::run_header
#include "checkpoint.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace train {
namespace fs = std::filesystem;

CheckpointHeader run_header(const gpt2::Config& cfg, const Args& a, int world, int rank, uint64_t owned_size) {
  CheckpointHeader h;
  h.world = world;
  h.rank = rank;
  h.L = cfg.num_layers;
  h.C = cfg.channels;
  h.NH = cfg.num_heads;
  h.maxT = cfg.max_seq_len;
  h.V = cfg.vocab_size;
  h.Vp = cfg.padded_vocab_size;
  h.B = a.B;
  h.T = a.T;
  h.accum = a.accum;
  h.compress = int32_t(a.compress);
  h.ratio = a.ratio;
  h.index_bits = a.index_bits;
  h.values = int32_t(a.values);
  h.index_exchange = int32_t(a.index_exchange);
  h.decoder = int32_t(a.decoder);
  h.adaptive = a.adaptive ? 1 : 0;
  h.sparsity = a.sparsity;
  h.sparsity_warmup = a.sparsity_warmup;
  h.sparsity_linear = a.sparsity_linear ? 1 : 0;
  h.sparsity_start = a.sparsity_start;
  h.owned_size = owned_size;
  return h;
}

fs::path rank_checkpoint_path(const fs::path& dir, int rank) { return dir / ("rank" + std::to_string(rank) + ".ckpt"); }

namespace {

void put(std::ofstream& f, const void* p, size_t n) { f.write(static_cast<const char*>(p), std::streamsize(n)); }
void get(std::ifstream& f, void* p, size_t n, const fs::path& path) {
  f.read(static_cast<char*>(p), std::streamsize(n));
  if (size_t(f.gcount()) != n) throw std::runtime_error("checkpoint " + path.string() + " is truncated");
}

std::string compress_name(int32_t c) { return to_string(CompressMode(c)); }

// The first field that differs, in words; empty when the run matches.
std::string mismatch(const CheckpointHeader& got, const CheckpointHeader& want) {
  const auto num = [](const char* what, auto g, auto w) {
    return std::string(what) + " " + std::to_string(g) + ", this run " + std::to_string(w);
  };
  if (got.world != want.world) return num("world size", got.world, want.world);
  if (got.rank != want.rank) return num("rank", got.rank, want.rank);
  if (got.L != want.L || got.C != want.C || got.NH != want.NH || got.maxT != want.maxT || got.V != want.V ||
      got.Vp != want.Vp)
    return "model L=" + std::to_string(got.L) + " C=" + std::to_string(got.C) + " NH=" + std::to_string(got.NH) +
           " maxT=" + std::to_string(got.maxT) + ", this run L=" + std::to_string(want.L) + " C=" +
           std::to_string(want.C) + " NH=" + std::to_string(want.NH) + " maxT=" + std::to_string(want.maxT);
  if (got.B != want.B) return num("B", got.B, want.B);
  if (got.T != want.T) return num("T", got.T, want.T);
  if (got.accum != want.accum) return num("accum", got.accum, want.accum);
  if (got.compress != want.compress)
    return "--compress " + compress_name(got.compress) + ", this run " + compress_name(want.compress);
  if (got.compress != int32_t(CompressMode::none)) {
    if (got.values != want.values)
      return std::string("--values ") + to_string(ValuesMode(got.values)) + ", this run " +
             to_string(ValuesMode(want.values));
    if (got.ratio != want.ratio) return num("--ratio", got.ratio, want.ratio);
    if (got.index_bits != want.index_bits)
      return "--index-bits " + index_bits_name(got.index_bits) + ", this run " + index_bits_name(want.index_bits);
    if (got.index_exchange != want.index_exchange)
      return std::string("--index-exchange ") + to_string(IndexExchange(got.index_exchange)) + ", this run " +
             to_string(IndexExchange(want.index_exchange));
    if (got.decoder != want.decoder)
      return std::string("--decoder ") + to_string(DecoderMode(got.decoder)) + ", this run " +
             to_string(DecoderMode(want.decoder));
    if (got.adaptive != want.adaptive)
      return std::string("--adaptive ") + (got.adaptive ? "on" : "off") + ", this run " + (want.adaptive ? "on" : "off");
    if (got.sparsity_warmup != want.sparsity_warmup) return num("--sparsity-warmup", got.sparsity_warmup, want.sparsity_warmup);
    if (got.sparsity_warmup > 0 && (got.sparsity_linear != want.sparsity_linear || got.sparsity_start != want.sparsity_start))
      return std::string("--sparsity-schedule ") + (got.sparsity_linear ? "linear" : "exp") + " --sparsity-start " +
             std::to_string(got.sparsity_start) + ", this run " + (want.sparsity_linear ? "linear" : "exp") + " " +
             std::to_string(want.sparsity_start);
  }
  if (got.owned_size != want.owned_size) return num("owned shard size", got.owned_size, want.owned_size);
  return {};
}

}  // namespace

void write_checkpoint(const fs::path& dir, const CheckpointData& d) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create checkpoint dir " + dir.string() + ": " + ec.message());
  const fs::path path = rank_checkpoint_path(dir, d.header.rank);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write checkpoint " + tmp.string());
    put(f, &d.header, sizeof d.header);
    const uint64_t np = d.segment_paths.size(), nj = d.auto_json.size();
    put(f, &np, sizeof np);
    put(f, d.segment_paths.data(), np);
    put(f, &nj, sizeof nj);
    put(f, d.auto_json.data(), nj);
    for (const auto* vec : {&d.params, &d.m, &d.v}) put(f, vec->data(), vec->size() * sizeof(float));
    const uint64_t n = d.reducer_states.size();
    put(f, &n, sizeof n);
    for (const auto& s : d.reducer_states) {
      const uint64_t bytes = s.size();
      put(f, &bytes, sizeof bytes);
      put(f, s.data(), s.size());
    }
    f.flush();
    if (!f) throw std::runtime_error("error writing checkpoint " + tmp.string() + " (disk full?)");
  }
  fs::rename(tmp, path, ec);  // atomic on POSIX: readers see the old file or the new one
  if (ec) throw std::runtime_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}

namespace {

// Opens dir/rank<r>.ckpt, reads and checks the header, reads the segment plan.
CheckpointData read_head(std::ifstream& f, const fs::path& path, const CheckpointHeader& expect) {
  if (!f)
    throw std::runtime_error("cannot open checkpoint " + path.string() +
                             " (missing: was it written with fewer ranks, or to another directory?)");
  CheckpointData d;
  // versions 1 and 2 end the header before `values`: read that much, the rest if newer
  get(f, &d.header, checkpoint_header_v2_size, path);
  const CheckpointHeader want;
  if (std::memcmp(d.header.magic, want.magic, sizeof want.magic) != 0)
    throw std::runtime_error(path.string() + " is not a tagc-gpt2 checkpoint (bad magic)");
  if (d.header.version < 1 || d.header.version > want.version)
    throw std::runtime_error(path.string() + ": checkpoint version " + std::to_string(d.header.version) +
                             ", this program reads versions 1 to " + std::to_string(want.version));
  if (d.header.version >= 3)
    get(f, reinterpret_cast<char*>(&d.header) + checkpoint_header_v2_size,
        (d.header.version >= 4 ? sizeof d.header : checkpoint_header_v3_size) - checkpoint_header_v2_size, path);
  if (d.header.version < 4) {  // no schedule then
    d.header.sparsity_warmup = 0;
    d.header.sparsity_linear = 0;
    d.header.sparsity_start = expect.sparsity_start;
  }
  if (const std::string m = mismatch(d.header, expect); !m.empty())
    throw std::runtime_error("checkpoint " + path.string() + " is from another configuration: " + m);
  if (d.header.version >= 2) {
    uint64_t np = 0, nj = 0;
    get(f, &np, sizeof np, path);
    if (np > (1u << 20)) throw std::runtime_error(path.string() + ": corrupt segment count");
    d.segment_paths.resize(np);
    get(f, d.segment_paths.data(), np, path);
    get(f, &nj, sizeof nj, path);
    if (nj > (1u << 26)) throw std::runtime_error(path.string() + ": corrupt segment plan");
    d.auto_json.resize(nj);
    get(f, d.auto_json.data(), nj, path);
  }
  return d;
}

}  // namespace

CheckpointData read_checkpoint_plan(const fs::path& dir, const CheckpointHeader& expect) {
  const fs::path path = rank_checkpoint_path(dir, expect.rank);
  std::ifstream f(path, std::ios::binary);
  return read_head(f, path, expect);
}

CheckpointData read_checkpoint(const fs::path& dir, const CheckpointHeader& expect) {
  const fs::path path = rank_checkpoint_path(dir, expect.rank);
  std::ifstream f(path, std::ios::binary);
  CheckpointData d = read_head(f, path, expect);
  const size_t n = d.header.owned_size;
  for (auto* vec : {&d.params, &d.m, &d.v}) {
    vec->resize(n);
    get(f, vec->data(), n * sizeof(float), path);
  }
  uint64_t count = 0;
  get(f, &count, sizeof count, path);
  if (count > (1u << 20)) throw std::runtime_error(path.string() + ": corrupt reducer count");
  d.reducer_states.resize(count);
  for (auto& s : d.reducer_states) {
    uint64_t bytes = 0;
    get(f, &bytes, sizeof bytes, path);
    if (bytes > (uint64_t(1) << 36)) throw std::runtime_error(path.string() + ": corrupt reducer state size");
    s.resize(bytes);
    get(f, s.data(), bytes, path);
  }
  char extra;
  if (f.read(&extra, 1); f.gcount() != 0) throw std::runtime_error(path.string() + ": trailing bytes (corrupt?)");
  return d;
}

}  // namespace train
