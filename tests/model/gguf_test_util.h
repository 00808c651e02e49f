// Shared by the GGUF tests (gguf_test.cc, default_loading_test.cc): temporary paths, seeded tensors of every
// stored type, byte comparison, and a one-tensor file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "model/gguf_writer.h"
#include "model/tensor.h"

namespace tpserve::testing_gguf {

inline std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/gguf_test_" + name; }

// Encodes rows × cols seeded random floats in `type` (QuantizeRow: the reference quantiser, or the float
// types' conversion), so that every stored value is a valid number.
inline HostTensor RandomTensor(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  HostTensor t = HostTensor::Allocate(type, rows, cols);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = dist(rng);
    QuantizeRow(type, row.data(), t.data.get() + r * t.row_bytes(), cols);  // the float types converted too
  }
  return t;
}

inline bool SameBytes(const HostTensor& a, const uint8_t* b, int64_t n) {
  return a.nbytes() == n && std::memcmp(a.data.get(), b, n) == 0;
}

// A llama GGUF holding the one tensor `t` under `name`.
inline Status WriteOneTensor(const std::string& path, const std::string& name, const HostTensor& t) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.AddTensor(name, t.type, {t.rows, t.cols});
  RETURN_IF_ERROR(w.Open(path));
  RETURN_IF_ERROR(w.WriteTensor(t));
  return w.Finish();
}

}  // namespace tpserve::testing_gguf
