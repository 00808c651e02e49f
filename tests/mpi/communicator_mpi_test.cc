// MpiCommunicator collectives at any group size, against sums computed locally from every rank's
// (seeded, hence reproducible) inputs; and the deadline when a peer never joins.
#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"

namespace tpserve {
namespace {

// The input rank `rank` contributes in test `salt`: reproducible on every rank.
std::vector<float> RankInput(int rank, size_t count, int salt) {
  std::mt19937 rng(1000 * salt + rank);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

std::unique_ptr<MpiCommunicator> MakeComm(std::chrono::milliseconds deadline = std::chrono::milliseconds(30000),
                                          size_t slot_bytes = MpiCommunicatorOptions().shared_memory_slot_bytes) {
  MpiCommunicatorOptions options;
  options.deadline = deadline;
  options.shared_memory_slot_bytes = slot_bytes;
  auto comm = MpiCommunicator::Create(MPI_COMM_WORLD, options);
  CHECK(comm.ok()) << comm.status().ToString();
  return std::move(comm).value();
}

TEST(MpiCommunicatorTest, RankAndSizeMatchWorld) {
  auto comm = MakeComm();
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->size(), size);
}

// The int64 sum is exact: equal to the local sum of every rank's input, with magnitudes up to
// 2^60 and mixed signs (the fixed-point partials of the row-parallel layers).
TEST(MpiCommunicatorTest, AllReduceSumInt64IsExact) {
  auto comm = MakeComm();
  auto input = [](int rank, size_t count) {
    std::mt19937_64 rng(4242 + rank);
    std::uniform_int_distribution<int64_t> dist(-(int64_t{1} << 60), int64_t{1} << 60);
    std::vector<int64_t> values(count);
    for (int64_t& v : values) v = dist(rng) >> (rng() % 61);
    return values;
  };
  for (size_t count : {size_t{1}, size_t{577}, size_t{100003}}) {
    std::vector<int64_t> data = input(comm->rank(), count);
    ASSERT_TRUE(comm->AllReduceSum(data.data(), count).ok());
    std::vector<int64_t> expected(count, 0);
    for (int r = 0; r < comm->size(); ++r) {
      const std::vector<int64_t> in = input(r, count);
      for (size_t i = 0; i < count; ++i) expected[i] += in[i];
    }
    ASSERT_EQ(data, expected) << "count " << count;
  }
}

TEST(MpiCommunicatorTest, AllReduceSumMatchesLocalSumAndIsIdenticalOnEveryRank) {
  auto comm = MakeComm();
  for (size_t count : {size_t{1}, size_t{7}, size_t{576}, size_t{100003}}) {
    std::vector<float> data = RankInput(comm->rank(), count, static_cast<int>(count % 1000));
    ASSERT_TRUE(comm->AllReduceSum(data.data(), count).ok());
    std::vector<double> expected(count, 0.0);
    for (int r = 0; r < comm->size(); ++r) {
      std::vector<float> input = RankInput(r, count, static_cast<int>(count % 1000));
      for (size_t i = 0; i < count; ++i) expected[i] += input[i];
    }
    for (size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(data[i], expected[i], 1e-5 * comm->size()) << "count " << count << " index " << i;
    }
    // Every rank must hold bitwise the same sum, or ranks' hidden states drift apart.
    std::vector<float> gathered(count * comm->size());
    ASSERT_TRUE(comm->AllGather(data.data(), count, gathered.data()).ok());
    for (int r = 0; r < comm->size(); ++r) {
      ASSERT_EQ(0, std::memcmp(gathered.data() + r * count, data.data(), count * sizeof(float)))
          << "rank " << r << " holds a different sum";
    }
  }
  EXPECT_GT(comm->collective_seconds(), 0.0);
}

// These tests run every rank on one host, so sums go through shared memory unless it is turned off.
TEST(MpiCommunicatorTest, SumsGoThroughSharedMemoryOnOneHost) {
  EXPECT_EQ(MakeComm()->shared_memory(), MakeComm()->size() > 1);
  EXPECT_FALSE(MakeComm(std::chrono::milliseconds(30000), 0)->shared_memory());
}

// The shared-memory sums, in one round and in many (a 4 KiB slot): float sums are the left fold of the
// ranks' values in rank order, bit for bit on every rank; int64 sums are exact and wrap.
TEST(MpiCommunicatorTest, SharedMemorySumsFoldInRankOrderInEveryRoundSize) {
  for (size_t slot_bytes : {size_t{4096}, MpiCommunicatorOptions().shared_memory_slot_bytes}) {
    auto comm = MakeComm(std::chrono::milliseconds(30000), slot_bytes);
    ASSERT_EQ(comm->shared_memory(), comm->size() > 1);
    for (size_t count : {size_t{1}, size_t{1023}, size_t{1025}, size_t{300007}}) {
      std::vector<float> data = RankInput(comm->rank(), count, 5);
      std::vector<float> fold = RankInput(0, count, 5);
      for (int r = 1; r < comm->size(); ++r) {
        const std::vector<float> in = RankInput(r, count, 5);
        for (size_t i = 0; i < count; ++i) fold[i] += in[i];
      }
      ASSERT_TRUE(comm->AllReduceSum(data.data(), count).ok());
      ASSERT_EQ(0, std::memcmp(data.data(), fold.data(), count * sizeof(float)))
          << "slot " << slot_bytes << " count " << count;

      std::vector<int64_t> ints(count), expected(count, 0);
      for (int r = 0; r < comm->size(); ++r) {
        for (size_t i = 0; i < count; ++i) {
          const int64_t v = r % 2 ? INT64_MAX - static_cast<int64_t>(i) - r : r - static_cast<int64_t>(i * 977);
          if (r == comm->rank()) ints[i] = v;
          expected[i] = static_cast<int64_t>(static_cast<uint64_t>(expected[i]) + static_cast<uint64_t>(v));
        }
      }
      ASSERT_TRUE(comm->AllReduceSum(ints.data(), count).ok());
      ASSERT_EQ(ints, expected) << "slot " << slot_bytes << " count " << count;
    }
  }
}

// The row-parallel layers' sum to float, through shared memory in one round and in many, and through MPI
// (no slot): out[i] is the f32 of the exact int64 sum times the scale, *tail the exact sum of the last
// word, on every rank; from the communicator's own buffer (read in place where it is a shared slot) and
// from the caller's, in consecutive calls (the slots alternate between rounds).
TEST(MpiCommunicatorTest, SumToFloatIsTheExactSumRoundedOnce) {
  for (size_t slot_bytes : {size_t{0}, size_t{4096}, MpiCommunicatorOptions().shared_memory_slot_bytes}) {
    auto comm = MakeComm(std::chrono::milliseconds(30000), slot_bytes);
    for (size_t count : {size_t{1}, size_t{511}, size_t{512}, size_t{36864}, size_t{300007}}) {
      for (bool in_buffer : {true, false, true}) {
        auto value = [&](int r, size_t i) -> int64_t {
          return (r % 2 ? -1 : 1) * static_cast<int64_t>((i * 2654435761u + 97 * r + count) % (uint64_t{1} << 50));
        };
        std::vector<int64_t> own(count + 1);
        int64_t* partial = in_buffer ? comm->SumToFloatBuffer(count) : own.data();
        for (size_t i = 0; i < count; ++i) partial[i] = value(comm->rank(), i);
        partial[count] = comm->rank() + 1;
        std::vector<float> out(count);
        int64_t tail = 0;
        ASSERT_TRUE(comm->AllReduceSumToFloat(partial, count, 0x1p-32f, out.data(), &tail).ok());
        EXPECT_EQ(tail, comm->size() * (comm->size() + 1) / 2);
        for (size_t i = 0; i < count; ++i) {
          int64_t sum = 0;
          for (int r = 0; r < comm->size(); ++r) sum += value(r, i);
          ASSERT_EQ(out[i], static_cast<float>(sum) * 0x1p-32f)
              << "slot " << slot_bytes << " count " << count << " index " << i;
        }
      }
    }
  }
}

TEST(MpiCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  auto comm = MakeComm();
  const size_t count = 333;
  std::vector<float> mine = RankInput(comm->rank(), count, 7);
  std::vector<float> out(count * comm->size(), NAN);
  ASSERT_TRUE(comm->AllGather(mine.data(), count, out.data()).ok());
  for (int r = 0; r < comm->size(); ++r) {
    std::vector<float> expected = RankInput(r, count, 7);
    ASSERT_EQ(0, std::memcmp(out.data() + r * count, expected.data(), count * sizeof(float))) << "rank " << r;
  }
  // In place: this rank's slice already sits in `out`.
  std::vector<float> in_place(count * comm->size(), NAN);
  std::copy(mine.begin(), mine.end(), in_place.begin() + comm->rank() * count);
  ASSERT_TRUE(comm->AllGather(in_place.data() + comm->rank() * count, count, in_place.data()).ok());
  EXPECT_EQ(in_place, out);
}

TEST(MpiCommunicatorTest, BroadcastFromEveryRoot) {
  auto comm = MakeComm();
  for (int root = 0; root < comm->size(); ++root) {
    std::vector<float> data = RankInput(comm->rank(), 1000, 11);
    ASSERT_TRUE(comm->Broadcast(data.data(), data.size() * sizeof(float), root).ok());
    EXPECT_EQ(data, RankInput(root, 1000, 11)) << "root " << root;
  }
  uint64_t nothing = 0;
  EXPECT_TRUE(comm->Broadcast(&nothing, 0, 0).ok());
  EXPECT_TRUE(comm->Barrier().ok());
}

TEST(MpiCommunicatorTest, BroadcastWaitingAndMaxInt64) {
  auto comm = MakeComm();
  uint64_t value = comm->rank() == 0 ? 0xfeedfacecafebeefull : 0;
  ASSERT_TRUE(comm->BroadcastWaiting(&value, sizeof(value), 0, std::nullopt).ok());
  EXPECT_EQ(value, 0xfeedfacecafebeefull);
  int64_t v[2] = {comm->rank(), -comm->rank()};
  ASSERT_TRUE(comm->AllReduceMaxInt64(v, 2).ok());
  EXPECT_EQ(v[0], comm->size() - 1);
  EXPECT_EQ(v[1], 0);
}

TEST(MpiCommunicatorTest, PeerThatNeverJoinsGivesDeadlineExceeded) {
  auto comm = MakeComm(std::chrono::milliseconds(300));
  float x = 1.0f;
  if (comm->rank() != 1) {
    const auto start = std::chrono::steady_clock::now();
    Status status = comm->AllReduceSum(&x, 1);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.ToString();
    EXPECT_GE(waited, 0.29);
    EXPECT_LT(waited, 5.0);
    // Broken from now on: the same error, at once.
    EXPECT_EQ(comm->Barrier().code(), StatusCode::kDeadlineExceeded);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The abandoned collective stays pending on the broken communicator: keep it alive (and
  // reachable, so leak checkers stay quiet) rather than free it under MPI's feet, as a real
  // process that saw this error would exit instead.
  static auto* kept = new std::vector<std::unique_ptr<MpiCommunicator>>();
  kept->push_back(std::move(comm));
}

}  // namespace
}  // namespace tpserve
