// bench/e2e/overhead.cpp -- what the CPU codec costs, as a fraction of the communication
// time it saves, at each link bandwidth: tagc::estimate_reduce_scatter with the codec
// throughput measured by tagc_bench_codec. Built and fed by bench/e2e/overhead.sh.
//
//   overhead NAME ELEMENTS WORLD BITS COMPRESS_GBps DECODE_GBps [LATENCY_US]
//
// For each per-rank link bandwidth (busbw, bytes a rank sends per second):
//   dense_ms      a + (N-1)/N 4n / B                       plain fp32 reduce-scatter
//   tagc_comm_ms  4a + (N-1)/N n bits/8 / B                the compressed collectives only
//   codec_ms      4n / T_compress + 4(n/N) / T_decode       encode + decode
//   saved_ms      dense_ms - tagc_comm_ms                   communication time compression saves
//   overhead      codec_ms / saved_ms  (< 1: compression pays; the break-even is overhead = 1)
#include <cstdio>
#include <cstdlib>

#include <tagc/cost_model.hpp>

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s NAME ELEMENTS WORLD BITS COMPRESS_GBps DECODE_GBps [LATENCY_US]\n", argv[0]);
    return 2;
  }
  const char* name = argv[1];
  const std::size_t n = std::strtoull(argv[2], nullptr, 10);
  const int world = std::atoi(argv[3]);
  const double bits = std::atof(argv[4]);
  tagc::codec_model codec{std::atof(argv[5]) * 1e9, std::atof(argv[6]) * 1e9};
  const double lat = argc > 7 ? std::atof(argv[7]) * 1e-6 : 50e-6;
  const double mbits[] = {50, 100, 200, 500, 1000, 2500, 10000, 25000, 100000};
  for (double mb : mbits) {
    tagc::link_model link{mb * 1e6 / 8.0, lat};
    const auto full = tagc::estimate_reduce_scatter(n, world, bits, link, codec);
    // the same with an infinitely fast codec: the communication part alone
    const auto comm = tagc::estimate_reduce_scatter(n, world, bits, link, tagc::codec_model{1e300, 1e300});
    const double codec_s = full.compressed_seconds - comm.compressed_seconds;
    const double saved = full.dense_seconds - comm.compressed_seconds;
    std::printf("%s,%zu,%d,%.3f,%.0f,%.2f,%.2f,%.2f,%.2f,%.3f,%.3f,%s\n", name, n, world, bits, mb, full.dense_seconds * 1e3,
                comm.compressed_seconds * 1e3, codec_s * 1e3, saved * 1e3, saved > 0 ? codec_s / saved : 1e9,
                full.speedup(), full.pays() ? "yes" : "no");
  }
  return 0;
}
