// `kiln bench latency -m MODEL.onnx`: one input shape run again and again:
// latency percentiles, achieved GFLOP/s against the fp32 FMA roofline,
// per-layer figures for the convolutions, and onnxruntime side by side
// when asked.
#pragma once

#include <string>
#include <vector>

#include "bench/roofline.h"
#include "core/status.h"

namespace kiln::cli {

struct OnnxBenchArgs {
  std::string model;
  std::vector<std::string> inputs, input_shapes, fixed_inputs;
  std::string backend = "cpu";
  std::string precision;  // the --precision flag ("": fp32)
  int threads = 0;
  bool recompile_if_stale = false;
  bool verify_weights = false;  // an artifact: check its weight sections' checksums at load  // an artifact (kiln compile) built for another kernel-layout version or ISA
  int warmup = 5;
  int runs = 20;
  bool layers = false;  // per-layer times of the heavy nodes
  double layers_min_mflop = 50;  // which nodes --layers lists
  // ort_run.js (tests/onnx_oracle/): run onnxruntime on the same inputs with
  // the same thread count, and show both.
  std::string onnxruntime;
  std::string json;  // write the figures here
};

// `roofline`: the row at the run's thread count, or null.
Status RunOnnxLatency(const OnnxBenchArgs& args, const bench::RooflineRow* roofline, const std::string& machine);

}  // namespace kiln::cli
