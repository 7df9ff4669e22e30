// Each family of tensor ops adds its definitions here; tensor_op.cc
// gathers them into one table (explicit calls, so that nothing depends on
// static initializers surviving a static link).
#pragma once

#include <vector>

#include "graph/tensor_op.h"

namespace kiln {

void AddElementwiseOpDefs(std::vector<TensorOpDef>* ops);  // unary, binary with broadcasting, Where, Clip, Cast, ...
void AddShapeOpDefs(std::vector<TensorOpDef>* ops);        // Shape, Reshape, Transpose, Concat, Split, Slice, Gather, ...
void AddReduceOpDefs(std::vector<TensorOpDef>* ops);       // Reduce*, Softmax, ArgMax, TopK, normalizations, ...
void AddConvOpDefs(std::vector<TensorOpDef>* ops);         // Conv, ConvTranspose, pooling, MatMul, Gemm, Einsum, ...
void AddMatMulOpDefs(std::vector<TensorOpDef>* ops);        // MatMul, Gemm, Einsum
void AddQuantOpDefs(std::vector<TensorOpDef>* ops);        // QuantizeLinear, DequantizeLinear, QLinear*, ...
void AddLayoutOpDefs(std::vector<TensorOpDef>* ops);       // kiln.Reorder (the layout stage's conversions)
// kiln.ChannelShuffle (fused from ShuffleNet's Concat, Reshape, Transpose, Reshape)
void AddChannelShuffleOpDef(std::vector<TensorOpDef>* ops);

}  // namespace kiln
