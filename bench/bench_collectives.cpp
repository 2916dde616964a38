// tagc_bench_collectives — baseline reduce-scatter (fp32 and bf16) against every
// TAGC Reducer configuration, in one MPI run, on the same ranks and the same
// gradients, over a range of sizes.
//
//   mpirun -np N build/bench/tagc_bench_collectives
//       [--sizes 1M,4M,16M,64M,256M] [--iters 5] [--warmup 1]
//       [--max-seconds-per-config 60] [--configs fp32,bf16,r2i1,r2i4,...]
//       [--csv FILE] [--label TEXT]
//   (bench/run_collectives.sh runs it on the throttled loopback, 2 and 4 ranks.)
//
// Background. A size S is the bytes of the fp32 gradient each rank holds
// (S / 4 parameters). Every rank fills it with a deterministic heavy-tailed
// gradient (Pareto tail, alpha = 3, random sign). Per size, every configuration
// runs `warmup` untimed calls and then up to `iters` timed calls; the timed
// count is cut so that the timed calls of one configuration take about
// `max-seconds-per-config` (at least one call): 256 MB at 100 Mbit/s on 4
// ranks is ~60 s per baseline call. Each call starts after a barrier; its time
// is the slowest rank's; the table shows the median over the timed calls.
//
// Configurations:
//   fp32     MPI_Ireduce_scatter_block of the fp32 gradient (mpi_communicator).
//   bf16     convert fp32 -> bf16, bf16 reduce_scatter (user-defined MPI op),
//            convert the shard back; time includes both conversions
//            ("compress" / "decode" columns), "exchange" is the collective alone.
//   rRiB     Reducer<SparsifyPolicy, IndexPolicy<B>, SketchPolicy<R>, DecodePolicy<>>
//            reduce_scatter, compression and decode included; the split is the
//            Reducer's own profiling (set_profiling(true), reduce_stats::seconds).
//            The Reducer is stateful (error feedback): every call feeds the same
//            gradient, so the residual it carries is that of a steady state.
//
// Columns: time (ms, median), algbw = S / time, busbw = algbw (N-1)/N (the
// nccl-tests convention for reduce-scatter; S is the fp32 gradient for every
// row, so algbw is "fp32 gradient bytes reduced per second" and rows compare
// directly), bytes sent per rank (counting_communicator, ring model), bits per
// parameter in the paper's accounting (bytes sent / (N-1)/N / params: fp32 = 32,
// bf16 = 16), ratio = time / time(fp32), unresolved = entries peeling left
// (summed over shards, last call).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tagc/comm/counting.hpp>
#include <tagc/comm/mpi.hpp>
#include <tagc/core/bfloat16.hpp>
#include <tagc/tagc.hpp>

namespace {

using clk = std::chrono::steady_clock;
using comm_t = tagc::counting_communicator<tagc::mpi_communicator>;

struct options {
  std::vector<std::size_t> sizes{1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20};
  int iters = 5;
  int warmup = 1;
  double max_seconds = 60.0;
  std::vector<std::string> configs{"fp32", "bf16", "r2i1", "r2i4", "r4i1", "r4i4", "r10i1", "r10i4"};
  std::string csv;
  std::string label;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t end = std::min(s.find(',', at), s.size());
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

bool parse_size(const std::string& t, std::size_t& out) {
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !(v > 0)) return false;
  double mult = 1;
  const std::string suf(end);
  if (suf == "K" || suf == "k") mult = 1024.0;
  else if (suf == "M" || suf == "m") mult = 1024.0 * 1024.0;
  else if (suf == "G" || suf == "g") mult = 1024.0 * 1024.0 * 1024.0;
  else if (!suf.empty()) return false;
  out = std::size_t(v * mult);
  return out >= 4;
}

int parse_args(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        err = a + " needs a value";
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") return 1;
    const char* v = value();
    if (!v) return 2;
    if (a == "--sizes") {
      o.sizes.clear();
      for (const auto& t : split(v)) {
        std::size_t s = 0;
        if (!parse_size(t, s)) {
          err = "--sizes: '" + t + "' is not a size (e.g. 1M, 512K, 1G)";
          return 2;
        }
        o.sizes.push_back(s);
      }
    } else if (a == "--iters") {
      o.iters = std::atoi(v);
      if (o.iters < 1) return err = "--iters must be >= 1", 2;
    } else if (a == "--warmup") {
      o.warmup = std::atoi(v);
      if (o.warmup < 0) return err = "--warmup must be >= 0", 2;
    } else if (a == "--max-seconds-per-config") {
      o.max_seconds = std::atof(v);
      if (!(o.max_seconds > 0)) return err = "--max-seconds-per-config must be > 0", 2;
    } else if (a == "--configs") {
      o.configs = split(v);
    } else if (a == "--csv") {
      o.csv = v;
    } else if (a == "--label") {
      o.label = v;
    } else {
      err = "unknown argument '" + a + "'";
      return 2;
    }
  }
  return 0;
}

// Deterministic heavy-tailed gradient: |x| = 1e-3 ((1-u)^(-1/3) - 1) (Pareto,
// alpha = 3, like Student's t(3) in the tail), random sign. splitmix64 keeps
// 64M draws per rank at a few hundred ms.
void make_gradient(std::span<float> g, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e5ull;
  for (auto& x : g) {
    s += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const double u = double(z >> 11) * 0x1.0p-53;
    const double mag = 1e-3 * (std::pow(1.0 - u, -1.0 / 3.0) - 1.0);
    x = float((z & 1) ? -mag : mag);
  }
}

// One timed call: seconds (this rank), stage split, bytes sent, unresolved.
struct sample {
  double total = 0, compress = 0, exchange = 0, decode = 0;
  double bytes_sent = 0;
  double unresolved = 0;
};

// A configuration ready to run at one size.
struct runner {
  std::string name;
  std::string note;  // why it cannot run (then run is empty)
  std::function<tagc::status(sample&)> run;
};

double seconds_since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

// The slowest rank's value.
double max_over_ranks(double v) {
  double m = v;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}
double sum_over_ranks(double v) {
  double m = v;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return m;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct buffers {
  std::vector<float> grad;             // padded to a multiple of N for the baselines
  std::vector<float> shard;            // fp32 baseline output / bf16 output converted back
  std::vector<tagc::bfloat16> grad16;  // bf16 baseline input
  std::vector<tagc::bfloat16> shard16;
  std::vector<float> tagc_out;
};

runner make_fp32(comm_t& comm, buffers& b) {
  return {"fp32", "", [&comm, &b](sample& s) -> tagc::status {
            comm.reset();
            const auto t0 = clk::now();
            TAGC_TRY(comm.reduce_scatter(std::span<const float>(b.grad), std::span<float>(b.shard)));
            s.total = s.exchange = seconds_since(t0);
            s.bytes_sent = comm.counters().total_bytes_sent();
            return {};
          }};
}

runner make_bf16(comm_t& comm, buffers& b) {
  // Allocated and touched here, outside the timed calls (as a training loop would
  // keep them), so no call pays for first-touch page faults.
  b.grad16.assign(b.grad.size(), tagc::bfloat16(0.0f));
  b.shard16.assign(b.shard.size(), tagc::bfloat16(0.0f));
  return {"bf16", "", [&comm, &b](sample& s) -> tagc::status {
            comm.reset();
            const auto t0 = clk::now();
            for (std::size_t i = 0; i < b.grad.size(); ++i) b.grad16[i] = tagc::bfloat16(b.grad[i]);
            const auto t1 = clk::now();
            TAGC_TRY(comm.reduce_scatter(std::span<const tagc::bfloat16>(b.grad16),
                                         std::span<tagc::bfloat16>(b.shard16)));
            const auto t2 = clk::now();
            for (std::size_t i = 0; i < b.shard.size(); ++i) b.shard[i] = float(b.shard16[i]);
            const auto t3 = clk::now();
            using d = std::chrono::duration<double>;
            s.compress = d(t1 - t0).count();
            s.exchange = d(t2 - t1).count();
            s.decode = d(t3 - t2).count();
            s.total = d(t3 - t0).count();
            s.bytes_sent = comm.counters().total_bytes_sent();
            return {};
          }};
}

template <int Ratio, int Bits>
runner make_tagc(comm_t& comm, buffers& b, std::size_t n, std::string name) {
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<Bits>, tagc::SketchPolicy<Ratio>,
                          tagc::DecodePolicy<>>;
  auto red = std::make_shared<R>();
  const tagc::reducer_arguments args{.length = n, .world_size = comm.size(), .rank = comm.rank()};
  if (auto st = red->initialize(args); !st.ok()) return {std::move(name), st.what(), {}};
  red->set_profiling(true);
  return {std::move(name), "", [&comm, &b, n, red](sample& s) -> tagc::status {
            comm.reset();
            b.tagc_out.resize(red->output_size());
            tagc::reduce_stats st;
            const auto t0 = clk::now();
            TAGC_TRY(red->reduce_scatter(comm, std::span<const float>(b.grad.data(), n), std::span<float>(b.tagc_out),
                                         &st));
            s.total = seconds_since(t0);
            s.compress = st.seconds.compress();
            s.exchange = st.seconds.exchange();
            s.decode = st.seconds.decode;
            s.bytes_sent = comm.counters().total_bytes_sent();
            s.unresolved = double(st.unresolved);
            return {};
          }};
}

runner make_runner(const std::string& name, comm_t& comm, buffers& b, std::size_t n) {
  if (name == "fp32") return make_fp32(comm, b);
  if (name == "bf16") return make_bf16(comm, b);
#define TAGC_CFG_(R, B) \
  if (name == "r" #R "i" #B) return make_tagc<R, B>(comm, b, n, name);
  TAGC_CFG_(2, 1)
  TAGC_CFG_(2, 4)
  TAGC_CFG_(4, 1)
  TAGC_CFG_(4, 4)
  TAGC_CFG_(10, 1)
  TAGC_CFG_(10, 4)
#undef TAGC_CFG_
  return {name, "unknown configuration (known: fp32, bf16, r{2,4,10}i{1,4})", {}};
}

struct row {
  std::string config;
  int timed = 0;
  double t = 0, compress = 0, exchange = 0, decode = 0;  // medians, slowest rank
  double bytes_sent = 0, bits_per_param = 0, unresolved = 0;
  std::string note;
};

std::string human(std::size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) std::snprintf(buf, sizeof buf, "%zuM", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(buf, sizeof buf, "%zuK", bytes >> 10);
  else std::snprintf(buf, sizeof buf, "%zu", bytes);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  options o;
  std::string err;
  if (const int rc = parse_args(argc, argv, o, err); rc != 0) {
    if (rank == 0) {
      if (rc == 2) std::fprintf(stderr, "tagc_bench_collectives: %s\n", err.c_str());
      std::fprintf(rc == 2 ? stderr : stdout,
                   "usage: mpirun -np N tagc_bench_collectives [--sizes 1M,4M,16M,64M,256M] [--iters 5]\n"
                   "         [--warmup 1] [--max-seconds-per-config 60] [--csv FILE] [--label TEXT]\n"
                   "         [--configs fp32,bf16,r2i1,r2i4,r4i1,r4i4,r10i1,r10i4]\n");
    }
    MPI_Finalize();
    return rc == 1 ? 0 : 2;
  }

  {  // the communicator is freed before MPI_Finalize
  // Unchecked: every rank runs the same sequence; the Reducer agrees on its own plan.
  tagc::mpi_communicator mpi(MPI_COMM_WORLD, {.checked = false, .timeout = std::chrono::seconds(900)});
  if (!mpi.init_status().ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, mpi.init_status().what().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  comm_t comm(mpi);

  std::FILE* csv = nullptr;
  if (rank == 0 && !o.csv.empty()) {
    csv = std::fopen(o.csv.c_str(), "w");
    if (!csv) {
      std::fprintf(stderr, "tagc_bench_collectives: cannot write --csv %s\n", o.csv.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::fprintf(csv,
                 "label,ranks,size_bytes,params,config,timed_iters,time_ms,compress_ms,exchange_ms,decode_ms,"
                 "algbw_MBps,busbw_MBps,bytes_sent_per_rank,bits_per_param,ratio_vs_fp32,unresolved,note\n");
  }
  if (rank == 0) {
    std::printf("# tagc_bench_collectives: %d ranks%s%s, warmup %d, up to %d timed iters, ~%.0f s per config\n",
                world, o.label.empty() ? "" : ", ", o.label.c_str(), o.warmup, o.iters, o.max_seconds);
    std::printf("# time = slowest rank, median over timed iters; algbw = S/time with S the fp32 gradient bytes;\n"
                "# busbw = algbw (N-1)/N; bits/param = bytes sent / ((N-1)/N) / params (fp32 = 32)\n");
    std::fflush(stdout);
  }

  for (const std::size_t S : o.sizes) {
    const std::size_t n = S / sizeof(float);
    const std::size_t padded = (n + std::size_t(world) - 1) / std::size_t(world) * std::size_t(world);
    buffers b;
    b.grad.assign(padded, 0.0f);
    make_gradient(std::span<float>(b.grad.data(), n), 0x7a6c0000ull + std::uint64_t(rank) * 131ull + S);
    b.shard.assign(padded / std::size_t(world), 0.0f);

    std::vector<row> rows;
    for (const auto& name : o.configs) {
      runner r = make_runner(name, comm, b, n);
      // Every rank must agree whether this configuration runs.
      const double can = max_over_ranks(r.run ? 0.0 : 1.0);
      row out;
      out.config = name;
      if (can != 0.0) {
        out.note = r.note.empty() ? "not runnable on some rank" : r.note;
        rows.push_back(out);
        continue;
      }
      std::vector<double> t, c, e, d;
      sample s;
      bool failed = false;
      int timed = o.iters;
      for (int it = 0; it < o.warmup + timed && !failed; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        s = {};
        if (auto st = r.run(s); !st.ok()) {
          std::fprintf(stderr, "rank %d: %s at %s: %s\n", rank, name.c_str(), human(S).c_str(), st.what().c_str());
          failed = true;
        }
        const double tot = max_over_ranks(s.total);
        if (it < o.warmup) {
          // Budget the timed calls from the (last) warm-up call: at least one.
          if (it == o.warmup - 1) timed = std::clamp(int(o.max_seconds / std::max(tot, 1e-9)), 1, o.iters);
          continue;
        }
        if (o.warmup == 0 && it == 0) timed = std::clamp(int(o.max_seconds / std::max(tot, 1e-9)), 1, o.iters);
        t.push_back(tot);
        c.push_back(max_over_ranks(s.compress));
        e.push_back(max_over_ranks(s.exchange));
        d.push_back(max_over_ranks(s.decode));
      }
      if (max_over_ranks(failed ? 1.0 : 0.0) != 0.0) {
        out.note = "failed (see stderr)";
        rows.push_back(out);
        continue;
      }
      b.grad16 = {};  // the bf16 copies are only needed by the bf16 baseline
      b.shard16 = {};
      out.timed = int(t.size());
      out.t = median(t);
      out.compress = median(c);
      out.exchange = median(e);
      out.decode = median(d);
      out.bytes_sent = max_over_ranks(s.bytes_sent);
      const double f = double(world - 1) / double(world);
      out.bits_per_param = world > 1 ? out.bytes_sent * 8.0 / f / double(n) : 0.0;
      out.unresolved = sum_over_ranks(s.unresolved);
      rows.push_back(out);
    }

    if (rank == 0) {
      double base = 0;
      for (const auto& r : rows)
        if (r.config == "fp32" && r.timed) base = r.t;
      const double f = double(world - 1) / double(world);
      std::printf("\n## %s fp32 gradient (%zu params), %d ranks%s%s\n", human(S).c_str(), n, world,
                  o.label.empty() ? "" : ", ", o.label.c_str());
      std::printf("%-6s %5s %10s %9s %9s %9s %9s %9s %12s %6s %7s %10s\n", "config", "iters", "time_ms", "compr_ms",
                  "exch_ms", "decode_ms", "algbw", "busbw", "sent/rank", "bits/p", "ratio", "unresolved");
      std::printf("%-6s %5s %10s %9s %9s %9s %9s %9s %12s %6s %7s %10s\n", "", "", "", "", "", "", "MB/s", "MB/s",
                  "MB", "", "vs fp32", "");
      for (const auto& r : rows) {
        if (!r.timed) {
          std::printf("%-6s %s\n", r.config.c_str(), r.note.c_str());
          if (csv)
            std::fprintf(csv, "%s,%d,%zu,%zu,%s,0,,,,,,,,,,,\"%s\"\n", o.label.c_str(), world, S, n, r.config.c_str(),
                         r.note.c_str());
          continue;
        }
        const double algbw = double(S) / r.t / 1e6, busbw = algbw * f;
        const double ratio = base > 0 ? r.t / base : 0.0;
        std::printf("%-6s %5d %10.2f %9.2f %9.2f %9.2f %9.1f %9.1f %12.2f %6.2f %7.3f %10.0f\n", r.config.c_str(),
                    r.timed, r.t * 1e3, r.compress * 1e3, r.exchange * 1e3, r.decode * 1e3, algbw, busbw,
                    r.bytes_sent / 1e6, r.bits_per_param, ratio, r.unresolved);
        if (csv)
          std::fprintf(csv, "%s,%d,%zu,%zu,%s,%d,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.0f,%.4f,%.4f,%.0f,\n",
                       o.label.c_str(), world, S, n, r.config.c_str(), r.timed, r.t * 1e3, r.compress * 1e3,
                       r.exchange * 1e3, r.decode * 1e3, algbw, busbw, r.bytes_sent, r.bits_per_param, ratio,
                       r.unresolved);
      }
      std::fflush(stdout);
      if (csv) std::fflush(csv);
    }
  }
  if (csv) std::fclose(csv);
  }
  MPI_Finalize();
  return 0;
}
