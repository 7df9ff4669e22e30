// `kiln compile MODEL -o OUT.kiln [engine flags]`: compiles a model once
// into an artifact that -m loads without packing its weights again.
#include <algorithm>

#include <fmt/format.h>

#include "cli/backend_plugin_flag.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/inspect_onnx.h"
#include "cli/onnx_feeds.h"
#include "engine/model_artifact.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_input_shape.h"
#include "vision/pipeline_artifact.h"

namespace kiln::cli {
namespace {

// What is given for an ONNX graph's inputs.
struct OnnxInputFlags {
  std::vector<std::string> input_shapes, sample_shapes;
  std::vector<std::string> shape_buckets;          // each NAME:DIMS one more stored shape
  std::vector<std::string> inputs, fixed_inputs;  // values, and which of them are fixed

  bool Any() const {
    return !input_shapes.empty() || !sample_shapes.empty() || !shape_buckets.empty() || !inputs.empty() ||
           !fixed_inputs.empty();
  }
};

// An ONNX graph: the backend, precision and threads of the engine flags;
// the inputs fixed here are stored with their values, as constants.
Status CompileOnnx(const EngineFlags& engine, const OnnxInputFlags& flags, const std::string& output) {
  KILN_RETURN_IF_ERROR(LoadBackendPlugins(engine.backend_plugins));
  KILN_ASSIGN_OR_RETURN(auto feeds, ReadOnnxFeeds(flags.inputs));
  for (const auto& [name, value] : feeds) {
    if (std::find(flags.fixed_inputs.begin(), flags.fixed_inputs.end(), name) == flags.fixed_inputs.end()) {
      return InvalidArgument("--input {}: an artifact stores only inputs fixed at compile time; add --fixed-input "
                             "{}, or give the value when running it",
                             name, name);
    }
  }
  KILN_ASSIGN_OR_RETURN(OnnxSessionOptions options, OnnxOptionsFromFlags(flags.input_shapes, flags.fixed_inputs, feeds));
  options.backend = engine.options.backend;
  options.threads = engine.options.threads;
  KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecisionFlag(engine.precision, Precision::kFp32));
  std::map<std::string, std::vector<int64_t>> samples;
  for (const std::string& s : flags.sample_shapes) KILN_RETURN_IF_ERROR(AddOnnxInputShape(s, &samples));
  std::vector<OnnxInputShapes> buckets;
  for (const std::string& s : flags.shape_buckets) {
    OnnxInputShapes bucket;
    KILN_RETURN_IF_ERROR(AddOnnxInputShape(s, &bucket));
    buckets.push_back(std::move(bucket));
  }
  if (!buckets.empty() && samples.empty()) {
    return InvalidArgument("--shape-bucket: give --sample-shape too (the shape whose kernels' layouts are stored)");
  }
  KILN_ASSIGN_OR_RETURN(OnnxArtifactSummary summary,
                        CompileOnnxArtifact(engine.options.model, options, output, samples, buckets));
  fmt::print("{}: ONNX graph{}, {} constants in their kernels' layouts, {:.1f} MiB (compiled in {:.2f} s)\n",
             output, summary.input_shapes.empty() ? "" : " for " + summary.input_shapes, summary.laid_out,
             static_cast<double>(summary.bytes) / (1 << 20), summary.compile_seconds);
  return Status::Ok();
}

// A pipeline file: every model compiled, with the engine flags' backend,
// precision and threads, into one artifact (vision/pipeline_artifact.h).
Status CompilePipeline(const EngineFlags& engine, const std::string& output) {
  KILN_RETURN_IF_ERROR(LoadBackendPlugins(engine.backend_plugins));
  OnnxSessionOptions options;
  options.backend = engine.options.backend;
  options.threads = engine.options.threads;
  KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecisionFlag(engine.precision, Precision::kFp32));
  KILN_ASSIGN_OR_RETURN(PipelineArtifactSummary summary, CompilePipelineArtifact(engine.options.model, options, output));
  fmt::print("{}: pipeline of {} models, {:.1f} MiB\n", output, summary.models,
             static_cast<double>(summary.bytes) / (1 << 20));
  return Status::Ok();
}

}  // namespace

void RegisterCompile(CLI::App& app) {
  struct Args {
    EngineFlags engine;
    std::string output;
    OnnxInputFlags onnx;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Compile a model into a .kiln artifact: weights packed for the backend, plan, tokenizer, "
                 "generation defaults and provenance; -m OUT.kiln then loads it as it is");
  cmd->add_option("model", a->engine.options.model, "A Hugging Face folder, a .gguf, an .onnx file or a pipeline file (.json) (or -m)");
  AddEngineFlags(cmd, &a->engine);
  cmd->add_option("-o,--output", a->output, "The artifact to write (OUT.kiln)")->required();
  cmd->add_option("--input-shape", a->onnx.input_shapes,
                  "ONNX graphs: NAME:DIMS, the input shape to compile for, e.g. images:1,3,640,640 (an input "
                  "left open is compiled per shape at run time)");
  cmd->add_option("--sample-shape", a->onnx.sample_shapes,
                  "ONNX graphs: NAME:DIMS, a shape to compile an input left open at, so that its convolutions' "
                  "weights are stored in their kernels' layouts; the input stays open");
  cmd->add_option("--shape-bucket", a->onnx.shape_buckets,
                  "ONNX graphs: NAME:DIMS, one more shape of an input left open (repeatable, e.g. a text "
                  "recognizer's widths): its compiled graph is stored too, so a run at that shape compiles nothing");
  cmd->add_option("--input", a->onnx.inputs,
                  "ONNX graphs: NAME=FILE.npy (or FILE.pb), the value of an input given to --fixed-input");
  cmd->add_option("--fixed-input", a->onnx.fixed_inputs,
                  "ONNX graphs: NAME, an input compiled with its --input value fixed (a shape, scales, or a "
                  "product's second operand fed as a graph input): the artifact stores the value and what is "
                  "folded from it, and takes no value for it when it runs");
  cmd->callback([a]() {
    // An artifact holds the whole model; the split is made when running it.
    if (a->engine.options.tensor_parallel_size > 1 || a->engine.options.pipeline_parallel_size > 1) {
      fmt::print(stderr, "kiln compile: an artifact holds the whole model; --tensor-parallel-size and "
                         "--pipeline-parallel-size apply when running one (from the model it was compiled from)\n");
      SetExitCode(2);
      return;
    }
    if (IsPipelineFilePath(a->engine.options.model)) {
      Status s = !a->onnx.Any() ? CompilePipeline(a->engine, a->output)
                                : InvalidArgument("a pipeline's input shapes are its stages'; --input-shape, "
                                                  "--sample-shape, --shape-bucket, --input and --fixed-input are "
                                                  "for one ONNX graph");
      if (!s.ok()) {
        fmt::print(stderr, "kiln compile: {}\n", s.ToString());
        SetExitCode(1);
      }
      return;
    }
    if (IsOnnxPath(a->engine.options.model)) {
      Status s = CompileOnnx(a->engine, a->onnx, a->output);
      if (!s.ok()) {
        fmt::print(stderr, "kiln compile: {}\n", s.ToString());
        SetExitCode(1);
      }
      return;
    }
    if (a->onnx.Any()) {
      fmt::print(stderr, "kiln compile: --input-shape, --sample-shape, --shape-bucket, --input and --fixed-input are for "
                         "ONNX graphs\n");
      SetExitCode(2);
      return;
    }
    auto options = a->engine.Resolve();
    if (!options.ok()) {
      fmt::print(stderr, "kiln compile: {}\n", options.status().ToString());
      SetExitCode(2);
      return;
    }
    if (options->model.empty() && options->load_format != "dummy") {
      fmt::print(stderr, "kiln compile: no model given (MODEL, -m)\n");
      SetExitCode(2);
      return;
    }
    auto summary = CompileArtifact(*options, a->output);
    if (!summary.ok()) {
      fmt::print(stderr, "kiln compile: {}\n", summary.status().ToString());
      SetExitCode(1);
      return;
    }
    fmt::print("{}: {} tensors, {} matrices in their packed layouts, {:.1f} MiB (compiled in {:.2f} s)\n",
               a->output, summary->tensors, summary->packed, static_cast<double>(summary->bytes) / (1 << 20),
               summary->compile_seconds);
  });
}

}  // namespace kiln::cli
