// Rewrites a compiled artifact with its metadata or sections changed,
// sealed with fresh checksums, as a file from another build or machine
// would be: how the tests make stale and crafted artifacts.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "format/artifact_file.h"

namespace kiln::testing {

// Writes `out`: the artifact at `path`, every section as it is but the
// metadata, which `edit(nlohmann::json&)` changes. `out` may be `path`'s
// own name only through a temporary (the source stays mapped meanwhile).
template <typename Edit>
void RewriteArtifactMetadata(const std::string& path, const std::string& out, Edit edit) {
  auto file = ArtifactFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ArtifactWriter writer;
  for (const ArtifactSection& s : (*file)->sections()) {
    if (s.name == "metadata") {
      nlohmann::json meta = nlohmann::json::parse(s.text());
      edit(meta);
      ASSERT_TRUE(writer.AddText("metadata", meta.dump()).ok());
    } else {
      ASSERT_TRUE(writer.Add(s.name, s.span(), s.flags).ok());
    }
  }
  ASSERT_TRUE(writer.Write(out).ok()) << out;
}

// Writes `out`: the artifact at `path` with every section's bytes passed
// through `edit(name, std::vector<uint8_t>& bytes)`, which may change them
// and returns whether the section stays; sealed with fresh checksums.
template <typename Edit>
void RewriteArtifactSections(const std::string& path, const std::string& out, Edit edit) {
  auto file = ArtifactFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ArtifactWriter writer;
  std::list<std::vector<uint8_t>> kept;  // the writer refers to the bytes until Write
  for (const ArtifactSection& s : (*file)->sections()) {
    std::vector<uint8_t> bytes(s.data, s.data + s.bytes);
    if (!edit(s.name, bytes)) continue;
    kept.push_back(std::move(bytes));
    ASSERT_TRUE(writer.Add(s.name, {kept.back().data(), kept.back().size()}, s.flags).ok());
  }
  ASSERT_TRUE(writer.Write(out).ok()) << out;
}

// The edit most tests want: another kernel-layout version.
inline void BumpKernelLayoutVersion(nlohmann::json& meta) {
  meta["kernel_layout_version"] = meta["kernel_layout_version"].get<int>() + 1;
}

}  // namespace kiln::testing
