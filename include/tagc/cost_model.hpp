#pragma once
// defines: tagc::link_model, tagc::codec_model, tagc::cost_estimate,
//          tagc::estimate_reduce_scatter — does compressing this unit pay?
//
// The paper found compressing every layer *slower* than compressing none: small
// tensors cost more to compress than to send, and each compressed exchange is
// several latency-bound collectives instead of one. This model decides per unit
// from measured figures (link bandwidth and latency, codec throughput, and the
// bits per parameter the Reducer reported), so a trainer can pick, per unit,
// the plain reduce-scatter or the Reducer.
//
//   dense      = a + (N-1)/N * 4n / B
//   compressed = c*a + (N-1)/N * n*bits/8 / B + 4n / T_compress + 4(n/N) / T_decode
//
// with a the per-collective latency, B the link bandwidth (bytes/s per rank),
// and c the collectives one Reducer call issues (agreement check, index,
// values, unresolved count: 4).

#include <cstddef>

#include "core/config.hpp"

TAGC_BEGIN_NAMESPACE

struct link_model {
  double bytes_per_second = 1.25e9;  // per rank, what a plain reduce-scatter achieves (busbw)
  double latency_seconds = 50e-6;    // per collective
};

struct codec_model {
  double compress_bytes_per_second = 1e9;  // fp32 gradient bytes through sparsify + index + values
  double decode_bytes_per_second = 1e9;    // fp32 shard bytes through decode
};

struct cost_estimate {
  double dense_seconds = 0;
  double compressed_seconds = 0;
  bool pays() const { return compressed_seconds < dense_seconds; }
  double speedup() const { return compressed_seconds > 0 ? dense_seconds / compressed_seconds : 0; }
};

inline constexpr int reducer_collectives = 4;

inline cost_estimate estimate_reduce_scatter(std::size_t length, int world, double compressed_bits_per_param,
                                             const link_model& link, const codec_model& codec,
                                             int collectives = reducer_collectives) {
  cost_estimate c;
  const double n = double(length), N = double(world > 0 ? world : 1), ring = (N - 1.0) / N;
  c.dense_seconds = link.latency_seconds + ring * 4.0 * n / link.bytes_per_second;
  c.compressed_seconds = double(collectives) * link.latency_seconds +
                         ring * n * compressed_bits_per_param / 8.0 / link.bytes_per_second +
                         4.0 * n / codec.compress_bytes_per_second + 4.0 * (n / N) / codec.decode_bytes_per_second;
  return c;
}

TAGC_END_NAMESPACE
