// checkpoint.cpp: see checkpoint.hpp.
// defines: train::write_checkpoint_file, train::parse_checkpoint, train::read_checkpoint_file,
//          train::read_checkpoint, train::run_header
#include "checkpoint.hpp"

#include "crc32c.hpp"
#include "durable_file.hpp"
#include "fault_injection.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

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
  h.values = header_code(a.values);
  h.index_exchange = header_code(a.index_exchange);
  h.decoder = header_code(a.decoder);
  h.adaptive = a.adaptive ? 1 : 0;
  h.sparsity = a.sparsity;
  h.sparsity_warmup = a.sparsity_warmup;
  h.sparsity_linear = header_code(a.sparsity_shape);
  h.sparsity_start = a.sparsity_start;
  h.shuffle = a.shuffle ? 1 : 0;
  h.shuffle_seed = a.shuffle ? a.shuffle_seed : 0;
  h.owned_size = owned_size;
  return h;
}

fs::path rank_checkpoint_path(const fs::path& dir, int rank) { return dir / ("rank" + std::to_string(rank) + ".ckpt"); }

namespace {

constexpr char trailer_magic[8] = {'T', 'G', 'C', 'R', 'C', '\0', '\0', '\0'};

std::string compress_name(int32_t c) {
  return c >= 0 && c <= int32_t(CompressMode::automatic) ? std::string(to_string(CompressMode(c)))
                                                       : "?(" + std::to_string(c) + ")";
}
std::string sparsity_name(double s) {
  if (s < 0) return "default (the paper's for the ratio)";
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", s);
  return b;
}

std::string differs(const char* what, auto got, auto want) {
  return std::string(what) + " " + std::to_string(got) + ", this run " + std::to_string(want);
}

// The first configuration field of the header that differs, in words; empty when the run
// matches. Only files without a manifest are judged by it (HeaderCheck::configuration).
std::string configuration_mismatch(const CheckpointHeader& got, const CheckpointHeader& want) {
  if (got.L != want.L || got.C != want.C || got.NH != want.NH || got.maxT != want.maxT || got.V != want.V ||
      got.Vp != want.Vp)
    return "model L=" + std::to_string(got.L) + " C=" + std::to_string(got.C) + " NH=" + std::to_string(got.NH) +
           " maxT=" + std::to_string(got.maxT) + ", this run L=" + std::to_string(want.L) + " C=" +
           std::to_string(want.C) + " NH=" + std::to_string(want.NH) + " maxT=" + std::to_string(want.maxT);
  if (got.B != want.B) return differs("--B", got.B, want.B);
  if (got.T != want.T) return differs("--T", got.T, want.T);
  if (got.accum != want.accum) return differs("--accum", got.accum, want.accum);
  if (got.compress != want.compress)
    return "--compress " + compress_name(got.compress) + ", this run " + compress_name(want.compress);
  if (got.compress != int32_t(CompressMode::none)) {
    // "--values packed-bf16, this run sketch": the codes named by the library's names.
    const auto differ = [](const char* flag, auto choice, int32_t got, int32_t want) {
      return std::string(flag) + " " + header_code_name(choice, got) + ", this run " + header_code_name(choice, want);
    };
    if (got.values != want.values) return differ("--values", tagc::values_kind{}, got.values, want.values);
    if (got.ratio != want.ratio) return differs("--ratio", got.ratio, want.ratio);
    if (got.index_bits != want.index_bits)
      return "--index-bits " + tagc::index_bits_name(got.index_bits) + ", this run " +
             tagc::index_bits_name(want.index_bits);
    if (got.index_exchange != want.index_exchange)
      return differ("--index-exchange", tagc::index_exchange{}, got.index_exchange, want.index_exchange);
    if (got.decoder != want.decoder)
      return differ("--decoder", tagc::decode_mode{}, got.decoder, want.decoder);
    if (got.adaptive != want.adaptive)
      return std::string("--adaptive ") + (got.adaptive ? "on" : "off") + ", this run " + (want.adaptive ? "on" : "off");
    if (got.sparsity_warmup != want.sparsity_warmup) return differs("--sparsity-warmup", got.sparsity_warmup, want.sparsity_warmup);
    if (got.sparsity_warmup > 0 && (got.sparsity_linear != want.sparsity_linear || got.sparsity_start != want.sparsity_start))
      return "--sparsity-schedule " + header_code_name(tagc::schedule_shape{}, got.sparsity_linear) +
             " --sparsity-start " + std::to_string(got.sparsity_start) + ", this run " +
             header_code_name(tagc::schedule_shape{}, want.sparsity_linear) + " " + std::to_string(want.sparsity_start);
    // The reducers were built with the checkpoint's theta and their error feedback is
    // relative to it: a different --sparsity is refused rather than silently ignored.
    // (--adaptive steers theta from its saved value, so there the flag is only a start.)
    if (!got.adaptive && got.sparsity != want.sparsity)
      return "--sparsity " + sparsity_name(got.sparsity) + ", this run " + sparsity_name(want.sparsity) +
             " (resume with the checkpoint's value)";
  }
  if (got.shuffle != want.shuffle)
    return std::string("--shuffle ") + (got.shuffle ? "on" : "off") + ", this run " + (want.shuffle ? "on" : "off");
  if (got.shuffle && got.shuffle_seed != want.shuffle_seed)
    return differs("--shuffle-seed", got.shuffle_seed, want.shuffle_seed);
  return {};
}

// The first field that differs, in words: where the file belongs (world, rank, shard size)
// always, the configuration too where the header is the file's only record of it.
std::string mismatch(const CheckpointHeader& got, const CheckpointHeader& want, HeaderCheck check) {
  if (got.world != want.world) return differs("world size", got.world, want.world);
  if (got.rank != want.rank) return differs("rank", got.rank, want.rank);
  if (check == HeaderCheck::configuration)
    if (std::string m = configuration_mismatch(got, want); !m.empty()) return m;
  if (got.owned_size != want.owned_size) return differs("owned shard size", got.owned_size, want.owned_size);
  return {};
}

// Reads a checkpoint stream section by section: a running CRC per section (and over the
// whole file), and a bound on every length by the bytes left in the file.
class Reader {
 public:
  Reader(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {
    in_.seekg(0, std::ios::end);
    const auto end = in_.tellg();
    in_.seekg(0, std::ios::beg);
    if (!in_ || end < 0) throw CheckpointDamaged("checkpoint " + name_ + ": cannot be read");
    left_ = uint64_t(end);
    size_ = left_;
  }
  void get(void* p, uint64_t n, const char* what) {
    if (n > left_)
      throw CheckpointDamaged("checkpoint " + name_ + " is truncated (" + what + " needs " + std::to_string(n) +
                              " bytes, " + std::to_string(left_) + " left)");
    in_.read(static_cast<char*>(p), std::streamsize(n));
    if (uint64_t(in_.gcount()) != n) throw CheckpointDamaged("checkpoint " + name_ + ": read error in " + what);
    left_ -= n;
    section_.update(p, n);
    whole_.update(p, n);
  }
  // A length field: refused if more than the rest of the file could hold.
  uint64_t length(const char* what, uint64_t elem_bytes) {
    uint64_t n = 0;
    get(&n, sizeof n, what);
    if (elem_bytes && n > left_ / elem_bytes)
      throw CheckpointDamaged("checkpoint " + name_ + ": " + what + " " + std::to_string(n) +
                              " is more than the file holds (corrupt)");
    return n;
  }
  uint32_t end_section() {
    const uint32_t c = section_.value();
    section_ = Crc32c{};
    return c;
  }
  uint64_t left() const { return left_; }
  uint64_t size() const { return size_; }
  uint32_t whole_crc() const { return whole_.value(); }
  const std::string& name() const { return name_; }

 private:
  std::istream& in_;
  std::string name_;
  uint64_t left_ = 0, size_ = 0;
  Crc32c section_, whole_;
};

std::string hex(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

}  // namespace

FileDigest write_checkpoint_file(const fs::path& path, const CheckpointData& d) {
  DurableFile f(path);
  std::vector<uint32_t> crcs;
  Crc32c section;
  const auto put = [&](const void* p, size_t n) {
    f.write(p, n);
    section.update(p, n);
  };
  const auto end_section = [&] {
    crcs.push_back(section.value());
    section = Crc32c{};
  };
  CheckpointHeader h = d.header;
  h.version = CheckpointHeader{}.version;
  put(&h, sizeof h);
  end_section();
  const uint64_t np = d.segment_paths.size(), nj = d.auto_json.size();
  put(&np, sizeof np);
  put(d.segment_paths.data(), np);
  put(&nj, sizeof nj);
  put(d.auto_json.data(), nj);
  end_section();
  for (const auto* vec : {&d.params, &d.m, &d.v}) {
    put(vec->data(), vec->size() * sizeof(float));
    end_section();
    if (vec == &d.params) fault::maybe_kill_in_save(int(d.header.step), d.header.rank);
  }
  const uint64_t n = d.reducer_states.size();
  // The count is in no section: the trailer's section count (count + 5) and the
  // manifest's whole-file CRC check it.
  f.write(&n, sizeof n);
  for (const auto& s : d.reducer_states) {
    const uint64_t bytes = s.size();
    put(&bytes, sizeof bytes);
    put(s.data(), s.size());
    end_section();
  }
  // trailer
  Crc32c t;
  const auto tput = [&](const void* p, size_t n) {
    f.write(p, n);
    t.update(p, n);
  };
  const uint32_t count = uint32_t(crcs.size());
  tput(trailer_magic, sizeof trailer_magic);
  tput(&count, sizeof count);
  tput(crcs.data(), crcs.size() * sizeof(uint32_t));
  const uint32_t self = t.value();
  f.write(&self, sizeof self);
  const FileDigest digest{f.bytes(), f.crc()};
  f.commit();
  return digest;
}

CheckpointData parse_checkpoint(std::istream& in, const std::string& name, const CheckpointHeader& expect,
                                const FileDigest* whole, bool plan_only, HeaderCheck check) {
  Reader r(in, name);
  if (whole && r.size() != whole->bytes)
    throw CheckpointDamaged("checkpoint " + name + " has " + std::to_string(r.size()) +
                            " bytes, the manifest records " + std::to_string(whole->bytes) +
                            " (truncated or replaced)");
  CheckpointData d;
  std::vector<uint32_t> crcs;
  // versions 1 and 2 end the header before `values`: read that much, the rest if newer
  r.get(&d.header, checkpoint_header_v2_size, "the header");
  const CheckpointHeader want;
  if (std::memcmp(d.header.magic, want.magic, sizeof want.magic) != 0)
    throw CheckpointDamaged(name + " is not a tagc-gpt2 checkpoint (bad magic)");
  if (d.header.version < 1 || d.header.version > want.version)
    throw CheckpointDamaged(name + ": checkpoint version " + std::to_string(d.header.version) +
                            ", this program reads versions 1 to " + std::to_string(want.version));
  const bool v4 = d.header.version >= 4;  // version 4 on: the checksum trailer
  const size_t header_size = d.header.version >= 6 ? sizeof d.header
                             : d.header.version == 5 ? checkpoint_header_v5_size
                             : v4                  ? checkpoint_header_v4_size
                                                   : checkpoint_header_v3_size;
  if (d.header.version >= 3)
    r.get(reinterpret_cast<char*>(&d.header) + checkpoint_header_v2_size, header_size - checkpoint_header_v2_size,
          "the header");
  crcs.push_back(r.end_section());
  if (!v4) {  // no sparsity schedule before version 4
    d.header.sparsity_warmup = 0;
    d.header.sparsity_linear = 0;
    d.header.sparsity_start = CheckpointHeader{}.sparsity_start;
  }
  if (d.header.version >= 2) {
    const uint64_t np = r.length("segment count", 1);
    d.segment_paths.resize(np);
    r.get(d.segment_paths.data(), np, "the segment plan");
    const uint64_t nj = r.length("segment plan size", 1);
    d.auto_json.resize(nj);
    r.get(d.auto_json.data(), nj, "the segment plan");
  }
  crcs.push_back(r.end_section());
  const auto check_header = [&] {
    if (const std::string m = mismatch(d.header, expect, check); !m.empty())
      throw CheckpointMismatch("checkpoint " + name + " is from another configuration: " + m);
  };
  if (plan_only) {
    check_header();
    return d;
  }
  const uint64_t n = d.header.owned_size;
  if (n > r.left() / (3 * sizeof(float)))
    throw CheckpointDamaged("checkpoint " + name + ": owned size " + std::to_string(n) +
                            " is more than the file holds (corrupt or truncated)");
  for (auto* vec : {&d.params, &d.m, &d.v}) {
    vec->resize(n);
    r.get(vec->data(), n * sizeof(float), vec == &d.params ? "params" : vec == &d.m ? "AdamW m" : "AdamW v");
    crcs.push_back(r.end_section());
  }
  const uint64_t count = r.length("reducer count", sizeof(uint64_t));
  (void)r.end_section();
  d.reducer_states.resize(count);
  for (auto& s : d.reducer_states) {
    const uint64_t bytes = r.length("reducer state size", 1);
    s.resize(bytes);
    r.get(s.data(), bytes, "a reducer state");
    crcs.push_back(r.end_section());
  }
  if (v4) {
    char magic[8];
    uint32_t sections = 0;
    r.get(magic, sizeof magic, "the checksum trailer");
    r.get(&sections, sizeof sections, "the checksum trailer");
    if (std::memcmp(magic, trailer_magic, sizeof magic) != 0 || sections != crcs.size())
      throw CheckpointDamaged("checkpoint " + name + ": the checksum trailer is damaged (" +
                              std::to_string(crcs.size()) + " sections read)");
    std::vector<uint32_t> stored(sections);
    r.get(stored.data(), sections * sizeof(uint32_t), "the checksum trailer");
    const uint32_t trailer_crc = r.end_section();
    uint32_t self = 0;
    r.get(&self, sizeof self, "the checksum trailer");
    if (self != trailer_crc) throw CheckpointDamaged("checkpoint " + name + ": the checksum trailer is damaged");
    static const char* names[] = {"header", "segment plan", "params", "AdamW m", "AdamW v"};
    for (size_t i = 0; i < crcs.size(); ++i)
      if (crcs[i] != stored[i])
        throw CheckpointDamaged("checkpoint " + name + ": section '" +
                                (i < 5 ? std::string(names[i]) : "reducer state " + std::to_string(i - 5)) +
                                "' fails its checksum (crc32c " + hex(crcs[i]) + ", recorded " + hex(stored[i]) +
                                "): the file is damaged");
  }
  if (r.left() != 0) throw CheckpointDamaged("checkpoint " + name + ": trailing bytes (corrupt?)");
  if (whole && r.whole_crc() != whole->crc32c)
    throw CheckpointDamaged("checkpoint " + name + " fails its checksum (crc32c " + hex(r.whole_crc()) +
                            ", the manifest records " + hex(whole->crc32c) + "): the file is damaged");
  // Last: a damaged header must read as damage (above), not as "another configuration".
  check_header();
  return d;
}

CheckpointData read_checkpoint_file(const fs::path& path, const CheckpointHeader& expect, const FileDigest* whole,
                                    bool plan_only, HeaderCheck check) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw CheckpointDamaged("checkpoint " + path.string() + " is missing or unreadable");
  return parse_checkpoint(f, path.string(), expect, whole, plan_only, check);
}

CheckpointData read_checkpoint(const fs::path& dir, const CheckpointHeader& expect) {
  const fs::path path = rank_checkpoint_path(dir, expect.rank);
  if (!fs::exists(path))
    throw CheckpointDamaged("cannot open checkpoint " + path.string() +
                            " (missing: was it written with fewer ranks, or to another directory?)");
  return read_checkpoint_file(path, expect);
}

}  // namespace train
