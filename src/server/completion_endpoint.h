// POST /v1/chat/completions and POST /v1/completions: checks a request,
// turns it into engine requests (n choices of each prompt), and answers
// with one JSON object or, when it asks to stream, server-sent events.
#pragma once

#include <httplib.h>

#include <string>

#include "server/completion_request.h"
#include "server/server_state.h"

namespace kiln::server {

// Answers `req`, whose body is `body`, into `res`. A stream's events are
// written after this returns, by the content provider it installs.
void ServeCompletion(ServerState& state, Endpoint endpoint, const httplib::Request& req, const std::string& body,
                     httplib::Response& res);

}  // namespace kiln::server
