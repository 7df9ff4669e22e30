// `kiln diff` on ONNX graphs: every float value of one run compared, node by
// node, between two configurations (backends, fusions on or off), or
// against another runtime's intermediate values.
#pragma once

#include <string>
#include <vector>

#include "accuracy/tensor_compare.h"
#include "core/status.h"

namespace kiln::cli {

// What either kind of diff compared, for printing.
struct DiffComparison {
  std::string a, b;   // labels
  std::string input;  // "prompt: 12 tokens", "inputs: images f32[1,3,640,640]"
  int64_t tokens = -1;
  std::vector<DiffRow> rows;
};

struct OnnxDiffArgs {
  std::string model;
  std::vector<std::string> inputs, input_shapes, fixed_inputs;
  std::string against;  // a folder of DIR/<value name>.npy: B is that
  int threads = 0;
  std::string a_backend = "cpu", b_backend = "cpu";
  bool a_fuse = true, b_fuse = true;
  std::string a_precision, b_precision;  // --a-precision, --b-precision ("": fp32)
};

Expected<DiffComparison> CompareOnnx(const OnnxDiffArgs& args);

}  // namespace kiln::cli
