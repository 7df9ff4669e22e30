// Test path helpers.
#include "testing/test_paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace kiln::testing {

std::string SourceDir() { return KILN_SOURCE_DIR; }
std::string BinaryDir() { return KILN_BINARY_DIR; }

std::string SharedDir() {
  if (const char* env = std::getenv("KILN_SHARED_DIR")) return env;
  return std::filesystem::weakly_canonical(std::filesystem::path(KILN_SOURCE_DIR) / ".." / "shared").string();
}

std::string ModelDir(const std::string& name) { return SharedDir() + "/models/" + name; }

std::string MakeTempDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  std::filesystem::path dir = std::filesystem::path(KILN_BINARY_DIR) / "test_tmp" /
                              (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string KilnBinary() { return std::string(KILN_BINARY_DIR) + "/bin/kiln"; }

}  // namespace kiln::testing
