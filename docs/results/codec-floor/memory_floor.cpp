// Scratch program behind "Issue 10, where the floor is" in docs/results/history.md: what this
// machine's memory allows, beside a memcpy (16M floats; the minimum over 15 rounds).
//   memcpy            64 MB copied (the targets' yardstick)
//   acc = g + r       into a third buffer: what pass 0 writes (the residual is kept)
//   r += g            in place: what pass 0 would cost if it could overwrite the residual
//   acc = g + r (NT)  non-temporal stores, 64-byte aligned
//   read g, r         the two reads alone
// then a pointer chase over 1-128 MB (one 64-byte line per hop, random order): the
// latency the decoder's records see at each working-set size.
//
//   g++ -O2 -march=native memory_floor.cpp -o memory_floor && ./memory_floor
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using clk = std::chrono::steady_clock;
static double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

int main() {
  const std::size_t n = std::size_t(16) << 20;
  auto* g = static_cast<float*>(std::aligned_alloc(64, n * 4));
  auto* r = static_cast<float*>(std::aligned_alloc(64, n * 4));
  auto* a = static_cast<float*>(std::aligned_alloc(64, n * 4));
  auto* d = static_cast<float*>(std::aligned_alloc(64, n * 4));
  for (std::size_t i = 0; i < n; ++i) g[i] = float(i) * 1e-7f, r[i] = 1.0f / float(i + 1), a[i] = d[i] = 0.0f;
  const char* names[] = {"memcpy", "acc = g + r", "r += g", "acc = g + r (NT)", "read g, r"};
  double best[5] = {1e9, 1e9, 1e9, 1e9, 1e9};
  volatile float sink = 0.0f;
  for (int rep = 0; rep < 15; ++rep)
    for (int k = 0; k < 5; ++k) {
      const auto t = clk::now();
      if (k == 0) std::memcpy(d, g, n * 4);
      if (k == 1) for (std::size_t i = 0; i < n; i += 16) _mm512_store_ps(a + i, _mm512_add_ps(_mm512_load_ps(g + i), _mm512_load_ps(r + i)));
      if (k == 2) for (std::size_t i = 0; i < n; i += 16) _mm512_store_ps(d + i, _mm512_add_ps(_mm512_load_ps(g + i), _mm512_load_ps(d + i)));
      if (k == 3) {
        for (std::size_t i = 0; i < n; i += 16) _mm512_stream_ps(a + i, _mm512_add_ps(_mm512_load_ps(g + i), _mm512_load_ps(r + i)));
        _mm_sfence();
      }
      if (k == 4) {
        __m512 s = _mm512_setzero_ps();
        for (std::size_t i = 0; i < n; i += 16) s = _mm512_add_ps(s, _mm512_add_ps(_mm512_load_ps(g + i), _mm512_load_ps(r + i)));
        sink = _mm512_reduce_add_ps(s);
      }
      best[k] = std::min(best[k], ms_since(t));
    }
  for (int k = 0; k < 5; ++k) std::printf("%-18s %.2f ms  x memcpy %.3f\n", names[k], best[k], best[0] / best[k]);
  for (const std::size_t mb : {1, 2, 4, 8, 16, 24, 32, 48, 64, 128}) {
    const std::size_t lines = mb * (std::size_t(1) << 20) / 64;
    std::vector<std::size_t> order(lines), next(lines * 8);
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
    for (std::size_t i = 0; i < lines; ++i) next[order[i] * 8] = order[(i + 1) % lines] * 8;
    std::size_t p = 0;
    for (std::size_t i = 0; i < lines; ++i) p = next[p];
    const std::size_t hops = 2000000;
    const auto t = clk::now();
    for (std::size_t i = 0; i < hops; ++i) p = next[p];
    std::printf("chase %4zu MB: %.1f ns a hop%s\n", mb, ms_since(t) * 1e6 / double(hops), p == 1 ? " " : "");
  }
}
