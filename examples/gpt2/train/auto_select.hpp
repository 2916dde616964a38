// auto_select.hpp: "--compress auto" — per gradient segment, does compressing pay?
//
// The candidates are those of "--compress all": every unit's compressible prefix and
// plain suffix. At start-up the trainer measures (Trainer::decide_auto, trainer_auto_impl.hpp):
//   link:  a plain fp32 reduce-scatter of 4 MB through the trainer's communicator
//          (1 warm-up + 3 timed, median), and a 1-float-per-rank reduce-scatter
//          (1 warm-up + 15 timed, median) for the per-collective latency a; the
//          bandwidth per rank is B = (N-1)/N * bytes / (t - a) (ring model).
//          --link-mbps / --link-latency-us replace either figure (what-if runs).
//   codec: per segment, a throw-away tagc::Reducer of its length (same ratio, index
//          bits, decoder) is called 1 + codec_timed_calls times, profiled, on a
//          synthetic heavy-tailed gradient; the first call warms up, and the fastest
//          timed call per stage gives compress seconds (sparsify + index + sketch) and
//          decode seconds; with the bytes it sent (ring model),
//          bits/param = 8 * bytes / ((N-1)/N * n).
// Every rank's figures are all-gathered and the maximum taken (the slowest rank sets
// a collective's pace), so every rank computes the same decision from the same
// numbers with tagc::estimate_reduce_scatter.
//
// The plan is logged on rank 0 (stderr table, "auto" in the JSONL run line) and
// stored in the checkpoint; a resumed run (--resume) takes it from there.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace train {

// What each segment's reduce-scatter goes through (one byte per segment, unit by
// unit, prefix then suffix: the checkpoint's segment plan).
enum SegmentPath : uint8_t { path_none = 0, path_plain = 1, path_tagc = 2 };

struct AutoSegment {
  std::string name;  // "<unit>/prefix" or "<unit>/suffix"
  int unit = 0, seg = 0;
  size_t length = 0;  // elements
  double bits_per_param = 0;  // what the Reducer sent, per parameter, before the ring factor
  double compress_seconds = 0, decode_seconds = 0;  // measured (max over ranks)
  double dense_ms = 0, compressed_ms = 0;            // predicted
  bool compress = false;
};

struct AutoPlan {
  std::string source = "measured";  // or "checkpoint"
  int world = 1;
  double bytes_per_second = 0;  // link, per rank
  double latency_seconds = 0;
  std::string bandwidth_from, latency_from;  // "measured" or the flag
  double probe_bytes = 0, probe_seconds = 0;  // the timed reduce-scatter (median, max over ranks)
  std::string baseline_dtype = "fp32";
  std::vector<AutoSegment> segments;
};

nlohmann::json to_json(const AutoPlan& p);
AutoPlan auto_plan_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception
// The decision table, one line per segment (what rank 0 prints).
std::string format_table(const AutoPlan& p);

// Timed codec calls per segment (after one warm-up); each stage keeps its fastest.
inline constexpr int codec_timed_calls = 3;
// The measurement's pieces (Trainer::decide_auto, trainer_auto_impl.hpp):
double median_of(std::vector<double> v);  // 0 for none
// A heavy-tailed synthetic gradient (symmetric Pareto, tail index 2, scale 1e-3).
void synthetic_gradient(std::vector<float>& g, uint64_t seed);

}  // namespace train
