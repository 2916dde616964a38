#pragma once
// defines: tagc::nccl_communicator (part of comm/nccl.hpp, which documents it).

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "../argument_rules.hpp"
#include "init.hpp"
#include "request.hpp"

TAGC_BEGIN_NAMESPACE

class nccl_communicator {
 public:
  // Completion handle of a start_*() collective (or of start_group_end()); see nccl/request.hpp.
  using request = nccl_request;

  nccl_communicator() = default;  // empty: every call returns invalid_argument
  // Moves are written out, not `= default`: nvcc treats a special member that is
  // defaulted on its first declaration as implicitly __host__ __device__, and
  // this one moves a std::shared_ptr (host-only). cuda::std::expected's
  // __host__ __device__ members (nccl_expected) instantiate it, and with
  // --diag-error=20011 the build failed ("calling a __host__ function from a
  // __host__ __device__ function", misattributed to whichever header nvcc was
  // in when it emitted its deferred diagnostics, e.g. bfloat16's operator float).
  // A user-provided move is plainly __host__.
  nccl_communicator(nccl_communicator&& o) noexcept : s_(std::move(o.s_)) {}
  nccl_communicator& operator=(nccl_communicator&& o) noexcept {
    s_ = std::move(o.s_);
    return *this;
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() = default;  // the state finalizes when its last holder goes

  // Joins the communicator `id` names as `rank` of `nranks`; every rank calls it
  // with the same id and nranks (distribute the id with exchange_nccl_unique_id
  // or nccl_mpi_bootstrap.hpp). Non-blocking init, polled up to opt.init_timeout.
  static nccl_expected<nccl_communicator> create(const nccl_id& id, int nranks, int rank, nccl_options opt = {}) {
    return create(id.value, nranks, rank, opt);
  }
  static nccl_expected<nccl_communicator> create(const ncclUniqueId& id, int nranks, int rank,
                                                 nccl_options opt = {}) {
    return join("nccl_communicator::create", "ncclCommInitRankConfig", nranks, rank, opt,
                [&](ncclComm_t* comm, ncclConfig_t* config) {
                  return ncclCommInitRankConfig(comm, nranks, id, rank, config);
                });
  }

  // A communicator of the ranks of this one that pass the same `color`, ordered by `key`
  // (ncclCommSplit; every rank of this communicator calls it; two-level reduction's node
  // and cross levels, comm/two_level.hpp). A color < 0 joins none (NCCL_SPLIT_NOCOLOR);
  // the result's size and rank are NCCL's.
  nccl_expected<nccl_communicator> split(int color, int key, int new_size, int new_rank, nccl_options opt = {}) const {
    if (!usable())
      return ::cuda::std::unexpected(
          status{errc::communication, "nccl_communicator::split: the communicator is not usable"});
    if (opt.device < 0) opt.device = s_->device;
    ncclComm_t parent = s_->comm;
    return join("nccl_communicator::split", "ncclCommSplit", new_size, new_rank, opt,
                [&](ncclComm_t* comm, ncclConfig_t* config) {
                  return ncclCommSplit(parent, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, comm, config);
                });
  }

  int rank() const noexcept { return s_ ? s_->rank : 0; }
  int size() const noexcept { return s_ ? s_->size : 0; }
  int device() const noexcept { return s_ ? s_->device : -1; }
  cudaStream_t stream() const noexcept { return s_ ? s_->stream : nullptr; }  // the communication stream
  cudaStream_t compute_stream() const noexcept { return s_ ? s_->compute : nullptr; }
  ncclComm_t native_handle() const noexcept { return s_ ? s_->comm : nullptr; }
  bool usable() const noexcept { return s_ && s_->usable(); }

  // The stream whose work every collective is ordered after, and which blocking
  // collectives make wait for their result. Same device as the communicator.
  void set_compute_stream(cudaStream_t s) noexcept {
    if (s_) s_->compute = s;
  }

  // Make `s` wait for everything enqueued so far on the communication stream
  // (an event; no host sync).
  status join(cudaStream_t s) {
    if (!usable()) return refuse("join");
    return s_->order(s_->stream, s, s_->done, "join");
  }

  // Host wait for everything enqueued so far on the communication stream, with
  // the deadline. Does not wait for the compute stream.
  status synchronize() {
    if (!usable()) return refuse("synchronize");
    auto ev = s_->acquire_event("synchronize");
    if (!ev) return ev.error();
    request r(s_, *ev, "synchronize");
    if (const cudaError_t e = cudaEventRecord(*ev, s_->stream); e != cudaSuccess)
      return s_->cuda_fail(e, "synchronize: cudaEventRecord");
    return r.wait();
  }

  // Finalize and destroy now, reporting how it went (the destructor does the
  // same silently). The communicator is unusable afterwards.
  status finalize() {
    if (!s_) return {};
    return s_->shutdown();
  }

  // ---- collectives (spans in device memory) ----

  template <reducible T>
  status all_reduce(std::span<const T> in, std::span<T> out) {
    return blocking(collective::all_reduce, in, out, 0);
  }
  template <reducible T>
  status reduce_scatter(std::span<const T> in, std::span<T> out) {
    return blocking(collective::reduce_scatter, in, out, 0);
  }
  template <reducible T>
  status all_gather(std::span<const T> in, std::span<T> out) {
    return blocking(collective::all_gather, in, out, 0);
  }
  // Only root's `out` is written; every rank passes one of the same length.
  template <reducible T>
  status reduce(std::span<const T> in, std::span<T> out, int root) {
    return blocking(collective::reduce, in, out, root);
  }
  template <reducible T>
  status broadcast(std::span<T> buf, int root) {
    return blocking(collective::broadcast, std::span<const T>(buf), buf, root);
  }

  // Uneven shards: rank r receives the sum of in[offsets[r], offsets[r+1]) into
  // its `out` (size offsets[rank+1] - offsets[rank]); offsets has size()+1
  // non-decreasing entries within in.size(). One NCCL group of size() reduces,
  // i.e. a reduce-scatter whose blocks need not be equal. `out` may be this
  // rank's own block of `in` (in place); any other overlap is refused.
  template <reducible T>
  status reduce_each(std::span<const T> in, std::span<const std::size_t> offsets, std::span<T> out) {
    if (!usable()) return refuse("reduce_each");
    TAGC_TRY(check_reduce_each_arguments(in, offsets, out, rank(), size()));
    TAGC_TRY(check_buffers("reduce_each", in, out));
    TAGC_TRY(group_start());
    status first;
    for (int r = 0; r < size(); ++r) {
      const std::size_t n = offsets[r + 1] - offsets[r];
      if (n == 0) continue;
      const T* send = in.data() + offsets[r];
      // recvbuff is only written at the root; elsewhere pass the send block (NCCL's in-place form).
      T* recv = r == rank() ? out.data() : const_cast<T*>(send);
      detail::assign(first, s_->settle(ncclReduce(send, recv, n, detail::nccl_type_of<T>(), ncclSum, r, s_->comm, s_->stream),
                                       "reduce_each"));
      if (!first.ok()) break;
    }
    status end = group_end();  // always close the group we opened
    if (!first.ok()) return first;
    return end;
  }

  // Blocks of any size to each rank (communicator.hpp): one NCCL group of an
  // ncclSend and an ncclRecv per peer with a nonzero block, of bytes (only bytes
  // move; the counts stay elements at this boundary). This rank's own arguments are
  // checked (comm/argument_rules.hpp); the pair rule (rank p's send_counts[q] ==
  // rank q's recv_counts[p]) is not: NCCL cannot compare ranks, so the caller
  // exchanges the counts first (an all_to_all_v of one count per rank, as the
  // reducer does). NCCL does not define a pair that disagrees: expect a hang until a
  // deadline (wait(), barrier(), synchronize()) aborts the communicator, or a wrong
  // block. A rank with nothing to send or receive enqueues nothing (its peers' blocks
  // for it are empty too).
  template <reducible T>
  status all_to_all_v(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                      std::span<const std::size_t> recv_counts) {
    if (!usable()) return refuse("all_to_all_v");
    if (const route_check v = check_all_to_all_arguments(in, send_counts, out, recv_counts, size()); !v.ok())
      return route_refusal(v, rank(), size());
    TAGC_TRY(check_buffers("all_to_all_v", in, out));
    if (in.empty() && out.empty()) return {};
    TAGC_TRY(group_start());
    status first;
    const auto* send = reinterpret_cast<const std::byte*>(in.data());
    auto* recv = reinterpret_cast<std::byte*>(out.data());
    for (int p = 0; p < size() && first.ok(); ++p) {
      const std::size_t sent = send_counts[std::size_t(p)] * sizeof(T);
      const std::size_t received = recv_counts[std::size_t(p)] * sizeof(T);
      if (sent != 0)
        detail::assign(first, s_->settle(ncclSend(send, sent, ncclUint8, p, s_->comm, s_->stream), "all_to_all_v"));
      if (received != 0 && first.ok())
        detail::assign(first, s_->settle(ncclRecv(recv, received, ncclUint8, p, s_->comm, s_->stream), "all_to_all_v"));
      send += sent;
      recv += received;
    }
    status end = group_end();  // always close the group we opened
    if (!first.ok()) return first;
    return end;
  }

  status barrier() {
    if (!usable()) return refuse("barrier");
    if (s_->group_depth > 0) return {errc::invalid_argument, "barrier: not allowed inside group_start()/group_end()"};
    request r = start("barrier", status{}, [&] {
      return ncclAllReduce(s_->token, s_->token, 1, ncclUint32, ncclSum, s_->comm, s_->stream);
    }, 1);
    return r.wait();
  }

  // ---- non-blocking collectives: the compute stream does not wait ----

  template <reducible T>
  request start_all_reduce(std::span<const T> in, std::span<T> out) {
    return start(collective::all_reduce, in, out);
  }
  template <reducible T>
  request start_reduce_scatter(std::span<const T> in, std::span<T> out) {
    return start(collective::reduce_scatter, in, out);
  }
  template <reducible T>
  request start_all_gather(std::span<const T> in, std::span<T> out) {
    return start(collective::all_gather, in, out);
  }

  // ---- groups ----

  // Opens (or nests) an NCCL group; the first level orders the communication
  // stream after the compute stream once for the whole group.
  status group_start() {
    if (!usable()) return refuse("group_start");
    if (s_->group_depth == 0) TAGC_TRY(s_->order(s_->compute, s_->stream, s_->ready, "group_start"));
    TAGC_TRY(s_->settle(ncclGroupStart(), "group_start"));
    ++s_->group_depth;
    return {};
  }
  // Closes a group level; the outermost launches the group and makes the
  // compute stream wait for it.
  status group_end() {
    TAGC_TRY(end_group("group_end"));
    if (s_->group_depth == 0) return s_->order(s_->stream, s_->compute, s_->done, "group_end");
    return {};
  }
  // Closes the outermost group level and returns a request for the whole group
  // (the compute stream does not wait; join or wait on the request).
  request start_group_end() {
    if (s_ && s_->group_depth != 1)
      return request(status{errc::invalid_argument, "start_group_end: needs exactly one open group level, found " +
                                                        std::to_string(s_->group_depth)});
    if (status st = end_group("group"); !st.ok()) return request(std::move(st));
    return record("group");
  }

 private:
  // create() and split(): detail::nccl_init, then the communicator that owns the state.
  template <class Init>
  static nccl_expected<nccl_communicator> join(const char* caller, const char* call, int nranks, int rank,
                                               nccl_options opt, Init&& init) {
    std::shared_ptr<detail::nccl_state> s;
    if (status st = detail::nccl_init(caller, call, nranks, rank, opt, std::forward<Init>(init), s); !st.ok())
      return ::cuda::std::unexpected(std::move(st));
    nccl_communicator c;
    c.s_ = std::move(s);
    return c;
  }

  status refuse(std::string_view what) const {
    if (!s_) return {errc::invalid_argument, std::string(what) + ": communicator is empty (moved from or never created)"};
    return s_->refuse(what);
  }

  // Always closes NCCL's group level while the communicator lives, so an
  // error inside a group does not leave the thread's group state open.
  status end_group(const char* what) {
    if (!s_) return refuse(what);
    if (s_->group_depth == 0) return {errc::invalid_argument, std::string(what) + ": no group_start() to close"};
    --s_->group_depth;
    if (s_->comm == nullptr) return refuse(what);
    const ncclResult_t r = ncclGroupEnd();
    if (!usable()) return refuse(what);
    return s_->settle(r, what);
  }

  // Enqueues `call` ordered after the compute stream (unless inside a group,
  // where group_start did it). count == 0 is a no-op on every rank.
  template <class F>
  status enqueue(const char* what, const status& checked, F&& call, std::size_t count) {
    if (!usable()) return refuse(what);
    if (!checked.ok()) return checked;
    if (count == 0) return {};
    if (s_->group_depth == 0) TAGC_TRY(s_->order(s_->compute, s_->stream, s_->ready, what));
    return s_->settle(call(), what);
  }

  template <class F>
  status blocking(const char* what, const status& checked, F&& call, std::size_t count) {
    TAGC_TRY(enqueue(what, checked, std::forward<F>(call), count));
    if (count == 0 || s_->group_depth > 0) return {};
    return s_->order(s_->stream, s_->compute, s_->done, what);
  }

  template <class F>
  request start(const char* what, const status& checked, F&& call, std::size_t count) {
    if (usable() && s_->group_depth > 0)
      return request(status{errc::invalid_argument,
                            std::string("start_") + what +
                                ": not allowed inside group_start()/group_end() (the group launches at its end); use "
                                "the blocking form and start_group_end()"});
    if (status st = enqueue(what, checked, std::forward<F>(call), count); !st.ok()) return request(std::move(st));
    if (count == 0) return request(status{});
    return record(what);
  }

  // One collective's NCCL call on the communication stream (arguments already checked).
  template <class T>
  ncclResult_t launch(collective kind, std::span<const T> in, std::span<T> out, int root) {
    const ncclDataType_t type = detail::nccl_type_of<T>();
    switch (kind) {
      case collective::all_reduce:
        return ncclAllReduce(in.data(), out.data(), in.size(), type, ncclSum, s_->comm, s_->stream);
      case collective::reduce_scatter:
        return ncclReduceScatter(in.data(), out.data(), out.size(), type, ncclSum, s_->comm, s_->stream);
      case collective::all_gather:
        return ncclAllGather(in.data(), out.data(), in.size(), type, s_->comm, s_->stream);
      case collective::reduce:
        return ncclReduce(in.data(), out.data(), in.size(), type, ncclSum, root, s_->comm, s_->stream);
      case collective::broadcast:
        return ncclBroadcast(out.data(), out.data(), out.size(), type, root, s_->comm, s_->stream);
      default: return ncclInvalidUsage;
    }
  }
  // Elements per rank NCCL moves (0: nothing to do on any rank).
  template <class T>
  static std::size_t call_count(collective kind, std::span<const T> in, std::span<T> out) {
    return kind == collective::reduce_scatter ? out.size() : in.size();
  }
  template <class T>
  status blocking(collective kind, std::span<const T> in, std::span<T> out, int root) {
    return blocking(collective_name(kind), check(kind, in, out, root), [&] { return launch(kind, in, out, root); },
                    call_count(kind, in, out));
  }
  template <class T>
  request start(collective kind, std::span<const T> in, std::span<T> out) {
    return start(collective_name(kind), check(kind, in, out), [&] { return launch(kind, in, out, 0); },
                 call_count(kind, in, out));
  }

  // A request completing with everything enqueued so far on the communication stream.
  request record(const char* what) {
    auto ev = s_->acquire_event(what);
    if (!ev) return request(ev.error());
    if (const cudaError_t e = cudaEventRecord(*ev, s_->stream); e != cudaSuccess) {
      s_->release_event(*ev);
      return request(s_->cuda_fail(e, std::string(what) + ": cudaEventRecord"));
    }
    return request(s_, *ev, what);
  }

  // ---- this rank's own argument checks ----

  template <class T>
  status check_pointer(const char* what, const char* name, const T* p, std::size_t n) const {
    if (!s_->opt.check_pointers || n == 0) return {};
    cudaPointerAttributes a{};
    if (const cudaError_t e = cudaPointerGetAttributes(&a, p); e != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky; do not leave it for the caller's next check
      return detail::cuda_status(e, std::string(what) + ": cudaPointerGetAttributes(" + name + ")",
                                 errc::invalid_argument);
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      return {errc::invalid_argument, std::string(what) + ": " + name +
                                          " is host memory; NCCL spans must point to device memory"};
    if (a.type == cudaMemoryTypeDevice && a.device != s_->device)
      return {errc::invalid_argument, std::string(what) + ": " + name + " is on device " + std::to_string(a.device) +
                                          ", the communicator on device " + std::to_string(s_->device)};
    return {};
  }

  template <class T>
  status check_buffers(const char* what, std::span<const T> in, std::span<T> out) const {
    TAGC_TRY(check_pointer(what, "send", in.data(), in.size()));
    TAGC_TRY(check_pointer(what, "recv", out.data(), out.size()));
    return {};
  }

  // The rules every backend applies (comm/argument_rules.hpp), then the pointers.
  template <class T>
  status check(collective kind, std::span<const T> in, std::span<T> out, int root = 0) const {
    if (!usable()) return {};
    TAGC_TRY(check_arguments(kind, in, out, root, rank(), size()));
    return check_buffers(collective_name(kind), in, out);
  }

  std::shared_ptr<detail::nccl_state> s_;
};

static_assert(full_communicator<nccl_communicator> && routing_communicator<nccl_communicator>);

TAGC_END_NAMESPACE
