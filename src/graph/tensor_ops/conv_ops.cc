// Shape inference of the conv family of tensor ops.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {

void AddConvOpDefs(std::vector<TensorOpDef>* ops) { (void)ops; }

}  // namespace kiln
