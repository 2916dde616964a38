// Nothing is allocated in the step path: after a warm-up call, repeated
// reduce_scatter / all_reduce calls allocate nothing — no operator new, and
// (outside ASan, which owns malloc) no malloc / calloc / realloc either, which
// catches Thrust's temporary buffers and host std::vectors alike.
//
// What is measured is the reducer alone: the in-process communicator's
// collectives (comm/local.hpp) run with counting paused (paused_comm below), as
// a real communicator's internals are not the reducer's to answer for.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "support/harness.hpp"

namespace {
std::atomic<long> allocations{0};
thread_local bool counting = false;
inline void note_allocation() {
  if (counting) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#  define TAGC_TEST_HOOK_MALLOC 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define TAGC_TEST_HOOK_MALLOC 0
#  endif
#endif
#ifndef TAGC_TEST_HOOK_MALLOC
#  define TAGC_TEST_HOOK_MALLOC 1
#endif

#if TAGC_TEST_HOOK_MALLOC
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* malloc(std::size_t n) {
  note_allocation();
  return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t n, std::size_t s) {
  note_allocation();
  return __libc_calloc(n, s);
}
extern "C" void* realloc(void* p, std::size_t n) {
  note_allocation();
  return __libc_realloc(p, n);
}
#endif

void* operator new(std::size_t n) {
  note_allocation();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  note_allocation();
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace tagc;
using namespace tagc_test;

namespace {

struct pause_counting {
  bool was = counting;
  pause_counting() { counting = false; }
  ~pause_counting() { counting = was; }
};

// The in-process communicator with allocation counting paused inside its collectives.
template <class C>
struct paused_comm {
  C& c;
  int rank() const { return c.rank(); }
  int size() const { return c.size(); }
  status barrier() { pause_counting p; return c.barrier(); }
  template <class T> status all_reduce(std::span<const T> in, std::span<T> out) { pause_counting p; return c.all_reduce(in, out); }
  template <class T> status reduce_scatter(std::span<const T> in, std::span<T> out) { pause_counting p; return c.reduce_scatter(in, out); }
  template <class T> status all_gather(std::span<const T> in, std::span<T> out) { pause_counting p; return c.all_gather(in, out); }
  template <class T> status reduce(std::span<const T> in, std::span<T> out, int root) { pause_counting p; return c.reduce(in, out, root); }
  template <class T> status broadcast(std::span<T> out, int root) { pause_counting p; return c.broadcast(out, root); }
  template <class T> auto start_all_reduce(std::span<const T> in, std::span<T> out) { pause_counting p; return c.start_all_reduce(in, out); }
  template <class T> auto start_reduce_scatter(std::span<const T> in, std::span<T> out) { pause_counting p; return c.start_reduce_scatter(in, out); }
  template <class T> auto start_all_gather(std::span<const T> in, std::span<T> out) { pause_counting p; return c.start_all_gather(in, out); }
};

// Allocations by the reducer over `calls` calls after a warm-up call, summed over ranks.
template <class R>
long step_allocations(int world, std::size_t n, double theta, bool with_stats, topology topo = topology::sharded) {
  allocations = 0;
  std::atomic<int> failures{0};
  on_ranks(world, [&](local_communicator& lc) {
    paused_comm<local_communicator> comm{lc};
    static_assert(communicator<paused_comm<local_communicator>>);
    const reducer_arguments a{.length = n, .world_size = world, .rank = lc.rank(), .topo = topo, .sparsity = theta};
    R red;
    if (!red.initialize(a).ok()) {
      ++failures;
      return;
    }
    std::vector<std::vector<float>> g;
    for (int t = 0; t < 4; ++t) g.push_back(gradient(n, 99, lc.rank(), t, 0.8));
    std::vector<float> out(red.output_size());
    reduce_stats s;
    const auto call = [&](int t) {
      return topo == topology::sharded ? red.reduce_scatter(comm, g[std::size_t(t)], out, with_stats ? &s : nullptr)
                                       : red.all_reduce(comm, g[std::size_t(t)], out, with_stats ? &s : nullptr);
    };
    if (!call(0).ok()) ++failures;  // warm-up (OpenMP's thread pool, first-touch)
    counting = true;
    for (int t = 1; t < 4; ++t)
      if (!call(t).ok()) ++failures;
    counting = false;
  });
  REQUIRE(failures == 0);
  return allocations.load();
}

template <class Values, class Index = IndexPolicy<1>, class Sparsify = SparsifyPolicy,
          decode_mode Mode = decode_mode::peel_then_estimate>
using reducer_for = Reducer<Sparsify, Index, Values, DecodePolicy<Mode>>;

}  // namespace

TEST_CASE("step path: the counter sees an allocation when there is one") {
  allocations = 0;
  counting = true;
  auto* v = new std::vector<float>(100);
  counting = false;
  CHECK(allocations.load() >= 1);
  delete v;
}

TEST_CASE("step path: packed values allocate nothing (fp32, bf16, fp16; stats on and off)") {
  CHECK(step_allocations<reducer_for<PackedPolicy>>(2, 100003, 0.95, false) == 0);
  CHECK(step_allocations<reducer_for<PackedPolicy>>(3, 600001, 0.95, true) == 0);  // index bytes above the inline size
  CHECK(step_allocations<reducer_for<PackedBf16Policy, ExactIndexPolicy>>(2, 100003, 0.9, true) == 0);
  CHECK(step_allocations<reducer_for<PackedFp16Policy, ExactIndexPolicy, SparsifyBf16ResidualPolicy>>(2, 100003, 0.9,
                                                                                                     true) == 0);
}

TEST_CASE("step path: a dense sketch (no peeling) allocates nothing") {
  CHECK(step_allocations<reducer_for<SketchPolicy<10>>>(2, 3001, 0.9875, true) == 0);
  CHECK(step_allocations<reducer_for<SketchPolicy<10>>>(2, 3001, 0.9875, false, topology::replicated) == 0);
}

// The support list comes from index words into a workspace sized at initialize
// (detail/host/support_list.hpp): no thrust::copy_if temporaries per call.
TEST_CASE("step path: a peeled sketch allocates nothing (1-bit and exact reduce-scattered index, fp32 and fp16)") {
  CHECK(step_allocations<reducer_for<SketchPolicy<10>>>(2, 200003, 0.9875, false) == 0);
  CHECK(step_allocations<reducer_for<SketchPolicy<4>, IndexPolicy<index_auto, index_exchange::reduce_scatter>>>(
            3, 200003, 0.9, true) == 0);
  CHECK(step_allocations<reducer_for<SketchFp16Policy<4>, ExactIndexPolicy>>(2, 200003, 0.9, true) == 0);
}

// The portable path is the code a GPU runs: its sums (work left, entries
// resolved) came from thrust::transform_reduce, whose temporary storage is a
// malloc per call on the host and a cudaMalloc / cudaFree per call on CUDA. They
// are OpenMP reductions here and CUB reductions into the decoder's workspace there.
TEST_CASE("step path: the portable path (what a GPU runs) allocates nothing either") {
  using portable_sketch = Reducer<SparsifyPolicy, IndexPolicy<1>, SketchPolicy<10>, DecodePolicy<>, exec::host_portable>;
  using portable_fp16 = Reducer<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<4>, DecodePolicy<>, exec::host_portable>;
  using portable_packed = Reducer<SparsifyPolicy, IndexPolicy<1>, PackedPolicy, DecodePolicy<>, exec::host_portable>;
  CHECK(step_allocations<portable_sketch>(2, 200003, 0.9875, false) == 0);
  CHECK(step_allocations<portable_sketch>(3, 200003, 0.9875, true) == 0);
  CHECK(step_allocations<portable_fp16>(2, 200003, 0.9, true) == 0);  // near the peeling threshold: many rounds
  CHECK(step_allocations<portable_packed>(2, 200003, 0.95, true) == 0);
}

// SharedIndexPolicy: the leader's select, the list or bitmap and its scan, the
// values' all-reduce and the statistics' counts all run in workspaces sized at
// initialize (theta 0.999: a list; 0.9: a bitmap expanded on every rank).
TEST_CASE("step path: a shared index allocates nothing (list and bitmap, fp32 and bf16, both topologies)") {
  using shared_f32 = Reducer<SparsifyPolicy, SharedIndexPolicy, PackedPolicy>;
  using shared_bf16 = Reducer<SparsifyBf16ResidualPolicy, SharedIndexPolicy, PackedBf16Policy>;
  CHECK(step_allocations<shared_f32>(3, 200003, 0.999, true) == 0);
  CHECK(step_allocations<shared_f32>(2, 200003, 0.9, false) == 0);
  CHECK(step_allocations<shared_bf16>(3, 200003, 0.9, true, topology::replicated) == 0);
  CHECK(step_allocations<shared_f32>(3, 200003, 0.3, true) == 0);  // over half the buffer: exchanged in it
}

// PooledIndexPolicy: the shares' lists (theta 0.999) or bitmaps (0.9: shares over n / 32),
// the union, and a union over half the buffer exchanged in the buffer (0.3).
TEST_CASE("step path: a pooled index allocates nothing (lists, bitmaps, the buffer exchange)") {
  using pooled_f32 = Reducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy>;
  using pooled_bf16 = Reducer<SparsifyBf16ResidualPolicy, PooledIndexPolicy, PackedBf16Policy>;
  CHECK(step_allocations<pooled_f32>(3, 200003, 0.999, true) == 0);
  CHECK(step_allocations<pooled_bf16>(3, 200003, 0.9, true) == 0);
  CHECK(step_allocations<pooled_f32>(2, 200003, 0.3, false) == 0);
  // GatheredIndexPolicy: k from every rank, lists (0.999) and bitmaps (0.9)
  using gathered_bf16 = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy>;
  CHECK(step_allocations<gathered_bf16>(3, 200003, 0.999, true) == 0);
  CHECK(step_allocations<gathered_bf16>(3, 200003, 0.9, true) == 0);
}
