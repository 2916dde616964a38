// auto_select.cpp: see auto_select.hpp. The measurement is Trainer::decide_auto
// (trainer_auto_impl.hpp: it needs the trainer's communicator, queue and shard plan).
// defines: train::to_json, train::auto_plan_from_json, train::format_table,
//          train::median_of, train::synthetic_gradient
#include "auto_select.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace train {

nlohmann::json to_json(const AutoPlan& p) {
  nlohmann::json segs = nlohmann::json::array();
  for (const auto& s : p.segments)
    segs.push_back({{"name", s.name},
                    {"unit", s.unit},
                    {"seg", s.seg},
                    {"elements", s.length},
                    {"bits_per_param", s.bits_per_param},
                    {"compress_ms", s.compress_seconds * 1e3},
                    {"decode_ms", s.decode_seconds * 1e3},
                    {"dense_ms", s.dense_ms},
                    {"compressed_ms", s.compressed_ms},
                    {"path", s.compress ? "tagc" : "plain"}});
  return {{"source", p.source},
          {"world", p.world},
          {"link_mbps", p.bytes_per_second * 8e-6},
          {"link_bytes_per_second", p.bytes_per_second},
          {"link_latency_us", p.latency_seconds * 1e6},
          {"bandwidth_from", p.bandwidth_from},
          {"latency_from", p.latency_from},
          {"probe_bytes", p.probe_bytes},
          {"probe_ms", p.probe_seconds * 1e3},
          {"baseline_dtype", p.baseline_dtype},
          {"segments", segs}};
}

AutoPlan auto_plan_from_json(const nlohmann::json& j) {
  AutoPlan p;
  p.source = j.at("source").get<std::string>();
  p.world = j.at("world").get<int>();
  p.bytes_per_second = j.at("link_bytes_per_second").get<double>();
  p.latency_seconds = j.at("link_latency_us").get<double>() * 1e-6;
  p.bandwidth_from = j.at("bandwidth_from").get<std::string>();
  p.latency_from = j.at("latency_from").get<std::string>();
  p.probe_bytes = j.at("probe_bytes").get<double>();
  p.probe_seconds = j.at("probe_ms").get<double>() * 1e-3;
  p.baseline_dtype = j.at("baseline_dtype").get<std::string>();
  for (const auto& s : j.at("segments")) {
    AutoSegment a;
    a.name = s.at("name").get<std::string>();
    a.unit = s.at("unit").get<int>();
    a.seg = s.at("seg").get<int>();
    a.length = s.at("elements").get<size_t>();
    a.bits_per_param = s.at("bits_per_param").get<double>();
    a.compress_seconds = s.at("compress_ms").get<double>() * 1e-3;
    a.decode_seconds = s.at("decode_ms").get<double>() * 1e-3;
    a.dense_ms = s.at("dense_ms").get<double>();
    a.compressed_ms = s.at("compressed_ms").get<double>();
    a.compress = s.at("path").get<std::string>() == "tagc";
    p.segments.push_back(a);
  }
  return p;
}

std::string format_table(const AutoPlan& p) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line,
                "compress auto (%s): link %.6g Mbit/s per rank (%s), latency %.1f us (%s), %d rank(s), "
                "baseline %s\n",
                p.source == "checkpoint" ? "from the checkpoint" : "measured at start-up",
                p.bytes_per_second * 8e-6, p.bandwidth_from.c_str(), p.latency_seconds * 1e6,
                p.latency_from.c_str(), p.world, p.baseline_dtype.c_str());
  out += line;
  std::snprintf(line, sizeof line, "  %-16s %10s %9s %12s %11s %10s %13s  %s\n", "segment", "elements", "bits/par",
                "compress ms", "decode ms", "dense ms", "compressed ms", "path");
  out += line;
  int n = 0;
  for (const auto& s : p.segments) {
    std::snprintf(line, sizeof line, "  %-16s %10zu %9.2f %12.3f %11.3f %10.3f %13.3f  %s\n", s.name.c_str(),
                  s.length, s.bits_per_param, s.compress_seconds * 1e3, s.decode_seconds * 1e3, s.dense_ms,
                  s.compressed_ms, s.compress ? "tagc" : "plain");
    out += line;
    n += s.compress;
  }
  std::snprintf(line, sizeof line, "  -> %d of %zu segments compressed", n, p.segments.size());
  out += line;
  return out;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// A heavy-tailed synthetic gradient (symmetric Pareto, tail index 2, scale 1e-3):
// a few large entries and many small ones, as real gradients are.
void synthetic_gradient(std::vector<float>& g, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E5ull;
  for (float& v : g) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const double u = (double((x >> 11) & ((1ull << 52) - 1)) + 0.5) / double(1ull << 52);
    const double mag = 1.0 / std::sqrt(u) - 1.0;
    v = float(((x & 1) ? 1e-3 : -1e-3) * std::min(mag, 1e4));
  }
}


}  // namespace train
