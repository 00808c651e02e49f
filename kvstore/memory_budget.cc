#include "kvstore/memory_budget.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tpserve {

StatusOr<int64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    std::string unit;
    if (!(fields >> kib >> unit) || kib < 0 || unit != "kB") {
      return DataLoss("malformed MemAvailable line: '" + line + "'");
    }
    return kib * 1024;
  }
  return DataLoss("no MemAvailable line in meminfo");
}

StatusOr<int64_t> HostAvailableMemoryBytes() {
  std::ifstream file("/proc/meminfo");
  if (!file) return Unavailable("cannot read /proc/meminfo");
  std::stringstream text;
  text << file.rdbuf();
  StatusOr<int64_t> bytes = ParseMemAvailable(text.str());
  if (!bytes.ok()) return Unavailable(bytes.status().message());
  return bytes;
}

int64_t KvBudgetBytes(int64_t available, double fraction, int ranks_on_host, int64_t reserve_bytes) {
  CHECK(fraction > 0.0 && fraction <= 1.0) << "fraction " << fraction;
  CHECK_GE(ranks_on_host, 1);
  const double share = static_cast<double>(std::max<int64_t>(available, 0)) * fraction / ranks_on_host;
  return std::max<int64_t>(0, static_cast<int64_t>(share) - reserve_bytes);
}

}  // namespace tpserve
