// When a relayed stream has really begun. A chat stream's first event from
// `kiln serve` is a preamble, sent as soon as the request is accepted: the
// assistant's role with empty content. Until an event with generated output
// arrives the router holds the preamble back, so that a replica dying while
// the request waits in its queue can still be replaced by another one
// without the client seeing two streams.
#pragma once

#include <string_view>

namespace kiln::router {

// True once `sse` (the stream's bytes so far) holds a complete event that
// is not a preamble: text, a delta with more than the role, a finish
// reason, an error, "[DONE]", or anything the router does not recognize.
bool StreamHasBegun(std::string_view sse);

}  // namespace kiln::router
