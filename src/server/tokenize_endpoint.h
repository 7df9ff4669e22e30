// POST /tokenize and POST /detokenize (vLLM's shapes): text or a chat to
// token ids with the served model's tokenizer, and ids back to text.
#pragma once

#include <httplib.h>

#include <string>

#include "server/server_state.h"

namespace kiln::server {

// {"prompt": text, "add_special_tokens": bool} or {"messages": [...],
// "add_generation_prompt": bool} -> {"tokens", "count", "max_model_len"}.
void ServeTokenize(ServerState& state, const std::string& body, httplib::Response& res);

// {"tokens": [ids]} -> {"prompt": text}.
void ServeDetokenize(ServerState& state, const std::string& body, httplib::Response& res);

}  // namespace kiln::server
