// The progress bar `kiln quantize` draws: tensors done, bytes written and the
// time left, as one line of text.
#pragma once

#include <string>

#include "quantize/quantize_model.h"

namespace kiln {

// "[#########...........]  12/46 tensors  1.2/3.4 MiB  0:03 left", the bar
// `bar_width` characters wide. The time left extrapolates the elapsed time
// over the bytes still to write ("--:--" before any are written; "done"
// once all are).
std::string QuantizeProgressLine(const QuantizeProgress& progress, int bar_width = 24);

// Seconds as "m:ss", or "h:mm:ss" from an hour on.
std::string FormatDuration(double seconds);

}  // namespace kiln
