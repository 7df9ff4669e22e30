// The chat page: GET / serves a page that talks to this server's own
// /v1/models and /v1/chat/completions from the browser. Its files are
// public (the browser loads them before it has the API key); the API they
// call is not.
#pragma once

#include <string>

#include <httplib.h>

namespace kiln::server {

// Whether `path` is one of the page's files, served without the API key.
bool IsChatPagePath(const std::string& path);

// Adds a GET route for each of the page's files.
void InstallChatPageRoutes(httplib::Server& http);

}  // namespace kiln::server
