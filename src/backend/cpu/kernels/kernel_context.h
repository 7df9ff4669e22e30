// What every CPU kernel call needs besides its operands: the threads to run
// on and the instruction set to run with.
#pragma once

#include "backend/cpu/kernels/isa.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

struct KernelContext {
  // Threads to split the work over; null runs everything on the caller.
  ThreadPool* pool = nullptr;
  // Which kernel variant runs. REQUIRES: IsaAvailable(isa).
  Isa isa = BestIsa();

  int num_threads() const { return pool != nullptr ? pool->num_threads() : 1; }
};

}  // namespace kiln::cpu
