// The Reducer on the GPU (exec::cuda + NCCL, one thread per GPU) against the
// same Reducer on the host (exec::host + the in-process communicator), same
// gradients, several steps (so residuals and carries are exercised too).
// Sums are float sums in different orders on the two sides, so outputs agree to
// a relative 1e-5, not bit for bit. Without a GPU: prints why and exits 77.
//
// Stream contract shown here: the Reducer launches on exec::cuda{s}, and the
// communicator's compute stream is the same s (set_compute_stream), so every
// collective is ordered after the kernels before it and before those after it.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "../support/cuda_devices.hpp"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

// defines: tagc::Reducer, the policies, tagc::local_world, tagc::exec::host
#include <tagc/tagc.hpp>
// defines: tagc::exec::cuda
#include <tagc/exec/cuda.hpp>
// defines: tagc::nccl_communicator
#include <tagc/comm/nccl.hpp>

namespace {

int g_world = 1;

std::vector<float> gradient(std::size_t n, int rank, int step) {
  std::mt19937_64 rng(0x7a6cull * 1000003ull + std::uint64_t(rank) * 7919ull + std::uint64_t(step) * 104729ull);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = 1e-3f * t(rng);
  return g;
}

using outputs = std::vector<std::vector<std::vector<float>>>;  // [rank][step][...]

template <template <class> class R>
outputs on_host(std::size_t n, int steps, tagc::topology topo, double bound, std::vector<std::string>& errors) {
  outputs out(static_cast<std::size_t>(g_world));
  tagc::local_world world(g_world, std::chrono::seconds(120));
  world.run([&](tagc::local_communicator& comm) {
    const int r = comm.rank();
    const auto steps_on_host = [&]() -> tagc::status {
      R<tagc::exec::host> red;
      TAGC_TRY(red.initialize({.length = n, .world_size = g_world, .rank = r, .topo = topo, .union_bound = bound}));
      for (int t = 0; t < steps; ++t) {
        const auto g = gradient(n, r, t);
        std::vector<float> o(red.output_size());
        TAGC_TRY(topo == tagc::topology::sharded
                     ? red.reduce_scatter(comm, std::span<const float>(g), std::span<float>(o))
                     : red.all_reduce(comm, std::span<const float>(g), std::span<float>(o)));
        out[static_cast<std::size_t>(r)].push_back(std::move(o));
      }
      return {};
    };
    if (const tagc::status s = steps_on_host(); !s.ok()) errors[static_cast<std::size_t>(r)] = "host: " + s.what();
  });
  return out;
}

template <template <class> class R>
outputs on_gpu(std::size_t n, int steps, tagc::topology topo, double bound, std::vector<std::string>& errors) {
  outputs out(static_cast<std::size_t>(g_world));
  auto id = tagc::nccl_unique_id();
  REQUIRE_MESSAGE(id.has_value(), (id ? "" : id.error().what()));
  std::vector<std::thread> threads;
  for (int r = 0; r < g_world; ++r)
    threads.emplace_back([&, r] {
      std::string& err = errors[static_cast<std::size_t>(r)];
      auto comm = tagc::nccl_communicator::create(*id, g_world, r, {.device = r});
      if (!comm) {
        err = "create: " + comm.error().what();
        return;
      }
      cudaStream_t s = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        err = "cudaStreamCreateWithFlags failed";
        return;
      }
      comm->set_compute_stream(s);
      const tagc::exec::cuda space{s};
      const auto steps_on_gpu = [&]() -> tagc::status {
        R<tagc::exec::cuda> red;
        TAGC_TRY(red.initialize({.length = n, .world_size = g_world, .rank = r, .topo = topo, .union_bound = bound}, space));
        tagc::exec::cuda::vector<float> dg(n), dout(red.output_size());
        const std::span<const float> in(thrust::raw_pointer_cast(dg.data()), n);
        const std::span<float> o(thrust::raw_pointer_cast(dout.data()), dout.size());
        for (int t = 0; t < steps; ++t) {
          const auto g = gradient(n, r, t);
          TAGC_TRY(space.copy_from_host(g.data(), thrust::raw_pointer_cast(dg.data()), n));
          TAGC_TRY(topo == tagc::topology::sharded ? red.reduce_scatter(*comm, in, o) : red.all_reduce(*comm, in, o));
          std::vector<float> h(dout.size());
          TAGC_TRY(space.copy_to_host(thrust::raw_pointer_cast(dout.data()), h.data(), h.size()));
          out[static_cast<std::size_t>(r)].push_back(std::move(h));
        }
        return comm->finalize();
      };
      const tagc::status st = steps_on_gpu();
      (void)cudaStreamDestroy(s);
      if (!st.ok()) err = "gpu: " + st.what();
    });
  for (auto& t : threads) t.join();
  return out;
}

template <template <class> class R>
void compare(tagc::topology topo, double bound = 0.0) {
  const std::size_t n = (std::size_t(1) << 16) + 123;
  const int steps = 3;
  std::vector<std::string> host_err(static_cast<std::size_t>(g_world)), gpu_err(static_cast<std::size_t>(g_world));
  const outputs want = on_host<R>(n, steps, topo, bound, host_err);
  const outputs got = on_gpu<R>(n, steps, topo, bound, gpu_err);
  for (int r = 0; r < g_world; ++r) {
    REQUIRE_MESSAGE(host_err[static_cast<std::size_t>(r)].empty(), host_err[static_cast<std::size_t>(r)]);
    REQUIRE_MESSAGE(gpu_err[static_cast<std::size_t>(r)].empty(), gpu_err[static_cast<std::size_t>(r)]);
    REQUIRE(got[static_cast<std::size_t>(r)].size() == want[static_cast<std::size_t>(r)].size());
    for (std::size_t t = 0; t < want[static_cast<std::size_t>(r)].size(); ++t) {
      const auto& a = got[static_cast<std::size_t>(r)][t];
      const auto& b = want[static_cast<std::size_t>(r)][t];
      REQUIRE(a.size() == b.size());
      std::size_t bad = 0, first = a.size();
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!(std::fabs(double(a[i]) - double(b[i])) <= 1e-5 * (1e-3 + std::fabs(double(b[i]))))) {
          if (bad++ == 0) first = i;
        }
      CHECK_MESSAGE(bad == 0, "rank ", r, " step ", t, ": ", bad, " of ", a.size(), " elements differ, first at ",
                    first, (first < a.size() ? " (gpu " + std::to_string(a[first]) + ", host " +
                                                   std::to_string(b[first]) + ")"
                                             : std::string()));
    }
  }
}

template <class Exec>
using wide_sharded = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>,
                                   tagc::DecodePolicy<>, Exec>;
template <class Exec>
using narrow_peel = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>,
                                  tagc::DecodePolicy<tagc::decode_mode::peel>, Exec>;

template <class Exec>
using routed_f32 = tagc::Reducer<tagc::SparsifyPolicy, tagc::RoutedIndexPolicy, tagc::PackedPolicy,
                                 tagc::DecodePolicy<>, Exec>;

TEST_CASE("Reducer<4-bit index> reduce_scatter: GPU + NCCL equals host + threads") {
  compare<wide_sharded>(tagc::topology::sharded);
}

TEST_CASE("Reducer<1-bit index, peel> all_reduce: GPU + NCCL equals host + threads") {
  compare<narrow_peel>(tagc::topology::replicated);
}

TEST_CASE("Reducer<routed index> reduce_scatter: GPU + NCCL (grouped all_to_all_v) equals host + threads") {
  compare<routed_f32>(tagc::topology::sharded);
}

TEST_CASE("Reducer<routed index> all_reduce: GPU + NCCL (the owners' broadcasts) equals host + threads") {
  compare<routed_f32>(tagc::topology::replicated);
}

TEST_CASE("Reducer<routed index> all_reduce, union bound 1: GPU + NCCL (each owner's largest sums) equals host + threads") {
  compare<routed_f32>(tagc::topology::replicated, 1.0);
}

}  // namespace

int main(int argc, char** argv) {
  const int devices = tagc_test::cuda_devices_or_skip("tagc_gpu_reducer");
  if (devices == 0) return tagc_test::kSkipped;
  g_world = devices;
  if (const char* env = std::getenv("TAGC_GPU_RANKS"); env != nullptr && std::atoi(env) > 0)
    g_world = std::min(devices, std::atoi(env));
  std::printf("tagc_gpu_reducer: %d rank(s), one thread per GPU\n", g_world);
  doctest::Context context(argc, argv);
  return context.run();
}
