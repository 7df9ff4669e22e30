// Internal: runs an elementwise kernel over threads, splitting rows, or
// columns when there are few rows. Lanes are independent, so any split
// gives the same result.
#pragma once

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {

void RunElementwise(const KernelContext& ctx, void (*kernel)(const ElementwiseArgs&),
                    const ElementwiseArgs& args, int64_t cost_per_element = 1);

}  // namespace kiln::cpu
