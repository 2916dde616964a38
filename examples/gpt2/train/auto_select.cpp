// auto_select.cpp: see auto_select.hpp. The measurement is Trainer::decide_auto (it
// needs the trainer's communicator, worker and shard plan).
// defines: train::to_json, train::auto_plan_from_json, train::format_table, Trainer::decide_auto
#include "auto_select.hpp"

#include "trainer.hpp"

// defines: tagc::estimate_reduce_scatter, tagc::link_model, tagc::codec_model
#include "tagc/cost_model.hpp"

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

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
double median(std::vector<double> v) {
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

}  // namespace

void Trainer::decide_auto() {
  const int U = plan_.num_units();
  const int N = world();
  const double ring = double(N - 1) / double(N);
  AutoPlan p;
  p.world = N;
  p.baseline_dtype = args_.baseline_dtype;

  // Every figure below is gathered from every rank and the maximum taken: identical
  // on all ranks, so is the decision.
  const auto max_over_ranks = [&](std::vector<double> local) {
    std::vector<double> all(local.size() * size_t(N));
    check(worker_.run([&] { return comm_.all_gather(std::span<const double>(local), std::span<double>(all)); }),
          "--compress auto: all-gather");
    for (int r = 0; r < N; ++r)
      for (size_t i = 0; i < local.size(); ++i) local[i] = std::max(local[i], all[size_t(r) * local.size() + i]);
    return local;
  };

  // (a) the link
  const bool bw_given = args_.link_mbps > 0, lat_given = args_.link_latency_us >= 0;
  double latency = 0, probe = 0;
  const size_t probe_elems = ((size_t(1) << 20) + size_t(N) - 1) / size_t(N) * size_t(N);  // 4 MB of fp32
  if (N > 1 && !(bw_given && lat_given)) {
    check(worker_.run([&]() -> tagc::status {
            std::vector<float> tiny_send(size_t(N), 1.0f), tiny_recv(1), send(probe_elems, 1e-3f),
                recv(probe_elems / size_t(N));
            std::vector<double> t_small, t_big;
            for (int i = 0; i < 16; ++i) {
              TAGC_TRY(comm_.barrier());
              const auto t0 = clock_type::now();
              TAGC_TRY(comm_.reduce_scatter(std::span<const float>(tiny_send), std::span<float>(tiny_recv)));
              if (i > 0) t_small.push_back(seconds_since(t0));
            }
            if (!bw_given)
              for (int i = 0; i < 4; ++i) {
                TAGC_TRY(comm_.barrier());
                const auto t0 = clock_type::now();
                TAGC_TRY(comm_.reduce_scatter(std::span<const float>(send), std::span<float>(recv)));
                if (i > 0) t_big.push_back(seconds_since(t0));
              }
            latency = median(t_small);
            probe = median(t_big);
            return {};
          }),
          "--compress auto: link measurement");
    const auto m = max_over_ranks({latency, probe});
    latency = m[0];
    probe = m[1];
  }
  p.latency_seconds = lat_given ? args_.link_latency_us * 1e-6 : latency;
  p.latency_from = lat_given ? "--link-latency-us" : N > 1 ? "measured" : "1 rank";
  if (bw_given) {
    p.bytes_per_second = args_.link_mbps * 1e6 / 8.0;
    p.bandwidth_from = "--link-mbps";
  } else if (N > 1) {
    p.probe_bytes = 4.0 * double(probe_elems);
    p.probe_seconds = probe;
    // the probe's own latency (measured, whatever --link-latency-us says) is not bandwidth
    p.bytes_per_second = ring * p.probe_bytes / std::max(probe - latency, 1e-9);
    p.bandwidth_from = "measured";
  } else {
    p.bytes_per_second = std::numeric_limits<double>::max();  // nothing crosses a link
    p.bandwidth_from = "1 rank";
  }
  const tagc::link_model link{p.bytes_per_second, p.latency_seconds};

  // (b) the codec, per candidate segment, on throw-away reducers
  CompressOptions co = compress_options(args_);
  co.reducer.schedule = {};  // estimate the steady state, not a sparsity warm-up's first steps
  std::vector<double> local;  // per segment: compress s, decode s, bytes sent
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s) {
      const Segment& g = plan_.unit(u).seg[s];
      if (g.length == 0) continue;
      AutoSegment a;
      a.name = plan_.unit(u).name + (s == 0 ? "/prefix" : "/suffix");
      a.unit = u;
      a.seg = s;
      a.length = g.length;
      p.segments.push_back(a);
      std::unique_ptr<UnitReducer> r;
      agree("--compress auto: reducer setup", [&] { r = make_tagc_reducer(co, g.length, N, rank()); });
      r->set_profiling(true);
      std::vector<float> grad(g.length), shard(g.shard);
      synthetic_gradient(grad, uint64_t(u * 2 + s) * 1000003u + uint64_t(rank()) + args_.seed);
      tagc::reduce_stats st;
      for (int call = 0; call < 2; ++call)  // the first call warms up (allocation, first touch)
        check(worker_.run([&] {
                return r->reduce_scatter(comm_, std::span<const float>(grad), std::span<float>(shard), &st);
              }),
              "--compress auto: codec measurement");
      local.push_back(st.seconds.compress());
      local.push_back(st.seconds.decode);
      local.push_back(st.total_bytes());
    }
  const std::vector<double> fig = max_over_ranks(local);

  for (size_t i = 0; i < p.segments.size(); ++i) {
    AutoSegment& a = p.segments[i];
    const double n = double(a.length);
    a.compress_seconds = fig[3 * i];
    a.decode_seconds = fig[3 * i + 1];
    a.bits_per_param = ring > 0 ? fig[3 * i + 2] * 8.0 / (ring * n) : 32.0;
    const double shard = std::ceil(n / double(N));
    const tagc::codec_model codec{4.0 * n / std::max(a.compress_seconds, 1e-12),
                                  4.0 * shard / std::max(a.decode_seconds, 1e-12)};
    tagc::cost_estimate e = tagc::estimate_reduce_scatter(a.length, N, a.bits_per_param, link, codec);
    // the bf16 baseline sends half the bytes of the fp32 one the model assumes
    if (args_.baseline_dtype == "bf16")
      e.dense_seconds = link.latency_seconds + 0.5 * (e.dense_seconds - link.latency_seconds);
    a.dense_ms = e.dense_seconds * 1e3;
    a.compressed_ms = e.compressed_seconds * 1e3;
    a.compress = e.pays();
    paths_[size_t(2 * a.unit + a.seg)] = a.compress ? path_tagc : path_plain;
  }
  // Defensive: a rank that decided otherwise would issue other collectives (and hang or
  // fail in MPI). Equal on all ranks iff sum^2 == N * sum of squares.
  double h = 0;
  for (size_t i = 0; i < paths_.size(); ++i) h += double(paths_[i]) * double(i + 1);
  const double s1 = all_reduce_sum(h), s2 = all_reduce_sum(h * h);
  if (s1 * s1 != double(N) * s2) throw std::logic_error("--compress auto: the ranks reached different decisions");
  auto_ = std::move(p);
}

}  // namespace train
