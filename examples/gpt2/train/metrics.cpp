// metrics.cpp: see metrics.hpp.
// defines: train::Metrics, train::step_json
#include "metrics.hpp"
#include "compress_options.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace train {

nlohmann::json compression_info(const Args& a) {
  nlohmann::json j = {{"compress", std::string(to_string(a.compress))}};
  if (a.compress != CompressMode::all) j["baseline_dtype"] = a.baseline_dtype;
  // the parameter all-gather's format: recorded when it is not the default fp32 (it must
  // match on resume, and it changes the numerics of every configuration alike)
  if (a.gather_dtype != "fp32") j["gather_dtype"] = a.gather_dtype;
  if (a.ranks_per_node != 1) j["ranks_per_node"] = a.ranks_per_node == 0 ? "auto" : std::to_string(a.ranks_per_node);
  if (a.shuffle) j["shuffle_seed"] = a.shuffle_seed;
  if (a.compress == CompressMode::none) return j;
  const tagc::reducer_description d = compress_options(a).reducer;
  j["values"] = std::string(tagc::to_string(d.values));
  if (tagc::is_sketch(d.values)) j["ratio"] = d.ratio;
  j["index_bits"] = tagc::index_bits_name(d.index_bits);
  j["index_exchange"] = std::string(tagc::to_string(d.exchange));
  if (tagc::is_sketch(d.values)) j["decoder"] = std::string(tagc::to_string(d.decoder));
  j["residual"] = std::string(tagc::to_string(d.residual));
  j["sparsity"] = a.sparsity;
  j["adaptive"] = a.adaptive;
  if (a.adaptive) j["target_load"] = a.target_load;
  if (d.schedule.enabled()) {  // theta's warm-up (tagc::sparsity_schedule): only when on
    j["sparsity_warmup"] = d.schedule.warmup_steps;
    j["sparsity_schedule"] = std::string(tagc::to_string(d.schedule.shape));
    j["sparsity_start"] = d.schedule.start;
  }
  return j;
}

std::string compression_summary(const Args& a) {
  const nlohmann::json j = compression_info(a);
  std::string s;
  for (const char* key : {"compress", "values", "ratio", "index_bits", "index_exchange", "residual", "baseline_dtype",
                          "gather_dtype", "ranks_per_node", "sparsity_warmup", "sparsity_schedule", "sparsity_start"}) {
    if (!j.contains(key)) continue;
    std::string k = key;
    for (char& c : k)
      if (c == '_') c = '-';
    const auto& v = j.at(key);
    s += (s.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return s;
}

nlohmann::json step_json(const StepMetrics& m) {
  using nlohmann::json;
  json bytes = json::object(), calls = json::object();
  for (int k = 0; k < int(tagc::collective::count_); ++k) {
    const auto c = tagc::collective(k);
    const auto& t = m.traffic[c];
    if (t.calls == 0) continue;
    bytes[tagc::collective_name(c)] = t.bytes_sent;
    calls[tagc::collective_name(c)] = t.calls;
  }
  // Aggregate over the compressed segments: sums, and the worst load.
  double elements = 0, kept = 0, support = 0, unresolved = 0, pending = 0, load_max = 0, cells = 0, carries = 0;
  json units = json::array();
  tagc::reduce_stats::stage_seconds t;
  for (const auto& s : m.compression) {
    const auto& r = s.stats;
    t.check += r.seconds.check;
    t.sparsify += r.seconds.sparsify;
    t.index += r.seconds.index;
    t.index_exchange += r.seconds.index_exchange;
    t.sketch += r.seconds.sketch;
    t.value_exchange += r.seconds.value_exchange;
    t.decode += r.seconds.decode;
    t.residual += r.seconds.residual;
    elements += double(r.elements);
    kept += double(r.kept);
    support += double(r.support);
    unresolved += double(r.unresolved);
    pending += deferred_entries(r);
    carries += double(r.deferred);
    if (!r.dense && r.load > 0) cells += double(r.support) / r.load;
    load_max = std::max(load_max, r.load);
    units.push_back({{"unit", s.unit}, {"seg", s.segment}, {"sparsity", r.sparsity}, {"theta", r.theta}, {"load", r.load},
                     {"support", r.support}, {"unresolved", r.unresolved}, {"deferred", deferred_entries(r)},
                     {"dense", r.dense}});
  }
  json j = {{"type", "step"},         {"step", m.step},         {"loss", m.loss},
            {"lr", m.lr},             {"grad_norm", m.grad_norm}, {"step_ms", m.step_ms},
            {"compute_ms", m.compute_ms}, {"comm_ms", m.comm_ms}, {"wait_ms", m.wait_ms},
            {"grad_comm_ms", m.grad_comm_ms}, {"param_comm_ms", m.param_comm_ms},
            {"tokens", m.tokens},     {"grad_bytes", m.grad_bytes},
            {"grad_bytes_internode", m.grad_bytes_internode},
            {"grad_bytes_internode_mean", m.grad_bytes_internode_mean},
            {"grad_bytes_internode_max", m.grad_bytes_internode_max}, {"param_bytes", m.param_bytes},
            {"param_bytes_internode", m.param_bytes_internode}, {"bytes", bytes},
            {"calls", calls}};
  if (!m.compression.empty()) {
    j["compression"] = {{"segments", m.compression.size()},
                        {"sparsity", elements > 0 ? 1.0 - kept / elements : 0.0},
                        {"load", cells > 0 ? support / cells : 0.0},
                        {"load_max", load_max},
                        {"support", support},
                        {"unresolved", unresolved},
                        {"deferred", pending},
                        // this rank's kept entries not delivered this step (summed-index carries
                        // + retransmissions): they stay in the residual for a later step
                        {"index_carries", carries},
                        {"held_back_share", kept > 0 ? (carries + pending) / kept : 0.0}};
    // Where the compressed segments' time went (ms, this rank, summed over segments).
    j["reducer_ms"] = {{"check", t.check * 1e3},   {"sparsify", t.sparsify * 1e3},
                       {"index", t.index * 1e3},   {"index_exchange", t.index_exchange * 1e3},
                       {"sketch", t.sketch * 1e3}, {"value_exchange", t.value_exchange * 1e3},
                       {"decode", t.decode * 1e3}, {"residual", t.residual * 1e3}};
    j["units"] = units;
    j["compression_all_ranks"] = {{"support", m.all_support}, {"load", m.all_load},
                                  {"unresolved", m.all_unresolved}, {"deferred", m.all_pending}};
  }
  return j;
}

Metrics::Metrics(const Args& a, bool enabled, int first_step)
    : enabled_(enabled),
      tty_(isatty(fileno(stderr)) != 0),
      total_steps_(a.steps),
      print_every_(a.print_every),
      first_step_(first_step),
      start_(std::chrono::steady_clock::now()) {
  if (!enabled_ || a.log.empty()) return;
  // A resumed run appends, so one file holds the whole history.
  log_.open(a.log, a.resume.empty() ? std::ios::trunc : std::ios::app);
  if (!log_) throw std::runtime_error("cannot open --log " + a.log + " for writing");
}

void Metrics::write(const nlohmann::json& j) {
  if (!log_.is_open()) return;
  log_ << j.dump() << '\n';
  log_.flush();  // a crashed run keeps its history
}

void Metrics::run_info(const nlohmann::json& info) {
  if (!enabled_) return;
  nlohmann::json j = info;
  j["type"] = "run";
  write(j);
}

void Metrics::step(const StepMetrics& m) {
  if (!enabled_) return;
  write(step_json(m));
  tokens_ += m.tokens;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int done = m.step - first_step_;
  const double tok_s = elapsed > 0 ? double(tokens_) / elapsed : 0.0;
  const double eta = done > 0 ? elapsed / done * (total_steps_ - m.step) : 0.0;
  char line[256];
  std::snprintf(line, sizeof line, "step %d/%d | loss %.4f | lr %.2e | %.0f ms (comm %.0f, wait %.0f) | %.0f tok/s | ETA %.0fs",
                m.step, total_steps_, m.loss, m.lr, m.step_ms, m.comm_ms, m.wait_ms, tok_s, eta);
  // Kept entries held back this step (index carries, retransmissions): shown once it is a
  // large share, so a configuration that delays most of its update cannot do so silently.
  double kept = 0, held = 0;
  for (const auto& s : m.compression) {
    kept += double(s.stats.kept);
    held += double(s.stats.deferred) + deferred_entries(s.stats);
  }
  if (kept > 0 && held > 0.25 * kept) {
    const size_t n = std::strlen(line);
    std::snprintf(line + n, sizeof line - n, " | held back %.0f%% of kept", 100.0 * held / kept);
  }
  if (tty_) {
    std::fprintf(stderr, "\r%s\033[K", line);
    line_open_ = true;
    if (m.step == total_steps_) {
      std::fputc('\n', stderr);
      line_open_ = false;
    }
  } else if (m.step % print_every_ == 0 || m.step == total_steps_ || m.step == first_step_ + 1) {
    std::fprintf(stderr, "%s\n", line);
  }
}

void Metrics::val(int step, double loss) {
  if (!enabled_) return;
  write({{"type", "val"}, {"step", step}, {"val_loss", loss}});
  char line[96];
  std::snprintf(line, sizeof line, "step %d: val loss %.4f", step, loss);
  message(line);
}

void Metrics::val(int step, const std::vector<double>& batch_losses) {
  if (!enabled_ || batch_losses.empty()) return;
  const double n = double(batch_losses.size());
  double sum = 0.0;
  for (double l : batch_losses) sum += l;
  const double mean = sum / n;
  double ss = 0.0;
  for (double l : batch_losses) ss += (l - mean) * (l - mean);
  const double se = batch_losses.size() > 1 ? std::sqrt(ss / (n - 1.0) / n) : 0.0;
  write({{"type", "val"}, {"step", step}, {"val_loss", mean}, {"val_se", se}, {"val_batch_losses", batch_losses}});
  char line[128];
  std::snprintf(line, sizeof line, "step %d: val loss %.4f (se %.4f, %zu batches)", step, mean, se,
                batch_losses.size());
  message(line);
}

void Metrics::message(const std::string& text) {
  if (!enabled_) return;
  if (line_open_) {
    std::fputc('\n', stderr);
    line_open_ = false;
  }
  std::fprintf(stderr, "%s\n", text.c_str());
}

}  // namespace train
