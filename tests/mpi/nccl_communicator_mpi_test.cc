// NcclCommunicator on device buffers (label gpu): one rank per visible GPU. Skips where there is
// no GPU, or fewer GPUs than ranks (NCCL refuses two ranks on one device). Same checks as the MPI
// communicator's test: sums against locally computed references, gathers in rank order,
// broadcasts from every root, identical results on every rank.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
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

// A stand-in for the group heartbeat on one host: a peer is lost once its process is stopped (state T in
// /proc/PID/stat), which is what the heartbeat reports 2 s later for a real group.
class StoppedPeerLiveness : public PeerLiveness {
 public:
  explicit StoppedPeerLiveness(pid_t peer) : peer_(peer) {}
  Status Check() const override {
    std::ifstream stat("/proc/" + std::to_string(peer_) + "/stat");
    std::string pid, comm, state;
    stat >> pid >> comm >> state;
    return state == "T" ? Unavailable("rank 1 (pid " + std::to_string(peer_) + ") is stopped") : OkStatus();
  }

 private:
  pid_t peer_;
};

// Rank 1 stops itself (SIGSTOP) instead of joining an all-reduce; rank 0, whose NCCL waits are given a
// liveness that reports rank 1 lost, must get an error well before the 60 s deadline: the collective is
// abandoned and the communicator aborted (ncclCommAbort), as the MPI waits do on the heartbeat's word.
TEST_F(NcclCommunicatorTest, AllReduceAbandonedWhenThePeerIsLost) {
  if (comm_->size() != 2) GTEST_SKIP() << "two ranks";
  pid_t pids[2] = {0, 0};
  pid_t self = getpid();
  MPI_Allgather(&self, sizeof(pid_t), MPI_BYTE, pids, sizeof(pid_t), MPI_BYTE, MPI_COMM_WORLD);
  StoppedPeerLiveness liveness(pids[1]);
  NcclCommunicatorOptions options;
  options.deadline = std::chrono::seconds(60);
  options.wait.liveness = comm_->rank() == 0 ? &liveness : nullptr;
  auto watched = NcclCommunicator::Create(bootstrap_.get(), nullptr, options);
  ASSERT_TRUE(watched.ok()) << watched.status().ToString();
  const size_t count = 1 << 20;
  float* data = ToDevice(RankInput(comm_->rank(), count, 11));
  if (comm_->rank() == 1) {
    raise(SIGSTOP);  // resumed by rank 0 once it has given up; never joins the all-reduce
  } else {
    const auto start = std::chrono::steady_clock::now();
    Status reduced = (*watched)->AllReduceSum(data, count);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    kill(pids[1], SIGCONT);
    EXPECT_EQ(reduced.code(), StatusCode::kUnavailable) << reduced.ToString();
    EXPECT_LT(seconds, 3.0) << "the all-reduce waited for its deadline instead of the liveness";
    EXPECT_FALSE((*watched)->AllReduceSum(data, count).ok()) << "an aborted communicator must stay failed";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace tpserve
