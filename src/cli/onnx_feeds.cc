#include "cli/onnx_feeds.h"

#include "core/npy.h"
#include "onnx/onnx_input_shape.h"
#include "onnx/onnx_reader.h"

namespace kiln::cli {

Expected<std::map<std::string, HostTensor>> ReadOnnxFeeds(const std::vector<std::string>& specs) {
  std::map<std::string, HostTensor> feeds;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("--input {}: expected NAME=FILE.npy", spec);
    const std::string name = spec.substr(0, eq);
    const std::string file = spec.substr(eq + 1);
    HostTensor t;
    if (file.size() > 3 && file.compare(file.size() - 3, 3, ".pb") == 0) {
      // ONNX's test data: a TensorProto.
      KILN_ASSIGN_OR_RETURN(OnnxTensor pb, ReadOnnxTensorFile(file));
      t.type = TensorType{pb.dtype, pb.dims};
      t.bytes.assign(pb.data.begin(), pb.data.end());
    } else {
      KILN_ASSIGN_OR_RETURN(NpyArray npy, ReadNpy(file));
      t.type = TensorType{npy.dtype, npy.dims};
      t.bytes.assign(npy.data.begin(), npy.data.end());
    }
    if (!feeds.emplace(name, std::move(t)).second) return InvalidArgument("--input {} given twice", name);
  }
  return feeds;
}

Expected<OnnxSessionOptions> OnnxOptionsFromFlags(const std::vector<std::string>& input_shapes,
                                                  const std::vector<std::string>& fixed_inputs,
                                                  const std::map<std::string, HostTensor>& feeds) {
  OnnxSessionOptions options;
  for (const std::string& s : input_shapes) KILN_RETURN_IF_ERROR(AddOnnxInputShape(s, &options.input_shapes));
  for (const std::string& name : fixed_inputs) {
    auto it = feeds.find(name);
    if (it == feeds.end()) return InvalidArgument("--fixed-input {}: no --input of that name", name);
    options.fixed_inputs[name] = it->second;
  }
  return options;
}

}  // namespace kiln::cli
