// The text of a request that a backend's prefix cache would see first, for
// prefix affinity: the prompt of a completion, or the chat messages (and
// tools) in order. It only has to put requests that share a prompt prefix
// on the same path, not to match the chat template.
#pragma once

#include <string>
#include <string_view>

namespace kiln::router {

enum class ApiKind { kCompletion, kChat };

// The affinity text of a request body; "" when the body is not JSON or has
// no prompt (the backend will say what is wrong with it).
std::string AffinityText(std::string_view body, ApiKind kind);

}  // namespace kiln::router
