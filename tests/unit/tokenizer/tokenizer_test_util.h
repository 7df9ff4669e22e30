// Helpers shared by the tokenizer tests: reading the shared test vectors and
// checking the decode invariants every tokenizer must keep.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "testing/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace kiln::testing {

inline std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string TokenizerDataDir() {
  return SharedDir() + "/data/tokenizers";
}

struct TokenizerVector {
  std::string text;
  std::vector<int32_t> ids;
};

// The llama.cpp vectors ggml-vocab-<name>.gguf.inp/.out.
inline std::vector<TokenizerVector> ReadLlamaCppVectors(const std::string& name) {
  std::string base = TokenizerDataDir() + "/llama.cpp-vectors/ggml-vocab-" + name + ".gguf";
  std::string inp = ReadTestFile(base + ".inp");
  std::string out = ReadTestFile(base + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<TokenizerVector> vectors;
  size_t pos = 0;
  while (pos < inp.size()) {
    size_t end = inp.find(separator, pos);
    if (end == std::string::npos) break;
    vectors.push_back({inp.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= vectors.size()) {
      ADD_FAILURE() << base << ".out has more lines than tests";
      break;
    }
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) vectors[i].ids.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, vectors.size()) << base;
  return vectors;
}

inline std::unique_ptr<Tokenizer> LoadTokenizerOrFail(const std::string& path) {
  auto tokenizer = LoadTokenizer(path);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

// Feeds `ids` one by one to a StreamingDecoder: the pieces must join to
// Decode(ids) and none may end inside a UTF-8 character.
inline void ExpectStreamingMatchesDecode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                         bool skip_special = true) {
  StreamingDecoder stream(tokenizer, skip_special);
  std::string joined;
  for (int32_t id : ids) {
    std::string piece = stream.Add(id);
    EXPECT_TRUE(IsValidUtf8(piece)) << "chunk after id " << id;
    joined += piece;
  }
  std::string rest = stream.Flush();
  EXPECT_TRUE(IsValidUtf8(rest));
  joined += rest;
  EXPECT_EQ(joined, tokenizer.Decode(ids, skip_special));
}

inline std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace kiln::testing
