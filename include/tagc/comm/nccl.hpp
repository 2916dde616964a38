#pragma once
// defines: tagc::nccl_communicator (one rank per GPU, stream ordered),
//          tagc::nccl_options, tagc::nccl_expected, tagc::nccl_id,
//          tagc::nccl_unique_id(), tagc::exchange_nccl_unique_id() (file rendezvous).
//          MPI bootstrap: comm/nccl_mpi_bootstrap.hpp (kept apart: it needs mpi.h).
//
// Needs the CUDA runtime and NCCL headers and libraries, not nvcc: a host
// compiler with -I<cuda>/include and -lnccl -lcudart builds it.
//
// Streams. The communicator owns a communication stream (non-blocking, so the
// legacy default stream never serializes it) and knows the caller's compute
// stream (set_compute_stream; default: the legacy default stream 0). Every
// collective is ordered after the work already enqueued on the compute stream by
// an event (record on compute, wait on comm) -- the host never waits:
//   - all_reduce, reduce_scatter, all_gather, reduce, broadcast, reduce_each,
//     all_to_all_v:
//     enqueue, then make the compute stream wait for the result, and return.
//     Later work on the compute stream sees the result, exactly as if the
//     collective had been launched on it (communicator.hpp: "return once
//     enqueued"). Other streams: join(stream).
//   - start_*: enqueue and return a request; the compute stream does NOT wait,
//     so the collective overlaps whatever is enqueued next. request::join(s)
//     makes a stream wait without a host sync (the llm.c pattern); request::wait()
//     waits on the host, polling the event and the communicator's async error
//     with a deadline, and aborts the communicator instead of hanging.
//   - barrier(): a one-element all-reduce waited for on the host (NCCL has no
//     barrier), so it also waits for the compute work enqueued before it.
// Group calls: group_start(); several blocking collectives; group_end() (or
// start_group_end() for a request). NCCL fuses the group into one launch; use it
// for per-shard reduces (reduce_each does so). start_* inside a group is refused:
// a grouped operation is only launched at group_end.
//
// Buffers: spans point to device memory of this rank's GPU (checked with
// cudaPointerGetAttributes unless nccl_options::check_pointers is off). Shapes and
// in place as every backend (comm/argument_rules.hpp): all_reduce/reduce/broadcast
// with send == recv; reduce_scatter with recv == send + rank * recv.size();
// all_gather with send == recv + rank * send.size(). Any other overlap is refused.
// Lengths are checked locally only: NCCL cannot compare them across ranks, so a
// rank passing a different length hangs its peers until a deadline (wait(),
// barrier(), synchronize()) aborts the communicator. all_to_all_v likewise trusts
// the caller that each pair's counts agree (exchange them first).
//
// Errors. Every call returns a status naming the collective and carrying
// ncclGetErrorString + ncclGetLastError. The communicator is non-blocking
// (ncclConfig_t::blocking = 0): every NCCL call that reports ncclInProgress is
// polled with ncclCommGetAsyncError up to a deadline. A transport error or a
// deadline aborts the communicator (ncclCommAbort); every later call returns
// that first error. Destruction: ncclCommFinalize + ncclCommDestroy (abort
// after an error); finalize() does the same and reports what happened.
//
// With a Reducer on exec::cuda{s}: set_compute_stream(s), so the Reducer's
// kernels and the collectives between them form one stream-ordered sequence.
//
// Threads: one communicator is used by one host thread at a time (as NCCL
// requires); several communicators may live in one process, one per thread and
// GPU. Requests keep the communicator's state alive, so they may outlive it.
//
// Files, read top to bottom: nccl/types.hpp (options, ids, datatypes, error text),
// nccl/state.hpp (what a communicator owns: settle, order, wait, abort, shutdown),
// nccl/request.hpp, nccl/init.hpp (joining with a deadline), nccl/communicator.hpp
// (the class), nccl/unique_id.hpp (ids: fresh, or exchanged through a file).

#include "nccl/communicator.hpp"
#include "nccl/unique_id.hpp"
