// Stage 2 for tensor graphs, after shape_views: a Concat along the channels
// of one image runs on the CPU as a copy of each input into its part of the
// output. Where it is safe the inputs become views of the output instead
// (Value::view_of, at col_offset elements in): each input's producer writes
// straight into its slice, and the Concat node goes. An input that is itself
// a view (a Split's part, a Reshape) moves its whole storage into the
// output, so that Split -> ... -> Concat (YOLO's C2f) copies nothing.
//
// Safe means: the output and every input's storage are arena values (no
// graph input or output, no constant) of one dtype, layout and memory
// domain, on the CPU backend; the output is row-major with every axis
// before the concat's one of extent 1, or nchw16c of one image joined along
// whole channel blocks (every input but the last a multiple of 16
// channels); each input's storage is exactly tiled by the windows of it
// that this Concat joins, in order (so a value already placed in another
// Concat's output stays a copy here; being read elsewhere too is fine);
// every part starts 64-byte aligned (so each also ends where the next
// starts, or at the output's 64-byte padded end, as the buffers a kernel
// wrote before did). Each byte of the output then has
// exactly one writer, and the planner keeps the output alive from its first
// part's producer to the last reader of it or of any part.
#pragma once

#include <string>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

// `cpu_backend` names the backend whose Concat kernel is the copy.
// Returns the number of Concat nodes made views; compacts the graph.
Expected<int> MakeConcatViews(Graph& g, const std::string& cpu_backend);

}  // namespace kiln
