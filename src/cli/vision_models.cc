#include "cli/vision_models.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "vision/image_file.h"

namespace kiln::cli {

Expected<std::unique_ptr<OnnxSession>> LoadVisionModel(const std::string& path, const OnnxSessionOptions& options,
                                                       const char* role) {
  auto session = OnnxSession::Load(path, options);
  if (!session.ok()) return session.status().WithContext(fmt::format("{} model {}", role, path));
  if ((*session)->inputs().size() != 1 || (*session)->outputs().empty()) {
    return InvalidArgument("{} model {} has {} inputs and {} outputs; expected one image input", role, path,
                           (*session)->inputs().size(), (*session)->outputs().size());
  }
  return session;
}

TensorModel SessionTensorModel(OnnxSession* session) {
  // The compiled graph reads the input and writes the outputs where they
  // lie: the tensor the stage before made is read in place, and the output
  // returned is the buffer the model wrote, which the next stage reads.
  return [session](const HostTensor& input) -> Expected<HostTensor> {
    if (input.bytes.size() != input.type.Bytes()) {
      return InvalidArgument("input {}: {} bytes for {}", session->inputs()[0].name, input.bytes.size(),
                             input.type.ToString());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<TensorType> types, session->OutputTypes({input.type}));
    if (types.empty()) return Internal("the model has no outputs");
    std::vector<HostTensor> outputs;
    std::vector<TensorRef> refs;
    for (const TensorType& t : types) outputs.emplace_back(t);
    for (HostTensor& h : outputs) refs.push_back(h.ref());
    // Only read, as OnnxSession::Run on host tensors passes it.
    const TensorRef in{input.type, const_cast<uint8_t*>(input.bytes.data())};
    KILN_RETURN_IF_ERROR(session->Run({in}, refs));
    return std::move(outputs[0]);
  };
}

PipelineModel SessionPipelineModel(OnnxSession* session) {
  PipelineModel m;
  for (const OnnxTensorInfo& i : session->inputs()) m.inputs.push_back(i.name);
  for (const OnnxTensorInfo& o : session->outputs()) m.outputs.push_back(o.name);
  m.run = [session](const std::vector<const HostTensor*>& inputs) -> Expected<std::vector<HostTensor>> {
    const std::vector<OnnxTensorInfo>& info = session->inputs();
    if (inputs.size() != info.size()) {
      return InvalidArgument("{} inputs given, the model takes {}", inputs.size(), info.size());
    }
    std::vector<TensorType> types;
    std::vector<TensorRef> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const HostTensor& t = *inputs[i];
      if (t.type.dtype != info[i].dtype) {
        return InvalidArgument("input {} takes {}, but is given {}", info[i].name, DTypeName(info[i].dtype),
                               t.type.ToString());
      }
      if (t.bytes.size() != t.type.Bytes()) {
        return InvalidArgument("input {}: {} bytes for {}", info[i].name, t.bytes.size(), t.type.ToString());
      }
      types.push_back(t.type);
      // Only read, as OnnxSession::Run on host tensors passes it.
      in.push_back(TensorRef{t.type, const_cast<uint8_t*>(t.bytes.data())});
    }
    KILN_ASSIGN_OR_RETURN(std::vector<TensorType> out_types, session->OutputTypes(types));
    std::vector<HostTensor> outputs;
    std::vector<TensorRef> refs;
    for (const TensorType& t : out_types) outputs.emplace_back(t);
    for (HostTensor& h : outputs) refs.push_back(h.ref());
    KILN_RETURN_IF_ERROR(session->Run(in, refs));
    return outputs;
  };
  return m;
}

Status WriteVisionOutputs(const nlohmann::ordered_json& json, const std::string& path, const Image* drawn,
                          const std::string& draw_path) {
  const std::string text = json.dump(2) + "\n";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return IoError("cannot create {}: {}", path, std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) return IoError("cannot write {}: {}", path, std::strerror(errno));
  if (drawn && !draw_path.empty()) KILN_RETURN_IF_ERROR(WritePngFile(*drawn, draw_path));
  return Status::Ok();
}

}  // namespace kiln::cli
