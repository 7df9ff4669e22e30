// tokenizer.json parsing: small hand-written files for the supported
// components, and the errors for malformed or unsupported ones.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_unicode.h"
#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace hf_tokenizer_json_tests {

using nlohmann::json;

// A byte-level BPE over the 256 byte characters plus "ab" and "Ġab".
json ByteLevelJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteToUnicodeUtf8(static_cast<uint8_t>(b))] = b;
  vocab["ab"] = 256;
  vocab["Ġab"] = 257;
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", json::array({"Ġ", "ab"})}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", {{{"id", 258}, {"content", "<|end|>"}, {"special", true}}}},
  };
}

Expected<std::unique_ptr<Tokenizer>> Load(const json& j) {
  return LoadTokenizerFromJson(j.dump(), "test.json");
}

TEST(HfTokenizerJsonTest, ByteLevelBpe) {
  auto tok = Load(ByteLevelJson());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->type(), "byte-level BPE");
  EXPECT_EQ((*tok)->vocab_size(), 259);
  EXPECT_EQ((*tok)->Encode("ab ab<|end|>"), (std::vector<int32_t>{256, 257, 258}));
  EXPECT_EQ((*tok)->eos_id(), -1);  // "<|end|>" is no conventional EOS name
  EXPECT_EQ((*tok)->Decode(std::vector<int32_t>{256, 257, 258}), "ab ab");
}

TEST(HfTokenizerJsonTest, TemplatePostProcessorAddsBosAndEos) {
  json j = ByteLevelJson();
  j["added_tokens"].push_back({{"id", 259}, {"content", "<s>"}, {"special", true}});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}}}},
        {{"Sequence", {{"id", "A"}}}},
        {{"SpecialToken", {{"id", "<|end|>"}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {259}}}}}},
  };
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->Encode("ab"), (std::vector<int32_t>{259, 256, 258}));
  EXPECT_EQ((*tok)->Encode("ab", false), (std::vector<int32_t>{256}));
}

// A Mistral-style SentencePiece tokenizer.json: no normalizer, Metaspace
// pre-tokenizer and decoder.
TEST(HfTokenizerJsonTest, MetaspaceSentencePiece) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"▁", 2}, {"H", 3}, {"i", 4}, {"▁H", 5}, {"▁Hi", 6}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 7 + b;
  json j = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"▁ H", "▁H i"}},
        {"byte_fallback", true},
        {"unk_token", "<unk>"}}},
      {"pre_tokenizer",
       {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}}},
      {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
  };
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->type(), "SentencePiece BPE");
  EXPECT_EQ((*tok)->Encode("Hi"), (std::vector<int32_t>{6}));
  // "first": no prefix after a special token; an existing space is the prefix.
  EXPECT_EQ((*tok)->Encode("<s>Hi"), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ((*tok)->Encode(" Hi"), (std::vector<int32_t>{6}));
  // 'x' is not in the vocabulary: byte fallback.
  EXPECT_EQ((*tok)->Encode("Hix"), (std::vector<int32_t>{6, 7 + 'x'}));
  EXPECT_EQ((*tok)->Decode(std::vector<int32_t>{6, 2, 5}), "Hi  H");
}

struct BadJson {
  std::string label;
  std::function<void(json&)> edit;
  StatusCode code;
  std::string message;  // expected inside the error message
};

TEST(HfTokenizerJsonTest, MalformedOrUnsupportedFilesAreReported) {
  std::vector<BadJson> cases = {
      {"unigram", [](json& j) { j["model"]["type"] = "Unigram"; }, StatusCode::kUnsupported, "Unigram"},
      {"vocab not object", [](json& j) { j["model"]["vocab"] = json::array(); }, StatusCode::kCorrupt,
       "vocab"},
      {"negative id", [](json& j) { j["model"]["vocab"]["zz"] = -4; }, StatusCode::kCorrupt,
       "\"zz\" has id -4"},
      {"huge id", [](json& j) { j["model"]["vocab"]["zz"] = 1 << 30; }, StatusCode::kCorrupt, "zz"},
      {"shared id", [](json& j) { j["model"]["vocab"]["zz"] = 5; }, StatusCode::kCorrupt, "id 5"},
      {"merge unknown piece", [](json& j) { j["model"]["merges"].push_back("a q\xc3\xa9"); },
       StatusCode::kCorrupt, "merge 2"},
      {"merge not a pair", [](json& j) { j["model"]["merges"][0] = "abc"; }, StatusCode::kCorrupt,
       "model.merges[0]"},
      {"pre-tokenizer type",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Foo"}};
       },
       StatusCode::kUnsupported, "pre-tokenizer type \"Foo\""},
      {"empty literal split",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", 7}}}, {"behavior", "Isolated"}};
       },
       StatusCode::kCorrupt, "pattern"},
      {"bad regex",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Isolated"}};
       },
       StatusCode::kInvalidArgument, "(("},
      {"bad behavior",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
       },
       StatusCode::kCorrupt, "Sideways"},
      {"normalizer type",
       [](json& j) {
         j["normalizer"] = {{"type", "BertNormalizer"}};
       },
       StatusCode::kUnsupported, "BertNormalizer"},
      {"decoder type",
       [](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       StatusCode::kUnsupported, "WordPiece"},
      {"added id", [](json& j) { j["added_tokens"][0]["id"] = 1 << 28; }, StatusCode::kCorrupt, "<|end|>"},
      {"added empty", [](json& j) { j["added_tokens"][0]["content"] = ""; }, StatusCode::kCorrupt,
       "added token"},
      {"added type", [](json& j) { j["added_tokens"][0]["special"] = "yes"; }, StatusCode::kCorrupt,
       "added_tokens[0]"},
      {"no model", [](json& j) { j.erase("model"); }, StatusCode::kCorrupt, "model"},
  };
  for (const BadJson& c : cases) {
    json j = ByteLevelJson();
    c.edit(j);
    auto tok = Load(j);
    ASSERT_FALSE(tok.ok()) << c.label;
    EXPECT_EQ(tok.status().code(), c.code) << c.label << ": " << tok.status().ToString();
    EXPECT_NE(tok.status().message().find(c.message), std::string::npos)
        << c.label << ": " << tok.status().ToString();
    EXPECT_NE(tok.status().message().find("test.json"), std::string::npos)
        << c.label << ": " << tok.status().ToString();
  }
}

TEST(HfTokenizerJsonTest, NotJsonOrTooDeep) {
  for (std::string text :
       {std::string("not json"), std::string("{\"model\": "), std::string(500, '[') + std::string(500, ']'),
        std::string("[1, 2]"), std::string("")}) {
    auto tok = LoadTokenizerFromJson(text, "x.json");
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), StatusCode::kCorrupt) << tok.status().ToString();
  }
}

}  // namespace hf_tokenizer_json_tests
}  // namespace kiln::testing
