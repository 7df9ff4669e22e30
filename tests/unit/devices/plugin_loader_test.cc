// The plugin loader refuses, with a message naming the file and the
// problem and without registering anything, every kind of bad plugin; and
// the test accelerators arrive through the plugin boundary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/backend.h"
#include "backend/plugin/plugin_backend.h"
#include "backend/plugin/plugin_loader.h"
#include "../compiler/compiler_test_util.h"
#include "compiler/compiled_model.h"
#include "testing/test_paths.h"

namespace kiln {
namespace plugin_loader_tests {

std::string FaultPlugin(const std::string& fault) {
  return testing::BinaryDir() + "/test_plugins/libkiln_backend_fault_" + fault + ".so";
}

// Loads `path`, expecting a refusal whose message has `path` and `problem`.
void ExpectRefused(const std::string& path, const std::string& problem) {
  BackendRegistry& r = BackendRegistry::Get();
  const std::string before = r.Names();
  Status s = r.LoadPlugin(path);
  ASSERT_FALSE(s.ok()) << path;
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(problem), std::string::npos) << s.message();
  EXPECT_EQ(r.Names(), before);
}

TEST(PluginLoader, TheTestAcceleratorsAreLoadedAsPlugins) {
  for (const char* name : {"testaccel", "testaccel-mm"}) {
    auto* b = dynamic_cast<PluginBackend*>(BackendRegistry::Get().Find(name));
    ASSERT_NE(b, nullptr) << name << " is not a plugin backend; have " << BackendRegistry::Get().Names();
    EXPECT_NE(b->library().find(std::string("libkiln_backend_") + name + ".so"), std::string::npos);
    EXPECT_TRUE(b->support().Supports(OpKind::kLinear));
  }
  EXPECT_TRUE(BackendRegistry::Get().Find("testaccel-mm")->support().Supports(OpKind::kAttnScores));
  EXPECT_FALSE(BackendRegistry::Get().Find("testaccel")->support().Supports(OpKind::kAttnScores));
  EXPECT_TRUE(BackendRegistry::Get().startup_errors().empty());
}

TEST(PluginLoader, RefusesAFileThatIsNotALibrary) {
  std::string path = testing::MakeTempDir() + "/libkiln_backend_text.so";
  std::ofstream(path) << "not a shared library\n";
  ExpectRefused(path, "cannot be loaded as a shared library");
}

TEST(PluginLoader, RefusesAMissingFile) {
  std::string path = testing::MakeTempDir() + "/libkiln_backend_absent.so";
  BackendRegistry& r = BackendRegistry::Get();
  Status s = r.LoadPlugin(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(PluginLoader, RefusesALibraryWithoutTheEntryPoint) {
  ExpectRefused(FaultPlugin("no_entry"), "missing the symbol kiln_backend_plugin_entry");
}

TEST(PluginLoader, RefusesAnotherAbiVersion) {
  ExpectRefused(FaultPlugin("abi_version"), "plugin ABI version 2; this kiln speaks version 1");
}

TEST(PluginLoader, RefusesAStructTooSmall) {
  ExpectRefused(FaultPlugin("struct_size"), "struct kiln_backend of 16 bytes is smaller than ABI 1's");
}

TEST(PluginLoader, RefusesAMissingFunction) {
  ExpectRefused(FaultPlugin("missing_function"), "lacks the function bind");
}

TEST(PluginLoader, RefusesASupportListNamingAnUnknownOp) {
  ExpectRefused(FaultPlugin("unknown_op"), "names unknown op 'frobnicate'");
}

TEST(PluginLoader, RefusesANameThatIsTaken) {
  ExpectRefused(FaultPlugin("name_clash"), "backend name 'cpu' is already taken");
  // The valid plugin loads once; the same library under another file name
  // then clashes with it.
  BackendRegistry& r = BackendRegistry::Get();
  ASSERT_TRUE(r.LoadPlugin(FaultPlugin("valid")).ok());
  ASSERT_NE(r.Find("faulty"), nullptr);
  EXPECT_TRUE(r.LoadPlugin(FaultPlugin("valid")).ok());  // the same file again: nothing to do
  std::string copy = testing::MakeTempDir() + "/libkiln_backend_copy.so";
  std::filesystem::copy_file(FaultPlugin("valid"), copy);
  ExpectRefused(copy, "backend name 'faulty' is already taken");
}

TEST(PluginLoader, AKernelThePluginCannotBindFailsCompilationWithItsMessage) {
  ASSERT_TRUE(BackendRegistry::Get().LoadPlugin(FaultPlugin("valid")).ok());
  auto store = testing::SmallModel(Architecture::kLlama);
  ASSERT_NE(store, nullptr);
  CompileOptions o;
  o.backend = "faulty";  // it takes the adds, and refuses to bind them
  o.max_batch_tokens = 4;
  o.threads = 1;
  auto m = CompiledModel::Compile(*store, o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("faulty: bind: this plugin only tests loading"), std::string::npos)
      << m.status().message();
}

TEST(PluginLoader, FindsPluginFilesInASearchPath) {
  std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/libkiln_backend_b.so") << "x";
  std::ofstream(dir + "/libkiln_backend_a.so") << "x";
  std::ofstream(dir + "/libother.so") << "x";
  std::ofstream(dir + "/libkiln_backend_c.txt") << "x";
  auto files = PluginFilesIn("/no/such/dir:" + dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], dir + "/libkiln_backend_a.so");
  EXPECT_EQ(files[1], dir + "/libkiln_backend_b.so");
}

}  // namespace plugin_loader_tests
}  // namespace kiln
