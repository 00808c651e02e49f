// Status and StatusOr<T>: errors as values at module boundaries.
// Anything a user, a file or a peer can cause returns one of these; programmer errors CHECK.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "common/check.h"

namespace tpserve {

// The codes double as the typed errors of the client protocol (see comm/schema/client.capnp).
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a bad request or flag
  kNotFound,           // a missing file, tensor or key
  kDataLoss,           // a corrupt or truncated file
  kOutOfRange,         // e.g. a prompt longer than the context
  kResourceExhausted,  // out of KV blocks, queue full (overloaded)
  kUnavailable,        // a lost worker or peer
  kDeadlineExceeded,   // a collective or step that timed out
  kCancelled,
  kUnauthenticated,
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { CHECK(!status_.ok()) << "StatusOr from OK status"; }
  StatusOr(T value) : value_(std::move(value)) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok()
  T& value() & { CHECK(ok()) << status_.ToString(); return *value_; }
  const T& value() const& { CHECK(ok()) << status_.ToString(); return *value_; }
  T&& value() && { CHECK(ok()) << status_.ToString(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tpserve

#define TPSERVE_CONCAT_INNER(a, b) a##b
#define TPSERVE_CONCAT(a, b) TPSERVE_CONCAT_INNER(a, b)

// RETURN_IF_ERROR(expr): returns expr's Status from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::tpserve::Status _st = (expr);                    \
    if (!_st.ok()) return _st;                         \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): lhs = value of StatusOr expr, or return its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TPSERVE_CONCAT(_status_or_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
