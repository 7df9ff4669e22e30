// Rewriting a ModelProto on the wire: fields are copied as they are, but for
// the main graph's initializers, whose data fields are replaced.
#include "onnx/onnx_weight_split.h"

#include <algorithm>
#include <charconv>

#include "core/dtype.h"
#include "onnx/onnx_proto.h"
#include "onnx/onnx_read_context.h"
#include "onnx/onnx_wire.h"

namespace kiln {
namespace {

using onnx_proto::DecodeState;
using onnx_proto::Wire;

// onnx.proto's field numbers for what is rewritten.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kTensorExternalData = 13;
constexpr uint32_t kTensorDataLocation = 14;
constexpr int kLenWire = 2;
constexpr int kVarintWire = 0;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendLenField(uint32_t field, std::string_view bytes, std::string* out) {
  AppendVarint((uint64_t{field} << 3) | kLenWire, out);
  AppendVarint(bytes.size(), out);
  out->append(bytes);
}

void AppendEntry(std::string_view key, std::string_view value, std::string* out) {
  std::string entry;
  AppendLenField(1, key, &entry);
  AppendLenField(2, value, &entry);
  AppendLenField(kTensorExternalData, entry, out);
}

// Calls field(number, wire_type, bytes of the whole field, its contents
// cursor) for each field of the message in [begin, end); `contents` is
// valid for length-delimited fields only.
template <typename Field>
Status ForEachField(const uint8_t* begin, const uint8_t* end, const char* what, Field field) {
  DecodeState state;
  state.max_items = int64_t{1} << 40;
  Wire w(begin, end, begin, &state, 64);
  while (!w.AtEnd()) {
    const uint8_t* start = w.position();
    uint32_t number = 0;
    int wire_type = 0;
    if (!w.Tag(&number, &wire_type)) break;
    Wire contents = w;
    if (wire_type == kLenWire) {
      if (!w.Sub(wire_type, &contents)) break;
    } else if (!w.Skip(wire_type)) {
      break;
    }
    std::string_view whole(reinterpret_cast<const char*>(start), static_cast<size_t>(w.position() - start));
    KILN_RETURN_IF_ERROR(field(number, wire_type, whole, contents));
  }
  if (!w.ok()) return Corrupt("{}: {}", what, state.error);
  return Status::Ok();
}

uint64_t ParseNumber(const std::string& text, bool* ok) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  *ok = ec == std::errc() && end == text.data() + text.size();
  return v;
}

class Splitter {
 public:
  Splitter(const std::string& location, const OnnxExternalFiles& files) : location_(location), files_(files) {}

  Status Model(std::span<const uint8_t> model) {
    return ForEachField(model.data(), model.data() + model.size(), "model",
                        [&](uint32_t number, int wire_type, std::string_view whole, Wire contents) -> Status {
                          if (number != kModelGraph || wire_type != kLenWire) {
                            out_.graph.append(whole);
                            return Status::Ok();
                          }
                          std::string graph;
                          KILN_RETURN_IF_ERROR(Graph(contents, &graph));
                          AppendLenField(kModelGraph, graph, &out_.graph);
                          return Status::Ok();
                        });
  }

  SplitOnnxModel Take() { return std::move(out_); }

 private:
  Status Graph(Wire contents, std::string* out) {
    return ForEachField(contents.position(), contents.position() + contents.remaining(), "graph",
                        [&](uint32_t number, int wire_type, std::string_view whole, Wire tensor) -> Status {
                          if (number != kGraphInitializer || wire_type != kLenWire) {
                            out->append(whole);
                            return Status::Ok();
                          }
                          std::string rewritten;
                          KILN_ASSIGN_OR_RETURN(bool moved, Initializer(tensor, &rewritten));
                          if (moved) {
                            AppendLenField(kGraphInitializer, rewritten, out);
                          } else {
                            out->append(whole);
                          }
                          return Status::Ok();
                        });
  }

  // The bytes an initializer holds, where it holds them in raw form (raw
  // data, or a span of an external file); empty `bytes` otherwise.
  Status DataOf(const onnx_proto::Tensor& t, std::string_view* bytes) {
    *bytes = {};
    if (t.has_raw_data) {
      *bytes = t.raw_data;
      return Status::Ok();
    }
    if (t.data_location != 1) return Status::Ok();
    std::string location;
    uint64_t offset = 0;
    bool has_length = false;
    uint64_t length = 0;
    for (const auto& e : t.external_data) {
      bool ok = true;
      if (e.key == "location") location = e.value;
      if (e.key == "offset") offset = ParseNumber(e.value, &ok);
      if (e.key == "length") {
        length = ParseNumber(e.value, &ok);
        has_length = true;
      }
      if (!ok) return Corrupt("initializer {}: external data {} '{}' is not a number", t.name, e.key, e.value);
    }
    if (!has_length) {
      std::optional<DType> dtype = DTypeFromOnnx(t.data_type);
      if (!dtype) return Status::Ok();
      uint64_t elements = 1;
      for (int64_t d : t.dims) elements *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
      std::optional<uint64_t> n = DTypeBytes(*dtype, elements);
      if (!n) return Status::Ok();
      length = *n;
    }
    KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> file, files_(location));
    if (offset > file.size() || length > file.size() - offset) {
      return Corrupt("initializer {}: external data at offset {} and length {} lies beyond the end of '{}'",
                     t.name, offset, length, location);
    }
    *bytes = std::string_view(reinterpret_cast<const char*>(file.data() + offset), length);
    return Status::Ok();
  }

  // Rewrites one TensorProto; false (nothing written) when it stays as it is.
  Expected<bool> Initializer(Wire contents, std::string* out) {
    const uint8_t* begin = contents.position();
    const size_t size = contents.remaining();
    onnx_proto::Tensor t;
    KILN_RETURN_IF_ERROR(onnx_proto::DecodeTensorProto(begin, size, int64_t{1} << 40, &t));
    std::string_view bytes;
    KILN_RETURN_IF_ERROR(DataOf(t, &bytes));
    const bool external = !t.has_raw_data && t.data_location == 1;
    const bool move = bytes.size() >= kOnnxMinMovedBytes;
    if (!move && !external) return false;
    // Every field but where the data is; then where it is now.
    KILN_RETURN_IF_ERROR(ForEachField(begin, begin + size, "initializer",
                                      [&](uint32_t number, int, std::string_view whole, Wire) -> Status {
                                        if (number != kTensorRawData && number != kTensorExternalData &&
                                            number != kTensorDataLocation) {
                                          out->append(whole);
                                        }
                                        return Status::Ok();
                                      }));
    if (!move) {
      // A small tensor of an external file comes into the graph, so that
      // the file need not be stored for it.
      AppendLenField(kTensorRawData, bytes, out);
      return true;
    }
    out_.weights.resize((out_.weights.size() + kOnnxWeightAlignment - 1) / kOnnxWeightAlignment *
                        kOnnxWeightAlignment);
    const size_t offset = out_.weights.size();
    out_.weights.append(bytes);
    AppendEntry("location", location_, out);
    AppendEntry("offset", std::to_string(offset), out);
    AppendEntry("length", std::to_string(bytes.size()), out);
    AppendVarint((uint64_t{kTensorDataLocation} << 3) | kVarintWire, out);
    AppendVarint(1, out);  // EXTERNAL
    ++out_.moved;
    return true;
  }

  const std::string& location_;
  const OnnxExternalFiles& files_;
  SplitOnnxModel out_;
};

}  // namespace

Expected<SplitOnnxModel> SplitOnnxWeights(std::span<const uint8_t> model, const std::string& location,
                                          const OnnxExternalFiles& external_files) {
  Splitter splitter(location, external_files);
  KILN_RETURN_IF_ERROR(splitter.Model(model));
  return splitter.Take();
}

}  // namespace kiln
