// Where tests find their inputs: the repository, the build tree and the
// shared model and tokenizer data beside the repository.
#pragma once

#include <string>

namespace kiln::testing {

// The repository root.
std::string SourceDir();
// The CMake build directory.
std::string BinaryDir();
// ../shared relative to the repository root, or $KILN_SHARED_DIR.
std::string SharedDir();
// <shared>/models/<name>, e.g. ModelDir("tiny-qwen2").
std::string ModelDir(const std::string& name);
// A fresh empty directory under the build tree, unique per test case.
std::string MakeTempDir();
// The `kiln` executable of this build.
std::string KilnBinary();

}  // namespace kiln::testing
