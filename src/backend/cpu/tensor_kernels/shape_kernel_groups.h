// The shape family's CPU kernels, in groups (one file each); AddShapeKernels
// (shape_kernels.cc) adds them all.
#pragma once

#include <vector>

#include "backend/cpu/tensor_kernels/strided_copy.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu::shape_kernels {

void AddShapeViewKernels(std::vector<TensorKernelEntry>*
                             kernels);  // Shape, Size, Reshape, ..., Transpose, Expand, Tile, DepthToSpace
void AddShapeSelectKernels(
    std::vector<TensorKernelEntry>* kernels);  // Concat, Split, Slice, Gather*, Scatter*, Pad, NonZero
void AddShapeGenerateKernels(
    std::vector<TensorKernelEntry>* kernels);  // ConstantOfShape, Range, OneHot, Trilu, EyeLike
void AddResizeKernels(std::vector<TensorKernelEntry>* kernels);  // Resize, Upsample

// A kernel copying input 0 to output 0 as `spec` says.
TensorKernel StridedCopyKernel(StridedCopySpec spec);

}  // namespace kiln::cpu::shape_kernels
