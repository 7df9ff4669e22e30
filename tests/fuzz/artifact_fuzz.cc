// Fuzzes the .kiln artifact reader: the container (header, section table,
// checksums, bounds), then what loading does with a file that opened: the
// metadata JSON, the model config and the weights over the sections. Each
// input is tried as it is and resealed (its checksums recomputed), so that
// mutations also reach past the checksums.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/artifact_file.h"
#include "format/weight_store.h"

namespace {

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The input with its checksums made right (where its offsets allow), so
// that mutations get past them to the table, the metadata and the weights.
std::vector<uint8_t> Resealed(const uint8_t* data, size_t size) {
  std::vector<uint8_t> image(data, data + size);
  if (size < kiln::kArtifactHeaderBytes) return image;
  uint8_t* h = image.data();
  const uint64_t table_offset = Load64(h + 16), table_bytes = Load64(h + 24);
  if (table_offset <= size && table_bytes <= size - table_offset) {
    for (uint64_t e = table_offset; e + kiln::kArtifactEntryBytes <= table_offset + table_bytes;
         e += kiln::kArtifactEntryBytes) {
      const uint64_t offset = Load64(h + e + 32), bytes = Load64(h + e + 40);
      if (offset <= size && bytes <= size - offset) {
        const uint64_t sum = kiln::ArtifactChecksum({h + offset, static_cast<size_t>(bytes)});
        std::memcpy(h + e + 48, &sum, 8);
      }
    }
    const uint64_t table_sum = kiln::ArtifactChecksum({h + table_offset, static_cast<size_t>(table_bytes)});
    std::memcpy(h + 32, &table_sum, 8);
  }
  const uint64_t file_bytes = size;
  std::memcpy(h + 40, &file_bytes, 8);
  const uint64_t header_sum = kiln::ArtifactChecksum({h, 56});
  std::memcpy(h + 56, &header_sum, 8);
  return image;
}

void Check(const uint8_t* data, size_t size) {
  auto parsed = kiln::ArtifactFile::Parse(data, size, "fuzz.kiln");
  if (!parsed.ok()) return;
  std::shared_ptr<const kiln::ArtifactFile> file = std::move(parsed).value();
  (void)file->VerifyAll();
  for (const kiln::ArtifactSection& s : file->sections()) {
    // Every section lies inside the input.
    if (s.bytes > 0 && (s.data < data || s.data + s.bytes > data + size)) __builtin_trap();
  }
  const kiln::ArtifactSection* meta = file->Find("metadata");
  if (meta == nullptr) return;
  nlohmann::json m = nlohmann::json::parse(meta->text(), nullptr, false);
  if (m.is_discarded() || !m.is_object()) return;
  auto field = [&](const char* key) { return m.contains(key) ? m[key].dump() : std::string("null"); };
  auto store = kiln::WeightStore::FromArtifact(file, field("config"), field("tensors"), field("packed"));
  if (!store.ok()) return;
  // Every weight's bytes lie inside the input and match its shape.
  for (const kiln::Weight& w : (*store)->weights()) {
    if (w.nbytes > 0 && (w.data < data || w.data + w.nbytes > data + size)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Check(data, size);
  const std::vector<uint8_t> resealed = Resealed(data, size);
  Check(resealed.data(), resealed.size());
  return 0;
}
