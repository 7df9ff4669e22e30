// mmap + madvise, and reading back the page sizes obtained.
#include "bench/page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace kiln::bench {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ParseHex(std::string_view s, uintptr_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

const char* PageModeName(PageMode mode) {
  return mode == PageMode::kHuge ? "thp" : "4k";
}

std::string TransparentHugePageSetting() {
  std::string text = ReadAll("/sys/kernel/mm/transparent_hugepage/enabled");
  size_t open = text.find('[');
  size_t close = text.find(']', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos) return "unavailable";
  return text.substr(open + 1, close - open - 1);
}

Expected<int64_t> ParseAnonHugeBytes(std::string_view smaps, uintptr_t begin, uintptr_t end) {
  int64_t total = 0;
  bool inside = false;
  size_t pos = 0;
  int line_number = 0;
  while (pos < smaps.size()) {
    size_t eol = smaps.find('\n', pos);
    std::string_view line = smaps.substr(pos, eol == std::string_view::npos ? smaps.npos : eol - pos);
    pos = eol == std::string_view::npos ? smaps.size() : eol + 1;
    ++line_number;
    if (line.empty()) continue;
    // A mapping header starts with "start-end " in hex; field lines with a
    // capitalized "Name:".
    size_t dash = line.find('-');
    size_t space = line.find(' ');
    const bool header = dash != std::string_view::npos && space != std::string_view::npos && dash < space &&
                        line.substr(0, dash).find(':') == std::string_view::npos;
    if (header) {
      uintptr_t lo = 0, hi = 0;
      if (!ParseHex(line.substr(0, dash), &lo) || !ParseHex(line.substr(dash + 1, space - dash - 1), &hi)) {
        return Corrupt("smaps line {}: malformed mapping range '{}'", line_number, line.substr(0, space));
      }
      inside = lo < end && hi > begin;
      continue;
    }
    constexpr std::string_view kField = "AnonHugePages:";
    if (!inside || line.substr(0, kField.size()) != kField) continue;
    std::string_view rest = line.substr(kField.size());
    size_t digits = rest.find_first_not_of(' ');
    if (digits == std::string_view::npos) return Corrupt("smaps line {}: AnonHugePages without a value", line_number);
    int64_t kib = 0;
    auto [ptr, ec] = std::from_chars(rest.data() + digits, rest.data() + rest.size(), kib);
    if (ec != std::errc()) return Corrupt("smaps line {}: AnonHugePages value is not a number", line_number);
    total += kib * 1024;
  }
  return total;
}

Expected<PageBuffer> PageBuffer::Map(size_t bytes, PageMode mode) {
  if (bytes == 0) return InvalidArgument("page buffer: zero bytes");
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Map one huge page more than needed and trim, so the buffer starts on a
  // 2 MiB boundary (a huge page can only back an aligned range).
  const size_t mapped = rounded + kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return ResourceExhausted("page buffer: mmap of {} bytes failed: {}", mapped, std::strerror(errno));
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = aligned + rounded;
  if (start + mapped > tail) munmap(reinterpret_cast<void*>(tail), start + mapped - tail);

  PageBuffer b;
  b.data_ = reinterpret_cast<void*>(aligned);
  b.bytes_ = rounded;
  b.mode_ = mode;
  // Advice that fails (a kernel without THP) leaves the default pages; the
  // huge bytes actually obtained are reported either way.
  madvise(b.data_, rounded, mode == PageMode::kHuge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return b;
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), mode_(other.mode_) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mode_ = other.mode_;
  }
  return *this;
}

PageBuffer::~PageBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

Expected<int64_t> PageBuffer::HugeBytes() const {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_);
  auto bytes = ParseAnonHugeBytes(ReadAll("/proc/self/smaps"), begin, begin + bytes_);
  if (!bytes.ok()) return bytes.status().WithContext("/proc/self/smaps");
  return bytes;
}

}  // namespace kiln::bench
