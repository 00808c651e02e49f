// Each CUDA op against its CPU twin on seeded random inputs. Skips when no GPU is present.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu_tanh_mul.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "tests/gpu/require_gpu.h"

namespace tpserve {
namespace {

// A device copy of a host vector, copied back on request.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : size_(host.size()) {
    CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(1, size_) * sizeof(T)));
    if (size_ > 0) CUDA_CHECK(cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceVector() { cudaFree(ptr_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> ToHost() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(size_);
    if (size_ > 0) CUDA_CHECK(cudaMemcpy(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t size_;
};

std::vector<float> Random(int64_t n, std::mt19937* rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs,
                const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + abs) << what << " at " << i;
  }
}

TEST(CudaKernelsTest, RmsNormMatchesCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(1);
  const int64_t T = 5, dim = 576;
  const auto x = Random(T * dim, &rng), weight = Random(dim, &rng);
  std::vector<float> want(T * dim);
  RmsNorm(x.data(), weight.data(), T, dim, 1e-5f, want.data());
  DeviceVector<float> dx(x), dw(weight), dout{std::vector<float>(T * dim)};
  cuda::RmsNorm(dx.get(), dw.get(), T, dim, 1e-5f, dout.get(), nullptr);
  ExpectNear(dout.ToHost(), want, 1e-5, 1e-6, "rms_norm");
}

TEST(CudaKernelsTest, RopeMatchesCpuInBothLayouts) {
  REQUIRE_GPU();
  std::mt19937 rng(2);
  const int64_t T = 4, H = 3, D = 64;
  std::vector<float> inv_freq(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / D));
  const std::vector<int32_t> positions = {0, 3, 511, 8191};
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    auto want = Random(T * H * D, &rng);
    DeviceVector<float> dx(want), dfreq(inv_freq);
    DeviceVector<int32_t> dpos(positions);
    cuda::ApplyRope(dx.get(), dpos.get(), T, H, D, dfreq.get(), layout, nullptr);
    ApplyRope(want.data(), positions.data(), T, H, D, inv_freq.data(), layout);
    ExpectNear(dx.ToHost(), want, 1e-5, 1e-5, "rope");
  }
}

TEST(CudaKernelsTest, SiluMulAndSoftmaxMatchCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  const int64_t n = 1537;
  const auto gate = Random(n, &rng, 3.0f), up = Random(n, &rng);
  std::vector<float> want(n);
  SiluMul(gate.data(), up.data(), n, want.data());
  DeviceVector<float> dg(gate), du(up), dout{std::vector<float>(n)};
  cuda::SiluMul(dg.get(), du.get(), n, dout.get(), nullptr);
  ExpectNear(dout.ToHost(), want, 1e-5, 1e-7, "silu_mul");

  const int64_t rows = 3, cols = 49152;
  auto logits = Random(rows * cols, &rng, 5.0f);
  DeviceVector<float> dl(logits);
  cuda::Softmax(dl.get(), rows, cols, nullptr);
  for (int64_t r = 0; r < rows; ++r) Softmax(logits.data() + r * cols, cols);
  ExpectNear(dl.ToHost(), logits, 1e-4, 1e-9, "softmax");
}

// Gemma's activation, Qwen's biases, Gemma's embedding scale: the CPU model's loops.
TEST(CudaKernelsTest, GeluTanhMulAddBiasAndScaleMatchCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(4);
  const int64_t rows = 7, n = 211;
  const auto gate = Random(rows * n, &rng, 3.0f), up = Random(rows * n, &rng), bias = Random(n, &rng);
  std::vector<float> want(rows * n);
  GeluTanhMul(gate.data(), up.data(), rows * n, want.data());
  DeviceVector<float> dg(gate), du(up), dout{std::vector<float>(rows * n)};
  cuda::GeluTanhMul(dg.get(), du.get(), rows * n, dout.get(), nullptr);
  ExpectNear(dout.ToHost(), want, 1e-5, 1e-7, "gelu_tanh_mul");

  std::vector<float> biased = gate;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) biased[r * n + i] += bias[i];
  DeviceVector<float> db(bias);
  cuda::AddBias(dg.get(), db.get(), rows, n, nullptr);
  ExpectNear(dg.ToHost(), biased, 0, 0, "add_bias");

  const float scale = std::sqrt(640.0f);
  for (float& x : biased) x *= scale;
  cuda::Scale(dg.get(), rows * n, scale, nullptr);
  ExpectNear(dg.ToHost(), biased, 0, 0, "scale");
}

TEST(CudaKernelsTest, EmbeddingMatchesCpuForEveryType) {
  REQUIRE_GPU();
  std::mt19937 rng(4);
  const int64_t rows = 10;
  for (DType type : kSupportedDTypes) {
    const int64_t cols = std::max<int64_t>(64, DTypeBlockElems(type));
    const auto src = Random(rows * cols, &rng);
    const int64_t row_bytes = DTypeRowBytes(type, cols);
    std::vector<uint8_t> bytes(rows * row_bytes);
    for (int64_t r = 0; r < rows; ++r) QuantizeRow(type, src.data() + r * cols, bytes.data() + r * row_bytes, cols);
    const std::vector<int32_t> ids = {5, 14, 15, 24, 25, 0};
    std::vector<float> want(ids.size() * cols);
    EmbeddingLookup(WeightMatrix{type, rows, cols, bytes.data()}, 15, ids.data(), ids.size(), want.data());
    DeviceVector<uint8_t> dtable(bytes);
    DeviceVector<int32_t> dids(ids);
    DeviceVector<float> dout{std::vector<float>(want.size())};
    cuda::EmbeddingLookup(WeightMatrix{type, rows, cols, dtable.get()}, 15, dids.get(), ids.size(), dout.get(), nullptr);
    ExpectNear(dout.ToHost(), want, 0, 0, DTypeName(type));
  }
}

TEST(CudaKernelsTest, MatMulMatchesCpuForEveryTypeAndQuantIsBatchInvariant) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  cublasHandle_t cublas;
  CUBLAS_CHECK(cublasCreate(&cublas));
  ThreadPool pool(2);
  const int64_t rows = 37, T = 7;
  for (DType type : kSupportedDTypes) {
    const int64_t cols = IsKQuant(type) ? 768 : 576;
    const auto src = Random(rows * cols, &rng);
    const int64_t row_bytes = DTypeRowBytes(type, cols);
    std::vector<uint8_t> bytes(rows * row_bytes);
    std::vector<float> dequant(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(type, src.data() + r * cols, bytes.data() + r * row_bytes, cols);
      DequantizeRow(type, bytes.data() + r * row_bytes, dequant.data() + r * cols, cols);
    }
    const auto x = Random(T * cols, &rng);
    std::vector<float> cpu(T * rows);
    MatMul(WeightMatrix{type, rows, cols, bytes.data()}, x.data(), T, cpu.data(), &pool);
    DeviceVector<uint8_t> dw(bytes);
    DeviceVector<float> dx(x), dy{std::vector<float>(T * rows)};
    const WeightMatrix w{type, rows, cols, dw.get()};
    cuda::MatMul(cublas, w, dx.get(), T, dy.get(), nullptr);
    const auto gpu = dy.ToHost();
    // Both against the f64 product of the dequantised weights: the CPU rounds activations to Q8
    // (quantised types), the GPU to F16/BF16 (half types); allow each its rounding.
    const double act_rel = type == DType::kBF16 ? 8e-3 : type == DType::kF16 ? 1e-3 : IsQuantized(type) ? 1.2e-2 : 1e-5;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0, magnitude = 0;
        for (int64_t k = 0; k < cols; ++k) {
          exact += static_cast<double>(dequant[r * cols + k]) * x[t * cols + k];
          magnitude += std::fabs(static_cast<double>(dequant[r * cols + k]) * x[t * cols + k]);
        }
        ASSERT_NEAR(gpu[t * rows + r], exact, 1e-5 * magnitude + (type == DType::kF32 ? 0 : act_rel * magnitude))
            << DTypeName(type) << " gpu t=" << t << " r=" << r;
        ASSERT_NEAR(cpu[t * rows + r], exact, (IsQuantized(type) ? act_rel : 1e-5) * magnitude)
            << DTypeName(type) << " cpu t=" << t << " r=" << r;
      }
    if (IsQuantized(type)) {
      for (int64_t t = 0; t < T; ++t) {
        DeviceVector<float> one{std::vector<float>(rows)};
        cuda::MatMul(cublas, w, dx.get() + t * cols, 1, one.get(), nullptr);
        const auto single = one.ToHost();
        ASSERT_EQ(0, std::memcmp(single.data(), gpu.data() + t * rows, rows * sizeof(float))) << DTypeName(type) << t;
      }
    }
  }
  CUBLAS_CHECK(cublasDestroy(cublas));
}

// The GPU's cache bytes are the CPU's for kv_dtype, and its attention over them agrees.
void ExpectKvCacheAndAttentionMatchCpu(DType kv_dtype) {
  std::mt19937 rng(6);
  // Sequence 0: 40 cached + a 9-token prefill chunk; sequence 1: a decode at position 20;
  // sequence 2: 150 cached keys then one decode (more than one 128-key tile): 4 + 2 + 10 blocks of 16,
  // from a pool with spares.
  const int64_t H = 9, Hkv = 3, D = 64, bs = 16, num_blocks = 20, max_blocks = 10;
  const int64_t lens[] = {49, 21, 151};
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> tables(3 * max_blocks, 0);
  int next = 0;
  for (int s = 0; s < 3; ++s)
    for (int64_t b = 0; b < (lens[s] + bs - 1) / bs; ++b) {
      ASSERT_LT(b, max_blocks);
      ASSERT_LT(next, num_blocks);
      tables[s * max_blocks + b] = ids[next++];
    }
  std::vector<uint8_t> k_cache(num_blocks * bs * Hkv * DTypeRowBytes(kv_dtype, D), 0), v_cache = k_cache;
  DeviceVector<uint8_t> dk_cache(k_cache), dv_cache(v_cache);
  for (int s = 0; s < 3; ++s) {
    const auto k = Random(lens[s] * Hkv * D, &rng), v = Random(lens[s] * Hkv * D, &rng);
    std::vector<int32_t> slots(lens[s]);
    for (int64_t p = 0; p < lens[s]; ++p) slots[p] = static_cast<int32_t>(tables[s * max_blocks + p / bs] * bs + p % bs);
    WriteKvCache(k.data(), v.data(), slots.data(), lens[s], Hkv, D, k_cache.data(), v_cache.data(), kv_dtype);
    DeviceVector<float> dk(k), dv(v);
    DeviceVector<int32_t> dslots(slots);
    cuda::WriteKvCache(dk.get(), dv.get(), dslots.get(), lens[s], Hkv, D, dk_cache.get(), dv_cache.get(), kv_dtype,
                       nullptr);
  }
  EXPECT_TRUE(dk_cache.ToHost() == k_cache) << "k_cache bytes";
  EXPECT_TRUE(dv_cache.ToHost() == v_cache) << "v_cache bytes";

  std::vector<int32_t> token_seq, positions;
  for (int64_t p = 40; p < 49; ++p) token_seq.push_back(0), positions.push_back(static_cast<int32_t>(p));
  token_seq.push_back(1), positions.push_back(20);
  token_seq.push_back(2), positions.push_back(150);
  const int64_t T = static_cast<int64_t>(positions.size());
  std::vector<int32_t> kv_head_of_q(H);
  for (int64_t h = 0; h < H; ++h) kv_head_of_q[h] = static_cast<int32_t>(h / (H / Hkv));
  const auto q = Random(T * H * D, &rng);
  PagedAttentionArgs args;
  args.max_blocks_per_seq = max_blocks;
  args.num_tokens = T;
  args.num_heads = H;
  args.num_kv_heads = Hkv;
  args.head_dim = D;
  args.block_size = bs;
  args.scale = 0.125f;
  args.kv_dtype = kv_dtype;
  // Full attention, a window inside one tile, a window spanning two tiles of 128 keys.
  for (int64_t window : {0, 7, 130}) {
  args.sliding_window = window;
  std::vector<float> want(T * H * D);
  PagedAttentionArgs cpu = args;
  cpu.q = q.data();
  cpu.k_cache = k_cache.data();
  cpu.v_cache = v_cache.data();
  cpu.token_seq = token_seq.data();
  cpu.positions = positions.data();
  cpu.block_tables = tables.data();
  cpu.kv_head_of_q = kv_head_of_q.data();
  cpu.out = want.data();
  ThreadPool pool(2);
  PagedAttention(cpu, &pool);

  DeviceVector<float> dq(q), dout{std::vector<float>(T * H * D)};
  DeviceVector<int32_t> dseq(token_seq), dpos(positions), dtables(tables), dkvh(kv_head_of_q);
  PagedAttentionArgs gpu = args;
  gpu.q = dq.get();
  gpu.k_cache = dk_cache.get();
  gpu.v_cache = dv_cache.get();
  gpu.token_seq = dseq.get();
  gpu.positions = dpos.get();
  gpu.block_tables = dtables.get();
  gpu.kv_head_of_q = dkvh.get();
  gpu.out = dout.get();
  cuda::PagedAttention(gpu, nullptr);
  ExpectNear(dout.ToHost(), want, 1e-4, 1e-5, window == 0 ? "paged_attention" : "windowed paged_attention");
  }
}

TEST(CudaKernelsTest, WriteKvCacheAndPagedAttentionMatchCpu) {
  REQUIRE_GPU();
  for (DType kv_dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(kv_dtype));
    ExpectKvCacheAndAttentionMatchCpu(kv_dtype);
  }
}

// The GPU's activation blocks are the CPU's, bit for bit (same scale, rounding and sums), so the
// quantised matmuls of the two backends differ only in the f32 accumulation order.
TEST(CudaKernelsTest, QuantizeActivationsIsBitwiseTheCpus) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  const int64_t T = 6, cols = 576;
  auto x = Random(T * cols, &rng, 3.0f);
  for (int j = 0; j < 32; ++j) x[64 + j] = 0.0f;  // an all-zero block: scale 0
  std::vector<BlockQ8Act> want(T * cols / kQuantBlock);
  for (int64_t t = 0; t < T; ++t) QuantizeActivationRow(x.data() + t * cols, cols, want.data() + t * cols / kQuantBlock);
  DeviceVector<float> dx(x);
  DeviceVector<BlockQ8Act> dq{std::vector<BlockQ8Act>(want.size())};
  cuda::QuantizeActivations(dx.get(), T, cols, dq.get(), nullptr);
  const auto got = dq.ToHost();
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(BlockQ8Act)));
}

TEST(CudaKernelsTest, QuantMatMulMatchesCpuToAccumulationOrder) {
  REQUIRE_GPU();
  std::mt19937 rng(12);
  ThreadPool pool(2);
  const int64_t rows = 41, cols = 1536, T = 19;  // T spans several token groups of a warp
  for (DType type : kSupportedDTypes) {
    if (!IsQuantized(type)) continue;
    const auto src = Random(rows * cols, &rng);
    const int64_t row_bytes = DTypeRowBytes(type, cols);
    std::vector<uint8_t> bytes(rows * row_bytes);
    for (int64_t r = 0; r < rows; ++r) QuantizeRow(type, src.data() + r * cols, bytes.data() + r * row_bytes, cols);
    const auto x = Random(T * cols, &rng);
    std::vector<float> cpu(T * rows);
    MatMul(WeightMatrix{type, rows, cols, bytes.data()}, x.data(), T, cpu.data(), &pool);
    DeviceVector<uint8_t> dw(bytes);
    DeviceVector<float> dx(x), dy{std::vector<float>(T * rows)};
    cuda::QuantMatMul(WeightMatrix{type, rows, cols, dw.get()}, dx.get(), T, dy.get(), nullptr);
    const auto gpu = dy.ToHost();
    for (int64_t i = 0; i < T * rows; ++i) {
      // f32 sums of 48 block products in two orders: a few ulps of the largest partial sum.
      ASSERT_NEAR(gpu[i], cpu[i], 2e-5 * (std::fabs(cpu[i]) + 10.0)) << DTypeName(type) << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tpserve
