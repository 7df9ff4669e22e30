// Rewrites a compiled artifact with its metadata changed, sealed with fresh
// checksums, as a file from another build or machine would be: how the
// tests make stale artifacts.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

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

// The edit most tests want: another kernel-layout version.
inline void BumpKernelLayoutVersion(nlohmann::json& meta) {
  meta["kernel_layout_version"] = meta["kernel_layout_version"].get<int>() + 1;
}

}  // namespace kiln::testing
