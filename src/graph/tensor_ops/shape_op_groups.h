// The shape family's op definitions, in three groups (one file each):
// views and re-layouts, selection (slicing, gathering, scattering, joining),
// and generated tensors (ConstantOfShape, Range, Resize, ...).
#pragma once

#include <vector>

#include "graph/tensor_op.h"

namespace kiln::shape_ops {

void AddShapeViewOpDefs(
    std::vector<TensorOpDef>* ops);  // Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
                                     // Transpose, Expand, Tile, DepthToSpace, SpaceToDepth
void AddShapeSelectOpDefs(
    std::vector<TensorOpDef>* ops);  // Concat, Split, Slice, Gather*, Scatter*, Pad, NonZero
void AddShapeGenerateOpDefs(std::vector<TensorOpDef>* ops);  // ConstantOfShape, Range, OneHot, Trilu,
                                                             // EyeLike, Resize, Upsample

// A definition with these counts whose FLOPs are NoFlops.
TensorOpDef ShapeOpDef(const char* name, int min_in, int max_in,
                       Expected<ShapeResult> (*infer)(const ShapeContext&), int min_out = 1, int max_out = 1);

// FLOPs of an op that only moves data: none.
double NoFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs);

}  // namespace kiln::shape_ops
