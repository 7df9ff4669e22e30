#include "server/chat_page.h"

#include "server/chat_page_files.h"

namespace kiln::server {
namespace {

// The page runs only its own script and style, talks only to this server,
// and cannot be framed: text a model writes or a setting holds can never
// become code, even if it reached the DOM as markup.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The library matches routes as regular expressions: a file's path, with
// its dots meaning dots.
std::string RoutePattern(std::string_view path) {
  std::string pattern;
  for (char c : path) {
    if (c == '.') pattern += '\\';
    pattern += c;
  }
  return pattern;
}

}  // namespace

bool IsChatPagePath(const std::string& path) {
  for (const EmbeddedFile& file : ChatPageFiles()) {
    if (file.url_path == path) return true;
  }
  return false;
}

void InstallChatPageRoutes(httplib::Server& http) {
  for (const EmbeddedFile& file : ChatPageFiles()) {
    http.Get(RoutePattern(file.url_path), [&file](const httplib::Request&, httplib::Response& res) {
      res.status = 200;
      res.set_content(file.bytes.data(), file.bytes.size(), std::string(file.content_type));
      res.set_header("Content-Security-Policy", kContentSecurityPolicy);
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Referrer-Policy", "no-referrer");
      // A new binary may serve a new page: the browser asks each time.
      res.set_header("Cache-Control", "no-cache");
    });
  }
}

}  // namespace kiln::server
