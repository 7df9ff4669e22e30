// Rewriting a ModelProto on the wire: fields are copied as they are, but for
// the main graph's initializers, whose data fields are replaced.
#include "onnx/onnx_weight_split.h"

#include <algorithm>
#include <charconv>
#include <set>

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
constexpr uint32_t kGraphInput = 11;
constexpr uint32_t kValueInfoName = 1;
constexpr uint32_t kTensorDims = 1;
constexpr uint32_t kTensorDataType = 2;
constexpr uint32_t kTensorName = 8;
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

void AppendVarintField(uint32_t field, uint64_t v, std::string* out) {
  AppendVarint((uint64_t{field} << 3) | kVarintWire, out);
  AppendVarint(v, out);
}

// The name (field 1, a string) of the message in `contents`: a
// ValueInfoProto's.
Expected<std::string> NameField(Wire contents, const char* what) {
  std::string name;
  KILN_RETURN_IF_ERROR(ForEachField(contents.position(), contents.position() + contents.remaining(), what,
                                    [&](uint32_t number, int wire_type, std::string_view, Wire field) -> Status {
                                      if (number == kValueInfoName && wire_type == kLenWire) {
                                        name.assign(reinterpret_cast<const char*>(field.position()),
                                                    field.remaining());
                                      }
                                      return Status::Ok();
                                    }));
  return name;
}

class Splitter {
 public:
  Splitter(const std::string& location, const OnnxExternalFiles& files,
           const std::map<std::string, OnnxInputValue>& fixed)
      : location_(location), files_(files), fixed_(fixed) {}

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
    std::set<std::string> fixed_seen;
    KILN_RETURN_IF_ERROR(ForEachField(
        contents.position(), contents.position() + contents.remaining(), "graph",
        [&](uint32_t number, int wire_type, std::string_view whole, Wire field) -> Status {
          if (number == kGraphInput && wire_type == kLenWire && !fixed_.empty()) {
            KILN_ASSIGN_OR_RETURN(std::string name, NameField(field, "graph input"));
            if (fixed_.count(name)) {
              fixed_seen.insert(name);  // an initializer now
            } else {
              out->append(whole);
            }
            return Status::Ok();
          }
          if (number != kGraphInitializer || wire_type != kLenWire) {
            out->append(whole);
            return Status::Ok();
          }
          std::string rewritten;
          KILN_ASSIGN_OR_RETURN(Rewrite r, Initializer(field, &rewritten));
          if (r == Rewrite::kRewritten) AppendLenField(kGraphInitializer, rewritten, out);
          if (r == Rewrite::kKept) out->append(whole);
          return Status::Ok();
        }));
    for (const auto& [name, value] : fixed_) {
      if (!fixed_seen.count(name)) return InvalidArgument("fixed input {}: the graph has no input of that name", name);
      std::string tensor;
      KILN_RETURN_IF_ERROR(FixedInitializer(name, value, &tensor));
      AppendLenField(kGraphInitializer, tensor, out);
    }
    return Status::Ok();
  }

  // A fixed input's value as a TensorProto of its name.
  Status FixedInitializer(const std::string& name, const OnnxInputValue& value, std::string* out) {
    std::optional<int32_t> type = OnnxTypeFromDType(value.dtype);
    if (!type) return InvalidArgument("fixed input {}: dtype {} has no ONNX type", name, DTypeName(value.dtype));
    uint64_t elements = 1;
    for (int64_t d : value.dims) {
      if (d < 0) return InvalidArgument("fixed input {}: negative dimension {}", name, d);
      elements *= static_cast<uint64_t>(d);
    }
    std::optional<uint64_t> bytes = DTypeBytes(value.dtype, elements);
    if (!bytes || *bytes != value.bytes.size()) {
      return InvalidArgument("fixed input {}: {} bytes for {} elements of {}", name, value.bytes.size(), elements,
                             DTypeName(value.dtype));
    }
    for (int64_t d : value.dims) AppendVarintField(kTensorDims, static_cast<uint64_t>(d), out);
    AppendVarintField(kTensorDataType, static_cast<uint64_t>(*type), out);
    AppendLenField(kTensorName, name, out);
    AppendData({reinterpret_cast<const char*>(value.bytes.data()), value.bytes.size()}, out);
    return Status::Ok();
  }

  // Where a tensor's `bytes` go: into `weights` (named as external data)
  // when they are big enough to pay for the alignment, else inline as raw
  // data.
  void AppendData(std::string_view bytes, std::string* out) {
    if (bytes.size() < kOnnxMinMovedBytes) {
      AppendLenField(kTensorRawData, bytes, out);
      return;
    }
    out_.weights.resize((out_.weights.size() + kOnnxWeightAlignment - 1) / kOnnxWeightAlignment *
                        kOnnxWeightAlignment);
    const size_t offset = out_.weights.size();
    out_.weights.append(bytes);
    AppendEntry("location", location_, out);
    AppendEntry("offset", std::to_string(offset), out);
    AppendEntry("length", std::to_string(bytes.size()), out);
    AppendVarintField(kTensorDataLocation, 1, out);  // EXTERNAL
    ++out_.moved;
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

  enum class Rewrite { kKept, kRewritten, kDropped };

  // Rewrites one TensorProto into `out`; kKept (nothing written) when it
  // stays as it is, kDropped when a fixed input's value replaces it.
  Expected<Rewrite> Initializer(Wire contents, std::string* out) {
    const uint8_t* begin = contents.position();
    const size_t size = contents.remaining();
    onnx_proto::Tensor t;
    KILN_RETURN_IF_ERROR(onnx_proto::DecodeTensorProto(begin, size, int64_t{1} << 40, &t));
    if (fixed_.count(t.name)) return Rewrite::kDropped;
    std::string_view bytes;
    KILN_RETURN_IF_ERROR(DataOf(t, &bytes));
    const bool external = !t.has_raw_data && t.data_location == 1;
    const bool move = bytes.size() >= kOnnxMinMovedBytes;
    if (!move && !external) return Rewrite::kKept;
    // Every field but where the data is; then where it is now.
    KILN_RETURN_IF_ERROR(ForEachField(begin, begin + size, "initializer",
                                      [&](uint32_t number, int, std::string_view whole, Wire) -> Status {
                                        if (number != kTensorRawData && number != kTensorExternalData &&
                                            number != kTensorDataLocation) {
                                          out->append(whole);
                                        }
                                        return Status::Ok();
                                      }));
    // A small tensor of an external file comes into the graph, so that the
    // file need not be stored for it.
    AppendData(bytes, out);
    return Rewrite::kRewritten;
  }

  const std::string& location_;
  const OnnxExternalFiles& files_;
  const std::map<std::string, OnnxInputValue>& fixed_;
  SplitOnnxModel out_;
};

}  // namespace

Expected<SplitOnnxModel> SplitOnnxWeights(std::span<const uint8_t> model, const std::string& location,
                                          const OnnxExternalFiles& external_files,
                                          const std::map<std::string, OnnxInputValue>& fixed) {
  Splitter splitter(location, external_files, fixed);
  KILN_RETURN_IF_ERROR(splitter.Model(model));
  return splitter.Take();
}

}  // namespace kiln
