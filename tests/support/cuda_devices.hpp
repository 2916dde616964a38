#pragma once
// defines: tagc_test::cuda_devices_or_skip, tagc_test::kSkipped — the start of every GPU
// test's main: without a usable CUDA device it says why and the test exits kSkipped (77,
// each test's SKIP_RETURN_CODE), so ctest reports SKIPPED, never passed.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace tagc_test {

inline constexpr int kSkipped = 77;

// The number of CUDA devices; 0 after printing "SKIP <test>: <why>".
inline int cuda_devices_or_skip(const char* test) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return devices;
  const std::string why = e != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) : "no CUDA device";
  std::printf("SKIP %s: %s\n", test, why.c_str());
  return 0;
}

}  // namespace tagc_test
