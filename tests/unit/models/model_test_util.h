// Loading the tiny models and their golden references for the model tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/compiled_model.h"
#include "core/mapped_file.h"
#include "format/weight_store.h"
#include "testing/test_paths.h"

namespace kiln::testing {

inline nlohmann::json LoadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

inline std::vector<int32_t> Ids(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

inline std::vector<float> Floats(const nlohmann::json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct LoadedModel {
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<CompiledModel> model;
};

inline LoadedModel Load(const std::string& path, CompileOptions options = {}) {
  LoadedModel m;
  auto w = WeightStore::Open(path);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return m;
  m.weights = std::move(w).value();
  auto c = CompiledModel::Compile(*m.weights, options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (c.ok()) m.model = std::move(c).value();
  return m;
}

inline CompileOptions Fp32(int threads = 0) {
  CompileOptions o;
  o.precision = Precision::kFp32;
  o.threads = threads;
  return o;
}

}  // namespace kiln::testing
