#pragma once
// defines: TAGC_HOST_DEVICE, TAGC_INLINE_NS, the versioned inline namespace.
//
// Single source: every kernel is a functor whose call operator is marked
// TAGC_HOST_DEVICE. Under nvcc it is __host__ __device__; under a host compiler
// the CUDA keywords do not exist, so it expands to nothing and the same functor
// runs on Thrust's OpenMP system in the CPU tests.

#if defined(__CUDACC__)
#  define TAGC_HOST_DEVICE __host__ __device__
#  define TAGC_DEVICE __device__
#else
#  define TAGC_HOST_DEVICE
#  define TAGC_DEVICE
#endif

#define TAGC_VERSION_MAJOR 0
#define TAGC_VERSION_MINOR 1
#define TAGC_VERSION_PATCH 0

// A versioned inline namespace: objects built against different tagc versions
// do not link against each other by accident.
#define TAGC_BEGIN_NAMESPACE namespace tagc { inline namespace v0_1 {
#define TAGC_END_NAMESPACE } }
