// Writing JSON answers and OpenAI-shaped errors into an HTTP response.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace kiln::server {

// Seconds a client is asked to wait before retrying a 503.
inline constexpr int kRetryAfterSeconds = 1;

// `body` as application/json with `status`.
void ReplyJson(httplib::Response& res, int status, const nlohmann::ordered_json& body);

// The error's status and body; a 503 also says Retry-After.
void ReplyError(httplib::Response& res, const ApiError& error);

// The connection's endpoints as the request reports them.
struct ConnectionAddress;
ConnectionAddress AddressOf(const httplib::Request& req);

}  // namespace kiln::server
