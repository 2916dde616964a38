#pragma once
// defines: gpt2::fast_math::exp_fast / tanh_fast (float, host and device) and the
// GPT2_SIMD_* loop pragmas. Private to gpt2_model and gpt2_device_model.
//
// One exp for both models and every execution space: Model<float> (src/kernels.hpp) and
// the DeviceModel functors (src/device_kernels.hpp) call the same polynomial, so the two
// models differ only in summation order, and a loop over it vectorizes on the CPU (a
// libm expf/tanhf call does not without -ffast-math: the vocabulary softmax alone took
// ~80 ms of a d2 step through scalar expf, ~13 ms this way).
#include <cstring>

#if defined(__CUDACC__)
#  define GPT2_HOST_DEVICE __host__ __device__
#else
#  define GPT2_HOST_DEVICE
#endif

// `#pragma omp simd` (with a reduction) on the host compiler when OpenMP is on; nothing in
// device code. The reduction lets the compiler keep partial sums per lane, i.e. a
// different summation order from the sequential loop (the CPU model's choice for the
// softmaxes, kept here so both models add in the same order).
#define GPT2_PRAGMA(x) _Pragma(#x)
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#  define GPT2_SIMD GPT2_PRAGMA(omp simd)
#  define GPT2_SIMD_REDUCE(op, var) GPT2_PRAGMA(omp simd reduction(op : var))
#else
#  define GPT2_SIMD
#  define GPT2_SIMD_REDUCE(op, var)
#endif

namespace gpt2::fast_math {

// exp for x <= ~88 in float without a libm call: 2^n * e^r with |r| <= ln2/2 and a
// degree-6 Taylor polynomial (relative error ~2e-7, a few ulp). Inputs below -87 give
// ~1e-38 instead of 0.
GPT2_HOST_DEVICE inline float exp_fast(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // round to nearest by the 1.5*2^23 trick (no floorf call, so it vectorizes anywhere)
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split hi/lo
  float q = 1.0f / 720.0f;
  q = q * r + 1.0f / 120.0f;
  q = q * r + 1.0f / 24.0f;
  q = q * r + 1.0f / 6.0f;
  q = q * r + 0.5f;
  q = q * r + 1.0f;
  q = q * r + 1.0f;
  const int e = (static_cast<int>(n) + 127) << 23;
#if defined(__CUDA_ARCH__)
  const float scale = __int_as_float(e);
#else
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
#endif
  return q * scale;
}

// tanh = 1 - 2 / (e^{2y} + 1); absolute error ~1e-7 in float (what GELU needs).
GPT2_HOST_DEVICE inline float tanh_fast(float y) { return 1.0f - 2.0f / (exp_fast(2.0f * y) + 1.0f); }

}  // namespace gpt2::fast_math
