#include "common/logging.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>

namespace tpserve {

LogLevel CurrentLogLevel() {
  static const LogLevel level = [] {
    const char* env = std::getenv("TPSERVE_LOG");
    if (env == nullptr) return LogLevel::kInfo;
    if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
    if (std::strcmp(env, "warn") == 0) return LogLevel::kWarn;
    if (std::strcmp(env, "error") == 0) return LogLevel::kError;
    return LogLevel::kInfo;
  }();
  return level;
}

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line) {
  static const char* kNames[] = {"D", "I", "W", "E"};
  const char* base = std::strrchr(file, '/');
  stream_ << kNames[static_cast<int>(level)] << " [" << getpid() << "] " << (base ? base + 1 : file) << ":"
          << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::cerr << stream_.str() << std::flush;
}

}  // namespace internal
}  // namespace tpserve
