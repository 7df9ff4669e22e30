#include "cli/diff_onnx.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cli/engine_flags.h"
#include "cli/onnx_feeds.h"
#include "compiler/compiled_tensor_graph.h"
#include "core/half.h"
#include "core/npy.h"
#include "onnx/onnx_io_names.h"
#include "onnx/onnx_session.h"

namespace kiln::cli {
namespace {

// A float value's elements as float32; false for other dtypes.
bool WidenToF32(DType dtype, const uint8_t* data, int64_t n, std::vector<float>* out) {
  out->resize(static_cast<size_t>(n));
  switch (dtype) {
    case DType::kF32: std::copy_n(reinterpret_cast<const float*>(data), n, out->data()); return true;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        (*out)[static_cast<size_t>(i)] = dtype == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
      }
      return true;
    default: return false;
  }
}

// One run of the model with every float value captured, in node order.
Expected<std::vector<CapturedValue>> RunCapturing(const OnnxDiffArgs& args, const std::string& backend,
                                                  bool fuse, const std::string& precision,
                                                  const std::map<std::string, HostTensor>& feeds,
                                                  std::string* input_text) {
  KILN_ASSIGN_OR_RETURN(OnnxSessionOptions options, OnnxOptionsFromFlags(args.input_shapes, args.fixed_inputs, feeds));
  options.backend = backend;
  options.threads = args.threads;
  options.fuse = fuse;
  KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecisionFlag(precision, Precision::kFp32));
  KILN_ASSIGN_OR_RETURN(auto session, OnnxSession::Load(args.model, options));
  std::vector<TensorType> types;
  std::vector<const void*> in;
  std::vector<std::string> described;
  for (const OnnxTensorInfo& i : session->inputs()) {
    auto it = feeds.find(i.name);
    if (it == feeds.end()) return InvalidArgument("input {} has no --input", i.name);
    types.push_back(it->second.type);
    in.push_back(it->second.bytes.data());
    described.push_back(i.name + " " + it->second.type.ToString());
  }
  *input_text = fmt::format("inputs: {}", fmt::join(described, ", "));
  KILN_ASSIGN_OR_RETURN(CompiledTensorGraph * compiled, session->Compiled(types));
  std::vector<HostTensor> outputs;
  std::vector<void*> out;
  for (const TensorType& t : compiled->output_types()) outputs.emplace_back(t);
  for (HostTensor& h : outputs) out.push_back(h.bytes.data());
  std::vector<CapturedValue> values;
  std::map<std::string, size_t> index;
  // Values the layout stage keeps blocked or channels-last ("r1.nchw16c"):
  // captured row-major under the model's name.
  std::map<std::string, const Value*> laid_out;
  for (const Value& v : compiled->graph().values()) {
    if (v.is_tensor() && v.layout != TensorLayout::kRowMajor && v.dims.size() == 4) laid_out[v.name] = &v;
  }
  DumpFn dump = [&](const std::string& dumped, const BoundValue& v, int64_t rows) {
    if (dumped.find('@') != std::string::npos || v.data == nullptr) return;  // a transfer's device-side copy
    CapturedValue c;
    c.name = dumped;
    c.rows = 1;
    c.cols = v.cols * std::max<int64_t>(rows, 1);
    auto l = laid_out.find(dumped);
    if (l != laid_out.end()) {
      const Value& val = *l->second;
      const size_t elem = ElementBytes(val.dtype);
      std::vector<float> stored;
      const auto stored_count = static_cast<int64_t>(elem == 0 ? 0 : TensorBytesIn(val.tensor_type(), val.layout) / elem);
      if (elem == 0 || !WidenToF32(val.dtype, v.data, stored_count, &stored)) return;
      c.data.resize(static_cast<size_t>(c.cols));
      const auto& d = val.dims;
      for (int64_t n = 0; n < d[0]; ++n) {
        for (int64_t ch = 0; ch < d[1]; ++ch) {
          for (int64_t h = 0; h < d[2]; ++h) {
            for (int64_t w = 0; w < d[3]; ++w) {
              c.data[static_cast<size_t>(TensorLayoutOffset(d, TensorLayout::kRowMajor, n, ch, h, w))] =
                  stored[static_cast<size_t>(TensorLayoutOffset(d, val.layout, n, ch, h, w))];
            }
          }
        }
      }
      const std::string suffix = std::string(".") + TensorLayoutName(val.layout);
      if (c.name.size() > suffix.size() && c.name.compare(c.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        c.name.resize(c.name.size() - suffix.size());
      }
    } else if (!WidenToF32(v.dtype, v.data, c.cols, &c.data)) {
      return;
    }
    const std::string name = c.name;
    auto it = index.find(name);
    if (it != index.end()) {
      values[it->second] = std::move(c);
    } else {
      index[name] = values.size();
      values.push_back(std::move(c));
    }
  };
  KILN_RETURN_IF_ERROR(compiled->Run(in, out, session->pool(), &dump));
  return values;
}

// The values of `like` that `dir` holds as <name>.npy.
Expected<std::vector<CapturedValue>> ReadValues(const std::string& dir, const std::vector<CapturedValue>& like) {
  std::vector<CapturedValue> values;
  for (const CapturedValue& v : like) {
    const std::string path = (std::filesystem::path(dir) / TensorFileName(v.name)).string();
    if (!std::filesystem::exists(path)) continue;
    KILN_ASSIGN_OR_RETURN(NpyArray a, ReadNpy(path));
    CapturedValue c;
    c.name = v.name;
    c.rows = 1;
    int64_t n = 1;
    for (int64_t d : a.dims) n *= d;
    c.cols = n;
    if (!WidenToF32(a.dtype, reinterpret_cast<const uint8_t*>(a.data.data()), n, &c.data)) continue;
    values.push_back(std::move(c));
  }
  return values;
}

std::string Label(const std::string& model, const std::string& backend, bool fuse,
                  const std::string& precision) {
  return fmt::format("{} (backend {}{}{})", model, backend, fuse ? "" : ", no fusions",
                     precision.empty() ? "" : ", precision " + precision);
}

}  // namespace

Expected<DiffComparison> CompareOnnx(const OnnxDiffArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto feeds, ReadOnnxFeeds(args.inputs));
  DiffComparison c;
  auto a = RunCapturing(args, args.a_backend, args.a_fuse, args.a_precision, feeds, &c.input);
  if (!a.ok()) return a.status().WithContext("A");
  c.a = Label(args.model, args.a_backend, args.a_fuse, args.a_precision);
  std::vector<CapturedValue> b;
  if (!args.against.empty()) {
    KILN_ASSIGN_OR_RETURN(b, ReadValues(args.against, *a));
    c.b = fmt::format("the values in {}", args.against);
  } else {
    std::string unused;
    auto run = RunCapturing(args, args.b_backend, args.b_fuse, args.b_precision, feeds, &unused);
    if (!run.ok()) return run.status().WithContext("B");
    b = std::move(*run);
    c.b = Label(args.model, args.b_backend, args.b_fuse, args.b_precision);
  }
  c.rows = DiffValues(*a, b);
  return c;
}

}  // namespace kiln::cli
