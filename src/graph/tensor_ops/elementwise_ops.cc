// Shape inference of the elementwise ops: unary maps, binary ops with numpy
// broadcasting, and their relatives.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {

void AddElementwiseOpDefs(std::vector<TensorOpDef>* ops) {
  for (const char* name : {"Relu"}) {
    TensorOpDef d;
    d.op_type = name;
    d.infer = SameAsInput0;
    ops->push_back(d);
  }
}

}  // namespace kiln
