#pragma once
// defines: tagc::detail::nccl_init — joining an NCCL communicator (new, or split
//          from a parent) with a deadline instead of a hang (part of comm/nccl.hpp).

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "state.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail {

// Set-up shared by create() and split(): streams, events and the barrier word, then
// `init` (ncclCommInitRankConfig or ncclCommSplit) non-blocking, polled up to
// opt.init_timeout. On success `out` holds the new state; the first failure is
// returned and nothing is left behind. (A status and an out-parameter rather than
// an expected of a shared_ptr: nvcc makes expected's members __host__ __device__,
// and a shared_ptr moves on the host only; see nccl_communicator's moves.)
template <class Init>
status nccl_init(const char* caller, const char* call, int nranks, int rank, nccl_options opt, Init&& init,
                 std::shared_ptr<nccl_state>& out) {
  const auto bad = [caller](errc c, std::string m) { return status{c, std::string(caller) + ": " + std::move(m)}; };
  if (nranks < 1) return bad(errc::invalid_argument, "nranks " + std::to_string(nranks) + " must be at least 1");
  if (rank < 0 || rank >= nranks)
    return bad(errc::invalid_argument,
               "rank " + std::to_string(rank) + " outside [0, " + std::to_string(nranks) + ")");
  if (opt.device >= 0) {
    if (const cudaError_t e = cudaSetDevice(opt.device); e != cudaSuccess)
      return cuda_status(e, std::string(caller) + ": cudaSetDevice(" + std::to_string(opt.device) + ")",
                         errc::communication);
  }
  auto s = std::make_shared<nccl_state>();
  s->rank = rank;
  s->size = nranks;
  s->opt = opt;
  const auto cuda_try = [&](cudaError_t e, const char* expr) -> status {
    if (e == cudaSuccess) return {};
    return cuda_status(e, std::string(caller) + ": " + expr, errc::communication);
  };
  if (status st = cuda_try(cudaGetDevice(&s->device), "cudaGetDevice"); !st.ok())
    return st;
  if (status st = cuda_try(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      !st.ok())
    return st;
  for (cudaEvent_t* ev : {&s->ready, &s->done})
    if (status st = cuda_try(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), "cudaEventCreateWithFlags"); !st.ok())
      return st;
  if (status st = cuda_try(cudaMalloc(reinterpret_cast<void**>(&s->token), sizeof(std::uint32_t)), "cudaMalloc");
      !st.ok())
    return st;
  if (status st = cuda_try(cudaMemset(s->token, 0, sizeof(std::uint32_t)), "cudaMemset"); !st.ok())
    return st;

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we poll with a deadline instead of hanging
  if (opt.name != nullptr) config.commName = opt.name;
  const std::string who =
      "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " on device " + std::to_string(s->device);
  ncclResult_t r = init(&s->comm, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    status st = nccl_status(errc::communication, std::string(caller) + ": " + call + " (" + who + ")",
                                    r, s->comm);
    return s->fail(std::move(st));
  }
  const auto deadline = std::chrono::steady_clock::now() + opt.init_timeout;
  backoff b;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (const ncclResult_t q = ncclCommGetAsyncError(s->comm, &state); q != ncclSuccess) state = q;
    if (state == ncclSuccess) break;
    if (state != ncclInProgress)
      return s->fail(
          nccl_status(errc::communication, std::string(caller) + ": " + call + " (" + who + ")", state, s->comm));
    if (std::chrono::steady_clock::now() > deadline)
      return s->fail({errc::timeout, std::string(caller) + ": " + who + " waited " + ms_string(opt.init_timeout) +
                                         " for its peers (does every rank make the same call with the same arguments?)"});
    b.pause();
  }
  int count = 0, user_rank = -1;
  if (ncclCommCount(s->comm, &count) != ncclSuccess || ncclCommUserRank(s->comm, &user_rank) != ncclSuccess ||
      count != nranks || user_rank != rank)
    return s->fail({errc::internal, std::string(caller) + ": NCCL reports rank " + std::to_string(user_rank) + " of " +
                                        std::to_string(count) + ", asked for " + who});
  out = std::move(s);
  return {};
}

}  // namespace detail

TAGC_END_NAMESPACE
