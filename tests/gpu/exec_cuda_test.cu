// GPU runtime tests of tagc::exec::cuda: a single-source functor launched
// through the space's policy on its stream, synchronize(), the copy helpers and
// TAGC_CUDA_TRY's messages. Without a GPU: prints why and exits 77 (SKIPPED).

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "../support/cuda_devices.hpp"

#include <thrust/fill.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>

#include <cstdio>
#include <string>
#include <vector>

// defines: tagc::exec::cuda, TAGC_CUDA_TRY
#include <tagc/exec/cuda.hpp>

namespace {

struct saxpy {
  float a;
  TAGC_HOST_DEVICE float operator()(float x, float y) const { return a * x + y; }
};

// Written against the space's shape only, as the Reducer is.
template <class Space>
tagc::status run_saxpy(const Space& space, std::size_t n, std::vector<float>& out) {
  typename Space::template vector<float> x(n), y(n);
  thrust::sequence(space.policy(), x.begin(), x.end());
  thrust::fill(space.policy(), y.begin(), y.end(), 1.0f);
  thrust::transform(space.policy(), x.begin(), x.end(), y.begin(), y.begin(), saxpy{2.0f});
  TAGC_TRY(space.synchronize());
  out.resize(n);
  return space.copy_to_host(thrust::raw_pointer_cast(y.data()), out.data(), n);
}

struct stream_guard {
  cudaStream_t s = nullptr;
  stream_guard() { REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess); }
  ~stream_guard() { (void)cudaStreamDestroy(s); }
};

TEST_CASE("exec::cuda launches a single-source functor on its stream") {
  stream_guard g;
  const tagc::exec::cuda space{g.s};
  static_assert(tagc::exec::cuda::is_device);
  std::vector<float> h;
  const std::size_t n = (1u << 20) + 3;
  const tagc::status s = run_saxpy(space, n, h);
  REQUIRE_MESSAGE(s.ok(), s.what());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += h[i] != 2.0f * float(i) + 1.0f;
  CHECK(wrong == 0);
}

TEST_CASE("exec::cuda copies round trip and reduce on the stream") {
  stream_guard g;
  const tagc::exec::cuda space{g.s};
  std::vector<double> in(4099), back(4099, -1.0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = double(i % 17) * 0.5;
  tagc::exec::cuda::vector<double> d(in.size());
  REQUIRE(space.copy_from_host(in.data(), thrust::raw_pointer_cast(d.data()), in.size()).ok());
  const double sum = thrust::reduce(space.policy(), d.begin(), d.end(), 0.0);
  double want = 0;
  for (double v : in) want += v;
  CHECK(sum == want);
  REQUIRE(space.copy_to_host(thrust::raw_pointer_cast(d.data()), back.data(), back.size()).ok());
  CHECK(back == in);
  CHECK(space.copy_to_host<double>(nullptr, nullptr, 0).ok());
}

TEST_CASE("TAGC_CUDA_TRY returns a status naming the call and the CUDA error") {
  const auto f = []() -> tagc::status {
    TAGC_CUDA_TRY(cudaSetDevice(-1));
    return {};
  };
  const tagc::status s = f();
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("cudaSetDevice(-1)") != std::string::npos);
  CHECK(s.message().find("cudaErrorInvalidDevice") != std::string::npos);
  (void)cudaGetLastError();
}

}  // namespace

int main(int argc, char** argv) {
  if (tagc_test::cuda_devices_or_skip("tagc_gpu_exec") == 0) return tagc_test::kSkipped;
  doctest::Context context(argc, argv);
  return context.run();
}
