// trainer_auto_impl.hpp: Trainer<Exec, Comm>::decide_auto — "--compress auto"'s
// measurement (what it measures and how it decides: auto_select.hpp), on the trainer's
// own space and communicator: buffers in Exec memory, every timed collective or codec
// call followed by a synchronization of the side space (a no-op on the host) so the
// clock sees its completion. Included by trainer_impl.hpp.
// defines: train::Trainer<Exec, Comm>::decide_auto
#pragma once

#include "trainer.hpp"

// defines: tagc::estimate_reduce_scatter, tagc::link_model, tagc::codec_model
#include "tagc/cost_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace train {

template <class Exec, class Comm>
void Trainer<Exec, Comm>::decide_auto() {
  using clock_type = std::chrono::steady_clock;
  const auto seconds_since = [](clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
  };
  const int U = plan_.num_units();
  const int N = world();
  const double ring = double(N - 1) / double(N);
  const Exec& side = queue_.side();
  AutoPlan p;
  p.world = N;
  p.baseline_dtype = args_.baseline_dtype;

  // Every figure below is gathered from every rank and the maximum taken: identical
  // on all ranks, so is the decision.
  const auto max_over_ranks = [&](std::vector<double> local) {
    const size_t k = local.size();
    std::vector<double> all(k * size_t(N));
    vector<double> x(k * (1 + size_t(N)));  // this rank's figures, then every rank's
    double* d = raw(x);
    check(queue_.run([&]() -> tagc::status {
            TAGC_TRY(side.copy_from_host(local.data(), d, k));
            TAGC_TRY(comm_.all_gather(std::span<const double>(d, k), std::span<double>(d + k, k * size_t(N))));
            return side.copy_to_host(d + k, all.data(), all.size());
          }),
          "--compress auto: all-gather");
    for (int r = 0; r < N; ++r)
      for (size_t i = 0; i < k; ++i) local[i] = std::max(local[i], all[size_t(r) * k + i]);
    return local;
  };

  // (a) the link
  const bool bw_given = args_.link_mbps > 0, lat_given = args_.link_latency_us >= 0;
  double latency = 0, probe = 0;
  const size_t probe_elems = ((size_t(1) << 20) + size_t(N) - 1) / size_t(N) * size_t(N);  // 4 MB of fp32
  if (N > 1 && !(bw_given && lat_given)) {
    check(queue_.run([&]() -> tagc::status {
            vector<float> tiny_send(size_t(N), 1.0f), tiny_recv(1), send(probe_elems, 1e-3f),
                recv(probe_elems / size_t(N));
            std::vector<double> t_small, t_big;
            for (int i = 0; i < 16; ++i) {
              TAGC_TRY(comm_.barrier());
              const auto t0 = clock_type::now();
              TAGC_TRY(comm_.reduce_scatter(std::span<const float>(raw(tiny_send), tiny_send.size()),
                                            std::span<float>(raw(tiny_recv), 1)));
              TAGC_TRY(side.synchronize());
              if (i > 0) t_small.push_back(seconds_since(t0));
            }
            if (!bw_given)
              for (int i = 0; i < 4; ++i) {
                TAGC_TRY(comm_.barrier());
                const auto t0 = clock_type::now();
                TAGC_TRY(comm_.reduce_scatter(std::span<const float>(raw(send), send.size()),
                                              std::span<float>(raw(recv), recv.size())));
                TAGC_TRY(side.synchronize());
                if (i > 0) t_big.push_back(seconds_since(t0));
              }
            latency = median_of(t_small);
            probe = median_of(t_big);
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
      std::unique_ptr<UnitReducer<Exec, Counted>> r;
      agree("--compress auto: reducer setup",
            [&] { r = make_segment_reducer<Exec, Counted>(co, co.reducer, g.length, N, rank(), side); });
      r->set_profiling(true);  // the stage seconds are the measurement (on a GPU: synchronized stages)
      std::vector<float> grad_host(g.length);
      synthetic_gradient(grad_host, uint64_t(u * 2 + s) * 1000003u + uint64_t(rank()) + args_.seed);
      vector<float> grad(g.length), shard(g.shard);
      check(side.copy_from_host(grad_host.data(), raw(grad), g.length), "--compress auto: copy gradient");
      // The first call warms up (allocation, first touch). Of the timed calls each stage
      // keeps its fastest: a call the scheduler preempted measures the machine's load, not
      // the codec, and one such call used to flip a segment's decision on a busy machine.
      double compress_s = std::numeric_limits<double>::max(), decode_s = compress_s, bytes = 0;
      for (int call = 0; call < 1 + codec_timed_calls; ++call) {
        tagc::reduce_stats st;
        check(queue_.run([&] {
                return r->reduce_scatter(comm_, nullptr, std::span<const float>(raw(grad), g.length),
                                         std::span<float>(raw(shard), g.shard), &st);
              }),
              "--compress auto: codec measurement");
        if (call == 0) continue;
        compress_s = std::min(compress_s, st.seconds.compress());
        decode_s = std::min(decode_s, st.seconds.decode);
        bytes = st.total_bytes();
      }
      local.push_back(compress_s);
      local.push_back(decode_s);
      local.push_back(bytes);
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
    units_[size_t(a.unit)].seg[size_t(a.seg)].path = a.compress ? path_tagc : path_plain;
  }
  // Defensive: a rank that decided otherwise would issue other collectives (and hang or
  // fail in MPI). Equal on all ranks iff sum^2 == N * sum of squares.
  double h = 0;
  const std::vector<uint8_t> paths = segment_paths();
  for (size_t i = 0; i < paths.size(); ++i) h += double(paths[i]) * double(i + 1);
  const double s1 = all_reduce_sum(h), s2 = all_reduce_sum(h * h);
  if (s1 * s1 != double(N) * s2) throw std::logic_error("--compress auto: the ranks reached different decisions");
  auto_ = std::move(p);
}

}  // namespace train
