// run_config.cpp: see run_config.hpp.
// defines: train::config_fields, train::config_json, train::resume_differences,
//          train::config_record, train::compare_records, train::check_ranks_agree
#include "run_config.hpp"

#include "checkpoint.hpp"
#include "compress_options.hpp"

#include "tagc/comm/mpi.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

namespace train {
namespace {

// Shortest text that reads back as the same value (0.001f -> "0.001").
template <class F>
std::string shortest(F x) {
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, x);
  return std::string(b, r.ptr);
}
std::string num(double x) { return shortest(x); }
std::string num(float x) { return shortest(x); }
std::string num(int x) { return std::to_string(x); }
std::string num(uint64_t x) { return std::to_string(x); }
std::string sw(bool on) { return on ? "on" : "off"; }
// A choice as its flag spells it (the library's names for the reducer's, arg_names.cpp's for the trainer's).
template <class E>
std::string name(E e) {
  return std::string(to_string(e));
}

uint64_t fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Long values (paths) are kept readable but bounded: a prefix and a digest of the rest.
std::string bounded(const std::string& v) {
  if (v.size() <= 240) return v;
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(fnv1a(
                                            reinterpret_cast<const unsigned char*>(v.data()), v.size())));
  return v.substr(0, 200) + "...#" + b;
}

}  // namespace

std::vector<ConfigField> config_fields(const Args& a) {
  using C = FieldClass;
  const C must = C::resume_must_match, may = C::resume_may_change, local = C::local;
  // Every flag, classified. A new flag must be added here (test_run_config checks).
  const std::map<std::string, std::pair<std::string, C>> f = {
      {"model", {a.model, must}},
      {"L", {num(a.L), must}},
      {"C", {num(a.C), must}},
      {"NH", {num(a.NH), must}},
      {"maxT", {num(a.maxT), must}},
      {"B", {num(a.B), must}},
      {"T", {num(a.T), must}},
      {"accum", {num(a.accum), must}},
      {"steps", {num(a.steps), may}},
      {"seed", {num(a.seed), may}},
      {"lr", {num(a.lr), may}},
      {"lr-min", {num(a.lr_min), may}},
      {"beta1", {num(a.beta1), may}},
      {"beta2", {num(a.beta2), may}},
      {"eps", {num(a.eps), may}},
      {"weight-decay", {num(a.weight_decay), may}},
      {"clip", {a.clip > 0 ? num(a.clip) : "none", may}},
      {"schedule", {name(a.schedule), may}},
      {"warmup", {num(a.warmup), may}},
      {"zero2", {sw(a.zero2), may}},
      {"compress", {name(a.compress), must}},
      {"link-mbps", {num(a.link_mbps), may}},
      {"link-latency-us", {num(a.link_latency_us), may}},
      {"baseline-dtype", {a.baseline_dtype, must}},
      {"gather-dtype", {a.gather_dtype, must}},
      {"ranks-per-node", {a.ranks_per_node == 0 ? "auto" : num(a.ranks_per_node), must}},
      {"allow-index-carries", {sw(a.allow_index_carries), may}},
      {"grad-all-reduce", {sw(a.grad_all_reduce), must}},
      {"union-bound", {num(a.union_bound), must}},
      {"ratio", {num(a.ratio), must}},
      {"index-bits", {tagc::index_bits_name(a.index_bits), must}},
      {"values", {name(a.values), must}},
      {"index-exchange", {name(a.index_exchange), must}},
      // the fields above and below in the library's description language: a record of
      // the choice, which the must-match flags already compare one by one
      {"reducer", {reducer_text(a), may}},
      {"sparsity", {a.sparsity < 0 ? "default" : num(a.sparsity), must}},
      {"unit-sparsity", {unit_sparsity_text(a.unit_sparsity), must}},
      {"decoder", {name(a.decoder), must}},
      {"residual", {name(a.residual), must}},
      {"adaptive", {sw(a.adaptive), must}},
      {"sparsity-warmup", {num(a.sparsity_warmup), must}},
      {"sparsity-schedule", {name(a.sparsity_shape), must}},
      {"sparsity-start", {num(a.sparsity_start), must}},
      {"target-load", {num(a.target_load), may}},
      {"check-collectives", {sw(a.check_collectives), may}},
      {"train-data", {bounded(a.train_data), may}},
      {"val-data", {bounded(a.val_data), may}},
      {"shuffle", {sw(a.shuffle), must}},
      {"shuffle-seed", {a.shuffle ? num(a.shuffle_seed) : "", must}},
      {"val-every", {num(a.val_every), may}},
      {"val-batches", {num(a.val_batches), may}},
      {"checkpoint-dir", {bounded(a.checkpoint_dir), may}},
      {"checkpoint-every", {num(a.checkpoint_every), may}},
      {"keep-checkpoints", {num(a.keep_checkpoints), may}},
      {"collective-timeout", {num(a.collective_timeout), may}},
      {"resume", {bounded(a.resume), may}},
      {"init-from", {bounded(a.init_from), may}},
      {"save-model", {a.save_model.empty() ? "" : "set", may}},
      {"guard-loss-spike", {num(a.guard_loss_spike), may}},
      {"guard-grad-spike", {num(a.guard_grad_spike), may}},
      {"guard-param-max", {num(a.guard_param_max), may}},
      {"guard-rewind", {num(a.guard_rewind), may}},  // rank 0 writes; the gather is collective
      {"log", {a.log, local}},
      {"print-every", {num(a.print_every), local}},
      {"tokenizer", {a.tokenizer_dir, local}},
      {"corpus", {a.corpus, local}},
      {"out", {a.out_dir, local}},
      {"val-fraction", {num(a.val_fraction), local}},
      {"model-file", {a.model_file, local}},
      {"data", {a.data, local}},
      {"prompt", {a.prompt, local}},
      {"tokens", {num(a.tokens), local}},
      {"top-k", {num(a.top_k), local}},
  };
  std::vector<ConfigField> out;
  for (const std::string& name : flag_names()) {
    const auto it = f.find(name);
    // Unclassified: compared across ranks (the safe side) until someone classifies it.
    if (it == f.end()) out.push_back({name, "?", C::resume_may_change});
    else out.push_back({name, it->second.first, it->second.second});
  }
  return out;
}

nlohmann::json config_json(const Args& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const ConfigField& f : config_fields(a))
    if (f.cls != FieldClass::local) j[f.flag] = f.value;
  return j;
}

std::vector<std::string> resume_differences(const nlohmann::json& saved, const nlohmann::json& now) {
  std::vector<std::string> errors, notes;
  // Classes come from this program's table (flags the checkpoint does not know: below).
  std::map<std::string, FieldClass> cls;
  std::map<std::string, std::string> defaults;
  for (const ConfigField& f : config_fields(Args{})) {
    cls[f.flag] = f.cls;
    defaults[f.flag] = f.value;
  }
  for (auto it = now.begin(); it != now.end(); ++it) {
    const std::string& flag = it.key();
    if (!saved.is_object()) continue;
    std::string was;
    if (saved.contains(flag)) {
      was = saved[flag].is_string() ? saved[flag].get<std::string>() : saved[flag].dump();
    } else {
      // A flag newer than the checkpoint: the checkpoint's run had the behaviour of the
      // flag's default (a new flag's default keeps the old behaviour, e.g. --gather-dtype
      // fp32), so a must-match flag is compared with that default; others are skipped.
      if (!cls.count(flag) || cls[flag] != FieldClass::resume_must_match) continue;
      was = defaults.at(flag);
    }
    const std::string is = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    if (was == is) continue;
    const std::string line = "--" + flag + ": " + (was.empty() ? "(unset)" : was) + " in the checkpoint, " +
                             (is.empty() ? "(unset)" : is) + " in this run";
    if (cls.count(flag) && cls[flag] == FieldClass::resume_must_match) errors.push_back(line);
    else if (flag != "resume" && flag != "init-from") notes.push_back("changed since the checkpoint: " + line);
  }
  if (!errors.empty()) {
    std::string m = "the checkpoint was written with other settings that a resumed run must keep: ";
    for (size_t i = 0; i < errors.size(); ++i) m += (i ? "; " : "") + errors[i];
    throw CheckpointMismatch(m);
  }
  return notes;
}

std::vector<unsigned char> config_record(const Args& a) {
  std::string s;
  for (const ConfigField& f : config_fields(a))
    if (f.cls != FieldClass::local) s += f.flag + "=" + f.value + "\n";
  if (s.size() >= config_record_bytes) {
    // Cannot happen with bounded() values; keep the record well formed regardless.
    s = s.substr(0, config_record_bytes - 1);
  }
  std::vector<unsigned char> r(config_record_bytes, 0);
  std::memcpy(r.data(), s.data(), s.size());
  return r;
}

std::string compare_records(const std::vector<std::vector<unsigned char>>& records) {
  const size_t W = records.size();
  std::vector<std::map<std::string, std::string>> fields(W);
  std::set<std::string> names;
  for (size_t r = 0; r < W; ++r) {
    const auto& rec = records[r];
    const std::string s(reinterpret_cast<const char*>(rec.data()), strnlen(reinterpret_cast<const char*>(rec.data()), rec.size()));
    size_t pos = 0;
    while (pos < s.size()) {
      size_t nl = s.find('\n', pos);
      if (nl == std::string::npos) nl = s.size();
      const std::string line = s.substr(pos, nl - pos);
      if (const size_t eq = line.find('='); eq != std::string::npos) {
        fields[r][line.substr(0, eq)] = line.substr(eq + 1);
        names.insert(line.substr(0, eq));
      }
      pos = nl + 1;
    }
  }
  std::string msg;
  for (const std::string& n : names) {
    // value -> ranks, in rank order of first appearance
    std::vector<std::pair<std::string, std::vector<size_t>>> groups;
    for (size_t r = 0; r < W; ++r) {
      const auto it = fields[r].find(n);
      const std::string v = it == fields[r].end() ? "(absent: another build?)" : it->second;
      auto g = groups.begin();
      while (g != groups.end() && g->first != v) ++g;
      if (g == groups.end()) groups.push_back({v, {r}});
      else g->second.push_back(r);
    }
    if (groups.size() < 2) continue;
    std::string line = "--" + n + ":";
    for (size_t i = 0; i < groups.size(); ++i) {
      std::string ranks;
      for (size_t k = 0; k < groups[i].second.size(); ++k) {
        if (k == 4 && groups[i].second.size() > 5) {
          ranks += ", ... (" + std::to_string(groups[i].second.size()) + " ranks)";
          break;
        }
        ranks += (k ? ", " : "") + std::to_string(groups[i].second[k]);
      }
      line += std::string(i ? "," : "") + " '" + (groups[i].first.empty() ? "" : groups[i].first) + "' on rank" +
              (groups[i].second.size() > 1 ? "s " : " ") + ranks;
    }
    msg += (msg.empty() ? "" : "; ") + line;
  }
  if (msg.empty()) return {};
  return "the ranks were started with different settings (every rank must get the same flags): " + msg;
}

void check_ranks_agree(const Args& a, tagc::mpi_communicator& comm) {
  const std::vector<unsigned char> mine = config_record(a);
  const auto fail = [](const tagc::status& s) {
    if (!s.ok()) throw std::runtime_error("start-up agreement of the ranks' settings: " + s.what());
  };
  const size_t W = size_t(comm.size());
  // 1: digests (16 bytes each)
  uint64_t digest[2] = {fnv1a(mine.data(), mine.size()), 0};
  for (size_t i = 0; i < mine.size(); ++i) digest[1] = digest[1] * 31 + mine[i];
  std::vector<uint64_t> all(2 * W);
  fail(comm.all_gather(std::span<const uint64_t>(digest, 2), std::span<uint64_t>(all)));
  bool same = true;
  for (size_t r = 0; r < W; ++r) same &= all[2 * r] == digest[0] && all[2 * r + 1] == digest[1];
  // every rank computed `same` from the same gathered digests: the same branch everywhere
  if (same) return;
  // 2: the whole records
  std::vector<uint8_t> recs(W * config_record_bytes);
  fail(comm.all_gather(std::span<const uint8_t>(mine.data(), mine.size()), std::span<uint8_t>(recs)));
  std::vector<std::vector<unsigned char>> records(W);
  for (size_t r = 0; r < W; ++r)
    records[r].assign(recs.begin() + std::ptrdiff_t(r * config_record_bytes),
                      recs.begin() + std::ptrdiff_t((r + 1) * config_record_bytes));
  std::string m = compare_records(records);
  if (m.empty()) m = "the ranks' settings differ (digests differ, records equal: a build difference?)";
  throw std::runtime_error(m);
}

}  // namespace train
