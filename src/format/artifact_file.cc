// Reading and writing the .kiln container.
#include "format/artifact_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "core/mapped_file.h"

namespace kiln {
namespace {

uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void StoreU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

uint64_t AlignUp(uint64_t n) { return (n + kArtifactAlignment - 1) / kArtifactAlignment * kArtifactAlignment; }

// Header field offsets.
constexpr size_t kVersionAt = 8, kCountAt = 12, kTableOffsetAt = 16, kTableBytesAt = 24, kTableHashAt = 32,
                 kFileBytesAt = 40, kHeaderHashAt = 56;
// Entry field offsets.
constexpr size_t kNameBytes = 32, kOffsetAt = 32, kBytesAt = 40, kHashAt = 48, kFlagsAt = 56;

constexpr const char* kRebuild = "rebuild it with `kiln compile`";

// Writes a file in whole, aligned 2 MiB pieces (the last one short): a
// file system with large page-cache folios then caches each piece as one
// 2 MiB folio, which a mapping can map with one page-table entry
// (core/page_prefault.h), where pieces that start mid-folio are cached
// in 4 KiB pages. The bytes go through one buffer of that size.
class AlignedPieceWriter {
 public:
  static constexpr size_t kPieceBytes = size_t{2} << 20;

  explicit AlignedPieceWriter(int fd) : fd_(fd), buffer_(kPieceBytes) {}

  bool Append(const uint8_t* data, size_t bytes) {
    while (bytes > 0) {
      const size_t n = std::min(bytes, kPieceBytes - used_);
      if (data != nullptr) {
        std::memcpy(buffer_.data() + used_, data, n);
        data += n;
      } else {
        std::memset(buffer_.data() + used_, 0, n);
      }
      used_ += n;
      bytes -= n;
      if (used_ == kPieceBytes && !Flush()) return false;
    }
    return true;
  }
  bool Zeros(size_t bytes) { return Append(nullptr, bytes); }

  bool Flush() {
    size_t done = 0;
    while (done < used_) {
      const ssize_t n = ::write(fd_, buffer_.data() + done, used_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    used_ = 0;
    return true;
  }

 private:
  int fd_;
  std::vector<uint8_t> buffer_;
  size_t used_ = 0;
};

}  // namespace

uint64_t ArtifactChecksum(std::span<const uint8_t> bytes) { return XXH64(bytes.data(), bytes.size(), 0); }

ArtifactFile::~ArtifactFile() = default;

Expected<std::unique_ptr<ArtifactFile>> ArtifactFile::Open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(path));
  auto file = std::unique_ptr<ArtifactFile>(new ArtifactFile());
  file->name_ = path;
  file->data_ = mapped->data();
  file->size_ = mapped->size();
  file->mapped_ = std::move(mapped);
  KILN_RETURN_IF_ERROR(file->ParseImage());
  return file;
}

Expected<std::unique_ptr<ArtifactFile>> ArtifactFile::Parse(const uint8_t* data, size_t size,
                                                            const std::string& name) {
  auto file = std::unique_ptr<ArtifactFile>(new ArtifactFile());
  file->name_ = name;
  file->data_ = data;
  file->size_ = size;
  KILN_RETURN_IF_ERROR(file->ParseImage());
  return file;
}

Status ArtifactFile::ParseImage() {
  if (size_ < sizeof(kArtifactMagic) || std::memcmp(data_, kArtifactMagic, sizeof(kArtifactMagic)) != 0) {
    return InvalidArgument("{}: not a kiln artifact (no KILNART magic)", name_);
  }
  if (size_ < kArtifactHeaderBytes) {
    return Corrupt("{}: truncated: {} bytes, shorter than the {}-byte header; {}", name_, size_,
                   kArtifactHeaderBytes, kRebuild);
  }
  version_ = LoadU32(data_ + kVersionAt);
  const uint64_t header_hash = LoadU64(data_ + kHeaderHashAt);
  if (XXH64(data_, kHeaderHashAt, 0) != header_hash) {
    return Corrupt("{}: the header fails its checksum (the file is damaged); {}", name_, kRebuild);
  }
  if (version_ != kArtifactFormatVersion) {
    return Unsupported("{}: artifact format version {}, this kiln reads version {}; {}", name_, version_,
                       kArtifactFormatVersion, kRebuild);
  }
  const uint64_t file_bytes = LoadU64(data_ + kFileBytesAt);
  if (file_bytes != size_) {
    return Corrupt("{}: {}: {} bytes where the header says {}; {}", name_,
                   size_ < file_bytes ? "truncated" : "trailing bytes", size_, file_bytes, kRebuild);
  }
  const uint32_t count = LoadU32(data_ + kCountAt);
  const uint64_t table_offset = LoadU64(data_ + kTableOffsetAt);
  const uint64_t table_bytes = LoadU64(data_ + kTableBytesAt);
  if (table_bytes != uint64_t{count} * kArtifactEntryBytes || table_offset < kArtifactHeaderBytes ||
      table_offset > size_ || table_bytes > size_ - table_offset) {
    return Corrupt("{}: the section table ({} entries at {}) lies outside the file", name_, count, table_offset);
  }
  const uint8_t* table = data_ + table_offset;
  if (XXH64(table, table_bytes, 0) != LoadU64(data_ + kTableHashAt)) {
    return Corrupt("{}: the section table fails its checksum (the file is damaged); {}", name_, kRebuild);
  }
  std::set<std::string, std::less<>> names;
  sections_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = table + size_t{i} * kArtifactEntryBytes;
    ArtifactSection s;
    const void* nul = std::memchr(e, 0, kNameBytes);
    if (nul == nullptr || nul == e) return Corrupt("{}: section {} has no name", name_, i);
    s.name.assign(reinterpret_cast<const char*>(e), static_cast<size_t>(static_cast<const uint8_t*>(nul) - e));
    s.offset = LoadU64(e + kOffsetAt);
    s.bytes = LoadU64(e + kBytesAt);
    s.checksum = LoadU64(e + kHashAt);
    s.flags = LoadU32(e + kFlagsAt);
    if (s.offset % kArtifactAlignment != 0 || s.offset > size_ || s.bytes > size_ - s.offset) {
      return Corrupt("{}: section '{}' ({} bytes at {}) lies outside the file or off a page boundary", name_,
                     s.name, s.bytes, s.offset);
    }
    if (!names.insert(s.name).second) return Corrupt("{}: section '{}' appears twice", name_, s.name);
    s.data = data_ + s.offset;
    if ((s.flags & kVerifyAtOpen) != 0) KILN_RETURN_IF_ERROR(Verify(s));
    sections_.push_back(std::move(s));
  }
  return Status::Ok();
}

const ArtifactSection* ArtifactFile::Find(std::string_view name) const {
  for (const ArtifactSection& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Expected<const ArtifactSection*> ArtifactFile::Require(std::string_view name) const {
  const ArtifactSection* s = Find(name);
  if (s == nullptr) return Corrupt("{}: no section '{}'; {}", name_, name, kRebuild);
  return s;
}

Status ArtifactFile::Verify(const ArtifactSection& s) const {
  if (ArtifactChecksum(s.span()) != s.checksum) {
    return Corrupt("{}: section '{}' fails its checksum (the file is damaged); {}", name_, s.name, kRebuild);
  }
  return Status::Ok();
}

Status ArtifactFile::VerifyAll() const {
  for (const ArtifactSection& s : sections_) KILN_RETURN_IF_ERROR(Verify(s));
  return Status::Ok();
}

bool IsArtifactFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kArtifactMagic)] = {};
  if (!in.read(magic, sizeof(magic))) return false;
  return std::memcmp(magic, kArtifactMagic, sizeof(magic)) == 0;
}

bool ArtifactHasSection(const std::string& path, std::string_view section) {
  std::ifstream in(path, std::ios::binary);
  uint8_t header[kArtifactHeaderBytes] = {};
  if (!in.read(reinterpret_cast<char*>(header), sizeof(header))) return false;
  if (std::memcmp(header, kArtifactMagic, sizeof(kArtifactMagic)) != 0) return false;
  uint32_t count = 0;
  uint64_t table = 0;
  std::memcpy(&count, header + kCountAt, 4);
  std::memcpy(&table, header + kTableOffsetAt, 8);
  if (count > (1u << 16)) return false;
  std::vector<char> entries(static_cast<size_t>(count) * kArtifactEntryBytes);
  in.seekg(static_cast<std::streamoff>(table));
  if (!in.read(entries.data(), static_cast<std::streamsize>(entries.size()))) return false;
  for (size_t e = 0; e < entries.size(); e += kArtifactEntryBytes) {
    const char* name = entries.data() + e;
    if (std::string_view(name, strnlen(name, kNameBytes)) == section) return true;
  }
  return false;
}

Status ArtifactWriter::Add(const std::string& name, std::span<const uint8_t> bytes, uint32_t flags) {
  if (name.empty() || name.size() > kArtifactMaxNameBytes) {
    return InvalidArgument("artifact section name '{}': 1 to {} bytes", name, kArtifactMaxNameBytes);
  }
  for (const Pending& p : sections_) {
    if (p.name == name) return InvalidArgument("artifact section '{}' added twice", name);
  }
  sections_.push_back({name, bytes, flags});
  return Status::Ok();
}

Status ArtifactWriter::AddText(const std::string& name, std::string text, uint32_t flags) {
  owned_.push_back(std::make_unique<std::string>(std::move(text)));
  const std::string& s = *owned_.back();
  return Add(name, {reinterpret_cast<const uint8_t*>(s.data()), s.size()}, flags);
}

Status ArtifactWriter::Write(const std::string& path) const {
  const uint64_t table_offset = kArtifactHeaderBytes;
  const uint64_t table_bytes = sections_.size() * kArtifactEntryBytes;
  std::vector<uint8_t> head(table_offset + table_bytes, 0);
  uint64_t offset = AlignUp(table_offset + table_bytes);
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < sections_.size(); ++i) {
    const Pending& p = sections_[i];
    uint8_t* e = head.data() + table_offset + i * kArtifactEntryBytes;
    std::memcpy(e, p.name.data(), p.name.size());
    StoreU64(e + kOffsetAt, offset);
    StoreU64(e + kBytesAt, p.bytes.size());
    StoreU64(e + kHashAt, ArtifactChecksum(p.bytes));
    StoreU32(e + kFlagsAt, p.flags);
    offsets.push_back(offset);
    offset = AlignUp(offset + p.bytes.size());
  }
  // The file ends right after the last section's bytes.
  const uint64_t file_bytes = sections_.empty() ? table_offset + table_bytes
                                                : offsets.back() + sections_.back().bytes.size();
  std::memcpy(head.data(), kArtifactMagic, sizeof(kArtifactMagic));
  StoreU32(head.data() + kVersionAt, kArtifactFormatVersion);
  StoreU32(head.data() + kCountAt, static_cast<uint32_t>(sections_.size()));
  StoreU64(head.data() + kTableOffsetAt, table_offset);
  StoreU64(head.data() + kTableBytesAt, table_bytes);
  StoreU64(head.data() + kTableHashAt, XXH64(head.data() + table_offset, table_bytes, 0));
  StoreU64(head.data() + kFileBytesAt, file_bytes);
  StoreU64(head.data() + kHeaderHashAt, XXH64(head.data(), kHeaderHashAt, 0));

  const std::string temporary = path + ".partial";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("{}: cannot create: {}", temporary, std::strerror(errno));
  AlignedPieceWriter out(fd);
  bool ok = out.Append(head.data(), head.size());
  uint64_t at = head.size();
  for (size_t i = 0; ok && i < sections_.size(); ++i) {
    ok = out.Zeros(static_cast<size_t>(offsets[i] - at));
    const std::span<const uint8_t> bytes = sections_[i].bytes;
    ok = ok && out.Append(bytes.data(), bytes.size());
    at = offsets[i] + bytes.size();
  }
  ok = ok && out.Flush();
  std::string error = ok ? "" : std::strerror(errno);
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = std::strerror(errno);
  }
  if (!ok) {
    std::remove(temporary.c_str());
    return IoError("{}: write failed: {}", path, error);
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::remove(temporary.c_str());
    return IoError("{}: cannot rename {} into place: {}", path, temporary, ec.message());
  }
  return Status::Ok();
}

}  // namespace kiln
