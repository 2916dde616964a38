// dir_lock.hpp: one run at a time writes a checkpoint directory — D/LOCK names its holder
// (host, pid, run id). A second run (a job relaunched while the old one still runs,
// another experiment pointed at the same place) is refused at start with the holder
// named. A lock whose process is gone (its pid is dead on this host: a kill -9, an
// MPI_Abort) is stale and taken over, with a note. On a shared file system a holder on
// another host cannot be checked: the message says how to remove it.
// defines: train::DirLock
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace train {

class DirLock {
 public:
  // Creates D if needed and takes D/LOCK. Throws std::runtime_error naming the holder.
  // `note`: set when a stale lock was replaced.
  static std::unique_ptr<DirLock> acquire(const std::filesystem::path& dir, std::string* note);
  ~DirLock();  // removes the lock if it is still this process's
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  // Records the run id (known after a resume) in the lock.
  void set_run(const std::string& run_id);

 private:
  explicit DirLock(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace train
