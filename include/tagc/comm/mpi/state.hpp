#pragma once
// defines: tagc::detail::mpi::state, tagc::detail::mpi::pending — what an
//          mpi_communicator owns and how its collectives progress (part of comm/mpi.hpp).
//
// Collectives in flight live in `live`, in start order; advance() moves each through
// checking (the cross-rank argument check, mpi/argument_check.hpp) -> ready ->
// running -> done, starting an MPI call only after every earlier one has started, so
// all ranks issue them in the same order whatever order their requests are waited in.
// A checked all_to_all_v passes two more phases between checking and ready,
// exchanging and pairing (its pair rule, mpi/route.hpp). Their small collectives go
// on the collectives' communicator in the all_to_all_v's own slot: every earlier call
// has started and no later one starts before they finish, so every rank issues them
// at the same point of its sequence. (On the check communicator they would race with
// the argument checks that later collectives issue when they start.)

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "argument_check.hpp"
#include "datatypes.hpp"
#include "route.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail::mpi {

// MPI-3 counts are int (OpenMPI 4.1 has no MPI-4 "_c" large-count variants).
inline constexpr std::uint64_t max_count = std::uint64_t(INT_MAX);

inline std::string error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, std::size_t(len));
}

inline status mpi_error(collective kind, const char* call, int code) {
  return {errc::communication, std::string(collective_name(kind)) + ": " + call + ": " + error_string(code)};
}

inline std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

// exchanging, pairing: a checked all_to_all_v's pair check (mpi/route.hpp).
enum class phase { checking, exchanging, pairing, ready, running, done };

// One collective in flight. Heap-allocated and owned by the communicator's
// state, so the buffers MPI writes into (the check vectors) never move.
struct pending {
  collective kind = collective::barrier;
  int type_id = 0;
  MPI_Datatype datatype = MPI_DATATYPE_NULL;
  std::size_t elem_size = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  int count = 0;  // elements per rank (per block for reduce_scatter / all_gather)
  int root = 0;
  bool in_place = false;
  std::vector<std::byte> temp;  // in-place reduce_scatter: result before it is copied home
  route routed;                 // all_to_all_v: counts, displacements, the pair check

  phase ph = phase::ready;
  MPI_Request req = MPI_REQUEST_NULL;
  check_vector mine{}, agreed{};  // the argument check's contribution and result
  status result;
  bool abandoned = false;  // its request is gone: free it once done
  bool timed_out = false;  // a wait() on it expired while it was pending
  double waited_s = 0.0;
};

struct state {
  MPI_Comm comm = MPI_COMM_NULL;        // collectives
  MPI_Comm check_comm = MPI_COMM_NULL;  // argument checks (own matching order)
  MPI_Op u8_sum = MPI_OP_NULL;          // wrapping_sum_u8
  MPI_Op bf16_op = MPI_OP_NULL;         // half_sum<bfloat16>
  MPI_Op fp16_op = MPI_OP_NULL;         // half_sum<float16>
  int rank = -1;
  int size = 0;
  bool checked = true;
  std::chrono::nanoseconds timeout = std::chrono::seconds(300);
  status init;
  std::deque<std::unique_ptr<pending>> live;  // in start order

  // Start the MPI collective of p. Ops start strictly in start order (see advance()).
  void start_op(pending& p) {
    const MPI_Op sum = p.type_id == element_type_id<std::uint8_t> ? u8_sum
                       : p.type_id == element_type_id<bfloat16>   ? bf16_op
                       : p.type_id == element_type_id<float16>    ? fp16_op
                                                                    : MPI_SUM;
    const char* call = "";
    int rc = MPI_SUCCESS;
    switch (p.kind) {
      case collective::all_reduce:
        call = "MPI_Iallreduce";
        rc = MPI_Iallreduce(p.in_place ? MPI_IN_PLACE : p.send, p.recv, p.count, p.datatype, sum, comm, &p.req);
        break;
      case collective::reduce_scatter: {
        call = "MPI_Ireduce_scatter_block";
        void* dst = p.recv;
        if (p.in_place) {
          p.temp.resize(std::size_t(p.count) * p.elem_size);
          dst = p.temp.data();
        }
        rc = MPI_Ireduce_scatter_block(p.send, dst, p.count, p.datatype, sum, comm, &p.req);
        break;
      }
      case collective::all_gather:
        call = "MPI_Iallgather";
        rc = MPI_Iallgather(p.in_place ? MPI_IN_PLACE : p.send, p.count, p.datatype, p.recv, p.count, p.datatype,
                            comm, &p.req);
        break;
      case collective::reduce:
        call = "MPI_Ireduce";
        rc = MPI_Ireduce(p.in_place && rank == p.root ? MPI_IN_PLACE : p.send, rank == p.root ? p.recv : nullptr,
                         p.count, p.datatype, sum, p.root, comm, &p.req);
        break;
      case collective::broadcast:
        call = "MPI_Ibcast";
        rc = MPI_Ibcast(p.recv, p.count, p.datatype, p.root, comm, &p.req);
        break;
      case collective::barrier:
        call = "MPI_Ibarrier";
        rc = MPI_Ibarrier(comm, &p.req);
        break;
      case collective::all_to_all: {
        call = "MPI_Ialltoallv";
        route& r = p.routed;
        rc = MPI_Ialltoallv(p.send, r.send_counts.data(), r.send_displs.data(), p.datatype, p.recv,
                            r.recv_counts.data(), r.recv_displs.data(), p.datatype, comm, &p.req);
        break;
      }
      default: break;
    }
    if (rc != MPI_SUCCESS) {
      p.result = mpi_error(p.kind, call, rc);
      p.ph = phase::done;
    } else {
      p.ph = phase::running;
    }
  }

  void finish_op(pending& p) {
    if (p.kind == collective::reduce_scatter && p.in_place && p.count > 0)
      std::memcpy(p.recv, p.temp.data(), std::size_t(p.count) * p.elem_size);
    p.ph = phase::done;
  }

  // Whether p's request has completed (false while in flight). A failed MPI_Test
  // ends p with the error.
  bool completed(pending& p, const char* call) {
    int flag = 0;
    if (int rc = MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      p.result = mpi_error(p.kind, call, rc);
      p.ph = phase::done;
      return false;
    }
    return flag != 0;
  }

  // Starts one of the pair check's collectives (`rc` is its MPI return code).
  void next_check(pending& p, phase next, const char* call, int rc) {
    if (rc != MPI_SUCCESS) {
      p.result = mpi_error(p.kind, call, rc);
      p.ph = phase::done;
    } else {
      p.ph = next;
    }
  }

  // Progress everything in flight without blocking. A collective's MPI call is
  // started only after every earlier one has been started, so all ranks issue
  // them in the same order whatever order their requests are waited in.
  void advance() {
    bool blocked = false;
    for (auto it = live.begin(); it != live.end();) {
      pending& p = **it;
      if (!blocked && p.ph == phase::checking && completed(p, "MPI_Test (argument check)")) {
        p.result = check_verdict(p.agreed, size, max_count);
        if (!p.result.ok())
          p.ph = phase::done;
        else if (p.kind == collective::all_to_all)
          next_check(p, phase::exchanging, "MPI_Ialltoall (pair check)", p.routed.start_exchange(comm, &p.req));
        else
          p.ph = phase::ready;
      }
      if (!blocked && p.ph == phase::exchanging && completed(p, "MPI_Test (pair check)"))
        next_check(p, phase::pairing, "MPI_Iallgather (pair check)", p.routed.start_verdicts(comm, &p.req));
      if (!blocked && p.ph == phase::pairing && completed(p, "MPI_Test (pair check)")) {
        p.result = p.routed.verdict(size, max_count);
        p.ph = p.result.ok() ? phase::ready : phase::done;
      }
      // Still agreeing on arguments: nothing later may start its MPI call yet.
      if (p.ph == phase::checking || p.ph == phase::exchanging || p.ph == phase::pairing) blocked = true;
      if (!blocked && p.ph == phase::ready) start_op(p);
      if (p.ph == phase::running && completed(p, "MPI_Test")) finish_op(p);
      if (p.ph == phase::done && p.abandoned)
        it = live.erase(it);
      else
        ++it;
    }
  }

  // A collective that timed out and is still pending blocks new ones.
  const pending* stuck() const {
    for (const auto& p : live)
      if (p->timed_out && p->ph != phase::done) return p.get();
    return nullptr;
  }

  status wait(pending& p) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (;;) {
      advance();
      if (p.ph == phase::done) {
        p.timed_out = false;
        return p.result;
      }
      const auto waited = clock::now() - t0;
      if (waited >= timeout) {
        p.timed_out = true;
        p.waited_s = std::chrono::duration<double>(waited).count();
        return {errc::timeout,
                std::string(collective_name(p.kind)) + ": rank " + std::to_string(rank) + " waited " +
                    seconds(p.waited_s) + " (deadline " + seconds(std::chrono::duration<double>(timeout).count()) +
                    ") and the collective has not completed (" +
                    (p.ph == phase::running ? "transferring" : "agreeing on arguments") +
                    "): a peer is missing, dead or slow; wait again, drain() or abort()"};
      }
      std::this_thread::yield();
    }
  }

  void release(pending* p) {
    if (p->ph != phase::done) {
      p->abandoned = true;  // advance() frees it once MPI is done with it
      return;
    }
    for (auto it = live.begin(); it != live.end(); ++it)
      if (it->get() == p) {
        live.erase(it);
        return;
      }
  }
};

}  // namespace detail::mpi

TAGC_END_NAMESPACE
