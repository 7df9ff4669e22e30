// The machine's memory as the kernel reports it (/proc/meminfo), for
// sizing what is allocated against what is there.
#pragma once

#include <cstdint>

namespace kiln {

// Bytes available to this process now without swapping (MemAvailable), or
// 0 when unknown.
int64_t AvailableMemoryBytes();

// The machine's memory (MemTotal), or 0 when unknown.
int64_t TotalMemoryBytes();

}  // namespace kiln
