// STREAM-like memory bandwidth kernels (copy, scale, add, triad) over arrays far larger than the
// last-level cache, run on a ThreadPool: the measured limit the kernel benchmarks compare with.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/thread_pool.h"

namespace tpserve::bench {

struct StreamResult {
  std::string name;
  double best_gbs = 0;  // best of the repetitions, bytes counted as STREAM does (reads + writes)
};

class StreamArrays {
 public:
  // n doubles per array; each thread first-touches the part it later streams.
  StreamArrays(int64_t n, ThreadPool* pool) : n_(n), pool_(pool) {
    for (double** p : {&a_, &b_, &c_}) {
      *p = static_cast<double*>(std::aligned_alloc(64, n * sizeof(double)));
      CHECK(*p != nullptr);
    }
    pool_->ParallelFor(n_, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        a_[i] = 1.0;
        b_[i] = 2.0;
        c_[i] = 0.0;
      }
    });
  }
  ~StreamArrays() {
    std::free(a_);
    std::free(b_);
    std::free(c_);
  }
  StreamArrays(const StreamArrays&) = delete;
  StreamArrays& operator=(const StreamArrays&) = delete;

  // Runs the four kernels `reps` times each; returns copy, scale, add, triad.
  std::vector<StreamResult> Run(int reps) {
    const double s = 3.0;
    double *a = a_, *b = b_, *c = c_;
    std::vector<StreamResult> out;
    out.push_back(Time("copy", 2, reps, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) c[i] = a[i];
    }));
    out.push_back(Time("scale", 2, reps, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) b[i] = s * c[i];
    }));
    out.push_back(Time("add", 3, reps, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) c[i] = a[i] + b[i];
    }));
    out.push_back(Time("triad", 3, reps, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) a[i] = b[i] + s * c[i];
    }));
    return out;
  }

 private:
  template <class Fn>
  StreamResult Time(const char* name, int arrays, int reps, Fn fn) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      pool_->ParallelFor(n_, fn);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, sec);
    }
    return {name, arrays * static_cast<double>(n_) * sizeof(double) / best / 1e9};
  }

  int64_t n_;
  ThreadPool* pool_;
  double* a_ = nullptr;
  double* b_ = nullptr;
  double* c_ = nullptr;
};

// Triad GB/s with arrays of 3 × 256 MiB total (far beyond a 32 MiB L3).
inline double MeasureTriadGbs(ThreadPool* pool, int reps = 5) {
  StreamArrays arrays(int64_t{32} << 20, pool);
  return arrays.Run(reps).back().best_gbs;
}

}  // namespace tpserve::bench
