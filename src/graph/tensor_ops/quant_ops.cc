// Shape inference of the quant family of tensor ops.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {

void AddQuantOpDefs(std::vector<TensorOpDef>* ops) { (void)ops; }

}  // namespace kiln
