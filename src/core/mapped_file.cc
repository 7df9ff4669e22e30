// mmap-based file access.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln {

Expected<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("{}: not a regular file", path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return IoError("{}: cannot mmap {} bytes: {}", path, size, std::strerror(err));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::Prefetch() const {
  if (data_ != nullptr) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_WILLNEED);
}

void DropMappedPages(const void* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
  // Pages shared with neighbouring data are kept; failure only keeps them too.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Expected<std::string> ReadFileToString(const std::string& path) {
  // A folder opens as a stream that reads nothing: say what it is instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return IoError("{}: is a folder, not a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("{}: read failed", path);
  return ss.str();
}

}  // namespace kiln
