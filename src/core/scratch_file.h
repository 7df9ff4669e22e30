// Writable memory backed by an unlinked file on disk rather than by swap,
// for data too large to hold twice: pages the process drops after copying
// them elsewhere (DropMappedPages) are written back and read in again from
// the file, where anonymous memory would read back as zeros.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"

namespace kiln {

// A shared mapping of `bytes` zeroed bytes in a file created and unlinked
// in the temporary folder ($TMPDIR, else /tmp): the file is gone from the
// folder at once and its blocks are freed when the mapping is. Fails where
// that folder lives in memory (tmpfs), since the file's pages could then
// not leave it either.
Expected<std::shared_ptr<uint8_t>> MapScratchFile(uint64_t bytes);

}  // namespace kiln
