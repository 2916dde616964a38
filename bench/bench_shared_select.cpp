// tagc_bench_shared_select — the shared selection's leader select (stage/shared_selection.hpp)
// on the host's own path (exec::host: a sampled bracket, one marking pass) against the
// portable one (exec::host_portable: the radix select's launches, what a GPU runs), on
// one buffer: the leader's threshold, its bitmap and the bitmap's list, what every other
// rank waits for before values move (issue 33: GPT-2 d2's 6.7M compressed entries).
//
//   build/bench/tagc_bench_shared_select [--length 6733824] [--theta 0.95] [--reps 9]
//       [--path both|host|portable]
//
// With --path both the two paths alternate (the first of each pair alternating too), so a
// shared machine's slow spells fall on both; printed per path: min, median and max ms of
// the leader select and of one whole shared-index call (world 1: acc, select, values,
// residual), then the ratio of the medians with the spread of the pairs' ratios. The two
// paths' thresholds and positions are compared once (exit 1 if they differ).
//
// Instruction counts (repeatable, unlike times on a shared machine): one select per run,
// collected only inside timed_select, one OpenMP thread (the parallel regions then run on
// the calling thread, inside the collected function):
//   OMP_NUM_THREADS=1 valgrind --tool=callgrind --collect-atstart=no \
//       --toggle-collect='*timed_select*' build/bench/tagc_bench_shared_select --path host --reps 1
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tagc/tagc.hpp>

#include "support/gradient.hpp"

namespace {

double flag(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}
std::string text_flag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

using clock_type = std::chrono::steady_clock;

// One path's stage and reducer, on a one-rank world.
template <class Exec>
struct path {
  using reducer = tagc::Reducer<tagc::SparsifyPolicy, tagc::SharedIndexPolicy, tagc::PackedBf16Policy,
                                tagc::DecodePolicy<>, Exec>;
  tagc::stage::SharedSelection<Exec> selection;
  reducer red;
  std::vector<double> select_ms, call_ms;
};

// Kept out of line: callgrind's --toggle-collect names it.
template <class Exec>
__attribute__((noinline)) tagc::status timed_select(tagc::stage::SharedSelection<Exec>& s,
                                                    tagc::local_communicator& comm, const float* acc, std::size_t k) {
  return s.select(comm, acc, k, 0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

[[noreturn]] void fail(const char* what, const tagc::status& s) {
  std::fprintf(stderr, "tagc_bench_shared_select: %s: %s\n", what, s.message().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const auto n = std::size_t(flag(argc, argv, "--length", 6733824));
  const double theta = flag(argc, argv, "--theta", 0.95);
  const int reps = std::max(1, int(flag(argc, argv, "--reps", 9)));
  const std::string which = text_flag(argc, argv, "--path", "both");
  const bool run_host = which != "portable", run_portable = which != "host";
  const std::size_t k = tagc::stage::ThresholdSelect<float, tagc::exec::host>::kept_at_most(theta, n);
  const std::vector<float> acc = tagc_bench::heavy_tailed_gradient(n, 1);

  tagc::local_world world(1, std::chrono::seconds(600));
  auto comm = world.communicator(0);
  tagc::reducer_arguments args{.length = n, .world_size = 1, .rank = 0, .sparsity = theta};
  tagc::stage::reducer_plan plan;
  plan.args = args;
  plan.lay.length = n;
  path<tagc::exec::host> host;
  path<tagc::exec::host_portable> portable;
  constexpr auto leader = tagc::stage::selection_rule::leader;
  if (auto s = host.selection.initialize(plan, k, leader, 0, {}); !s.ok()) fail("initialize (host)", s);
  if (auto s = portable.selection.initialize(plan, k, leader, 0, {}); !s.ok()) fail("initialize (portable)", s);
  if (auto s = host.red.initialize(args); !s.ok()) fail("initialize (host reducer)", s);
  if (auto s = portable.red.initialize(args); !s.ok()) fail("initialize (portable reducer)", s);
  std::vector<float> out(n);

  const auto run = [&](auto& p) {
    auto t0 = clock_type::now();
    if (auto s = timed_select(p.selection, comm, acc.data(), k); !s.ok()) fail("select", s);
    p.select_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    if (reps == 1) return;  // one select alone: what callgrind counts
    t0 = clock_type::now();
    if (auto s = p.red.reduce_scatter(comm, std::span<const float>(acc), std::span<float>(out)); !s.ok())
      fail("call", s);
    p.call_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  };
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      if (run_host) run(host);
      if (run_portable) run(portable);
    } else {
      if (run_portable) run(portable);
      if (run_host) run(host);
    }
  }
  if (run_host && run_portable) {
    const bool same = *host.selection.threshold_bits() == *portable.selection.threshold_bits() &&
                      std::memcmp(host.selection.positions(), portable.selection.positions(), k * 4) == 0;
    if (!same) {
      std::fprintf(stderr, "tagc_bench_shared_select: the paths' thresholds or positions differ\n");
      return 1;
    }
  }

  std::printf("# leader select, %zu entries, theta %.4f (k %zu, sent as a %s), %d reps\n", n, theta, k,
              host.selection.sends_list(k) ? "list" : "bitmap", reps);
  std::printf("path,stage,min_ms,median_ms,max_ms\n");
  const auto row = [](const char* name, const char* stage, const std::vector<double>& v) {
    if (v.empty()) return;
    std::printf("%s,%s,%.2f,%.2f,%.2f\n", name, stage, *std::min_element(v.begin(), v.end()), median(v),
                *std::max_element(v.begin(), v.end()));
  };
  row("host", "select", host.select_ms);
  row("portable", "select", portable.select_ms);
  row("host", "call", host.call_ms);
  row("portable", "call", portable.call_ms);
  if (run_host && run_portable) {
    const auto ratios = [](const std::vector<double>& slow, const std::vector<double>& fast) {
      std::vector<double> r;
      for (std::size_t i = 0; i < std::min(slow.size(), fast.size()); ++i) r.push_back(slow[i] / fast[i]);
      return r;
    };
    for (const auto& [stage, rs] : {std::pair{"select", ratios(portable.select_ms, host.select_ms)},
                                    std::pair{"call", ratios(portable.call_ms, host.call_ms)}}) {
      if (rs.empty()) continue;
      std::printf("# %s: portable / host, pair by pair: median %.2fx (%.2f-%.2fx)\n", stage, median(rs),
                  *std::min_element(rs.begin(), rs.end()), *std::max_element(rs.begin(), rs.end()));
    }
  }
  return 0;
}
