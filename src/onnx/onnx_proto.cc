#include "onnx/onnx_proto.h"

#include <cstring>

namespace kiln::onnx_proto {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

// What all the cursors of one decoding share: the first failure (for the
// message) and the count of messages and strings decoded, which is bounded
// because each costs far more memory than its few bytes on the wire.
struct DecodeState {
  std::string error;
  int64_t items = 0;
  int64_t max_items = 0;
};

// A cursor over one message's bytes. Every read checks the bounds; the first
// failure is remembered and makes all later reads fail.
class Wire {
 public:
  Wire(const uint8_t* p, const uint8_t* end, const uint8_t* origin, DecodeState* state, int depth_left)
      : p_(p), end_(end), origin_(origin), state_(state), depth_left_(depth_left) {}

  bool AtEnd() const { return p_ >= end_; }
  bool ok() const { return state_->error.empty(); }

  bool Fail(const char* what) {
    if (state_->error.empty()) state_->error = fmt::format("{} at byte {}", what, p_ - origin_);
    return false;
  }

  // Counts one more message or string against the limit.
  bool Item() {
    if (++state_->items <= state_->max_items) return true;
    if (state_->error.empty()) {
      state_->error = fmt::format("more than {} messages and strings, the limit", state_->max_items);
    }
    return false;
  }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ >= end_) return Fail("a number runs past the end");
      uint8_t b = *p_++;
      if (shift == 63 && b > 1) return Fail("a number longer than 64 bits");
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = result;
        return true;
      }
    }
    return Fail("a number longer than 10 bytes");
  }

  bool Fixed(void* out, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return Fail("a fixed-size value runs past the end");
    std::memcpy(out, p_, n);  // little-endian on the wire and on the host
    p_ += n;
    return true;
  }

  bool Tag(uint32_t* field, int* wire_type) {
    uint64_t tag = 0;
    if (!Varint(&tag)) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    if (*field == 0 || tag >> 3 > 0x1fffffff) return Fail("an invalid field number");
    return true;
  }

  bool Len(const uint8_t** begin, size_t* n) {
    uint64_t len = 0;
    if (!Varint(&len)) return false;
    if (len > static_cast<uint64_t>(end_ - p_)) return Fail("a length runs past the end");
    *begin = p_;
    *n = static_cast<size_t>(len);
    p_ += len;
    return true;
  }

  bool Skip(int wire_type) {
    uint64_t v = 0;
    const uint8_t* b = nullptr;
    size_t n = 0;
    switch (wire_type) {
      case kVarint: return Varint(&v);
      case kFixed64: return Fixed(&v, 8);
      case kFixed32: return Fixed(&v, 4);
      case kLen: return Len(&b, &n);
      default: return Fail("an unknown wire type");
    }
  }

  // A nested message's cursor, one level deeper.
  bool Sub(int wire_type, Wire* sub) {
    if (wire_type != kLen) return Fail("a message field with the wrong wire type");
    if (depth_left_ <= 0) return Fail("messages nested too deep");
    if (!Item()) return false;
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    *sub = Wire(b, b + n, origin_, state_, depth_left_ - 1);
    return true;
  }

  bool String(int wire_type, std::string* s) {
    std::string_view v;
    if (!View(wire_type, &v)) return false;
    s->assign(v.data(), v.size());
    return true;
  }

  bool View(int wire_type, std::string_view* v) {
    if (wire_type != kLen) return Fail("a string field with the wrong wire type");
    if (!Item()) return false;
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    *v = std::string_view(reinterpret_cast<const char*>(b), n);
    return true;
  }

  bool Int(int wire_type, int64_t* v) {
    if (wire_type != kVarint) return Fail("an integer field with the wrong wire type");
    uint64_t u = 0;
    if (!Varint(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }

  bool Int32(int wire_type, int32_t* v) {
    int64_t w = 0;
    if (!Int(wire_type, &w)) return false;
    *v = static_cast<int32_t>(w);
    return true;
  }

  bool Float(int wire_type, float* v) {
    if (wire_type != kFixed32) return Fail("a float field with the wrong wire type");
    return Fixed(v, 4);
  }

  // A repeated varint field, packed or not.
  template <typename T>
  bool RepeatedVarint(int wire_type, std::vector<T>* out) {
    if (wire_type == kVarint) {
      uint64_t u = 0;
      if (!Varint(&u)) return false;
      out->push_back(static_cast<T>(u));
      return true;
    }
    if (wire_type != kLen) return Fail("a repeated integer field with the wrong wire type");
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    Wire packed(b, b + n, origin_, state_, depth_left_);
    while (!packed.AtEnd()) {
      uint64_t u = 0;
      if (!packed.Varint(&u)) return false;
      out->push_back(static_cast<T>(u));
    }
    return true;
  }

  // A repeated fixed-size field (float, double), packed or not.
  template <typename T>
  bool RepeatedFixed(int wire_type, std::vector<T>* out) {
    constexpr int kExpected = sizeof(T) == 4 ? kFixed32 : kFixed64;
    if (wire_type == kExpected) {
      T v{};
      if (!Fixed(&v, sizeof(T))) return false;
      out->push_back(v);
      return true;
    }
    if (wire_type != kLen) return Fail("a repeated floating-point field with the wrong wire type");
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    if (n % sizeof(T) != 0) return Fail("a packed floating-point field of a partial value");
    size_t old = out->size();
    out->resize(old + n / sizeof(T));
    if (n > 0) std::memcpy(out->data() + old, b, n);
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* origin_;
  DecodeState* state_;
  int depth_left_;
};

// Each Decode* reads fields until the end of its cursor; unknown fields are skipped.
#define KILN_WIRE_FIELDS(w) \
  uint32_t field;           \
  int wt;                   \
  while (!(w).AtEnd() && (w).Tag(&field, &wt))

bool DecodeEntry(Wire w, StringStringEntry* e) {
  KILN_WIRE_FIELDS(w) {
    bool ok = field == 1 ? w.String(wt, &e->key) : field == 2 ? w.String(wt, &e->value) : w.Skip(wt);
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeTensor(Wire w, Tensor* t) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    Wire sub = w;
    switch (field) {
      case 1: ok = w.RepeatedVarint(wt, &t->dims); break;
      case 2: ok = w.Int32(wt, &t->data_type); break;
      case 3:
        t->has_segment = true;
        ok = w.Skip(wt);
        break;
      case 4: ok = w.RepeatedFixed(wt, &t->float_data); break;
      case 5: ok = w.RepeatedVarint(wt, &t->int32_data); break;
      case 6:
        ++t->string_data_count;
        ok = w.Skip(wt);
        break;
      case 7: ok = w.RepeatedVarint(wt, &t->int64_data); break;
      case 8: ok = w.String(wt, &t->name); break;
      case 9:
        t->has_raw_data = true;
        ok = w.View(wt, &t->raw_data);
        break;
      case 10: ok = w.RepeatedFixed(wt, &t->double_data); break;
      case 11: ok = w.RepeatedVarint(wt, &t->uint64_data); break;
      case 13:
        t->external_data.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeEntry(sub, &t->external_data.back());
        break;
      case 14: ok = w.Int32(wt, &t->data_location); break;
      default: ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeDimension(Wire w, Dimension* d) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    if (field == 1) {
      d->has_dim_value = true;
      d->has_dim_param = false;  // a oneof: the last one set wins
      ok = w.Int(wt, &d->dim_value);
    } else if (field == 2) {
      d->has_dim_param = true;
      d->has_dim_value = false;
      ok = w.String(wt, &d->dim_param);
    } else {
      ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeShape(Wire w, std::vector<Dimension>* shape) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    if (field == 1) {
      Wire sub = w;
      shape->emplace_back();
      ok = w.Sub(wt, &sub) && DecodeDimension(sub, &shape->back());
    } else {
      ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeTensorType(Wire w, Type* type) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    if (field == 1) {
      ok = w.Int32(wt, &type->elem_type);
    } else if (field == 2) {
      Wire sub = w;
      type->has_shape = true;
      type->shape.clear();
      ok = w.Sub(wt, &sub) && DecodeShape(sub, &type->shape);
    } else {
      ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeType(Wire w, Type* type) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    Wire sub = w;
    switch (field) {
      case 1:
        *type = Type();
        type->kind = Type::kTensor;
        ok = w.Sub(wt, &sub) && DecodeTensorType(sub, type);
        break;
      case 4:
        *type = Type();
        type->kind = Type::kSequence;
        ok = w.Skip(wt);
        break;
      case 5:
        *type = Type();
        type->kind = Type::kMap;
        ok = w.Skip(wt);
        break;
      case 8:
        *type = Type();
        type->kind = Type::kSparseTensor;
        ok = w.Skip(wt);
        break;
      case 9:
        *type = Type();
        type->kind = Type::kOptional;
        ok = w.Skip(wt);
        break;
      default: ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeValueInfo(Wire w, ValueInfo* v) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    if (field == 1) {
      ok = w.String(wt, &v->name);
    } else if (field == 2) {
      Wire sub = w;
      v->has_type = true;
      v->type = Type();
      ok = w.Sub(wt, &sub) && DecodeType(sub, &v->type);
    } else {
      ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeGraph(Wire w, Graph* g);

bool DecodeAttribute(Wire w, Attribute* a) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    Wire sub = w;
    switch (field) {
      case 1: ok = w.String(wt, &a->name); break;
      case 21: ok = w.String(wt, &a->ref_attr_name); break;
      case 20: ok = w.Int32(wt, &a->type); break;
      case 2:
        a->has_f = true;
        ok = w.Float(wt, &a->f);
        break;
      case 3:
        a->has_i = true;
        ok = w.Int(wt, &a->i);
        break;
      case 4:
        a->has_s = true;
        ok = w.String(wt, &a->s);
        break;
      case 5:
        a->t = std::make_unique<Tensor>();
        ok = w.Sub(wt, &sub) && DecodeTensor(sub, a->t.get());
        break;
      case 6:
        a->g = std::make_unique<Graph>();
        ok = w.Sub(wt, &sub) && DecodeGraph(sub, a->g.get());
        break;
      case 7: ok = w.RepeatedFixed(wt, &a->floats); break;
      case 8: ok = w.RepeatedVarint(wt, &a->ints); break;
      case 9:
        a->strings.emplace_back();
        ok = w.String(wt, &a->strings.back());
        break;
      case 10:
      case 11:
      case 14:
      case 15:
      case 22:
      case 23:
        ++a->other_values;
        ok = w.Skip(wt);
        break;
      default: ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeNode(Wire w, Node* n) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    Wire sub = w;
    switch (field) {
      case 1:
        n->input.emplace_back();
        ok = w.String(wt, &n->input.back());
        break;
      case 2:
        n->output.emplace_back();
        ok = w.String(wt, &n->output.back());
        break;
      case 3: ok = w.String(wt, &n->name); break;
      case 4: ok = w.String(wt, &n->op_type); break;
      case 7: ok = w.String(wt, &n->domain); break;
      case 5:
        n->attribute.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeAttribute(sub, &n->attribute.back());
        break;
      default: ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeGraph(Wire w, Graph* g) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    Wire sub = w;
    switch (field) {
      case 1:
        g->node.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeNode(sub, &g->node.back());
        break;
      case 2: ok = w.String(wt, &g->name); break;
      case 5:
        g->initializer.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeTensor(sub, &g->initializer.back());
        break;
      case 15:
        ++g->sparse_initializer_count;
        ok = w.Skip(wt);
        break;
      case 11:
        g->input.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeValueInfo(sub, &g->input.back());
        break;
      case 12:
        g->output.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeValueInfo(sub, &g->output.back());
        break;
      default: ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

bool DecodeOpset(Wire w, OperatorSetId* o) {
  KILN_WIRE_FIELDS(w) {
    bool ok = field == 1 ? w.String(wt, &o->domain) : field == 2 ? w.Int(wt, &o->version) : w.Skip(wt);
    if (!ok) return false;
  }
  return w.ok();
}

// FunctionProto: only its name and domain (fields 1 and 10), for the message refusing it.
bool DecodeFunctionName(Wire w, std::string* name) {
  std::string fname, domain;
  KILN_WIRE_FIELDS(w) {
    bool ok = field == 1 ? w.String(wt, &fname) : field == 10 ? w.String(wt, &domain) : w.Skip(wt);
    if (!ok) return false;
  }
  *name = domain.empty() ? fname : domain + "." + fname;
  return w.ok();
}

bool DecodeModelFields(Wire w, Model* m) {
  KILN_WIRE_FIELDS(w) {
    bool ok = true;
    Wire sub = w;
    switch (field) {
      case 1: ok = w.Int(wt, &m->ir_version); break;
      case 2: ok = w.String(wt, &m->producer_name); break;
      case 3: ok = w.String(wt, &m->producer_version); break;
      case 7:
        m->has_graph = true;
        ok = w.Sub(wt, &sub) && DecodeGraph(sub, &m->graph);
        break;
      case 8:
        m->opset_import.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeOpset(sub, &m->opset_import.back());
        break;
      case 25:
        m->function_names.emplace_back();
        ok = w.Sub(wt, &sub) && DecodeFunctionName(sub, &m->function_names.back());
        break;
      default: ok = w.Skip(wt);
    }
    if (!ok) return false;
  }
  return w.ok();
}

#undef KILN_WIRE_FIELDS

}  // namespace

Status DecodeModel(const uint8_t* data, size_t size, int max_depth, int64_t max_items, Model* model) {
  DecodeState state;
  state.max_items = max_items;
  Wire w(data, data + size, data, &state, max_depth);
  if (!DecodeModelFields(w, model)) {
    if (state.items > max_items) {
      return ResourceExhausted("the model holds {}: larger than kiln reads", state.error);
    }
    return Corrupt(
        "not a valid ONNX model: its {} bytes do not decode as an ONNX ModelProto ({}; truncated, or not "
        "an ONNX file)",
        size, state.error.empty() ? "malformed" : state.error);
  }
  return Status::Ok();
}

Status DecodeTensorProto(const uint8_t* data, size_t size, int64_t max_items, Tensor* tensor) {
  DecodeState state;
  state.max_items = max_items;
  Wire w(data, data + size, data, &state, 4);
  if (!DecodeTensor(w, tensor) || !w.ok()) {
    if (state.items > max_items) return ResourceExhausted("the tensor holds {}: larger than kiln reads", state.error);
    return Corrupt("not a valid ONNX TensorProto ({} bytes; {})", size, state.error.empty() ? "malformed" : state.error);
  }
  return Status::Ok();
}

}  // namespace kiln::onnx_proto
