// `kiln run MODEL.onnx --input NAME=FILE.npy ... --output-dir DIR`: runs an
// ONNX graph once on .npy inputs and writes every output as DIR/<name>.npy.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cli/backend_plugin_flag.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/onnx_feeds.h"
#include "cli/profile_flags.h"
#include "cli/run_pipeline.h"
#include "compiler/profiler.h"
#include "core/cpu_info.h"
#include "core/npy.h"
#include "onnx/onnx_io_names.h"
#include "onnx/onnx_session.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> input_shapes;
  std::vector<std::string> fixed_inputs;
  std::string output_dir;
  std::string image;  // a pipeline's picture
  std::string json;   // and where its results go
  std::string backend = "cpu";
  std::string precision;  // "": fp32
  std::vector<std::string> backend_plugins;
  int threads = 0;
  bool recompile_if_stale = false;
  bool verify_weights = false;
  ProfileFlags profiling;
};

Status RunOnnx(const RunArgs& a) {
  if (IsPipelineFile(a.model)) return RunPipelineCommand(a.model, a.image, a.json, a.threads, a.recompile_if_stale);
  if (a.output_dir.empty()) return InvalidArgument("--output-dir DIR is required");
  KILN_RETURN_IF_ERROR(LoadBackendPlugins(a.backend_plugins));
  KILN_ASSIGN_OR_RETURN(auto feeds, ReadOnnxFeeds(a.inputs));
  KILN_ASSIGN_OR_RETURN(OnnxSessionOptions options, OnnxOptionsFromFlags(a.input_shapes, a.fixed_inputs, feeds));
  options.backend = a.backend;
  options.threads = a.threads;
  options.recompile_if_stale = a.recompile_if_stale;
  options.verify_weights = a.verify_weights;
  KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecisionFlag(a.precision, Precision::kFp32));
  KILN_ASSIGN_OR_RETURN(auto session, OnnxSession::Load(a.model, options));
  std::string expected;
  for (const OnnxTensorInfo& i : session->inputs()) {
    expected += fmt::format(" {}:{}[{}]", i.name, DTypeName(i.dtype), DimsToString(i.dims));
    if (!feeds.count(i.name)) return InvalidArgument("input {} has no --input (the model's inputs:{})", i.name, expected);
  }
  // Profiled, the run is one step whose forward pass holds the kernels.
  StartProfiling(a.profiling);
  const int64_t start_ns = ProfilingEnabled() ? ProfileNow() : 0;
  Expected<std::vector<HostTensor>> ran = [&] {
    ProfileScope forward("forward", "engine");
    return session->Run(feeds);
  }();
  if (ProfilingEnabled()) RecordProfileSpan("run", "step", start_ns);
  KILN_RETURN_IF_ERROR(FinishProfiling(a.profiling, a.threads > 0 ? a.threads : std::max(1, GetCpuInfo().physical_cores),
                                       options.precision == Precision::kFp32 ? bench::WeightArithmetic::kFp32
                                                                             : bench::WeightArithmetic::kBf16));
  KILN_ASSIGN_OR_RETURN(std::vector<HostTensor> outputs, std::move(ran));
  std::error_code ec;
  std::filesystem::create_directories(a.output_dir, ec);
  if (ec) return InvalidArgument("--output-dir {}: {}", a.output_dir, ec.message());
  for (size_t j = 0; j < outputs.size(); ++j) {
    const std::string path = (std::filesystem::path(a.output_dir) / TensorFileName(session->outputs()[j].name)).string();
    KILN_RETURN_IF_ERROR(WriteNpy(path, outputs[j].type.dtype, outputs[j].type.dims, outputs[j].bytes.data(),
                                  outputs[j].bytes.size()));
    fmt::print("{} {} -> {}\n", session->outputs()[j].name, outputs[j].type.ToString(), path);
  }
  return Status::Ok();
}

}  // namespace

void RegisterRun(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("run", "Run an ONNX model once on .npy inputs, writing its outputs as .npy; or a pipeline (.json) on an image");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("model", a->model, "An .onnx file, an artifact compiled from one (kiln compile), or a pipeline file (.json)")->required();
  cmd->add_option("--input", a->inputs, "NAME=FILE.npy (or an ONNX TensorProto FILE.pb): a graph input (repeatable)");
  cmd->add_option("--input-shape", a->input_shapes, "NAME:DIMS fixes an input's shape, e.g. images:1,3,640,640");
  cmd->add_option("--fixed-input", a->fixed_inputs,
                  "NAME: compile with this --input's value fixed (a shape, scales or pads fed as a graph input)");
  cmd->add_option("--output-dir", a->output_dir, "Where each output goes, as <output name>.npy");
  cmd->add_option("--image", a->image, "A pipeline's picture (JPEG or PNG)");
  cmd->add_option("--json", a->json, "Where a pipeline's results go (JSON)");
  cmd->add_option("--backend", a->backend, "The backend to compile for")->capture_default_str();
  AddBackendPluginFlag(cmd, &a->backend_plugins);
  cmd->add_option(
      "--precision", a->precision,
      "fp32 (default), mixed or bf16: mixed multiplies the convolutions and matmuls on weights in bf16, "
      "bf16 also the matmuls of two activations, where the CPU multiplies bf16 natively");
  cmd->add_option("--threads", a->threads, "Compute threads (0: one per physical core)");
  cmd->add_flag("--recompile-if-stale", a->recompile_if_stale,
                "An artifact compiled by another kiln kernel-layout version or for an ISA this CPU lacks: "
                "rebuild it from the .onnx file (or a compiled pipeline's pipeline and model files) it records, "
                "then run");
  cmd->add_flag("--verify-weights", a->verify_weights,
                "An artifact: check the checksums of its weight sections too before running (the graph, "
                "plan and metadata are checked at every load)");
  AddProfileFlags(cmd, &a->profiling);
  cmd->callback([a]() {
    Status s = RunOnnx(*a);
    if (!s.ok()) {
      fmt::print(stderr, "kiln run: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
