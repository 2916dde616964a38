#pragma once
// defines: tagc::mpi_communicator — the Communicator concept over an MPI
//          communicator (CPU buffers, any number of hosts), with deadlines
//          instead of hangs and an optional cross-rank argument check.
//
// Usage:
//   MPI_Init(&argc, &argv);
//   {
//     tagc::mpi_communicator comm(MPI_COMM_WORLD);        // dups it
//     if (auto s = comm.init_status(); !s.ok()) { ... }
//     TAGC_TRY(comm.all_reduce(std::span<const float>(g), std::span<float>(sum)));
//     auto req = comm.start_reduce_scatter(in, out);      // overlap ...
//     TAGC_TRY(req.wait());
//   }                                                      // frees the dup
//   MPI_Finalize();
//
// Semantics are those documented in communicator.hpp (sum only, in-place rules,
// unsigned sums wrap). Details of this backend:
//  - The constructor duplicates the given communicator twice (one for the
//    collectives, one for the argument check below) and sets MPI_ERRORS_RETURN
//    on both, so every MPI failure comes back as
//    status{errc::communication, "<collective>: <MPI_Error_string>"}.
//  - Blocking collectives are start_*() + wait(). wait() polls MPI_Test (yielding
//    the core between polls, as MPI_Wait does when oversubscribed) until the
//    collective completes or the deadline (`timeout()`, default 300 s, per wait()
//    call) passes; then it returns errc::timeout naming the collective and the
//    time waited. The collective is still pending inside MPI after a timeout and
//    still owns the caller's buffers. Until it completes, the communicator
//    refuses new collectives (errc::communication). Either wait() on the request
//    again / call drain() — if the late peer does arrive, the collective then
//    completes normally with the right result — or call abort(code) (MPI_Abort:
//    the usual reaction to a dead peer).
//  - checked mode (options::checked, default on): before each collective, one
//    extra MPI_Iallreduce(MAX) of 12 int64 on a separate communicator lets every
//    rank see every rank's collective kind, element type, length, root and local
//    argument errors. All ranks then return the *same* status
//    (size_mismatch / invalid_argument, naming the ranks and lengths) instead of
//    one rank returning early and the others hanging. Cost: one small,
//    latency-bound all-reduce per collective (2 ranks, TCP on loopback, busy
//    2-core machine: an 8-float all_reduce took 75 us unchecked, 110 us checked;
//    a 4 MiB one ~9-10 ms either way, the difference within noise). The tagc Reducer
//    already agrees on its plan across ranks, so it may run unchecked
//    (options{.checked = false}); then a local argument error is returned on the
//    offending rank only, without calling MPI, and the other ranks time out.
//    Check and collective are started in order on their own communicators, so
//    several requests may be in flight in any combination.
//  - uint8 sums use a user-defined wrapping op instead of MPI_SUM: Open MPI
//    4.1's AVX reduction component saturates 8-bit sums (see wrapping_sum_u8).
//  - bfloat16 and float16 travel as MPI_UINT16_T with user-defined commutative
//    ops that add in float and round to the 16-bit type at every reduction step
//    (see half_sum). The ops are created once per communicator.
//  - Element counts must fit in int (MPI-3; OpenMPI 4.1 has no MPI-4 "_c"
//    large-count variants): a larger span is a local argument error.
//  - In place: all_reduce, reduce, broadcast (send == recv) and all_gather
//    (send == recv.subspan(rank * send.size())) use MPI_IN_PLACE.
//    reduce_scatter in place (recv == send.subspan(rank * recv.size())) reduces
//    into a temporary of recv.size() elements and copies it into the rank's block,
//    so the other blocks of send are left untouched (MPI's own in-place form
//    would leave its result at block 0 and the rest of the buffer unspecified).
//    Partial overlap of send and recv in any other layout is an argument error.
//  - Not thread-safe: one thread drives one communicator (MPI_THREAD_SINGLE is
//    enough). Requests must be waited or destroyed before their communicator;
//    destroying a request that has not completed leaves the collective running:
//    later calls keep progressing it, drain() waits for it.

#include <mpi.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "communicator.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail::mpi {

// Element type facts: a stable id (agreed across ranks), a name, the MPI datatype.
template <class T> struct type_traits;
#define TAGC_MPI_TYPE_(T, ID, NAME, DT)                               \
  template <> struct type_traits<T> {                                 \
    static constexpr int id = ID;                                     \
    static constexpr const char* name = NAME;                         \
    static MPI_Datatype datatype() noexcept { return DT; }            \
  };
TAGC_MPI_TYPE_(float, 0, "float", MPI_FLOAT)
TAGC_MPI_TYPE_(double, 1, "double", MPI_DOUBLE)
TAGC_MPI_TYPE_(std::uint8_t, 2, "uint8", MPI_UINT8_T)
TAGC_MPI_TYPE_(std::int32_t, 3, "int32", MPI_INT32_T)
TAGC_MPI_TYPE_(std::uint32_t, 4, "uint32", MPI_UINT32_T)
TAGC_MPI_TYPE_(std::int64_t, 5, "int64", MPI_INT64_T)
TAGC_MPI_TYPE_(std::uint64_t, 6, "uint64", MPI_UINT64_T)
// bf16 travels as 16-bit words; only the user-defined op (half_sum) reads them as bf16.
TAGC_MPI_TYPE_(bfloat16, 7, "bfloat16", MPI_UINT16_T)
TAGC_MPI_TYPE_(float16, 8, "float16", MPI_UINT16_T)
#undef TAGC_MPI_TYPE_

inline const char* type_name(std::int64_t id) noexcept {
  constexpr const char* names[] = {"float", "double", "uint8", "int32", "uint32", "int64", "uint64", "bfloat16",
                                   "float16"};
  return id >= 0 && id < 9 ? names[id] : "?";
}

// Byte-wise wrapping sum for MPI_UINT8_T. Open MPI 4.1's AVX reduction
// component (op/avx, picked by default on AVX2/AVX-512 CPUs) adds 8- and 16-bit
// integers with *saturating* instructions (open-mpi/ompi#8045, "wontfix"), so
// MPI_SUM on MPI_UINT8_T gives 200 + 100 = 255 there, while tagc's index
// policies need 200 + 100 = 44 (mod 256, NCCL's behaviour). A user-defined op
// has no such variant. SWAR: eight bytes per 64-bit add, no carry between bytes.
inline void wrapping_sum_u8(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  const std::size_t n = std::size_t(*len);
  constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL, high = 0x8080808080808080ULL;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    const std::uint64_t r = ((x & low7) + (y & low7)) ^ ((x ^ y) & high);
    std::memcpy(b + i, &r, 8);
  }
  for (; i < n; ++i) b[i] = static_cast<unsigned char>(b[i] + a[i]);
}

// The sum of a 16-bit float type H (bfloat16, float16) over the 16-bit words it travels
// as (MPI-3 has neither a bf16 nor a half type): inout[i] = H(float(in[i]) + float(inout[i])),
// round-to-nearest-even. MPI applies the op once per reduction step, so each hop of a
// ring / butterfly rounds, as NCCL's ncclBfloat16 / ncclFloat16 sums do.
template <class H>
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  const std::size_t n = std::size_t(*len);
  for (std::size_t i = 0; i < n; ++i) b[i] = H(float(H::from_bits(a[i])) + float(H::from_bits(b[i]))).bits;
}

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

// Local argument errors, encoded as small integers so that every rank can
// rebuild the offending rank's message from the check all-reduce alone.
enum local_error : std::int64_t {
  none = 0,
  send_recv_differ,      // all_reduce / reduce / broadcast: send.size() != recv.size()
  scatter_shape,         // reduce_scatter: send.size() != size * recv.size()
  gather_shape,          // all_gather: recv.size() != size * send.size()
  root_out_of_range,     // reduce / broadcast
  count_too_large,       // more than INT_MAX elements
  partial_overlap,       // send and recv overlap, but not in the in-place layout
};

inline std::string describe(local_error e, std::int64_t in, std::int64_t out, std::int64_t root, int n) {
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  switch (e) {
    case send_recv_differ: return "send has " + s(in) + " elements but recv has " + s(out);
    case scatter_shape:
      return "send has " + s(in) + " elements, expected world size " + s(n) + " x recv " + s(out);
    case gather_shape:
      return "recv has " + s(out) + " elements, expected world size " + s(n) + " x send " + s(in);
    case root_out_of_range: return "root " + s(root) + " outside [0, " + s(n) + ")";
    case count_too_large:
      return "send has " + s(in) + " and recv " + s(out) +
             " elements; MPI-3 collectives take at most INT_MAX (2147483647)";
    case partial_overlap: return "send and recv overlap, but not in the in-place layout";
    default: return "?";
  }
}

// What every rank contributes to the check, reduced with MPI_MAX. Values that
// name a rank carry key(rank) = 2^20 - 1 - rank in their top bits, so the
// maximum selects the lowest such rank.
enum check_slot : int {
  err_code = 0, err_in, err_out, err_root,  // the lowest rank with a local error (or -1)
  count_max, count_min_neg,                 // (count, key) and (cap - count, key)
  kind_max, kind_min_neg, type_max, type_min_neg, root_max, root_min_neg,
  check_slots
};
inline constexpr int key_bits = 20;
inline constexpr std::int64_t key_mask = (std::int64_t(1) << key_bits) - 1;
inline constexpr int value_bits = 42;
inline constexpr std::int64_t value_cap = (std::int64_t(1) << value_bits) - 1;
inline constexpr std::int64_t clamp_value(std::uint64_t v) noexcept {
  return v > std::uint64_t(value_cap) ? value_cap : std::int64_t(v);
}
inline constexpr std::int64_t key_of(int rank) noexcept { return key_mask - (rank < key_mask ? rank : key_mask); }
inline constexpr int rank_of_key(std::int64_t key) noexcept { return int(key_mask - key); }

enum class phase { checking, ready, running, done };

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

  phase ph = phase::ready;
  MPI_Request req = MPI_REQUEST_NULL;
  std::array<std::int64_t, check_slots> mine{}, agreed{};
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
    const MPI_Op sum = p.type_id == type_traits<std::uint8_t>::id   ? u8_sum
                       : p.type_id == type_traits<bfloat16>::id     ? bf16_op
                       : p.type_id == type_traits<float16>::id      ? fp16_op
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

  // Every rank computes the same verdict from the same reduced vector.
  status verdict(const pending& p) const {
    const auto& a = p.agreed;
    const std::string what = collective_name(p.kind);
    if (a[err_code] >= 0) {
      const int r = rank_of_key(a[err_code] >> value_bits);
      const auto value = [&](int slot) { return a[slot] & value_cap; };
      return {errc::size_mismatch,
              what + ": rank " + std::to_string(r) + ": " +
                  describe(local_error(value(err_code)), value(err_in), value(err_out),
                           value(err_root) - (std::int64_t(1) << 40), size)};
    }
    if (a[kind_max] != -a[kind_min_neg])
      return {errc::invalid_argument, std::string("ranks called different collectives: ") +
                                          collective_name(collective(-a[kind_min_neg])) + " and " +
                                          collective_name(collective(a[kind_max]))};
    if (a[type_max] != -a[type_min_neg])
      return {errc::invalid_argument, what + ": ranks passed different element types: " +
                                          type_name(-a[type_min_neg]) + " and " + type_name(a[type_max])};
    const std::int64_t hi = a[count_max] >> key_bits, lo = value_cap - (a[count_min_neg] >> key_bits);
    if (hi != lo)
      return {errc::size_mismatch, what + ": rank " + std::to_string(rank_of_key(a[count_max] & key_mask)) +
                                       " passed " + std::to_string(hi) + " elements, rank " +
                                       std::to_string(rank_of_key(a[count_min_neg] & key_mask)) + " passed " +
                                       std::to_string(lo)};
    if (a[root_max] != -a[root_min_neg])
      return {errc::invalid_argument, what + ": ranks named different roots: " + std::to_string(-a[root_min_neg]) +
                                          " and " + std::to_string(a[root_max])};
    return {};
  }

  // Progress everything in flight without blocking. A collective's MPI call is
  // started only after every earlier one has been started, so all ranks issue
  // them in the same order whatever order their requests are waited in.
  void advance() {
    bool blocked = false;
    for (auto it = live.begin(); it != live.end();) {
      pending& p = **it;
      if (!blocked && p.ph == phase::checking) {
        int flag = 0;
        if (int rc = MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
          p.result = mpi_error(p.kind, "MPI_Test (argument check)", rc);
          p.ph = phase::done;
        } else if (flag) {
          p.result = verdict(p);
          p.ph = p.result.ok() ? phase::ready : phase::done;
        } else {
          blocked = true;
        }
      }
      if (!blocked && p.ph == phase::ready) start_op(p);
      if (p.ph == phase::running) {
        int flag = 0;
        if (int rc = MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
          p.result = mpi_error(p.kind, "MPI_Test", rc);
          p.ph = phase::done;
        } else if (flag) {
          finish_op(p);
        }
      }
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

class mpi_communicator {
 public:
  struct options {
    bool checked = true;                                          // cross-rank argument check, see above
    std::chrono::milliseconds timeout = std::chrono::seconds(300);  // per wait()
  };

  // The handle of a non-blocking collective. Movable; wait() may be called again
  // after it returned errc::timeout.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept
        : s_(std::exchange(o.s_, nullptr)), p_(std::exchange(o.p_, nullptr)), immediate_(std::move(o.immediate_)),
          has_immediate_(std::exchange(o.has_immediate_, false)) {}
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        reset();
        s_ = std::exchange(o.s_, nullptr);
        p_ = std::exchange(o.p_, nullptr);
        immediate_ = std::move(o.immediate_);
        has_immediate_ = std::exchange(o.has_immediate_, false);
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { reset(); }

    // Completes the collective or returns errc::timeout after the communicator's deadline.
    status wait() {
      if (has_immediate_) return immediate_;
      if (!p_) return {errc::invalid_argument, "request: wait() on an empty (default or moved-from) request"};
      return s_->wait(*p_);
    }
    // Progresses without blocking; true once wait() would return at once.
    bool test() {
      if (has_immediate_ || !p_) return true;
      s_->advance();
      return p_->ph == detail::mpi::phase::done;
    }

   private:
    friend class mpi_communicator;
    request(detail::mpi::state* s, detail::mpi::pending* p) : s_(s), p_(p) {}
    explicit request(status immediate) : immediate_(std::move(immediate)), has_immediate_(true) {}
    void reset() {
      if (p_) s_->release(p_);
      s_ = nullptr;
      p_ = nullptr;
    }
    detail::mpi::state* s_ = nullptr;
    detail::mpi::pending* p_ = nullptr;
    status immediate_;
    bool has_immediate_ = false;
  };

  explicit mpi_communicator(MPI_Comm comm) : mpi_communicator(comm, options{}) {}
  mpi_communicator(MPI_Comm comm, options opt) : s_(std::make_unique<detail::mpi::state>()) {
    s_->checked = opt.checked;
    s_->timeout = opt.timeout;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      s_->init = {errc::communication, "mpi_communicator: MPI is not initialized (call MPI_Init first)"};
      return;
    }
    // Each set-up call in turn; the first that fails is recorded in init and ends set-up.
    const auto ok = [&](const char* call, int rc) {
      if (rc != MPI_SUCCESS)
        s_->init = {errc::communication,
                    std::string("mpi_communicator: ") + call + ": " + detail::mpi::error_string(rc)};
      return rc == MPI_SUCCESS;
    };
    // Commutative ops: float addition is, and rounding a commutative sum keeps it so
    // (it is not associative: the reduction order decides the roundings).
    if (!ok("MPI_Comm_dup", MPI_Comm_dup(comm, &s_->comm)) ||
        !ok("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(s_->comm, MPI_ERRORS_RETURN)) ||
        !ok("MPI_Comm_dup", MPI_Comm_dup(s_->comm, &s_->check_comm)) ||
        !ok("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(s_->check_comm, MPI_ERRORS_RETURN)) ||
        !ok("MPI_Op_create", MPI_Op_create(&detail::mpi::wrapping_sum_u8, /*commute=*/1, &s_->u8_sum)) ||
        !ok("MPI_Op_create", MPI_Op_create(&detail::mpi::half_sum<bfloat16>, /*commute=*/1, &s_->bf16_op)) ||
        !ok("MPI_Op_create", MPI_Op_create(&detail::mpi::half_sum<float16>, /*commute=*/1, &s_->fp16_op)))
      return;
    MPI_Comm_rank(s_->comm, &s_->rank);
    MPI_Comm_size(s_->comm, &s_->size);
  }

  mpi_communicator(mpi_communicator&&) noexcept = default;
  mpi_communicator& operator=(mpi_communicator&& o) noexcept {
    if (this != &o) {
      free_comms();
      s_ = std::move(o.s_);
    }
    return *this;
  }
  mpi_communicator(const mpi_communicator&) = delete;
  mpi_communicator& operator=(const mpi_communicator&) = delete;
  ~mpi_communicator() { free_comms(); }

  // Not ok when the constructor could not set the communicator up; every
  // collective then returns this status.
  const status& init_status() const { return s_->init; }

  int rank() const noexcept { return s_->rank; }
  int size() const noexcept { return s_->size; }
  MPI_Comm native() const noexcept { return s_->comm; }

  bool checked() const noexcept { return s_->checked; }
  // Every rank must switch at the same point of its collective sequence.
  void set_checked(bool on) noexcept { s_->checked = on; }
  std::chrono::milliseconds timeout() const noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(s_->timeout);
  }
  void set_timeout(std::chrono::milliseconds t) noexcept { s_->timeout = t; }

  status barrier() { return start<float>(collective::barrier, {}, {}, 0).wait(); }

  template <reducible T> status all_reduce(std::span<const T> in, std::span<T> out) {
    return start_all_reduce(in, out).wait();
  }
  template <reducible T> status reduce_scatter(std::span<const T> in, std::span<T> out) {
    return start_reduce_scatter(in, out).wait();
  }
  template <reducible T> status all_gather(std::span<const T> in, std::span<T> out) {
    return start_all_gather(in, out).wait();
  }
  template <reducible T> status reduce(std::span<const T> in, std::span<T> out, int root) {
    return start<T>(collective::reduce, in, out, root).wait();
  }
  template <reducible T> status broadcast(std::span<T> buf, int root) {
    return start<T>(collective::broadcast, std::span<const T>(buf), buf, root).wait();
  }

  template <reducible T> request start_all_reduce(std::span<const T> in, std::span<T> out) {
    return start<T>(collective::all_reduce, in, out, 0);
  }
  template <reducible T> request start_reduce_scatter(std::span<const T> in, std::span<T> out) {
    return start<T>(collective::reduce_scatter, in, out, 0);
  }
  template <reducible T> request start_all_gather(std::span<const T> in, std::span<T> out) {
    return start<T>(collective::all_gather, in, out, 0);
  }

  // Waits (up to timeout() in all) for every collective still in flight,
  // including those whose request was dropped or whose wait() timed out.
  status drain() {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (;;) {
      s_->advance();
      std::size_t open = 0;
      for (const auto& p : s_->live) open += p->ph != detail::mpi::phase::done;
      if (open == 0) {
        for (auto& p : s_->live) p->timed_out = false;
        return {};
      }
      const auto waited = clock::now() - t0;
      if (waited >= s_->timeout)
        return {errc::timeout, "drain: rank " + std::to_string(s_->rank) + " waited " +
                                   detail::mpi::seconds(std::chrono::duration<double>(waited).count()) + " and " +
                                   std::to_string(open) + " collective(s) are still pending"};
      std::this_thread::yield();
    }
  }

  // Ends every process of the communicator (MPI_Abort). Does not return.
  [[noreturn]] void abort(int code) {
    MPI_Abort(s_ && s_->comm != MPI_COMM_NULL ? s_->comm : MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort should not return; make sure
  }

 private:
  template <class T>
  request start(collective kind, std::span<const T> in, std::span<T> out, int root) {
    namespace m = detail::mpi;
    auto& s = *s_;
    const std::string what = collective_name(kind);
    if (!s.init.ok()) return request(s.init);
    s.advance();
    if (const m::pending* p = s.stuck())
      return request(status{errc::communication,
                            what + ": refused: an earlier " + collective_name(p->kind) + " timed out after " +
                                m::seconds(p->waited_s) +
                                " and is still pending; wait() on it again, drain(), or abort()"});

    const int n = s.size;
    const std::size_t ni = in.size(), no = out.size();
    std::size_t count = 0;  // the length that must agree across ranks
    m::local_error err = m::none;
    bool in_place = false;
    const auto ib = reinterpret_cast<std::uintptr_t>(in.data()), ob = reinterpret_cast<std::uintptr_t>(out.data());
    const bool overlap = in.size_bytes() && out.size_bytes() && ib < ob + out.size_bytes() && ob < ib + in.size_bytes();
    switch (kind) {
      case collective::all_reduce:
      case collective::reduce:
      case collective::broadcast:
        count = ni;
        if (ni != no) err = m::send_recv_differ;
        in_place = ib == ob;
        if (kind != collective::all_reduce && (root < 0 || root >= n)) err = m::root_out_of_range;
        break;
      case collective::reduce_scatter:
        count = no;
        if (ni != no * std::size_t(n)) err = m::scatter_shape;
        in_place = ob == ib + std::size_t(s.rank) * out.size_bytes();
        break;
      case collective::all_gather:
        count = ni;
        if (no != ni * std::size_t(n)) err = m::gather_shape;
        in_place = ib == ob + std::size_t(s.rank) * in.size_bytes();
        break;
      default: break;
    }
    if (err == m::none && (ni > std::size_t(INT_MAX) || no > std::size_t(INT_MAX))) err = m::count_too_large;
    if (err == m::none && overlap && !in_place && kind != collective::broadcast) err = m::partial_overlap;
    if (kind != collective::reduce && kind != collective::broadcast) root = 0;

    if (!s.checked && err != m::none)
      return request(status{errc::size_mismatch, what + ": rank " + std::to_string(s.rank) + ": " +
                                                     m::describe(err, std::int64_t(m::clamp_value(ni)),
                                                                 std::int64_t(m::clamp_value(no)), root, n)});

    auto owned = std::make_unique<m::pending>();
    m::pending& p = *owned;
    p.kind = kind;
    p.type_id = m::type_traits<T>::id;
    p.datatype = m::type_traits<T>::datatype();
    p.elem_size = sizeof(T);
    p.send = in.data();
    p.recv = out.data();
    p.count = int(count <= std::size_t(INT_MAX) ? count : 0);
    p.root = root;
    p.in_place = in_place;

    if (s.checked) {
      const std::int64_t key = m::key_of(s.rank) << m::value_bits;
      const bool bad = err != m::none;
      auto& v = p.mine;
      v[m::err_code] = bad ? key | std::int64_t(err) : -1;
      v[m::err_in] = bad ? key | m::clamp_value(ni) : -1;
      v[m::err_out] = bad ? key | m::clamp_value(no) : -1;
      v[m::err_root] = bad ? key | m::clamp_value(std::uint64_t(std::int64_t(root) + (std::int64_t(1) << 40))) : -1;
      const std::int64_t c = m::clamp_value(count);
      v[m::count_max] = (c << m::key_bits) | m::key_of(s.rank);
      v[m::count_min_neg] = ((m::value_cap - c) << m::key_bits) | m::key_of(s.rank);
      v[m::kind_max] = std::int64_t(kind);
      v[m::kind_min_neg] = -std::int64_t(kind);
      v[m::type_max] = p.type_id;
      v[m::type_min_neg] = -std::int64_t(p.type_id);
      v[m::root_max] = root;
      v[m::root_min_neg] = -std::int64_t(root);
      if (int rc = MPI_Iallreduce(p.mine.data(), p.agreed.data(), m::check_slots, MPI_INT64_T, MPI_MAX, s.check_comm,
                                  &p.req);
          rc != MPI_SUCCESS) {
        return request(m::mpi_error(kind, "MPI_Iallreduce (argument check)", rc));
      }
      p.ph = m::phase::checking;
    } else {
      p.ph = m::phase::ready;
    }
    s.live.push_back(std::move(owned));
    s.advance();  // starts the collective now if nothing earlier holds it back
    return request(&s, &p);
  }

  void free_comms() {
    if (!s_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    // Collectives MPI may still write into: keep their memory alive (leak it).
    for (auto& p : s_->live)
      if (p->ph != detail::mpi::phase::done) (void)p.release();
    s_->live.clear();
    if (!finalized) {
      if (s_->check_comm != MPI_COMM_NULL) MPI_Comm_free(&s_->check_comm);
      if (s_->comm != MPI_COMM_NULL) MPI_Comm_free(&s_->comm);
      if (s_->u8_sum != MPI_OP_NULL) MPI_Op_free(&s_->u8_sum);
      if (s_->bf16_op != MPI_OP_NULL) MPI_Op_free(&s_->bf16_op);
      if (s_->fp16_op != MPI_OP_NULL) MPI_Op_free(&s_->fp16_op);
    }
    s_.reset();
  }

  std::unique_ptr<detail::mpi::state> s_;
};

TAGC_END_NAMESPACE
