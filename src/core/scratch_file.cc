#include "core/scratch_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kiln {

namespace {

std::string TemporaryFolder() {
  const char* dir = std::getenv("TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

}  // namespace

Expected<std::shared_ptr<uint8_t>> MapScratchFile(uint64_t bytes) {
  const std::string dir = TemporaryFolder();
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return IoError("{}: {}", dir, std::strerror(errno));
  if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
    return Unsupported("{} is held in memory: a scratch file there could not give its pages back", dir);
  }
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("{}: cannot create an unnamed scratch file: {}", dir, std::strerror(errno));
  if (bytes == 0) bytes = 1;
  // Blocks are reserved now: a full disk is an error here rather than a
  // SIGBUS at some later write through the mapping.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    ::close(fd);
    return IoError("{}: cannot reserve {} bytes for a scratch file: {}", dir, bytes, std::strerror(err));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED)
    return IoError("{}: cannot map a {}-byte scratch file: {}", dir, bytes, std::strerror(err));
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [bytes](uint8_t* q) { ::munmap(q, bytes); });
}

}  // namespace kiln
