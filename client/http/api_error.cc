#include "client/http/api_error.h"

#include <nlohmann/json.hpp>

namespace tpserve::http {
namespace {

constexpr int kRetryAfterSeconds = 1;

nlohmann::json NullIfEmpty(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

}  // namespace

std::string ApiError::ToJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}, {"param", NullIfEmpty(param)}, {"code", NullIfEmpty(code)}};
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError InvalidRequest(std::string param, std::string message) {
  return {400, "invalid_request_error", std::move(message), std::move(param), "", 0};
}

ApiError Unauthorized() {
  return {401, "authentication_error", "missing or wrong API key (send Authorization: Bearer <key>)", "",
          "invalid_api_key", 0};
}

ApiError RouteNotFound(const std::string& method, const std::string& target) {
  return {404, "not_found_error", "no route " + method + " " + target.substr(0, 256), "", "not_found", 0};
}

ApiError ModelNotFound(const std::string& model) {
  return {404, "not_found_error", "the model '" + model.substr(0, 256) + "' is not served here (see GET /v1/models)",
          "model", "model_not_found", 0};
}

ApiError BodyTooLarge(size_t limit_bytes) {
  return {413, "invalid_request_error",
          "the request body is larger than the limit of " + std::to_string(limit_bytes) + " bytes", "",
          "request_too_large", 0};
}

ApiError CoordinatorTimeout() {
  return {503, "service_unavailable", "the coordinator did not answer in time", "", "unavailable", kRetryAfterSeconds};
}

ApiError FromCoordinatorError(const proto::ErrorReply& error) {
  const std::string code = proto::ErrorKindName(error.kind);
  switch (error.kind) {
    case proto::ErrorKind::kInvalidRequest:
    case proto::ErrorKind::kPromptTooLong:
      return {400, "invalid_request_error", error.message, "", code, 0};
    case proto::ErrorKind::kOverloaded:
      return {429, "rate_limit_error", error.message, "", code, kRetryAfterSeconds};
    case proto::ErrorKind::kUnavailable:
    case proto::ErrorKind::kWorkerLost:
      return {503, "service_unavailable", error.message, "", code, kRetryAfterSeconds};
    case proto::ErrorKind::kUnauthenticated:
      return {401, "authentication_error", error.message, "", code, 0};
    case proto::ErrorKind::kCancelled:
      return {400, "invalid_request_error", error.message, "", code, 0};
    case proto::ErrorKind::kInternal:
      break;
  }
  return {500, "internal_error", error.message, "", code, 0};
}

}  // namespace tpserve::http
