// durable_file.cpp: see durable_file.hpp.
// defines: train::DurableFile, train::write_file_durably, train::sync_directory
#include "durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2 (_GNU_SOURCE)
#include <cstring>
#include <stdexcept>

namespace train {
namespace fs = std::filesystem;

namespace {
std::runtime_error sys_error(const std::string& what, const fs::path& p) {
  return std::runtime_error(what + " " + p.string() + ": " + std::strerror(errno));
}
}  // namespace

DurableFile::DurableFile(fs::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw sys_error("cannot create", tmp_);
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

void DurableFile::write(const void* data, size_t n) {
  crc_.update(data, n);
  bytes_ += n;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw sys_error("cannot write", tmp_);  // ENOSPC: "No space left on device"
    }
    p += w;
    n -= size_t(w);
  }
}

void DurableFile::commit() {
  if (::fsync(fd_) != 0) throw sys_error("cannot fsync", tmp_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw sys_error("cannot close", tmp_);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) throw sys_error("cannot rename " + tmp_.string() + " to", path_);
  sync_directory(path_.parent_path().empty() ? fs::path(".") : path_.parent_path());
}

void write_file_durably(const fs::path& path, const std::string& contents) {
  DurableFile f(path);
  f.write(contents.data(), contents.size());
  f.commit();
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw sys_error("cannot open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw sys_error("cannot fsync directory", dir);
}

void commit_written_file(const fs::path& written, const fs::path& path) {
  const int fd = ::open(written.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw sys_error("cannot open", written);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw sys_error("cannot fsync", written);
  if (::rename(written.c_str(), path.c_str()) != 0) throw sys_error("cannot rename " + written.string() + " to", path);
  sync_directory(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

void install_directory(const fs::path& fresh, const fs::path& target, const fs::path& retired) {
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    if (::rename(fresh.c_str(), target.c_str()) != 0) throw sys_error("cannot rename " + fresh.string() + " to", target);
    sync_directory(parent);
    return;
  }
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    sync_directory(parent);
    fs::remove_all(fresh, ec);  // now the replaced directory
    sync_directory(parent);
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    throw sys_error("cannot exchange " + fresh.string() + " with", target);
#endif
  fs::remove_all(retired, ec);
  if (::rename(target.c_str(), retired.c_str()) != 0) throw sys_error("cannot rename " + target.string() + " to", retired);
  if (::rename(fresh.c_str(), target.c_str()) != 0) throw sys_error("cannot rename " + fresh.string() + " to", target);
  sync_directory(parent);
  fs::remove_all(retired, ec);
  sync_directory(parent);
}

}  // namespace train
