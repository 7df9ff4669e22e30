// Helpers for the C API tests: handles that release themselves, models
// loaded once per test binary, and the tiny models' reference files.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "kiln/kiln.h"
#include "testing/test_paths.h"

namespace kiln::capi_test {

struct ModelDeleter {
  void operator()(kiln_model* m) const { kiln_model_destroy(m); }
};
struct EngineDeleter {
  void operator()(kiln_engine* e) const { kiln_engine_destroy(e); }
};
struct SessionDeleter {
  void operator()(kiln_session* s) const { kiln_session_destroy(s); }
};
struct CompletionDeleter {
  void operator()(kiln_completion* c) const { kiln_completion_free(c); }
};
struct StringDeleter {
  void operator()(char* s) const { kiln_string_free(s); }
};
using ModelPtr = std::unique_ptr<kiln_model, ModelDeleter>;
using EnginePtr = std::unique_ptr<kiln_engine, EngineDeleter>;
using SessionPtr = std::unique_ptr<kiln_session, SessionDeleter>;
using CompletionPtr = std::unique_ptr<kiln_completion, CompletionDeleter>;
using StringPtr = std::unique_ptr<char, StringDeleter>;

inline std::string ModelPath(const std::string& name) {
  return testing::ModelDir(name);
}

inline ModelPtr LoadModel(const std::string& name) {
  kiln_model* model = nullptr;
  kiln_status s = kiln_model_load(ModelPath(name).c_str(), nullptr, &model);
  EXPECT_EQ(s, KILN_OK) << kiln_last_error();
  return ModelPtr(model);
}

// The model of `name`, loaded once and shared by the tests of a binary.
inline const kiln_model* SharedModel(const std::string& name) {
  static auto* models = new std::map<std::string, ModelPtr>();
  auto it = models->find(name);
  if (it == models->end()) it = models->emplace(name, LoadModel(name)).first;
  return it->second.get();
}

// Engine options for quick tests: two threads, fp32 (so that greedy
// output matches the references exactly), a fixed seed.
inline kiln_engine_options TinyEngineOptions() {
  kiln_engine_options o;
  kiln_engine_options_default(&o);
  o.threads = 2;
  o.precision = "fp32";
  o.seed = 1;
  return o;
}

inline EnginePtr CreateEngine(const kiln_model* model,
                              const kiln_engine_options& options = TinyEngineOptions()) {
  kiln_engine* engine = nullptr;
  kiln_status s = kiln_engine_create(model, &options, &engine);
  EXPECT_EQ(s, KILN_OK) << kiln_last_error();
  return EnginePtr(engine);
}

inline kiln_sampling_params Greedy(int32_t max_tokens, bool ignore_eos = true) {
  kiln_sampling_params p;
  kiln_sampling_params_default(&p);
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = ignore_eos ? 1 : 0;
  return p;
}

inline nlohmann::json Reference(const std::string& model, int prompt) {
  auto text = ReadFileToString(ModelPath(model) + "/reference/prompt_" + std::to_string(prompt) + ".json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

inline std::vector<int32_t> Ids(const kiln_completion& c) {
  return std::vector<int32_t>(c.token_ids, c.token_ids + c.num_tokens);
}

inline std::string Text(const kiln_completion& c) {
  return std::string(c.text, c.text_len);
}

}  // namespace kiln::capi_test
