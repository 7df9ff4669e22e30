// Bounds on the work a chat template may do while rendering: templates are
// untrusted input (they travel inside GGUF files), so every render is capped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

struct RenderLimits {
  // Nested macro calls and recursive loop calls.
  int max_call_depth = 100;
  // Loop iterations over the whole render. (Like jinja2's sandbox, range()
  // also refuses more than 100,000 items on its own.)
  int64_t max_loop_iterations = 1'000'000;
  // Bytes of output, and of any single string built on the way.
  size_t max_output_bytes = 16u << 20;
  // Units of work over the whole render: one per evaluation step, plus one
  // per byte or item of every string or list built. Bounds the render time.
  int64_t max_steps = 50'000'000;
};

}  // namespace kiln
