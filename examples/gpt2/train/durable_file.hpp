// durable_file.hpp: files that are either absent or complete and on disk — written to
// "<path>.tmp", fsync'ed, renamed over <path>, and the directory fsync'ed, so neither a
// crash nor a power cut leaves a half-written file under the real name, and a rename
// that returned is not lost.
// defines: train::DurableFile, train::write_file_durably, train::sync_directory,
//          train::commit_written_file, train::install_directory
#pragma once

#include "crc32c.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace train {

// Streams bytes into <path>.tmp with a running CRC-32C; commit() makes it <path>.
// Destroyed without commit(): the .tmp file is removed. Errors: std::runtime_error
// naming the file and the system's reason (disk full, permission, ...).
class DurableFile {
 public:
  explicit DurableFile(std::filesystem::path path);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write(const void* data, size_t bytes);
  uint64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_.value(); }
  const std::filesystem::path& path() const { return path_; }
  void commit();  // fsync, close, rename, fsync the directory

 private:
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  Crc32c crc_;
};

// A small file in one go (manifests, pointers).
void write_file_durably(const std::filesystem::path& path, const std::string& contents);
// fsync of a directory: makes the creations, renames and removals in it durable.
void sync_directory(const std::filesystem::path& dir);
// A file another writer has closed at `written` (e.g. "<path>.tmp"): fsync it, rename it
// over `path`, fsync the directory. Until the rename, `path` keeps its old contents.
void commit_written_file(const std::filesystem::path& written, const std::filesystem::path& path);
// Puts the complete directory `fresh` at `target` (same parent). If `target` exists it
// is replaced without ever being absent where the file system can exchange two names
// atomically (Linux renameat2 RENAME_EXCHANGE); elsewhere it is first renamed to
// `retired` (still complete, under another name) and removed only once `fresh` is in.
void install_directory(const std::filesystem::path& fresh, const std::filesystem::path& target,
                       const std::filesystem::path& retired);

}  // namespace train
