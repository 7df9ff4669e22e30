// A read-only memory mapping of a whole file, for weights and other large inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace kiln {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to data() == nullptr, size() == 0.
  static Expected<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Hints that the whole file will be read soon (MADV_WILLNEED).
  void Prefetch() const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// Drops this process's copies of the whole pages within [data, data +
// bytes) (MADV_DONTNEED), so that they no longer count in its memory; a
// later read brings them back from the file. REQUIRES: the range lies in a
// read-only or shared file mapping (anonymous memory would read back as
// zeros).
void DropMappedPages(const void* data, size_t bytes);

// Reads a whole (small) file into a string.
Expected<std::string> ReadFileToString(const std::string& path);

}  // namespace kiln
