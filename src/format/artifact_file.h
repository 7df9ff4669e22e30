// The container of a compiled model (`kiln compile`'s .kiln file): a header,
// a table of named sections and the sections themselves, each starting on a
// page boundary so that weights can be mapped and used where they lie.
//
// Layout (little-endian):
//   [0, 64)  header: magic "KILNART\0", format version (u32), section
//            count (u32), table offset (u64), table bytes (u64), the
//            table's xxh64 (u64), the file's bytes (u64), 8 reserved bytes,
//            then the xxh64 of the 56 bytes before it.
//   table    one 64-byte entry per section: name (32 bytes, NUL-padded),
//            offset (u64), bytes (u64), xxh64 of the bytes (u64), flags
//            (u32), 4 reserved bytes.
//   sections at multiples of kArtifactAlignment.
// The header and table are checked whenever the file is opened, and so are
// the sections flagged kVerifyAtOpen (metadata, plan, compiled graph,
// tokenizer); the others (weights, which are large) by Verify on request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln {

class MappedFile;

inline constexpr char kArtifactMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
// Bumped whenever the container's layout changes.
inline constexpr uint32_t kArtifactFormatVersion = 1;
inline constexpr uint64_t kArtifactAlignment = 4096;
inline constexpr size_t kArtifactHeaderBytes = 64;
inline constexpr size_t kArtifactEntryBytes = 64;
inline constexpr size_t kArtifactMaxNameBytes = 31;

// Section flags.
inline constexpr uint32_t kVerifyAtOpen = 1;

struct ArtifactSection {
  std::string name;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t checksum = 0;  // xxh64 of the bytes, seed 0
  uint32_t flags = 0;
  const uint8_t* data = nullptr;

  std::span<const uint8_t> span() const { return {data, static_cast<size_t>(bytes)}; }
  std::string_view text() const { return {reinterpret_cast<const char*>(data), static_cast<size_t>(bytes)}; }
};

// xxh64 (seed 0) of `bytes`.
uint64_t ArtifactChecksum(std::span<const uint8_t> bytes);

class ArtifactFile {
 public:
  // Maps `path` and checks it (see the file comment). Errors name the path
  // and what is wrong: not an artifact, another format version, truncated,
  // a checksum that does not match (which part), a section out of bounds.
  static Expected<std::unique_ptr<ArtifactFile>> Open(const std::string& path);
  // The same over bytes in memory, which must outlive the result (tests,
  // fuzzing). `name` is used in messages.
  static Expected<std::unique_ptr<ArtifactFile>> Parse(const uint8_t* data, size_t size, const std::string& name);

  ~ArtifactFile();
  ArtifactFile(const ArtifactFile&) = delete;
  ArtifactFile& operator=(const ArtifactFile&) = delete;

  const std::string& name() const { return name_; }
  uint32_t format_version() const { return version_; }
  uint64_t size() const { return size_; }
  const std::vector<ArtifactSection>& sections() const { return sections_; }

  // nullptr when absent.
  const ArtifactSection* Find(std::string_view name) const;
  // An error naming the section when absent.
  Expected<const ArtifactSection*> Require(std::string_view name) const;

  // Checks a section's bytes against its checksum; the error names it.
  Status Verify(const ArtifactSection& section) const;
  // Verify for every section.
  Status VerifyAll() const;

  // Whether the bytes are a file's mapping (Open), rather than Parse's
  // bytes in memory: only a mapping's page tables can be prefaulted.
  bool mapped() const { return mapped_ != nullptr; }

 private:
  ArtifactFile() = default;
  Status ParseImage();

  std::string name_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  std::vector<ArtifactSection> sections_;
  std::unique_ptr<MappedFile> mapped_;
};

// Whether `path` names an artifact: a file whose first bytes are the magic.
bool IsArtifactFile(const std::string& path);

// Whether `path` is an artifact whose section table names `section`, read
// from the header and table alone (no checksums: a cheap hint of what the
// file holds, before it is opened; Open checks it).
bool ArtifactHasSection(const std::string& path, std::string_view section);

// Collects sections, then writes them in the order added.
class ArtifactWriter {
 public:
  // Adds a section over `bytes`, which must stay valid until Write. Errors
  // on a name that is empty, longer than kArtifactMaxNameBytes, or taken.
  Status Add(const std::string& name, std::span<const uint8_t> bytes, uint32_t flags = 0);
  // Adds a section holding a copy of `text`.
  Status AddText(const std::string& name, std::string text, uint32_t flags = kVerifyAtOpen);

  // Writes the file (to a temporary name beside `path`, renamed when
  // complete, so a failed write leaves no half file behind).
  Status Write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    std::span<const uint8_t> bytes;
    uint32_t flags = 0;
  };
  std::vector<Pending> sections_;
  std::vector<std::unique_ptr<std::string>> owned_;
};

}  // namespace kiln
