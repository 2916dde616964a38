// checkpoint_store.cpp: see checkpoint_store.hpp.
// defines: train::save_step, train::load_newest, train::read_newest_plan, train::agree_all
#include "checkpoint_store.hpp"

#include "durable_file.hpp"
#include "run_config.hpp"
#include "watchdog.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
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
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointDamaged(p.string() + " is damaged (" + e.what() + ")");
  }
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
    // The file first (its header names the first differing field), then every flag.
    CheckpointData d = read_checkpoint_file(file, expect, &digest);
    if (d.header.step != m["step"].get<uint64_t>())
      throw CheckpointDamaged(file.string() + " holds step " + std::to_string(d.header.step) + ", its manifest " +
                              std::to_string(m["step"].get<uint64_t>()));
    if (m.contains("config") && config_out) {
      *config_out = m["config"];
      try {
        *notes = resume_differences(m["config"], config_now);
      } catch (const CheckpointMismatch& e) {
        throw CheckpointMismatch("checkpoint " + step_dir.string() + " is from another configuration: " + e.what());
      }
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

void save_step(const fs::path& dir, const CheckpointData& d, const SaveInfo& info, RankGroup& g) {
  const uint64_t step = d.header.step;
  const fs::path sdir = dir / step_dir_name(step);
  const std::string what = "checkpoint save of step " + std::to_string(step);
  // (1) nothing non-finite is ever saved; a clean step directory
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
      fs::remove_all(sdir, ec);  // a crashed save of this step, or one of an abandoned history
      if (ec) throw std::runtime_error("cannot clear " + sdir.string() + ": " + ec.message());
      fs::create_directories(sdir, ec);
      if (ec) throw std::runtime_error("cannot create " + sdir.string() + ": " + ec.message());
      sync_directory(dir);
    }
  });
  // (2) every rank's file, durable
  FileDigest mine;
  agree_all(g, what, [&] { mine = write_checkpoint_file(rank_checkpoint_path(sdir, g.rank), d); });
  std::vector<double> digests(2 * size_t(g.world), 0.0);
  digests[2 * size_t(g.rank)] = double(mine.bytes);
  digests[2 * size_t(g.rank) + 1] = double(mine.crc32c);
  g.sum(digests);
  // (3) the manifest, then the pointer, then the pruning (rank 0)
  agree_all(g, what, [&] {
    if (g.rank != 0) return;
    nlohmann::json files = nlohmann::json::array();
    for (int r = 0; r < g.world; ++r)
      files.push_back({{"name", rank_checkpoint_path("", r).string()},
                       {"bytes", uint64_t(digests[2 * size_t(r)])},
                       {"crc32c", uint32_t(digests[2 * size_t(r) + 1])}});
    const nlohmann::json m = {{"format", "tagc-gpt2 checkpoint"}, {"file_version", CheckpointHeader{}.version},
                              {"step", step},  {"world", g.world},
                              {"loss", info.loss}, {"grad_norm", info.grad_norm},
                              {"files", files}, {"config", info.config}};
    write_file_durably(sdir / manifest_name, m.dump(1) + "\n");
    write_file_durably(dir / "latest", step_dir_name(step) + "\n");
    int kept = 0;
    for (const StepDir& s : list_steps(dir)) {
      // keep the newest `keep` complete steps up to this one; later ones belong to a
      // history this run abandoned (it resumed from an earlier step)
      const bool keep = s.complete && s.step <= (long long)step && kept < info.keep;
      if (keep) {
        ++kept;
        continue;
      }
      std::error_code ec;
      fs::remove_all(s.path, ec);  // best effort: a leftover is never resumed without its manifest
    }
    sync_directory(dir);
  });
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
    if (missing) throw AgreedError("--resume: cannot open checkpoint directory " + dir.string() + " (missing)");
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
          mine = s.step;
          mine_path = s.path;
          break;
        }
    }
    const std::vector<double> cands = gather(g, double(mine));
    const long long cand = (long long)*std::min_element(cands.begin(), cands.end());
    if (cand < 0) {
      const std::string why = out.notes.empty() ? "" : " (" + std::to_string(out.notes.size()) + " damaged, see above)";
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

CheckpointData read_newest_plan(const fs::path& dir, const CheckpointHeader& expect) {
  if (fs::exists(dir / manifest_name)) return read_checkpoint_file(rank_checkpoint_path(dir, expect.rank), expect, nullptr, true);
  for (const StepDir& s : list_steps(dir))
    if (s.complete) return read_checkpoint_file(rank_checkpoint_path(s.path, expect.rank), expect, nullptr, true);
  return read_checkpoint_file(rank_checkpoint_path(dir, expect.rank), expect, nullptr, true);
}

}  // namespace train
