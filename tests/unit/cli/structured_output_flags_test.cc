// kiln generate's --json-schema, --grammar and --json-object: the files
// read into SamplingParams, and the errors for files that cannot be read
// or enforced, which name the flag.
#include "cli/structured_output_flags.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "grammar/json_schema_grammar.h"

namespace kiln::cli {
namespace structured_output_flags_tests {

class StructuredOutputFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_structured_flags_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // Parses `args` as `kiln generate` flags and applies them.
  Status Run(std::vector<std::string> args, SamplingParams* params) {
    CLI::App app;
    StructuredOutputFlags flags;
    AddStructuredOutputFlags(&app, &flags);
    std::vector<const char*> argv = {"generate"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      return InvalidArgument("{}", e.what());
    }
    return ApplyStructuredOutputFlags(flags, params);
  }

  std::filesystem::path dir_;
};

TEST_F(StructuredOutputFlagsTest, SchemaFileBecomesTheJsonSchema) {
  const std::string schema = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{}}})";
  SamplingParams p;
  ASSERT_TRUE(Run({"--json-schema", Write("s.json", schema)}, &p).ok());
  EXPECT_EQ(p.json_schema, schema);  // as written, key order included
  EXPECT_TRUE(p.grammar.empty());
  EXPECT_FALSE(p.json_object);
}

TEST_F(StructuredOutputFlagsTest, GrammarFileAndJsonObject) {
  SamplingParams p;
  ASSERT_TRUE(Run({"--grammar", Write("g.gbnf", "root ::= \"yes\" | \"no\"\n")}, &p).ok());
  EXPECT_EQ(p.grammar, "root ::= \"yes\" | \"no\"\n");
  SamplingParams q;
  ASSERT_TRUE(Run({"--json-object"}, &q).ok());
  EXPECT_TRUE(q.json_object);
  SamplingParams none;
  ASSERT_TRUE(Run({}, &none).ok());
  EXPECT_FALSE(none.constrained());
}

TEST_F(StructuredOutputFlagsTest, BadFilesAreErrorsNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string words;
  };
  const std::string missing = (dir_ / "missing.json").string();
  const std::vector<Case> cases = {
      {{"--json-schema", missing}, "--json-schema: " + missing + ": cannot open"},
      {{"--grammar", missing}, "--grammar: " + missing + ": cannot open"},
      {{"--json-schema", Write("bad.json", "{\"type\":")}, "schema"},
      {{"--json-schema", Write("not.json", R"({"not":{"type":"string"}})")},
       "keyword 'not' is not supported"},
      {{"--json-schema", Write("cycle.json", R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})")},
       "can never complete"},
      {{"--json-schema", Write("big.json", R"({"enum":[")" + std::string(kMaxSchemaBytes, 'a') + "\"]}")},
       "over the limit"},
      {{"--grammar", Write("bad.gbnf", "root ::= (\"a\"")}, "--grammar"},
      {{"--grammar", Write("g.gbnf", "root ::= \"a\""), "--json-object"}, "excludes"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    Status s = Run(c.args, &p);
    ASSERT_FALSE(s.ok()) << c.args[0];
    EXPECT_NE(s.message().find(c.words), std::string::npos) << s.message() << "\nexpected: " << c.words;
    EXPECT_FALSE(p.constrained()) << s.message();
  }
}

}  // namespace structured_output_flags_tests
}  // namespace kiln::cli
