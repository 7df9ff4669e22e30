// The ONNX backend node tests Debian ships (libonnx-testdata), run end to
// end: import, the four stages, the CPU's kernels, compared with the
// expected outputs (float outputs within max|kiln - ref| <= 1e-4 x max(1,
// max|ref|) and cosine >= 0.9999; integer and bool outputs exact). Writes
// the pass table per op type to <build>/onnx_node_tests.md. A test of an op
// kiln claims (the CPU has a kernel for every op of its model) must pass,
// unless node_test_expectations.txt lists it with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "accuracy/tensor_compare.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/half.h"
#include "core/npy.h"
#include "graph/tensor_data.h"
#include "onnx/onnx_io_names.h"
#include "onnx/onnx_reader.h"
#include "onnx/onnx_session.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_node_suite_tests {

namespace fs = std::filesystem;
constexpr const char* kNodeDir = "/usr/share/libonnx-testdata/data/node";

std::string Snake(const std::string& op) {
  std::string s;
  for (size_t i = 0; i < op.size(); ++i) {
    const char c = op[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      const bool prev_lower = i > 0 && !std::isupper(static_cast<unsigned char>(op[i - 1]));
      const bool next_lower = i + 1 < op.size() && std::islower(static_cast<unsigned char>(op[i + 1]));
      if (i > 0 && (prev_lower || next_lower)) s += '_';
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      s += c;
    }
  }
  return s;
}

// The op a test is about: its only op, or the one its name starts with.
std::string OpOfTest(const std::string& test, const OnnxModel& model) {
  std::set<std::string> ops;
  for (const OnnxNode& n : model.graph.nodes) ops.insert(n.op_type);
  if (ops.size() == 1) return *ops.begin();
  std::string best;
  for (const std::string& op : ops) {
    const std::string prefix = "test_" + Snake(op);
    if (test.rfind(prefix, 0) == 0 && prefix.size() > best.size() + 5) best = op;
  }
  return best.empty() ? (ops.empty() ? "?" : *ops.begin()) : best;
}

std::vector<double> Widen(const HostTensor& t) {
  TensorData d(t.type, std::make_shared<const std::string>(t.bytes.begin(), t.bytes.end()));
  auto v = d.ToDoubles();
  return v.ok() ? *v : std::vector<double>{};
}

// "" when `got` matches `want`, else what differs.
std::string Mismatch(const HostTensor& got, const OnnxTensor& want) {
  if (got.type.dims != want.dims) {
    return fmt::format("shape [{}] vs expected [{}]", DimsToString(got.type.dims), DimsToString(want.dims));
  }
  if (got.type.dtype != want.dtype) return fmt::format("dtype {} vs expected {}", DTypeName(got.type.dtype), DTypeName(want.dtype));
  HostTensor w(TensorType{want.dtype, want.dims});
  if (w.bytes.size() != want.data.size()) return "expected data size";
  std::copy(want.data.begin(), want.data.end(), w.bytes.begin());
  const std::vector<double> a = Widen(got), b = Widen(w);
  const bool is_float = GetDTypeInfo(want.dtype).is_float;
  double max_ref = 0, max_abs = 0, dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i]) || std::isnan(a[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return fmt::format("element {}: {} vs expected {}", i, a[i], b[i]);
      continue;
    }
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i]) return fmt::format("element {}: {} vs expected {}", i, a[i], b[i]);
      continue;
    }
    if (!is_float && a[i] != b[i]) return fmt::format("element {}: {} vs expected {}", i, a[i], b[i]);
    max_ref = std::max(max_ref, std::fabs(b[i]));
    max_abs = std::max(max_abs, std::fabs(a[i] - b[i]));
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  // f16 outputs carry f16's own rounding (one part in 2^11).
  const double tol = (want.dtype == DType::kF16 ? 1e-3 : 1e-4) * std::max(1.0, max_ref);
  const double cosine = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 1.0;
  if (max_abs > tol) return fmt::format("max |diff| {:.3g} > {:.3g}", max_abs, tol);
  if (cosine < 0.9999 && max_abs > 1e-6) return fmt::format("cosine {:.6f}", cosine);
  return "";
}

struct Outcome {
  std::string op;
  bool claimed = false;
  bool passed = false;
  std::string why;
  // Against onnxruntime's outputs (KILN_NODE_TESTS_ORT_DIR): compared at all, and agreeing.
  bool ort_compared = false;
  bool ort_agrees = false;
  std::string ort_why;
};

// onnxruntime's outputs of the node tests, as tests/onnx_oracle/node_test_jobs.py
// and ort_run.js --jobs write them: <dir>/<test>/ort/<output name>.npy. Empty: not compared.
std::string OrtDir() {
  const char* d = std::getenv("KILN_NODE_TESTS_ORT_DIR");
  return d != nullptr ? d : "";
}

// kiln's output j against onnxruntime's; sets the outcome's ort fields.
void CompareWithOrt(const fs::path& dir, const OnnxModel& model, const std::vector<HostTensor>& out, Outcome* o) {
  const fs::path ort = fs::path(OrtDir()) / dir.filename() / "ort";
  if (OrtDir().empty() || !fs::is_directory(ort)) return;
  for (size_t j = 0; j < out.size() && j < model.graph.outputs.size(); ++j) {
    const fs::path f = ort / TensorFileName(model.graph.outputs[j].name);
    if (!fs::exists(f)) return;  // onnxruntime did not run this test
  }
  o->ort_compared = true;
  for (size_t j = 0; j < out.size(); ++j) {
    auto npy = ReadNpy((ort / TensorFileName(model.graph.outputs[j].name)).string());
    if (!npy.ok()) {
      o->ort_why = npy.status().message();
      return;
    }
    OnnxTensor want;
    want.dtype = npy->dtype;
    want.dims = npy->dims;
    want.data = SharedBytes(std::move(npy->data));
    std::string m = Mismatch(out[j], want);
    if (!m.empty()) {
      o->ort_why = fmt::format("output {} against onnxruntime: {}", j, m);
      return;
    }
  }
  o->ort_agrees = true;
}

Outcome RunNodeTest(const fs::path& dir) {
  Outcome o;
  auto model = ReadOnnxModel((dir / "model.onnx").string());
  if (!model.ok()) {
    o.op = "?";
    o.why = "read: " + model.status().message();
    return o;
  }
  o.op = OpOfTest(dir.filename().string(), *model);
  o.claimed = true;
  for (const OnnxNode& n : model->graph.nodes) {
    if (n.op_type != "Constant" && (!n.domain.empty() || cpu::FindTensorKernel(n.op_type) == nullptr)) o.claimed = false;
  }
  if (!o.claimed) {
    o.why = "not claimed";
    return o;
  }
  const fs::path data = dir / "test_data_set_0";
  std::map<std::string, HostTensor> feeds;
  for (size_t i = 0; i < model->graph.inputs.size(); ++i) {
    auto t = ReadOnnxTensorFile((data / fmt::format("input_{}.pb", i)).string());
    if (!t.ok()) {
      o.why = "input: " + t.status().message();
      return o;
    }
    HostTensor h(TensorType{t->dtype, t->dims});
    std::copy(t->data.begin(), t->data.end(), h.bytes.begin());
    feeds[model->graph.inputs[i].name] = std::move(h);
  }
  OnnxSessionOptions options;
  options.threads = 1;
  for (const auto& [name, t] : feeds) options.input_shapes[name] = t.type.dims;
  auto session = OnnxSession::Load((dir / "model.onnx").string(), options);
  if (!session.ok() && session.status().message().find("computed at run time") != std::string::npos) {
    // Shapes, scales or pads fed as graph inputs: fix the integer (and the
    // small float) inputs' values at compile time, as `kiln run --fixed-input` does.
    for (const auto& [name, t] : feeds) {
      if (!GetDTypeInfo(t.type.dtype).is_float || t.type.ElementCount() <= 8) options.fixed_inputs[name] = t;
    }
    session = OnnxSession::Load((dir / "model.onnx").string(), options);
  }
  if (!session.ok()) {
    o.why = session.status().message();
    return o;
  }
  auto out = (*session)->Run(feeds);
  if (!out.ok()) {
    o.why = out.status().message();
    return o;
  }
  for (size_t j = 0; j < out->size(); ++j) {
    auto want = ReadOnnxTensorFile((data / fmt::format("output_{}.pb", j)).string());
    if (!want.ok()) {
      o.why = "expected output: " + want.status().message();
      return o;
    }
    std::string m = Mismatch((*out)[j], *want);
    if (!m.empty()) {
      o.why = fmt::format("output {}: {}", j, m);
      return o;
    }
  }
  o.passed = true;
  CompareWithOrt(dir, *model, *out, &o);
  return o;
}

// test name -> reason, from node_test_expectations.txt ("name  reason").
std::map<std::string, std::string> ExpectedFailures() {
  std::map<std::string, std::string> m;
  std::ifstream in(testing::SourceDir() + "/tests/unit/onnx/node_test_expectations.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string name, reason;
    ss >> name;
    std::getline(ss, reason);
    m[name] = reason;
  }
  return m;
}

TEST(OnnxNodeSuite, ClaimedOpsPassTheirNodeTests) {
  if (!fs::is_directory(kNodeDir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(kNodeDir)) {
    if (e.is_directory()) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  const auto expected = ExpectedFailures();
  struct Tally {
    int tests = 0, claimed = 0, passed = 0, ort_compared = 0, ort_agrees = 0;
  };
  std::map<std::string, Tally> per_op;
  std::vector<std::string> unexpected, now_passing;
  for (const fs::path& dir : dirs) {
    const std::string test = dir.filename().string();
    Outcome o = RunNodeTest(dir);
    Tally& t = per_op[o.op];
    t.tests++;
    t.claimed += o.claimed;
    t.passed += o.passed;
    t.ort_compared += o.ort_compared;
    t.ort_agrees += o.ort_agrees;
    if (o.ort_compared && !o.ort_agrees && !expected.count(test)) unexpected.push_back(test + ": " + o.ort_why);
    const bool listed = expected.count(test) != 0;
    if (o.claimed && !o.passed && !listed) unexpected.push_back(test + ": " + o.why);
    if (o.passed && listed) now_passing.push_back(test);
  }
  int tests = 0, claimed = 0, passed = 0, ort_compared = 0, ort_agrees = 0;
  const bool with_ort = !OrtDir().empty();
  std::string table = with_ort ? "| op type | node tests | claimed | passed | compared with onnxruntime | agree |\n"
                                 "|---|---:|---:|---:|---:|---:|\n"
                               : "| op type | node tests | claimed | passed |\n|---|---:|---:|---:|\n";
  std::string unclaimed;
  for (const auto& [op, t] : per_op) {
    tests += t.tests;
    claimed += t.claimed;
    passed += t.passed;
    ort_compared += t.ort_compared;
    ort_agrees += t.ort_agrees;
    if (t.claimed == 0) {
      unclaimed += (unclaimed.empty() ? "" : ", ") + op;
      continue;
    }
    table += with_ort ? fmt::format("| {} | {} | {} | {} | {} | {} |\n", op, t.tests, t.claimed, t.passed,
                                    t.ort_compared, t.ort_agrees)
                      : fmt::format("| {} | {} | {} | {} |\n", op, t.tests, t.claimed, t.passed);
  }
  std::ofstream out(testing::BinaryDir() + (with_ort ? "/onnx_node_tests_ort.md" : "/onnx_node_tests.md"));
  out << fmt::format("# ONNX backend node tests (libonnx-testdata)\n\n{} tests; {} of ops kiln claims; {} pass ({:.1f}% "
                     "of claimed)",
                     tests, claimed, passed, claimed ? 100.0 * passed / claimed : 0.0);
  if (with_ort) {
    out << fmt::format("; of those, {} also compared with onnxruntime's outputs, and {} agree", ort_compared, ort_agrees);
  }
  out << "\n\n"
      << table << "\nOp types kiln does not claim: " << unclaimed << "\n";
  std::printf("%d node tests, %d claimed, %d pass; table in %s/onnx_node_tests.md\n", tests, claimed, passed,
              testing::BinaryDir().c_str());
  EXPECT_TRUE(unexpected.empty()) << unexpected.size() << " claimed tests fail:\n  " << fmt::format("{}", fmt::join(unexpected, "\n  "));
  EXPECT_TRUE(now_passing.empty()) << "now passing, remove from node_test_expectations.txt:\n  "
                                   << fmt::format("{}", fmt::join(now_passing, "\n  "));
}

}  // namespace onnx_node_suite_tests
}  // namespace kiln
