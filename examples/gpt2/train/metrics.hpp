// metrics.hpp: what a training run reports — JSON lines to --log (one object per
// step, per validation, plus a run header), and a progress line on stderr: redrawn in
// place on a terminal, a plain line every --print-every steps otherwise.
//
// Only rank 0 reports. Compression statistics are rank 0's own (each rank decodes its
// own shards); traffic is bytes *this rank* sent (ring model, tagc::ring_bytes_sent),
// which is the same on every rank for these collectives.
#pragma once

#include "trainer.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <string>

namespace train {

// The step line as JSON (also what the tests and scripts/demo.sh read).
nlohmann::json step_json(const StepMetrics& m);

// The run's compression flags for the log's first line, only those that apply: under
// --compress none only the baseline's dtype; no ratio or decoder for packed values; the
// baseline's dtype only where some segments stay uncompressed.
nlohmann::json compression_info(const Args& a);
// The same as one console phrase: "compress=non-attention values=sketch ratio=10 ...".
std::string compression_summary(const Args& a);

class Metrics {
 public:
  // enabled = false on ranks other than 0: every call does nothing.
  Metrics(const Args& args, bool enabled, int first_step);
  void run_info(const nlohmann::json& info);
  void step(const StepMetrics& m);
  void val(int step, double loss);
  // The same, with each batch's loss: the line also carries them and the mean's standard
  // error (sample standard deviation / sqrt(batches)).
  void val(int step, const std::vector<double>& batch_losses);
  void message(const std::string& text);  // a line on stderr (ends the progress line first)

 private:
  void write(const nlohmann::json& j);

  bool enabled_, tty_;
  int total_steps_, print_every_, first_step_;
  std::ofstream log_;
  std::chrono::steady_clock::time_point start_;
  long tokens_ = 0;
  bool line_open_ = false;
};

}  // namespace train
