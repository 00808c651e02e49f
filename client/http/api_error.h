// ApiError: an error reply in OpenAI's shape, {"error": {"message", "type", "param", "code"}}, with
// its HTTP status. Every failure the gateway reports — a bad body, a missing key, a typed error from
// the coordinator, an error in the middle of a stream — goes through here, so the mapping from
// causes to statuses lives in one place.
#pragma once

#include <string>

#include "comm/client_codec.h"

namespace tpserve::http {

struct ApiError {
  unsigned status = 500;    // HTTP status
  std::string type;         // OpenAI's error type: invalid_request_error, authentication_error, ...
  std::string message;      // what was wrong, naming the field when one was
  std::string param;        // the offending field ("" when none)
  std::string code;         // a short machine-readable code ("" when none)
  int retry_after_s = 0;    // > 0: the reply carries Retry-After (429, 503)

  // The JSON object {"error": {...}} (param and code are null when empty).
  std::string ToJson() const;
};

// 400: a field (param) or the body ("" param) is malformed, of the wrong type or out of range.
ApiError InvalidRequest(std::string param, std::string message);
// 401: no or a wrong API key.
ApiError Unauthorized();
// 404: no such route, or a model this gateway does not serve.
ApiError RouteNotFound(const std::string& method, const std::string& target);
ApiError ModelNotFound(const std::string& model);
// 413: the body is larger than `limit_bytes`.
ApiError BodyTooLarge(size_t limit_bytes);
// 503: the coordinator did not answer in time.
ApiError CoordinatorTimeout();

// A typed error of the coordinator: invalid_request/prompt_too_long → 400, overloaded → 429 with
// Retry-After, unavailable/worker_lost → 503 (Retry-After), unauthenticated → 401,
// cancelled → 400, internal → 500.
ApiError FromCoordinatorError(const proto::ErrorReply& error);

}  // namespace tpserve::http
