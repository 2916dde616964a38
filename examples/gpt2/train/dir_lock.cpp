// dir_lock.cpp: see dir_lock.hpp.
// defines: train::DirLock
#include "dir_lock.hpp"

#include "durable_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace train {
namespace fs = std::filesystem;

namespace {

std::string this_host() {
  char b[256] = {};
  if (::gethostname(b, sizeof b - 1) != 0) return "?";
  return b;
}

std::string lock_text(const std::string& run) {
  return "host " + this_host() + "\npid " + std::to_string(::getpid()) + "\nrun " + run + "\n";
}

struct Holder {
  std::string host, run = "(not yet known)";
  long pid = -1;
};

Holder read_holder(const fs::path& p) {
  Holder h;
  std::ifstream f(p);
  std::string key;
  while (f >> key) {
    if (key == "host") f >> h.host;
    else if (key == "pid") f >> h.pid;
    else if (key == "run") f >> h.run;
  }
  return h;
}

// Is the process running? A zombie (killed, not yet reaped: its parent, mpirun, may be
// gone, and a container's init may reap late) is not.
bool running(long pid) {
  if (pid <= 0) return false;
  if (::kill(pid_t(pid), 0) != 0) return errno != ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: trust kill()
  const size_t close = line.rfind(')');       // "pid (comm) S ..."
  return close == std::string::npos || close + 2 >= line.size() || (line[close + 2] != 'Z' && line[close + 2] != 'X');
}

}  // namespace

std::unique_ptr<DirLock> DirLock::acquire(const fs::path& dir, std::string* note) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("--checkpoint-dir: cannot create " + dir.string() + ": " + ec.message());
  const fs::path path = dir / "LOCK";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const std::string t = lock_text("(not yet known)");
      const bool ok = ::write(fd, t.data(), t.size()) == ssize_t(t.size()) && ::fsync(fd) == 0;
      ::close(fd);
      if (!ok) {
        fs::remove(path, ec);
        throw std::runtime_error("--checkpoint-dir: cannot write " + path.string() + ": " + std::strerror(errno));
      }
      sync_directory(dir);
      return std::unique_ptr<DirLock>(new DirLock(path));
    }
    if (errno != EEXIST)
      throw std::runtime_error("--checkpoint-dir: cannot create " + path.string() + ": " + std::strerror(errno));
    const Holder h = read_holder(path);
    const bool here = h.host == this_host();
    const bool dead = here && h.pid > 0 && !running(h.pid);
    if (!dead || attempt > 0)
      throw std::runtime_error(
          "--checkpoint-dir " + dir.string() + " is in use by another run (run " + h.run + ", pid " +
          std::to_string(h.pid) + " on host " + h.host + ", per " + path.string() +
          "): two runs must not write one directory; wait for it to end or choose another --checkpoint-dir" +
          (here ? std::string() : " (if that process is gone, remove " + path.string() + ")"));
    if (note)
      *note = "--checkpoint-dir " + dir.string() + ": stale lock of pid " + std::to_string(h.pid) + " (run " + h.run +
              ", no longer running on " + h.host + ") replaced";
    fs::remove(path, ec);
  }
  throw std::runtime_error("--checkpoint-dir: cannot take " + path.string());
}

void DirLock::set_run(const std::string& run_id) {
  write_file_durably(path_, lock_text(run_id));  // replaced whole (rename): never half a lock
}

DirLock::~DirLock() {
  const Holder h = read_holder(path_);
  if (h.pid == long(::getpid()) && h.host == this_host()) {
    std::error_code ec;
    fs::remove(path_, ec);
  }
}

}  // namespace train
