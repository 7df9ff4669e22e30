// Fuzzes the .kiln artifact reader: the container (header, section table,
// checksums, bounds), then what loading does with a file that opened: the
// metadata JSON, the model config and the weights over the sections.
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "format/artifact_file.h"
#include "format/weight_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = kiln::ArtifactFile::Parse(data, size, "fuzz.kiln");
  if (!parsed.ok()) return 0;
  std::shared_ptr<const kiln::ArtifactFile> file = std::move(parsed).value();
  (void)file->VerifyAll();
  for (const kiln::ArtifactSection& s : file->sections()) {
    // Every section lies inside the input.
    if (s.bytes > 0 && (s.data < data || s.data + s.bytes > data + size)) __builtin_trap();
  }
  const kiln::ArtifactSection* meta = file->Find("metadata");
  if (meta == nullptr) return 0;
  nlohmann::json m = nlohmann::json::parse(meta->text(), nullptr, false);
  if (m.is_discarded() || !m.is_object()) return 0;
  auto field = [&](const char* key) { return m.contains(key) ? m[key].dump() : std::string("null"); };
  auto store = kiln::WeightStore::FromArtifact(file, field("config"), field("tensors"), field("packed"));
  if (!store.ok()) return 0;
  // Every weight's bytes lie inside the input and match its shape.
  for (const kiln::Weight& w : (*store)->weights()) {
    if (w.nbytes > 0 && (w.data < data || w.data + w.nbytes > data + size)) __builtin_trap();
  }
  return 0;
}
