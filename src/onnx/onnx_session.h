// An ONNX model ready to run: read once, then compiled through the four
// stages into one Program per set of input shapes (the first run of a new
// shape compiles it; shapes the file fixes, or --input-shape fixes, are
// compiled at load). Runs read the caller's input buffers and write the
// caller's output buffers directly.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compilation_codec.h"
#include "core/precision.h"
#include "core/status.h"
#include "graph/laid_out_weights.h"
#include "graph/tensor_type.h"

namespace kiln {

class SharedArenas;

// A tensor that owns its bytes (row-major, little-endian).
struct HostTensor {
  TensorType type;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  explicit HostTensor(TensorType t) : type(std::move(t)), bytes(type.Bytes()) {}
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  TensorRef ref() { return TensorRef{type, bytes.data()}; }
};

struct OnnxSessionOptions {
  // `--input-shape`: dims for inputs whose declared shape is symbolic or
  // missing (or to replace it).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Inputs whose values are fixed at compile time: a shape, scales or
  // pads fed as a graph input, which kiln's static shapes need to know. A
  // run must pass the same values.
  std::map<std::string, HostTensor> fixed_inputs;
  // An artifact's inputs that were fixed when it was compiled: its graph
  // holds their values as constants, so they are no inputs of it; a run
  // that passes one is an error naming it (set by loading the artifact).
  std::vector<std::string> fixed_when_compiled;
  std::string backend = "cpu";  // the target; what it cannot run falls back to the CPU
  Precision precision = Precision::kFp32;
  int threads = 0;    // 0: physical cores
  bool fuse = true;   // the fuse stage's conv epilogues (off: for kiln diff)
  // Constants already in their kernels' layouts, and where kernels record
  // those they lay out (graph/laid_out_weights.h): set when compiling into an
  // artifact, and by loading one.
  std::shared_ptr<LaidOutWeights> laid_out;
  // Loading an artifact that is stale (another kernel-layout version, an ISA
  // this CPU lacks): rebuild it from the .onnx file it records first.
  bool recompile_if_stale = false;
  // Loading an artifact: check every section's checksum, the weights'
  // included (the graph, plan and metadata are checked at every load).
  bool verify_weights = false;
  // One activation arena for this session's shape buckets and for every
  // other session given the same one (a pipeline's models): sessions that
  // share it must run one at a time. Null: each compiled shape has its own.
  std::shared_ptr<SharedArenas> shared_arenas;
  // Keep each compiled graph after its stages, with its plan (compiling
  // into an artifact, which stores them).
  bool keep_compilation = false;
  // An artifact's stored graph for a compilation key (TensorCompilationKey;
  // nullopt when it stores none for that key): a session binds it instead
  // of compiling (set by loading an artifact).
  std::function<Expected<std::optional<StoredCompilation>>(const std::string& key)> stored_compilation;
};

// What a compiled tensor graph depends on beyond the model: its input types,
// the options that change what the stages make, and this CPU's ISA.
std::string TensorCompilationKey(const std::vector<TensorType>& inputs, const OnnxSessionOptions& options);

// A graph input or output as a caller sees it: its name and its type, with
// -1 for a dimension that is bound only by the input shapes of a run.
struct OnnxTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
};

class CompiledTensorGraph;
class ThreadPool;

struct OnnxModel;
struct OnnxArtifact;

class OnnxSession {
 public:
  // `path`: an .onnx file, or an artifact compiled from one (kiln compile),
  // which runs with the options and input shapes it was compiled with (a
  // given option or input shape that differs is an error) and its kernels'
  // weights as stored.
  static Expected<std::unique_ptr<OnnxSession>> Load(const std::string& path, const OnnxSessionOptions& options = {});
  // A session over an artifact already opened (OpenOnnxArtifactIn); `name`
  // is used in messages.
  static Expected<std::unique_ptr<OnnxSession>> FromArtifact(OnnxArtifact artifact, const std::string& name);
  ~OnnxSession();

  const std::vector<OnnxTensorInfo>& inputs() const;
  const std::vector<OnnxTensorInfo>& outputs() const;

  // The output types for these input types (compiling their Program if it
  // is new). `inputs` in inputs() order.
  Expected<std::vector<TensorType>> OutputTypes(const std::vector<TensorType>& inputs);

  // Runs on caller memory, in inputs()/outputs() order; each output buffer
  // must be of the type OutputTypes gives. Not reentrant: one run at a time
  // per session.
  Status Run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs);

  // An error naming `name` when it is an input an artifact was compiled
  // with fixed (options().fixed_when_compiled), which a run must not pass;
  // Ok otherwise.
  Status RefuseInputFixedWhenCompiled(const std::string& name) const;

  // Runs on named host tensors; returns the outputs in outputs() order.
  Expected<std::vector<HostTensor>> Run(const std::map<std::string, HostTensor>& inputs);

  // The compiled Program of these input shapes (for --plan, kiln diff, bench).
  Expected<CompiledTensorGraph*> Compiled(const std::vector<TensorType>& inputs);
  // The threads runs use (for running a Compiled() graph directly).
  ThreadPool* pool();
  // The model as read, and the options it runs with (an artifact's).
  const OnnxModel& model() const;
  const OnnxSessionOptions& options() const;

 private:
  OnnxSession();
  // The rest of a load once the graph and options are set.
  static Expected<std::unique_ptr<OnnxSession>> Prepare(std::unique_ptr<OnnxSession> s, const std::string& name);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
