// Minimal leveled logging to stderr: LOG(INFO) << "..."; level from TPSERVE_LOG (debug|info|warn|error).
#pragma once

#include <sstream>

namespace tpserve {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

LogLevel CurrentLogLevel();

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // writes one line atomically
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};
}  // namespace internal

}  // namespace tpserve

#define TPSERVE_LOG_DEBUG ::tpserve::LogLevel::kDebug
#define TPSERVE_LOG_INFO ::tpserve::LogLevel::kInfo
#define TPSERVE_LOG_WARN ::tpserve::LogLevel::kWarn
#define TPSERVE_LOG_ERROR ::tpserve::LogLevel::kError
#define LOG(level)                                                    \
  if (TPSERVE_LOG_##level < ::tpserve::CurrentLogLevel()) {           \
  } else                                                              \
    ::tpserve::internal::LogMessage(TPSERVE_LOG_##level, __FILE__, __LINE__).stream()
