// Compiled ONNX artifacts (`kiln compile MODEL.onnx -o OUT.kiln`): the
// graph compiled once for input shapes, a backend and options, stored in the
// .kiln container (format/artifact_file.h) with
//   metadata    provenance (kiln version, kernel-layout version, backend,
//               ISA features, the .onnx and external data files' xxh64), the
//               options and input shapes it was compiled for, the inputs
//               fixed then (`--fixed-input`), and the index of the sections
//               below;
//   plan        the plan as `kiln inspect MODEL.onnx --plan` prints it
//               (plan.nodes: with --nodes);
//   onnx.model  the graph: the .onnx file's ModelProto with its
//               initializers' bytes moved out (onnx/onnx_weight_split.h),
//               from which loading rebuilds the compiled graph by the same
//               deterministic stages (milliseconds; the kiln version, ISA
//               and options they depend on are recorded and checked), rather
//               than a second serialized form of the IR; checked at every
//               load, which costs little now that it holds no weights; an
//               input fixed at compile time is an initializer of it (its
//               value), so loading folds it as compiling did;
//   onnx.w      the initializers' bytes (1 KiB or more), each at a 64-byte
//               boundary, which the graph names as external data: mapped,
//               and used where they lie (no copy), checked on request
//               (verify_weights, `kiln inspect --verify`);
//   onnx.x.N    an external data file the graph still names (tensors other
//               than the main graph's initializers), stored whole;
//   w.N         the constants the kernels laid out for themselves (each
//               convolution's weights in its kernel's layout, the products'
//               packed panels, the bf16 products' weights in oneDNN's
//               format), page-aligned, mapped at load and used where they
//               lie. The metadata counts the products compiled in bf16: a
//               CPU without bf16 products finds such a file stale.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_session.h"

namespace kiln {

class ArtifactFile;

struct OnnxArtifactSummary {
  int64_t laid_out = 0;  // constants stored in their kernels' layouts
  int64_t bytes = 0;     // the file's size
  double compile_seconds = 0;
  std::string input_shapes;  // "images:1x3x640x640"
};

// Compiles the .onnx file at `model` with `options` and writes the artifact
// to `output` (beside it first, then renamed over it). An input whose shape
// `options` leaves open stays open (compiled per shape at run time);
// `sample_shapes` (`--sample-shape`) compiles such inputs at one shape
// here, so that its convolutions' layouts are stored and taken at run time
// by every shape whose kernels read the same layout (kiln's are the same
// at any image size; oneDNN's are matched by their format). The inputs in
// options.fixed_inputs are compiled with their values and stored as
// constants: the artifact has no such inputs.
// `shape_buckets`: more shapes of the open inputs (each a map from input to
// dims, say a text recognizer's crop widths) compiled here too, so that a
// run at any of them binds a stored graph instead of compiling one.
using OnnxInputShapes = std::map<std::string, std::vector<int64_t>>;
Expected<OnnxArtifactSummary> CompileOnnxArtifact(const std::string& model, OnnxSessionOptions options,
                                                  const std::string& output, const OnnxInputShapes& sample_shapes = {},
                                                  const std::vector<OnnxInputShapes>& shape_buckets = {});

// Whether `path` is an artifact compiled from an ONNX graph.
bool IsOnnxArtifact(const std::string& path);

// An opened ONNX artifact: its graph read back, and the options to run it
// with (the recorded ones, with the caller's threads and laid-out weights
// over the file's sections).
struct OnnxArtifact {
  std::shared_ptr<const ArtifactFile> file;
  nlohmann::json metadata;
  OnnxModel model;
  OnnxSessionOptions options;
  std::string note;  // set when it was compiled for a lower ISA than this CPU's
};

// Opens `path` (checksums of header, table, metadata, plan and graph
// verified; every section's with given.verify_weights), checks that this build and CPU can run it (as LLM artifacts
// are checked: kernel-layout version, ISA, backend) and that the options
// in `given` agree with the recorded ones: a backend or precision away from
// its default that differs, or an input shape that differs, is an error
// naming it and both values. With given.recompile_if_stale a stale file is
// rebuilt first from the .onnx file it records.
Expected<OnnxArtifact> OpenOnnxArtifact(const std::string& path, const OnnxSessionOptions& given);

// The same for an artifact already open, or held inside another file (a
// pipeline artifact stores each model's artifact as one of its sections):
// `file` must keep what it reads mapped; `name` is used in messages. A stale
// one is refused (given.recompile_if_stale rebuilds only a file of its own).
Expected<OnnxArtifact> OpenOnnxArtifactIn(std::shared_ptr<const ArtifactFile> file, const std::string& name,
                                          const OnnxSessionOptions& given);

// Rebuilds the stale ONNX artifact at `path` from the .onnx file and with
// the options it records. Returns a line saying what was rebuilt and why.
Expected<std::string> RecompileStaleOnnxArtifact(const std::string& path);

}  // namespace kiln
