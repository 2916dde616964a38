#pragma once
// defines: tagc::nccl_expected, tagc::nccl_id, tagc::nccl_options, and the small
//          helpers the NCCL backend shares (datatypes, error text, polling, device
//          scope) (part of comm/nccl.hpp, which documents the backend).

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cuda/std/expected>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "../../exec/cuda.hpp"
#include "../argument_rules.hpp"
#include "../communicator.hpp"

TAGC_BEGIN_NAMESPACE

// A value or the status that says why there is none.
template <class T>
using nccl_expected = ::cuda::std::expected<T, status>;

// The id every rank of one communicator joins with (ncclGetUniqueId's bytes).
// A named wrapper: ncclUniqueId is a typedef of an unnamed struct, and nvcc 13's
// front end dies with an internal error on cuda::std::expected<ncclUniqueId, ...>.
struct nccl_id {
  ncclUniqueId value{};
};

struct nccl_options {
  // CUDA device of this rank; create() makes it the calling thread's current
  // device. -1: keep the current device.
  int device = -1;
  // Deadline for ncclCommInitRankConfig to meet every peer.
  std::chrono::milliseconds init_timeout = std::chrono::minutes(5);
  // Deadline for one collective to complete in wait()/barrier()/synchronize(),
  // and for an enqueue that NCCL reports as in progress.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  // Deadline for ncclCommFinalize to quiesce before falling back to abort.
  std::chrono::milliseconds finalize_timeout = std::chrono::minutes(1);
  // Refuse host pointers up front (one cudaPointerGetAttributes per buffer).
  bool check_pointers = true;
  // ncclConfig_t::commName, shown in NCCL's logs; nullptr: none.
  const char* name = nullptr;
};

namespace detail {

// NCCL's datatype of an element type, by tagc's element id (comm/argument_rules.hpp).
template <reducible T>
constexpr ncclDataType_t nccl_type_of() noexcept {
  constexpr ncclDataType_t by_id[] = {ncclFloat,  ncclDouble, ncclUint8,    ncclInt32,  ncclUint32,
                                      ncclInt64,  ncclUint64, ncclBfloat16, ncclFloat16};
  return by_id[element_type_id<T>];
}

// "all_reduce: unhandled system error (run with NCCL_DEBUG=INFO for details) (last NCCL error: ...)"
inline status nccl_status(errc code, std::string_view what, ncclResult_t r, ncclComm_t comm) {
  std::string m(what);
  m += ": ";
  m += ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    m += " (last NCCL error: ";
    m += last;
    m += ")";
  }
  return {code, std::move(m)};
}

// `dst = src` for a status. status is [[nodiscard]] as a class, so nvcc's front
// end warns (#2810-D) on a plain assignment, whose result is a status&.
inline void assign(status& dst, status src) { static_cast<void>(dst = std::move(src)); }

inline std::string ms_string(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// Polls fast at first (a collective of a few KB completes in microseconds), then
// backs off to 1 ms so a long wait does not burn a core.
class backoff {
 public:
  void pause() {
    if (++n_ < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(n_ < 4000 ? std::chrono::microseconds(50) : std::chrono::microseconds(1000));
    }
  }

 private:
  unsigned n_ = 0;
};

// Makes `device` current for a scope and restores the previous one.
class device_guard {
 public:
  explicit device_guard(int device) {
    if (cudaGetDevice(&old_) == cudaSuccess && old_ != device && cudaSetDevice(device) == cudaSuccess) restore_ = true;
  }
  ~device_guard() {
    if (restore_) (void)cudaSetDevice(old_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int old_ = 0;
  bool restore_ = false;
};

}  // namespace detail

TAGC_END_NAMESPACE
