// JSON and error answers.
#include "server/http_reply.h"

#include "server/peer_socket.h"
#include "server/sse.h"

namespace kiln::server {

void ReplyJson(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(JsonText(body), "application/json");
}

void ReplyError(httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  if (error.http_status == 503) res.set_header("Retry-After", std::to_string(kRetryAfterSeconds));
  res.set_content(error.Body(), "application/json");
}

ConnectionAddress AddressOf(const httplib::Request& req) {
  return ConnectionAddress{req.local_addr, req.local_port, req.remote_addr, req.remote_port};
}

}  // namespace kiln::server
