#pragma once
// defines: tagc::errc, tagc::status, TAGC_TRY.
//
// Errors are values inside the library: no exceptions, no printing, no exit().
// A status names what was wrong ("rank 2 passed 1000 elements, rank 0 passed 1024")
// so the example's main() can print it and return an exit code.

#include <string>
#include <string_view>
#include <utility>

#include "config.hpp"

TAGC_BEGIN_NAMESPACE

enum class errc {
  ok = 0,
  invalid_argument,        // a caller's argument is out of range or inconsistent
  size_mismatch,           // ranks disagree on a length, or a span has the wrong size
  non_finite,              // NaN or Inf in a gradient (or in gradient + residual)
  unsupported_world_size,  // a policy cannot represent this many ranks
  communication,           // the transport failed (MPI/NCCL error string attached)
  timeout,                 // a peer did not arrive in time
  io,                      // a file could not be read or written, or is not ours
  internal,                // a broken invariant: a bug in tagc
};

inline constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid argument";
    case errc::size_mismatch: return "size mismatch";
    case errc::non_finite: return "non-finite value";
    case errc::unsupported_world_size: return "unsupported world size";
    case errc::communication: return "communication failure";
    case errc::timeout: return "timeout";
    case errc::io: return "i/o error";
    case errc::internal: return "internal error";
  }
  return "unknown";
}

class [[nodiscard]] status {
 public:
  status() = default;  // ok
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static status success() { return {}; }

  bool ok() const noexcept { return code_ == errc::ok; }
  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }

  // "size mismatch: rank 1 passed 10 elements, rank 0 passed 12"
  std::string what() const {
    if (ok()) return "ok";
    return std::string(to_string(code_)) + ": " + message_;
  }

 private:
  errc code_ = errc::ok;
  std::string message_;
};

TAGC_END_NAMESPACE

// Propagate an error status to the caller: `TAGC_TRY(comm.barrier());`
#define TAGC_TRY(...)                                  \
  do {                                                 \
    if (::tagc::status tagc_s_ = (__VA_ARGS__); !tagc_s_.ok()) return tagc_s_; \
  } while (0)
