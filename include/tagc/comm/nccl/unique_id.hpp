#pragma once
// defines: tagc::nccl_unique_id(), tagc::exchange_nccl_unique_id() — distributing
//          the ncclUniqueId every rank joins with (part of comm/nccl.hpp; the MPI
//          bootstrap is comm/nccl_mpi_bootstrap.hpp).

#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "types.hpp"

TAGC_BEGIN_NAMESPACE

// A fresh id; call it on one rank and hand the bytes to the others.
inline nccl_expected<nccl_id> nccl_unique_id() {
  nccl_id id{};
  if (const ncclResult_t r = ncclGetUniqueId(&id.value); r != ncclSuccess)
    return ::cuda::std::unexpected(detail::nccl_status(errc::communication, "ncclGetUniqueId", r, nullptr));
  return id;
}

// File rendezvous (ranks sharing a file system, no MPI). Rank 0 creates an id
// and publishes it at `path`: written to a temporary file beside it, then
// renamed, so a reader never sees half a file. The other ranks poll for the
// file until `timeout`. `tag` is stored with the id and must match on every
// rank: give each job its own (e.g. a scheduler job id), so a stale file from
// an earlier run is never taken for this one's. Rank 0 removes an old file
// first; removing the new one once every rank has joined is the caller's call.
inline nccl_expected<nccl_id> exchange_nccl_unique_id(const std::filesystem::path& path, int rank,
                                                            std::string_view tag = {},
                                                            std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
  static constexpr char magic[8] = {'t', 'a', 'g', 'c', 'n', 'i', 'd', '1'};
  const auto fail = [&](errc c, const std::string& m) {
    return ::cuda::std::unexpected(status{c, "exchange_nccl_unique_id(" + path.string() + "): " + m});
  };
  if (rank == 0) {
    auto id = nccl_unique_id();
    if (!id) return id;
    std::error_code ec;
    std::filesystem::remove(path, ec);  // a stale id must not be read while we write
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    std::filesystem::path tmp = path;
    tmp += ".tmp." + std::to_string(stamp);
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      const auto len = std::uint32_t(tag.size());
      f.write(magic, sizeof magic);
      f.write(reinterpret_cast<const char*>(&len), sizeof len);
      f.write(tag.data(), std::streamsize(tag.size()));
      f.write(id->value.internal, sizeof id->value.internal);
      f.flush();
      if (!f) return fail(errc::io, "cannot write " + tmp.string());
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      return fail(errc::io, "cannot rename " + tmp.string() + " to it: " + ec.message());
    }
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_problem = "the file never appeared";
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      char m[sizeof magic] = {};
      std::uint32_t len = 0;
      f.read(m, sizeof m);
      f.read(reinterpret_cast<char*>(&len), sizeof len);
      if (!f || std::memcmp(m, magic, sizeof magic) != 0 || len > 4096) {
        last_problem = "the file is not a tagc NCCL id";
      } else {
        std::string t(len, '\0');
        f.read(t.data(), std::streamsize(len));
        nccl_id id{};
        f.read(id.value.internal, sizeof id.value.internal);
        if (!f) last_problem = "the file is truncated";
        else if (t != tag) last_problem = "its tag is '" + t + "', expected '" + std::string(tag) + "' (stale file?)";
        else return id;
      }
    }
    if (std::chrono::steady_clock::now() > deadline)
      return fail(errc::timeout, "rank " + std::to_string(rank) + " waited " + detail::ms_string(timeout) +
                                     " for rank 0's id: " + last_problem);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TAGC_END_NAMESPACE
