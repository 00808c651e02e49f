// NcclCommunicator on device buffers (label gpu): one rank per visible GPU. Skips where there is
// no GPU, or fewer GPUs than ranks (NCCL refuses two ranks on one device). Same checks as the MPI
// communicator's test: sums against locally computed references, gathers in rank order,
// broadcasts from every root, identical results on every rank.
#include <cstring>
#include <random>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "comm/nccl_communicator.h"

namespace tpserve {
namespace {

std::vector<float> RankInput(int rank, size_t count, int salt) {
  std::mt19937 rng(1000 * salt + rank);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int num_devices = 0;
    if (cudaGetDeviceCount(&num_devices) != cudaSuccess) num_devices = 0;
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // Every rank must take the same branch: agree on the smallest device count.
    MPI_Allreduce(MPI_IN_PLACE, &num_devices, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (num_devices < size) GTEST_SKIP() << num_devices << " GPUs for " << size << " ranks";
    ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
    auto bootstrap = MpiCommunicator::Create(MPI_COMM_WORLD);
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
    bootstrap_ = std::move(bootstrap).value();
    NcclCommunicatorOptions options;
    options.deadline = std::chrono::seconds(60);
    auto comm = NcclCommunicator::Create(bootstrap_.get(), nullptr, options);
    ASSERT_TRUE(comm.ok()) << comm.status().ToString();
    comm_ = std::move(comm).value();
  }

  float* ToDevice(const std::vector<float>& host) {
    float* device = nullptr;
    EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(float) + 4), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    buffers_.push_back(device);
    return device;
  }
  std::vector<float> ToHost(const float* device, size_t count) {
    std::vector<float> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  void TearDown() override {
    for (float* b : buffers_) cudaFree(b);
  }

  std::unique_ptr<MpiCommunicator> bootstrap_;
  std::unique_ptr<NcclCommunicator> comm_;
  std::vector<float*> buffers_;
};

TEST_F(NcclCommunicatorTest, AllReduceSumMatchesLocalSum) {
  for (size_t count : {size_t{1}, size_t{576}, size_t{1} << 20}) {
    float* data = ToDevice(RankInput(comm_->rank(), count, 3));
    ASSERT_TRUE(comm_->AllReduceSum(data, count).ok());
    std::vector<float> got = ToHost(data, count);
    for (size_t i = 0; i < count; ++i) {
      double expected = 0;
      for (int r = 0; r < comm_->size(); ++r) expected += RankInput(r, count, 3)[i];
      ASSERT_NEAR(got[i], expected, 1e-5 * comm_->size()) << i;
      if (i > 64) break;  // the reference is slow; the first elements and the sizes suffice
    }
  }
  EXPECT_GT(comm_->collective_seconds(), 0.0);
}

TEST_F(NcclCommunicatorTest, AllGatherAndBroadcast) {
  const size_t count = 1000;
  float* in = ToDevice(RankInput(comm_->rank(), count, 5));
  float* out = ToDevice(std::vector<float>(count * comm_->size(), 0.0f));
  ASSERT_TRUE(comm_->AllGather(in, count, out).ok());
  std::vector<float> got = ToHost(out, count * comm_->size());
  for (int r = 0; r < comm_->size(); ++r) {
    std::vector<float> expected = RankInput(r, count, 5);
    EXPECT_EQ(0, std::memcmp(got.data() + r * count, expected.data(), count * sizeof(float))) << r;
  }
  for (int root = 0; root < comm_->size(); ++root) {
    float* data = ToDevice(RankInput(comm_->rank(), count, 9));
    ASSERT_TRUE(comm_->Broadcast(data, count * sizeof(float), root).ok());
    EXPECT_EQ(ToHost(data, count), RankInput(root, count, 9));
  }
  EXPECT_TRUE(comm_->Barrier().ok());
}

}  // namespace
}  // namespace tpserve
