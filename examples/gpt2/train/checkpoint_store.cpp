// checkpoint_store.cpp: see checkpoint_store.hpp.
// defines: train::save_step, train::load_newest, train::read_newest_plan, train::agree_all,
//          train::run_id_text, train::draw_run_id, train::claim_checkpoint_dir
#include "checkpoint_store.hpp"

#include "durable_file.hpp"
#include "run_config.hpp"
#include "watchdog.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

namespace train {
namespace fs = std::filesystem;

namespace {

const char* const manifest_name = "MANIFEST.json";

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// One value per rank, every rank gets all: an all-gather through the sum.
std::vector<double> gather(RankGroup& g, double mine) {
  std::vector<double> v(size_t(g.world), 0.0);
  v[size_t(g.rank)] = mine;
  g.sum(v);
  return v;
}

bool finite_all(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += double(x) * double(x);
  return std::isfinite(s);
}

// The step of a directory named step_<digits>, or -1.
long long step_of(const fs::path& p) {
  const std::string n = p.filename().string();
  if (n.size() < 6 || n.rfind("step_", 0) != 0) return -1;
  long long s = 0;
  for (size_t i = 5; i < n.size(); ++i) {
    if (n[i] < '0' || n[i] > '9') return -1;
    s = s * 10 + (n[i] - '0');
    if (s > (1ll << 40)) return -1;
  }
  return s;
}

struct StepDir {
  long long step;
  fs::path path;
  bool complete;  // has a manifest
};

const char* const run_file_name = "RUN";

// A run id as the manifest and D/RUN write it (16 hex digits); 0 for none or garbage.
uint64_t parse_run_id(const std::string& s) {
  if (s.size() != 16) return 0;
  uint64_t v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    v = v * 16 + uint64_t(d);
  }
  return v;
}

// The run id a step's manifest records: 0 when it has none (older manifests) or cannot
// be read (a damaged manifest is judged by verify_step, not here).
uint64_t manifest_run_id(const fs::path& step_dir) {
  std::ifstream f(step_dir / manifest_name);
  if (!f) return 0;
  try {
    const nlohmann::json j = nlohmann::json::parse(f);
    return j.contains("run_id") && j["run_id"].is_string() ? parse_run_id(j["run_id"].get<std::string>()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// The owner recorded in D/RUN (0: none).
uint64_t directory_owner(const fs::path& dir) {
  std::ifstream f(dir / run_file_name);
  std::string s;
  if (!(f >> s)) return 0;
  return parse_run_id(s);
}

// The manifest's own checksum: CRC-32C of its text without the field, as dump(1) writes it.
uint32_t manifest_crc(nlohmann::json m) {
  m.erase("manifest_crc32c");
  const std::string text = m.dump(1);
  return crc32c(text.data(), text.size());
}

// Step directories of D, newest first.
std::vector<StepDir> list_steps(const fs::path& dir) {
  std::vector<StepDir> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    const long long s = step_of(it->path());
    if (s < 0) continue;
    out.push_back({s, it->path(), fs::exists(it->path() / manifest_name, ec)});
  }
  std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) { return a.step > b.step; });
  return out;
}

nlohmann::json read_manifest(const fs::path& step_dir) {
  const fs::path p = step_dir / manifest_name;
  std::ifstream f(p);
  if (!f) throw CheckpointDamaged(p.string() + " is missing or unreadable");
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    if (!j.is_object() || !j.contains("step") || !j.contains("world") || !j.contains("files") ||
        !j["files"].is_array())
      throw CheckpointDamaged(p.string() + " is not a tagc-gpt2 manifest (fields missing)");
    // Manifests from before the checksum have none; a present one must match (a bit flip
    // anywhere in the text is damage, with a fallback, not "another configuration").
    if (j.contains("manifest_crc32c") &&
        (!j["manifest_crc32c"].is_number_unsigned() || j["manifest_crc32c"].get<uint32_t>() != manifest_crc(j)))
      throw CheckpointDamaged(p.string() + " fails its checksum: the manifest is damaged");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointDamaged(p.string() + " is damaged (" + e.what() + ")");
  }
}

// The one configuration identity a resume checks: the run configuration the step's
// manifest records against this run's (resume_differences: a must-match flag that
// differs is refused, a may-change one is a note). Returns the notes.
std::vector<std::string> check_identity(const fs::path& step_dir, const nlohmann::json& saved,
                                        const nlohmann::json& config_now) {
  try {
    return resume_differences(saved, config_now);
  } catch (const CheckpointMismatch& e) {
    throw CheckpointMismatch("checkpoint " + step_dir.string() + " is from another configuration: " + e.what());
  }
}

// How a file under this manifest is checked: for its place only where the manifest
// records the configuration (every manifest this program writes), else by its header.
HeaderCheck header_check(const nlohmann::json& manifest) {
  return manifest.contains("config") ? HeaderCheck::placement : HeaderCheck::configuration;
}

// Reads and verifies this rank's file of one complete step against its manifest.
CheckpointData verify_step(const fs::path& step_dir, const CheckpointHeader& expect, const nlohmann::json& config_now,
                           nlohmann::json* config_out, std::vector<std::string>* notes) {
  const nlohmann::json m = read_manifest(step_dir);
  try {
    if (m["world"].get<int>() != expect.world)
      throw CheckpointMismatch("checkpoint " + step_dir.string() + " is from another configuration: world size " +
                               std::to_string(m["world"].get<int>()) + ", this run " + std::to_string(expect.world));
    const auto& files = m["files"];
    if (files.size() != size_t(expect.world) || !files[size_t(expect.rank)].is_object())
      throw CheckpointDamaged((step_dir / manifest_name).string() + " lists " + std::to_string(files.size()) +
                              " files for " + std::to_string(expect.world) + " ranks");
    const auto& e = files[size_t(expect.rank)];
    const FileDigest digest{e.at("bytes").get<uint64_t>(), e.at("crc32c").get<uint32_t>()};
    const fs::path file = step_dir / e.at("name").get<std::string>();
    // The file first (damage reads as damage, not as another configuration), then the
    // run's configuration.
    CheckpointData d = read_checkpoint_file(file, expect, &digest, false, header_check(m));
    if (d.header.step != m["step"].get<uint64_t>())
      throw CheckpointDamaged(file.string() + " holds step " + std::to_string(d.header.step) + ", its manifest " +
                              std::to_string(m["step"].get<uint64_t>()));
    if (m.contains("config")) {
      *notes = check_identity(step_dir, m["config"], config_now);
      *config_out = m["config"];
    }
    return d;
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointDamaged((step_dir / manifest_name).string() + " is damaged (" + e.what() + ")");
  }
}

}  // namespace

void agree_all(RankGroup& g, const std::string& what, const std::function<void()>& fn) {
  std::string msg;
  bool failed = false;
  try {
    fn();
  } catch (const std::exception& e) {
    failed = true;
    msg = e.what();
  }
  const std::vector<double> f = gather(g, failed ? 1.0 : 0.0);
  std::vector<int> bad;
  for (int r = 0; r < g.world; ++r)
    if (f[size_t(r)] != 0.0) bad.push_back(r);
  if (bad.empty()) return;
  if (failed) throw AgreedError(msg);
  throw AgreedError(what + " failed on rank(s) " + rank_list(bad) + " (see its message)");
}

std::string step_dir_name(uint64_t step) {
  char b[32];
  std::snprintf(b, sizeof b, "step_%08llu", static_cast<unsigned long long>(step));
  return b;
}

std::string run_id_text(uint64_t id) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(id));
  return b;
}

uint64_t draw_run_id(RankGroup& g) {
  std::vector<double> halves(2, 0.0);
  if (g.rank == 0) {
    std::random_device rd;
    uint64_t id = 0;
    while (id == 0) id = (uint64_t(rd()) << 32) ^ uint64_t(rd());
    halves = {double(id >> 32), double(id & 0xffffffffu)};  // each exact in a double
  }
  g.sum(halves);
  return (uint64_t(halves[0]) << 32) | uint64_t(halves[1]);
}

void claim_checkpoint_dir(const fs::path& dir, uint64_t run_id, RankGroup& g) {
  agree_all(g, "--checkpoint-dir " + dir.string(), [&] {
    if (g.rank != 0) return;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw std::runtime_error("--checkpoint-dir: cannot create " + dir.string() + ": " + ec.message());
    const uint64_t owner = directory_owner(dir);
    // D already this run's (a resume): another run's step in it is tolerated (a resume
    // skips it, a save of its number keeps it aside). Otherwise D must hold no other
    // run's complete step.
    for (const StepDir& s : list_steps(dir)) {
      if (!s.complete || owner == run_id) continue;
      const uint64_t id = manifest_run_id(s.path);
      if (id == run_id || (id == 0 && owner == 0) || (id == 0 && owner == run_id)) continue;
      throw std::runtime_error("--checkpoint-dir " + dir.string() + " holds " + s.path.filename().string() +
                               " of another run (" + run_id_text(id != 0 ? id : owner) + ", this run " +
                               run_id_text(run_id) + "): pass --resume " + dir.string() +
                               " to continue that run, or choose another --checkpoint-dir");
    }
    if (owner != run_id) write_file_durably(dir / run_file_name, run_id_text(run_id) + "\n");
  });
}

std::string save_step(const fs::path& dir, const CheckpointData& d, const SaveInfo& info, RankGroup& g) {
  const uint64_t step = d.header.step;
  const fs::path sdir = dir / step_dir_name(step);
  const std::string id = run_id_text(info.run_id);
  const fs::path aside = dir / (step_dir_name(step) + ".partial-" + id);
  const std::string what = "checkpoint save of step " + std::to_string(step);
  // (0) the divergence guard's bound on the parameters, agreed (a run gone bad slowly
  // holds finite but absurd values: such a step is not saved, the older ones are kept)
  {
    double biggest = 0.0;
    for (float x : d.params) biggest = std::max(biggest, double(std::fabs(x)));
    const std::vector<double> all = gather(g, std::isfinite(biggest) ? biggest : 1e300);
    const double top = *std::max_element(all.begin(), all.end());
    if (info.param_max > 0 && top > info.param_max) {
      char b[160];
      std::snprintf(b, sizeof b, "a parameter of magnitude %.3g exceeds --guard-param-max %g", top, info.param_max);
      return b;
    }
  }
  // (1) nothing non-finite is ever saved; a clean aside directory (never the step's own)
  agree_all(g, what, [&] {
    if (!std::isfinite(info.loss) || !std::isfinite(info.grad_norm))
      throw std::runtime_error(what + " refused: the step's loss (" + std::to_string(info.loss) +
                               ") or gradient norm (" + std::to_string(info.grad_norm) + ") is not finite");
    for (const auto* v : {&d.params, &d.m, &d.v})
      if (!finite_all(*v))
        throw std::runtime_error(what + " refused: rank " + std::to_string(g.rank) + "'s " +
                                 (v == &d.params ? "parameters" : v == &d.m ? "AdamW m" : "AdamW v") +
                                 " hold a non-finite value");
    if (g.rank == 0) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) throw std::runtime_error("cannot create checkpoint dir " + dir.string() + ": " + ec.message());
      fs::remove_all(aside, ec);  // this run's own crashed save of this step
      if (ec) throw std::runtime_error("cannot clear " + aside.string() + ": " + ec.message());
      fs::create_directories(aside, ec);
      if (ec) throw std::runtime_error("cannot create " + aside.string() + ": " + ec.message());
      sync_directory(dir);
    }
  });
  // (2) every rank's file, durable
  FileDigest mine;
  agree_all(g, what, [&] { mine = write_checkpoint_file(rank_checkpoint_path(aside, g.rank), d); });
  std::vector<double> digests(2 * size_t(g.world), 0.0);
  digests[2 * size_t(g.rank)] = double(mine.bytes);
  digests[2 * size_t(g.rank) + 1] = double(mine.crc32c);
  g.sum(digests);
  // (3) the manifest, the exchange, the pointer, then the pruning (rank 0)
  agree_all(g, what, [&] {
    if (g.rank != 0) return;
    nlohmann::json files = nlohmann::json::array();
    for (int r = 0; r < g.world; ++r)
      files.push_back({{"name", rank_checkpoint_path("", r).string()},
                       {"bytes", uint64_t(digests[2 * size_t(r)])},
                       {"crc32c", uint32_t(digests[2 * size_t(r) + 1])}});
    nlohmann::json m = {{"format", "tagc-gpt2 checkpoint"}, {"file_version", CheckpointHeader{}.version},
                        {"step", step},  {"world", g.world}, {"run_id", id},
                        {"loss", info.loss}, {"grad_norm", info.grad_norm},
                        {"files", files}, {"config", info.config}};
    m["manifest_crc32c"] = manifest_crc(m);
    write_file_durably(aside / manifest_name, m.dump(1) + "\n");
    // A step of this number from another run (placed here, or left by one) is kept
    // under another name, never removed.
    std::error_code ec;
    if (fs::exists(sdir / manifest_name, ec)) {
      const uint64_t other = manifest_run_id(sdir);
      if (other != 0 && other != info.run_id) {
        const fs::path keep = dir / (step_dir_name(step) + ".run-" + run_id_text(other));
        if (::rename(sdir.c_str(), keep.c_str()) != 0)
          throw std::runtime_error("cannot move another run's " + sdir.string() + " aside to " + keep.string());
        std::fprintf(stderr, "checkpoint: %s belonged to run %s: kept as %s\n", sdir.string().c_str(),
                     run_id_text(other).c_str(), keep.filename().string().c_str());
      }
    }
    install_directory(aside, sdir, dir / (step_dir_name(step) + ".retired-" + id));
    write_file_durably(dir / "latest", step_dir_name(step) + "\n");
    // Pruning: only this run's steps older than this one (never a newer step, never
    // another run's), the newest `keep` (this one included) kept; and this run's
    // leftovers of crashed saves.
    int kept = 1;
    for (const StepDir& s : list_steps(dir)) {
      if (s.step >= (long long)step) continue;
      if (s.complete) {
        const uint64_t owner = manifest_run_id(s.path);
        if (owner != 0 && owner != info.run_id) continue;
        if (kept < info.keep) {
          ++kept;
          continue;
        }
      }
      fs::remove_all(s.path, ec);  // best effort: a leftover is never resumed without its manifest
    }
    const std::string mine_tail = ".partial-" + id;
    std::vector<fs::path> leftovers;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.size() > mine_tail.size() && n.compare(n.size() - mine_tail.size(), mine_tail.size(), mine_tail) == 0 &&
          step_of(dir / n.substr(0, n.size() - mine_tail.size())) >= 0)
        leftovers.push_back(it->path());
    }
    for (const fs::path& p : leftovers) fs::remove_all(p, ec);
    sync_directory(dir);
  });
  return "";
}

Resumed load_newest(const fs::path& dir, const CheckpointHeader& expect, const nlohmann::json& config_now,
                    RankGroup& g) {
  Resumed out;
  const bool missing = !fs::is_directory(dir);
  const bool single = fs::exists(dir / manifest_name);  // --resume D/step_N
  const bool legacy = !single && list_steps(dir).empty() && fs::exists(rank_checkpoint_path(dir, expect.rank));
  // The layout must be the same on every rank.
  {
    const double kind = missing ? 3.0 : single ? 1.0 : legacy ? 2.0 : 0.0;
    const std::vector<double> k = gather(g, kind);
    for (int r = 0; r < g.world; ++r)
      if (k[size_t(r)] != kind)
        throw AgreedError("--resume " + dir.string() + ": rank " + std::to_string(r) +
                                 " sees another checkpoint layout than rank " + std::to_string(g.rank) +
                                 " (is the directory shared by all ranks?)");
    if (missing) {
      std::error_code ec;
      if (fs::is_regular_file(dir, ec))
        throw AgreedError("--resume " + dir.string() + " is a file: --resume takes a checkpoint directory (the "
                          "--checkpoint-dir of a run, or one of its step_N directories); a model file from "
                          "--save-model is started from with --init-from");
      throw AgreedError("--resume: cannot open checkpoint directory " + dir.string() +
                        (fs::exists(dir, ec) ? " (not a directory)" : " (missing)"));
    }
  }
  if (legacy) {
    agree_all(g, "--resume", [&] { out.data = read_checkpoint(dir, expect); });
    out.from = dir;
    out.notes.push_back("--resume " + dir.string() + ": a checkpoint of the older layout (one file per rank, no "
                        "manifest, no checksums): loaded without verification");
    const std::vector<double> steps = gather(g, double(out.data.header.step));
    for (double s : steps)
      if (s != steps[0])
        throw AgreedError("checkpoint files in " + dir.string() +
                                 " are from different steps (a save was interrupted?)");
    return out;
  }
  // Whose steps a resume of D takes: the owner in D/RUN (older directories have none:
  // any step's). A step of another run (a directory copied in, another experiment) is
  // skipped, named.
  const uint64_t owner = single ? 0 : directory_owner(dir);
  std::vector<std::string> foreign;
  if (!single)
    for (const StepDir& s : list_steps(dir))
      if (s.complete && owner != 0)
        if (const uint64_t id = manifest_run_id(s.path); id != 0 && id != owner)
          foreign.push_back(s.path.filename().string() + " (run " + run_id_text(id) + ")");
  for (const std::string& f : foreign)
    out.notes.push_back(dir.string() + ": " + f + " is another run's, not this directory's run " +
                        run_id_text(owner) + ": skipped");
  const size_t foreign_notes = foreign.size();
  long long bound = std::numeric_limits<long long>::max();
  for (;;) {
    // The candidate: the newest complete step below `bound` that every rank sees.
    long long mine = -1;
    fs::path mine_path;
    if (single) {
      if (bound == std::numeric_limits<long long>::max()) {
        mine = 0;  // any value, the same on every rank
        mine_path = dir;
      }
    } else {
      for (const StepDir& s : list_steps(dir))
        if (s.complete && s.step < bound) {
          if (const uint64_t id = manifest_run_id(s.path); owner != 0 && id != 0 && id != owner) continue;
          mine = s.step;
          mine_path = s.path;
          break;
        }
    }
    const std::vector<double> cands = gather(g, double(mine));
    const long long cand = (long long)*std::min_element(cands.begin(), cands.end());
    if (cand < 0) {
      const size_t damaged_steps = out.notes.size() - foreign_notes;
      const std::string why = (damaged_steps == 0 ? "" : " (" + std::to_string(damaged_steps) + " damaged, see above)") +
                              (foreign_notes == 0 ? "" : " (" + std::to_string(foreign_notes) + " of another run)");
      throw AgreedError("--resume " + dir.string() + ": no complete checkpoint in it" + why);
    }
    if (!single && mine != cand) mine_path = dir / step_dir_name(uint64_t(cand));
    // 0: good, 1: damaged (fall back), 2: another configuration (an error)
    double verdict = 0.0;
    std::string msg;
    std::vector<std::string> changes;
    try {
      out.data = verify_step(mine_path, expect, config_now, &out.config, &changes);
    } catch (const CheckpointMismatch& e) {
      verdict = 2.0;
      msg = e.what();
    } catch (const std::exception& e) {
      verdict = 1.0;
      msg = e.what();
    }
    const std::vector<double> v = gather(g, verdict);
    std::vector<int> damaged, mismatched;
    for (int r = 0; r < g.world; ++r) {
      if (v[size_t(r)] == 1.0) damaged.push_back(r);
      if (v[size_t(r)] == 2.0) mismatched.push_back(r);
    }
    if (!mismatched.empty()) {
      if (verdict == 2.0) throw AgreedError(msg);
      throw AgreedError("--resume " + mine_path.string() + ": rank(s) " + rank_list(mismatched) +
                        " found a configuration mismatch (see its message)");
    }
    if (damaged.empty()) {
      out.from = mine_path;
      out.run_id = owner != 0 ? owner : out.data.header.run_id;
      out.notes.insert(out.notes.end(), changes.begin(), changes.end());
      return out;
    }
    // Named on the rank that found it (every rank's stderr reaches the job's).
    if (verdict == 1.0) std::fprintf(stderr, "checkpoint: rank %d: %s\n", g.rank, msg.c_str());
    out.notes.push_back(mine_path.string() + " is damaged on rank(s) " + rank_list(damaged) +
                        (single ? "" : ": falling back to the previous complete step"));
    std::fflush(stderr);
    if (single)
      throw AgreedError("--resume " + dir.string() + ": the checkpoint is damaged on rank(s) " + rank_list(damaged) +
                        " (see its message)");
    bound = cand;
  }
}

CheckpointData read_newest_plan(const fs::path& dir, const CheckpointHeader& expect, const nlohmann::json& config_now) {
  const auto plan_of = [&](const fs::path& step_dir) {
    // A damaged manifest is load_newest's to judge (with its fallback): the header then.
    nlohmann::json m;
    try {
      m = read_manifest(step_dir);
    } catch (const CheckpointDamaged&) {
    }
    CheckpointData d = read_checkpoint_file(rank_checkpoint_path(step_dir, expect.rank), expect, nullptr, true,
                                            header_check(m));
    if (m.contains("config")) (void)check_identity(step_dir, m["config"], config_now);
    return d;
  };
  if (fs::exists(dir / manifest_name)) return plan_of(dir);
  for (const StepDir& s : list_steps(dir))
    if (s.complete) return plan_of(s.path);
  return read_checkpoint_file(rank_checkpoint_path(dir, expect.rank), expect, nullptr, true);
}

}  // namespace train
