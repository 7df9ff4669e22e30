// Shape inference of the shape family of tensor ops.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {

void AddShapeOpDefs(std::vector<TensorOpDef>* ops) { (void)ops; }

}  // namespace kiln
