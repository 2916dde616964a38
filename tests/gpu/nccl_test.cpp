// GPU runtime tests of tagc::nccl_communicator: every collective, every
// reducible type, against a host reference; stream ordering; argument errors;
// deadlines (a missing peer aborts instead of hanging); the id bootstraps.
//
// Two ways to run (tests/gpu/CMakeLists.txt registers both):
//   tagc_gpu_nccl          one process, one thread per GPU (all visible GPUs, or
//                          TAGC_GPU_RANKS of them)
//   tagc_gpu_nccl_mpi      built with TAGC_GPU_TEST_MPI: one process per GPU under mpirun
// Without a usable GPU they print why and exit 77, which ctest reports as SKIPPED.
//
// Stream ordering is tested, not assumed: uploads and downloads are async
// copies on the rank's compute stream from pinned memory, and host callbacks
// that sleep delay the compute stream before an upload and the communication
// stream before a collective. A missing event in either direction then shows
// up as stale data.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

// defines: tagc::nccl_communicator, tagc::nccl_unique_id, tagc::exchange_nccl_unique_id
#include <tagc/comm/nccl.hpp>
// defines: tagc::counting_communicator
#include <tagc/comm/counting.hpp>
#if defined(TAGC_GPU_TEST_MPI)
// defines: tagc::nccl_communicator_from_mpi
#  include <tagc/comm/nccl_mpi_bootstrap.hpp>
#endif

namespace {

using namespace std::chrono_literals;

int g_world = 0;  // ranks per test world

struct rank_ctx {
  tagc::nccl_communicator& comm;
  cudaStream_t compute;
  int rank;
  int size;
};

// A rank's verdict: empty when it passed, else what went wrong.
using rank_fn = std::function<std::string(rank_ctx&)>;

std::string cuda_msg(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}
#define GPU_TRY(expr)                                                   \
  do {                                                                  \
    if (const cudaError_t e_ = (expr); e_ != cudaSuccess) return cuda_msg(e_, #expr); \
  } while (0)
#define STATUS_TRY(expr)                                                          \
  do {                                                                            \
    if (const tagc::status s_ = (expr); !s_.ok()) return std::string(#expr) + " -> " + s_.what(); \
  } while (0)

// Runs fn on one communicator per rank and returns each rank's verdict.
// check_finalize: report a failing finalize() (off where a test breaks the world on purpose).
std::vector<std::string> run_world(const rank_fn& fn, tagc::nccl_options opt = {}, bool check_finalize = true) {
  opt.timeout = std::min<std::chrono::milliseconds>(opt.timeout, 60s);
  opt.init_timeout = std::min<std::chrono::milliseconds>(opt.init_timeout, 60s);
  opt.finalize_timeout = std::min<std::chrono::milliseconds>(opt.finalize_timeout, 10s);
  const auto one_rank = [&](tagc::nccl_expected<tagc::nccl_communicator> c) -> std::string {
    if (!c) return "create: " + c.error().what();
    cudaStream_t s = nullptr;
    GPU_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    c->set_compute_stream(s);
    rank_ctx ctx{*c, s, c->rank(), c->size()};
    std::string verdict = fn(ctx);
    if (const tagc::status f = c->finalize(); !f.ok() && verdict.empty() && check_finalize)
      verdict = "finalize: " + f.what();
    (void)cudaStreamDestroy(s);
    return verdict;
  };
#if defined(TAGC_GPU_TEST_MPI)
  std::string mine = one_rank(tagc::nccl_communicator_from_mpi(MPI_COMM_WORLD, opt));
  int failed = mine.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  std::vector<std::string> out{mine};
  if (any && mine.empty()) out.push_back("");  // another rank reports its own failure
  return out;
#else
  auto id = tagc::nccl_unique_id();
  if (!id) return {"nccl_unique_id: " + id.error().what()};
  std::vector<std::string> out(static_cast<std::size_t>(g_world));
  std::vector<std::thread> threads;
  for (int r = 0; r < g_world; ++r)
    threads.emplace_back([&, r] {
      tagc::nccl_options o = opt;
      o.device = r;
      out[std::size_t(r)] = one_rank(tagc::nccl_communicator::create(*id, g_world, r, o));
    });
  for (auto& t : threads) t.join();
  return out;
#endif
}

void check_world(const std::vector<std::string>& verdicts) {
  for (std::size_t r = 0; r < verdicts.size(); ++r) CHECK_MESSAGE(verdicts[r].empty(), "rank ", r, ": ", verdicts[r]);
}

// ---- buffers ----

template <class T>
struct device_buffer {
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count) : n(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(count, 1) * sizeof(T)) != cudaSuccess) p = nullptr;
  }
  ~device_buffer() { (void)cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  std::span<T> span() { return {p, n}; }
  std::span<const T> cspan() const { return {p, n}; }
  std::span<T> sub(std::size_t at, std::size_t len) { return {p + at, len}; }
};

template <class T>
struct pinned {
  T* p = nullptr;
  std::size_t n = 0;
  explicit pinned(std::size_t count) : n(count) {
    if (cudaMallocHost(reinterpret_cast<void**>(&p), std::max<std::size_t>(count, 1) * sizeof(T)) != cudaSuccess)
      p = nullptr;
  }
  ~pinned() { (void)cudaFreeHost(p); }
  pinned(const pinned&) = delete;
  pinned& operator=(const pinned&) = delete;
  T& operator[](std::size_t i) { return p[i]; }
};

void CUDART_CB sleep_callback(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<std::uintptr_t>(ms)));
}
// Holds `stream` back for `ms` milliseconds from the host side.
cudaError_t delay(cudaStream_t stream, unsigned ms) {
  return cudaLaunchHostFunc(stream, sleep_callback, reinterpret_cast<void*>(std::uintptr_t(ms)));
}

// ---- values and host references ----

// Exact in every type: floats are multiples of 1/4 with small magnitude (sums
// exact in any order); unsigned values sit near the top so sums wrap; signed
// values mix signs.
template <class T>
T value(int rank, std::size_t i) {
  if constexpr (std::is_floating_point_v<T>) return T(double((rank + 1) * 3 + int(i % 101)) * 0.25);
  else if constexpr (std::is_unsigned_v<T>) return T(std::numeric_limits<T>::max() - T(i % 13) - T(rank * 7));
  else return T(T(i % 1000) * ((rank % 2) ? T(-1) : T(1)) + T(rank));
}

// Sum over ranks, as NCCL computes it: unsigned wraps modulo 2^bits.
template <class T>
T sum_ref(int n, std::size_t i) {
  if constexpr (std::is_floating_point_v<T>) {
    double acc = 0;
    for (int r = 0; r < n; ++r) acc += double(value<T>(r, i));
    return T(acc);
  } else {
    T acc = 0;
    for (int r = 0; r < n; ++r) acc = T(acc + value<T>(r, i));
    return acc;
  }
}

template <class T>
std::string expect_eq(const std::string& what, std::size_t i, T got, T want) {
  if (got == want) return {};
  return what + ": element " + std::to_string(i) + " is " + std::to_string(+got) + ", expected " +
         std::to_string(+want);
}

// Upload this rank's values for [first, first+n) into d (at offset 0) on the compute stream.
template <class T>
std::string upload(rank_ctx& c, device_buffer<T>& d, pinned<T>& h, std::size_t first_index, std::size_t count,
                   std::size_t at = 0) {
  for (std::size_t i = 0; i < count; ++i) h[at + i] = value<T>(c.rank, first_index + i);
  GPU_TRY(delay(c.compute, 20));  // the upload lands late: a collective not ordered after it reads garbage
  GPU_TRY(cudaMemcpyAsync(d.p + at, h.p + at, count * sizeof(T), cudaMemcpyHostToDevice, c.compute));
  return {};
}
template <class T>
std::string download(rank_ctx& c, device_buffer<T>& d, pinned<T>& h) {
  GPU_TRY(cudaMemcpyAsync(h.p, d.p, d.n * sizeof(T), cudaMemcpyDeviceToHost, c.compute));
  GPU_TRY(cudaStreamSynchronize(c.compute));
  return {};
}
#define STR_TRY(expr)                       \
  do {                                      \
    if (std::string e_ = (expr); !e_.empty()) return e_; \
  } while (0)

constexpr std::size_t kCount = 1031;  // not a multiple of anything NCCL likes

#define TAGC_GPU_TYPES float, double, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t

// ---- collectives vs host references ----

TEST_CASE_TEMPLATE("all_reduce: out of place, in place, start + join, start + wait", T, TAGC_GPU_TYPES) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    device_buffer<T> in(kCount), out(kCount);
    pinned<T> h(kCount);
    for (int mode = 0; mode < 4; ++mode) {
      device_buffer<T>& dst = mode == 1 ? in : out;
      STR_TRY(upload(c, in, h, 0, kCount));
      GPU_TRY(delay(c.comm.stream(), 20));  // the collective lands late: a download not ordered after it is stale
      if (mode == 0 || mode == 1) {
        STATUS_TRY(c.comm.all_reduce(in.cspan(), dst.span()));
      } else {
        auto req = c.comm.start_all_reduce(in.cspan(), dst.span());
        if (mode == 2) STATUS_TRY(req.join(c.compute));
        else STATUS_TRY(req.wait());
      }
      STR_TRY(download(c, dst, h));
      for (std::size_t i = 0; i < kCount; ++i)
        STR_TRY(expect_eq("all_reduce mode " + std::to_string(mode), i, h[i], sum_ref<T>(c.size, i)));
    }
    return {};
  }));
}

TEST_CASE_TEMPLATE("reduce_scatter: out of place, in place, start", T, TAGC_GPU_TYPES) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    const std::size_t block = 257, n = block * std::size_t(c.size);
    device_buffer<T> in(n), out(block);
    pinned<T> h(n);
    for (int mode = 0; mode < 3; ++mode) {
      STR_TRY(upload(c, in, h, 0, n));
      GPU_TRY(delay(c.comm.stream(), 20));
      std::span<T> dst = mode == 1 ? in.sub(std::size_t(c.rank) * block, block) : out.span();
      if (mode < 2) {
        STATUS_TRY(c.comm.reduce_scatter(in.cspan(), dst));
      } else {
        auto req = c.comm.start_reduce_scatter(in.cspan(), dst);
        STATUS_TRY(req.join(c.compute));
      }
      GPU_TRY(cudaMemcpyAsync(h.p, dst.data(), block * sizeof(T), cudaMemcpyDeviceToHost, c.compute));
      GPU_TRY(cudaStreamSynchronize(c.compute));
      for (std::size_t i = 0; i < block; ++i)
        STR_TRY(expect_eq("reduce_scatter", i, h[i], sum_ref<T>(c.size, std::size_t(c.rank) * block + i)));
    }
    return {};
  }));
}

TEST_CASE_TEMPLATE("all_gather: out of place, in place, start", T, TAGC_GPU_TYPES) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    const std::size_t block = 131, n = block * std::size_t(c.size);
    device_buffer<T> in(block), out(n);
    pinned<T> h(n);
    for (int mode = 0; mode < 3; ++mode) {
      // Rank r contributes value(r, j) for j in [r*block, (r+1)*block), so the
      // gathered buffer is value(owner(i), i).
      std::span<const T> src;
      if (mode == 1) {
        STR_TRY(upload(c, out, h, std::size_t(c.rank) * block, block, std::size_t(c.rank) * block));
        src = std::span<const T>(out.p + std::size_t(c.rank) * block, block);
      } else {
        STR_TRY(upload(c, in, h, std::size_t(c.rank) * block, block));
        src = in.cspan();
      }
      GPU_TRY(delay(c.comm.stream(), 20));
      if (mode < 2) {
        STATUS_TRY(c.comm.all_gather(src, out.span()));
      } else {
        auto req = c.comm.start_all_gather(src, out.span());
        STATUS_TRY(req.wait());
      }
      STR_TRY(download(c, out, h));
      for (std::size_t i = 0; i < n; ++i) STR_TRY(expect_eq("all_gather", i, h[i], value<T>(int(i / block), i)));
    }
    return {};
  }));
}

TEST_CASE_TEMPLATE("reduce: only the root's recv is written", T, TAGC_GPU_TYPES) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    const int root = c.size - 1;
    device_buffer<T> in(kCount), out(kCount);
    pinned<T> h(kCount);
    GPU_TRY(cudaMemsetAsync(out.p, 0x5a, kCount * sizeof(T), c.compute));
    STR_TRY(upload(c, in, h, 0, kCount));
    STATUS_TRY(c.comm.reduce(in.cspan(), out.span(), root));
    STR_TRY(download(c, out, h));
    T sentinel;
    std::memset(&sentinel, 0x5a, sizeof sentinel);
    for (std::size_t i = 0; i < kCount; ++i)
      STR_TRY(expect_eq(c.rank == root ? "reduce (root)" : "reduce (non-root recv must be untouched)", i, h[i],
                        c.rank == root ? sum_ref<T>(c.size, i) : sentinel));
    // In place at the root.
    STR_TRY(upload(c, in, h, 0, kCount));
    STATUS_TRY(c.comm.reduce(in.cspan(), in.span(), root));
    STR_TRY(download(c, in, h));
    if (c.rank == root)
      for (std::size_t i = 0; i < kCount; ++i) STR_TRY(expect_eq("reduce in place", i, h[i], sum_ref<T>(c.size, i)));
    return {};
  }));
}

TEST_CASE_TEMPLATE("broadcast from the first and the last rank", T, TAGC_GPU_TYPES) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    device_buffer<T> buf(kCount);
    pinned<T> h(kCount);
    for (int root : {0, c.size - 1}) {
      STR_TRY(upload(c, buf, h, 0, kCount));
      GPU_TRY(delay(c.comm.stream(), 20));
      STATUS_TRY(c.comm.broadcast(buf.span(), root));
      STR_TRY(download(c, buf, h));
      for (std::size_t i = 0; i < kCount; ++i) STR_TRY(expect_eq("broadcast", i, h[i], value<T>(root, i)));
    }
    return {};
  }));
}

TEST_CASE_TEMPLATE("reduce_each: uneven shards, out of place and in place", T, float, std::uint8_t, std::int64_t) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    // Shard r has 100 + 37 r elements; the last one is empty when there are 3+ ranks.
    std::vector<std::size_t> offsets{0};
    for (int r = 0; r < c.size; ++r)
      offsets.push_back(offsets.back() + ((c.size >= 3 && r == c.size - 1) ? 0 : 100 + 37 * std::size_t(r)));
    const std::size_t n = offsets.back(), lo = offsets[std::size_t(c.rank)], mine = offsets[std::size_t(c.rank) + 1] - lo;
    device_buffer<T> in(n), out(mine);
    pinned<T> h(n);
    for (int mode = 0; mode < 2; ++mode) {
      STR_TRY(upload(c, in, h, 0, n));
      std::span<T> dst = mode == 0 ? out.span() : in.sub(lo, mine);
      STATUS_TRY(c.comm.reduce_each(in.cspan(), std::span<const std::size_t>(offsets), dst));
      GPU_TRY(cudaMemcpyAsync(h.p, dst.data(), mine * sizeof(T), cudaMemcpyDeviceToHost, c.compute));
      GPU_TRY(cudaStreamSynchronize(c.compute));
      for (std::size_t i = 0; i < mine; ++i) STR_TRY(expect_eq("reduce_each", i, h[i], sum_ref<T>(c.size, lo + i)));
    }
    return {};
  }));
}

TEST_CASE_TEMPLATE("all_to_all_v: uneven blocks, zero blocks, a rank that sends nothing", T, float, std::uint8_t,
                   std::int64_t) {
  check_world(run_world([](rank_ctx& c) -> std::string {
    // Rank p's block for rank q: count(p, q) elements value<T>(p, 1000 q + i); some are
    // empty, and with 3+ ranks the last one sends nothing.
    const auto count = [&](int from, int to) {
      return c.size >= 3 && from == c.size - 1 ? std::size_t(0) : std::size_t((from * 5 + to * 3 + 1) % 4) * 37;
    };
    std::vector<std::size_t> send_counts, recv_counts;
    for (int q = 0; q < c.size; ++q) {
      send_counts.push_back(count(c.rank, q));
      recv_counts.push_back(count(q, c.rank));
    }
    std::size_t ns = 0, nr = 0;
    for (int q = 0; q < c.size; ++q) ns += send_counts[std::size_t(q)], nr += recv_counts[std::size_t(q)];
    device_buffer<T> in(ns), out(nr);
    pinned<T> h(std::max(ns, nr));
    std::size_t at = 0;
    for (int q = 0; q < c.size; ++q)
      for (std::size_t i = 0; i < send_counts[std::size_t(q)]; ++i)
        h[at++] = value<T>(c.rank, std::size_t(q) * 1000 + i);
    GPU_TRY(delay(c.compute, 20));  // the upload lands late: the sends must be ordered after it
    GPU_TRY(cudaMemcpyAsync(in.p, h.p, ns * sizeof(T), cudaMemcpyHostToDevice, c.compute));
    GPU_TRY(delay(c.comm.stream(), 20));  // the blocks land late: the download must be ordered after them
    STATUS_TRY(c.comm.all_to_all_v(in.cspan(), std::span<const std::size_t>(send_counts), out.span(),
                                   std::span<const std::size_t>(recv_counts)));
    STR_TRY(download(c, out, h));
    at = 0;
    for (int q = 0; q < c.size; ++q)
      for (std::size_t i = 0; i < recv_counts[std::size_t(q)]; ++i, ++at)
        STR_TRY(expect_eq("all_to_all_v from rank " + std::to_string(q), at, h[at],
                          value<T>(q, std::size_t(c.rank) * 1000 + i)));

    // This rank's own arguments are refused in the rules' words (no cross-rank check on NCCL).
    const auto short_counts = std::span<const std::size_t>(send_counts).first(std::size_t(c.size - 1));
    const tagc::status bad =
        c.comm.all_to_all_v(in.cspan(), short_counts, out.span(), std::span<const std::size_t>(recv_counts));
    const std::string want = "all_to_all_v: rank " + std::to_string(c.rank) + ": send_counts has " +
                             std::to_string(c.size - 1) + " and recv_counts " + std::to_string(c.size) +
                             " entries, expected world size " + std::to_string(c.size);
    if (bad.code() != tagc::errc::size_mismatch || bad.message() != want) return "bad counts: " + bad.what();
    return {};
  }));
}

TEST_CASE("groups: blocking collectives in a group, group_end and start_group_end") {
  check_world(run_world([](rank_ctx& c) -> std::string {
    device_buffer<float> a(kCount), b(kCount);
    device_buffer<std::uint32_t> u(kCount);
    pinned<float> hf(kCount);
    pinned<std::uint32_t> hu(kCount);
    for (int mode = 0; mode < 2; ++mode) {
      STR_TRY(upload(c, a, hf, 0, kCount));
      STR_TRY(upload(c, u, hu, 0, kCount));
      STATUS_TRY(c.comm.group_start());
      STATUS_TRY(c.comm.all_reduce(a.cspan(), b.span()));
      STATUS_TRY(c.comm.all_reduce(u.cspan(), u.span()));
      if (mode == 0) {
        STATUS_TRY(c.comm.group_end());
      } else {
        auto req = c.comm.start_group_end();
        STATUS_TRY(req.join(c.compute));
        STATUS_TRY(req.wait());
      }
      STR_TRY(download(c, b, hf));
      STR_TRY(download(c, u, hu));
      for (std::size_t i = 0; i < kCount; ++i) {
        STR_TRY(expect_eq("group float", i, hf[i], sum_ref<float>(c.size, i)));
        STR_TRY(expect_eq("group uint32", i, hu[i], sum_ref<std::uint32_t>(c.size, i)));
      }
    }
    // start_* inside a group is refused, and the group still closes.
    STATUS_TRY(c.comm.group_start());
    const tagc::status refused = c.comm.start_all_reduce(a.cspan(), b.span()).wait();
    STATUS_TRY(c.comm.group_end());
    if (refused.code() != tagc::errc::invalid_argument) return "start_ inside a group: got " + refused.what();
    return {};
  }));
}

TEST_CASE("barrier, synchronize, join, counting decorator") {
  check_world(run_world([](rank_ctx& c) -> std::string {
    for (int i = 0; i < 3; ++i) STATUS_TRY(c.comm.barrier());
    device_buffer<double> x(kCount), y(kCount);
    pinned<double> h(kCount);
    STR_TRY(upload(c, x, h, 0, kCount));
    auto req = c.comm.start_all_reduce(x.cspan(), y.span());
    STATUS_TRY(c.comm.synchronize());
    if (!req.ready()) return "synchronize returned before an enqueued collective completed";
    STATUS_TRY(req.wait());
    STATUS_TRY(c.comm.join(c.compute));
    tagc::counting_communicator<tagc::nccl_communicator> counted(c.comm);
    STATUS_TRY(counted.all_reduce(x.cspan(), y.span()));
    STATUS_TRY(counted.start_all_reduce(x.cspan(), y.span()).wait());
    const auto& k = counted.counters()[tagc::collective::all_reduce];
    if (k.calls != 2 || k.payload_bytes != 2.0 * double(kCount * sizeof(double)))
      return "counting decorator saw " + std::to_string(k.calls) + " calls, " + std::to_string(k.payload_bytes) + " B";
    return {};
  }));
}

// ---- errors ----

TEST_CASE("argument errors are refused locally and leave the communicator usable") {
  check_world(run_world([](rank_ctx& c) -> std::string {
    device_buffer<float> a(64 * std::size_t(c.size)), b(64 * std::size_t(c.size));
    std::vector<float> host(64);
    const auto expect = [](const tagc::status& s, tagc::errc code, const char* what) -> std::string {
      if (s.code() == code) return {};
      return std::string(what) + ": expected " + std::string(tagc::to_string(code)) + ", got " + s.what();
    };
    STR_TRY(expect(c.comm.all_reduce(a.cspan().first(10), b.span().first(11)), tagc::errc::size_mismatch,
                   "all_reduce 10 vs 11"));
    STR_TRY(expect(c.comm.reduce_scatter(a.cspan().first(10), b.span().first(10)),
                   c.size == 1 ? tagc::errc::ok : tagc::errc::size_mismatch, "reduce_scatter size"));
    STR_TRY(expect(c.comm.all_gather(a.cspan().first(10), b.span().first(10 * std::size_t(c.size) + 1)),
                   tagc::errc::size_mismatch, "all_gather size"));
    STR_TRY(expect(c.comm.reduce(a.cspan().first(8), b.span().first(8), c.size), tagc::errc::invalid_argument,
                   "reduce root out of range"));
    STR_TRY(expect(c.comm.broadcast(b.span().first(8), -1), tagc::errc::invalid_argument, "broadcast root -1"));
    STR_TRY(expect(c.comm.all_reduce(a.cspan().first(16), a.span().subspan(1, 16)), tagc::errc::invalid_argument,
                   "all_reduce partial overlap"));
    STR_TRY(expect(c.comm.all_reduce(std::span<const float>(host), b.span().first(64)), tagc::errc::invalid_argument,
                   "all_reduce from host memory"));
    STR_TRY(expect(c.comm.start_all_gather(a.cspan().first(3), b.span().first(4)).wait(), tagc::errc::size_mismatch,
                   "start_all_gather size"));
    STR_TRY(expect(c.comm.group_end(), tagc::errc::invalid_argument, "group_end without group_start"));
    if (!c.comm.usable()) return "communicator unusable after local argument errors";
    STATUS_TRY(c.comm.barrier());  // and it still works
    tagc::nccl_communicator empty;
    STR_TRY(expect(empty.barrier(), tagc::errc::invalid_argument, "barrier on an empty communicator"));
    return {};
  }));
}

TEST_CASE("a missing peer makes wait() time out and abort, never hang") {
  if (g_world < 2) {
    MESSAGE("needs at least 2 ranks; skipped");
    return;
  }
  tagc::nccl_options opt;
  opt.timeout = 3s;
  const auto t0 = std::chrono::steady_clock::now();
  check_world(run_world(
      [](rank_ctx& c) -> std::string {
        STATUS_TRY(c.comm.barrier());
        device_buffer<float> x(kCount);
        if (c.rank == 0) return {};  // rank 0 never joins the all-reduce
        const tagc::status s = c.comm.start_all_reduce(x.cspan(), x.span()).wait();
        if (s.code() != tagc::errc::timeout && s.code() != tagc::errc::communication)
          return "expected a timeout, got " + s.what();
        if (s.message().find("all_reduce") == std::string::npos) return "timeout does not name the collective: " + s.what();
        if (c.comm.usable()) return "communicator still usable after a timeout";
        const tagc::status later = c.comm.barrier();
        if (later.ok() || later.message().find("earlier error") == std::string::npos)
          return "a call after the abort should report the earlier error, got " + later.what();
        return {};
      },
      opt, /*check_finalize=*/false));
  CHECK(std::chrono::steady_clock::now() - t0 < 60s);
}

// ---- bootstrap ----

#if !defined(TAGC_GPU_TEST_MPI)
TEST_CASE("file rendezvous: rank 0 publishes the id, the others read it") {
  const auto path = std::filesystem::temp_directory_path() / ("tagc-nccl-id-test-" + std::to_string(::getpid()));
  const std::string tag = "test-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<std::string> out(static_cast<std::size_t>(g_world));
  std::vector<std::thread> threads;
  for (int r = 0; r < g_world; ++r)
    threads.emplace_back([&, r] {
      if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5 * r));
      auto id = tagc::exchange_nccl_unique_id(path, r, tag, 30s);
      if (!id) {
        out[std::size_t(r)] = id.error().what();
        return;
      }
      auto c = tagc::nccl_communicator::create(*id, g_world, r, {.device = r, .init_timeout = 60s});
      if (!c) {
        out[std::size_t(r)] = c.error().what();
        return;
      }
      if (tagc::status s = c->barrier(); !s.ok()) out[std::size_t(r)] = s.what();
      else if (tagc::status f = c->finalize(); !f.ok()) out[std::size_t(r)] = f.what();
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove(path);
  check_world(out);

  // A stale file with another tag is not taken: the reader times out and says why.
  auto stale = tagc::exchange_nccl_unique_id(path, 0, "old-job");
  REQUIRE(stale.has_value());
  auto reader = tagc::exchange_nccl_unique_id(path, 1, "new-job", 200ms);
  REQUIRE_FALSE(reader.has_value());
  CHECK(reader.error().code() == tagc::errc::timeout);
  CHECK(reader.error().message().find("stale") != std::string::npos);
  std::filesystem::remove(path);
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if defined(TAGC_GPU_TEST_MPI)
  MPI_Init(&argc, &argv);
  int world = 0, local_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  MPI_Comm_size(host, &local_size);
  MPI_Comm_free(&host);
#endif
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  std::string skip;
  if (e != cudaSuccess) skip = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  else if (devices == 0) skip = "no CUDA device";
#if defined(TAGC_GPU_TEST_MPI)
  else if (local_size > devices)
    skip = std::to_string(local_size) + " ranks on this host but " + std::to_string(devices) + " GPU(s)";
  g_world = world;
  int skip_any = skip.empty() ? 0 : 1, skip_all = 0;
  MPI_Allreduce(&skip_any, &skip_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (skip_all) {
    std::printf("SKIP tagc_gpu_nccl_mpi: %s\n", skip.empty() ? "another rank cannot run" : skip.c_str());
    MPI_Finalize();
    return 77;
  }
#else
  if (!skip.empty()) {
    std::printf("SKIP tagc_gpu_nccl: %s\n", skip.c_str());
    return 77;
  }
  g_world = devices;
  if (const char* env = std::getenv("TAGC_GPU_RANKS"); env != nullptr && std::atoi(env) > 0)
    g_world = std::min(devices, std::atoi(env));
  std::printf("tagc_gpu_nccl: %d rank(s), one thread per GPU\n", g_world);
#endif
  doctest::Context context(argc, argv);
  const int rc = context.run();
#if defined(TAGC_GPU_TEST_MPI)
  MPI_Finalize();
#endif
  return rc;
}
