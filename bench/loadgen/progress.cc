#include "bench/loadgen/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace tpserve::loadgen {

Progress::Progress(int64_t total, int64_t every)
    : total_(total), every_(std::max<int64_t>(1, every)), is_tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::Update(int64_t done, int64_t num_failed, double now_s, int64_t output_tokens) {
  const double rate = now_s > 0 ? output_tokens / now_s : 0;
  if (is_tty_) {
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld  failed %lld  %.1fs  %.1f out tok/s ", bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), static_cast<long long>(num_failed),
                 now_s, rate);
    drew_ = true;
  } else if (done % every_ == 0 || done == total_) {
    std::fprintf(stderr, "progress: %lld/%lld done (%lld failed), %.1fs, %.1f out tok/s\n",
                 static_cast<long long>(done), static_cast<long long>(total_), static_cast<long long>(num_failed),
                 now_s, rate);
  }
  std::fflush(stderr);
}

void Progress::Finish() {
  if (drew_) std::fputc('\n', stderr);
  drew_ = false;
}

}  // namespace tpserve::loadgen
