#include "core/system_memory.h"

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace kiln {
namespace {

int64_t MemInfoBytes(std::string_view wanted) {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == wanted) return kib * 1024;
  }
  return 0;
}

}  // namespace

int64_t AvailableMemoryBytes() { return MemInfoBytes("MemAvailable:"); }

int64_t TotalMemoryBytes() { return MemInfoBytes("MemTotal:"); }

}  // namespace kiln
