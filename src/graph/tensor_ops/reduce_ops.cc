// Shape inference of the reduce family of tensor ops.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {

void AddReduceOpDefs(std::vector<TensorOpDef>* ops) { (void)ops; }

}  // namespace kiln
