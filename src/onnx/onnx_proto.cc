#include "onnx/onnx_proto.h"

#include <cstring>

#include "onnx/onnx_wire.h"

namespace kiln::onnx_proto {
namespace {

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
