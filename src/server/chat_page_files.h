// The chat page's files (src/server/chat_page/), embedded in the binary at
// build time by cmake/embed_files.cmake, so that `kiln serve` needs nothing
// beside itself to serve the page.
#pragma once

#include <span>
#include <string_view>

namespace kiln::server {

struct EmbeddedFile {
  std::string_view url_path;      // "/" for index.html, else "/<file name>"
  std::string_view content_type;  // the Content-Type header
  std::string_view bytes;
};

// Every file of the page, in the order the build lists them.
std::span<const EmbeddedFile> ChatPageFiles();

}  // namespace kiln::server
