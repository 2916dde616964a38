// Scratch driver behind "Issue 10, where the floor is" in docs/results/history.md: the host
// shard decoder alone (16M elements, 2 shards, shard 0, 1-bit index), its phases
// timed (the minimum over calls): list, edges, count, sweep, queue, write. A random
// support at the given load of the sketch, Student-t values summed into the cells.
// The phase clocks are not in the library: apply peel_phases.patch to a copy of
// the headers (it also holds the huge-page experiment: HUGE=1 in the environment
// puts the entry and cell records on 2 MB pages, madvise(MADV_HUGEPAGE)).
//
//   cp -r include /tmp/inc_dec && patch /tmp/inc_dec/tagc/detail/host/peel.hpp docs/results/codec-floor/peel_phases.patch
//   g++ -O3 -DNDEBUG -std=gnu++20 -fopenmp -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP \
//       -isystem /usr/local/cuda/include/cccl -I/tmp/inc_dec decoder_phases.cpp -o decoder_phases
//   OMP_NUM_THREADS=1 ./decoder_phases 4 0.76        # ratio 4 at load 0.76: bench_codec's ratio-4 row
#include <tagc/tagc.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  const int ratio = argc > 1 ? std::atoi(argv[1]) : 4;
  const double load = argc > 2 ? std::atof(argv[2]) : 0.76;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 10;
  const std::size_t n = std::size_t(16) << 20;
  const auto l = tagc::make_layout(n, 2, 1024, ratio, 1);
  std::mt19937_64 rng(3);
  std::vector<std::uint8_t> index(l.index_bytes * 2, 0);
  std::vector<float> cells(l.cells), work(l.cells), out(l.shard_size);
  std::vector<std::uint8_t> state(l.shard_size);
  const auto support = std::size_t(load * double(l.cells));
  std::student_t_distribution<float> t(3.0f);
  for (std::size_t placed = 0; placed < support;) {
    const std::size_t e = rng() % l.shard_size;
    if (index[e / 8] >> (e % 8) & 1) continue;
    index[e / 8] |= std::uint8_t(1u << (e % 8));
    ++placed;
    const float v = 1e-3f * t(rng);
    for (int h = 0; h < 3; ++h) cells[tagc::detail::sketch_cell(l, e, h)] += tagc::detail::sketch_sign_of(l, e, h) * v;
  }
  tagc::detail::host::shard_decoder d;
  (void)d.initialize(l, 0);
  double best[6];
  std::fill(best, best + 6, 1e30);
  tagc::detail::decode_counts c{};
  for (int it = 0; it < iters; ++it) {
    work = cells;
    std::fill(tagc_timing::t, tagc_timing::t + 8, 0.0);
    (void)d.run(work.data(), index.data(), out.data(), state.data(), true, true, c);
    for (int k = 0; k < 6; ++k) best[k] = std::min(best[k], tagc_timing::t[k]);
  }
  if (FILE* f = std::fopen("/proc/self/smaps_rollup", "r")) {  // whether huge pages were granted
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::strstr(line, "AnonHuge")) std::fputs(line, stdout);
    std::fclose(f);
  }
  std::printf("ratio %d load %.3f support %zu peeled %zu: list %.2f edges %.2f count %.2f sweep %.2f queue %.2f "
              "write %.2f ms\n",
              ratio, double(c.support) / double(l.cells), std::size_t(c.support), std::size_t(c.peeled), best[0],
              best[1], best[2], best[3], best[4], best[5]);
}
