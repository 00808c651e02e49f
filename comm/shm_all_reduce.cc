#include "comm/shm_all_reduce.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/logging.h"

namespace tpserve {

// A rank's header, on its own cache lines so that one rank's stores do not evict the lines another
// rank polls. `posted`: the last round whose values are in the rank's slot of that round.
struct alignas(128) ShmAllReduce::Header {
  uint64_t posted;
};

namespace {

constexpr size_t kHeaderBytes = 128;
constexpr size_t kNameBytes = 64;
constexpr int kMaxRanks = 64;  // of one host

uint64_t LoadAcquire(const uint64_t& v) { return std::atomic_ref<const uint64_t>(v).load(std::memory_order_acquire); }
void StoreRelease(uint64_t& v, uint64_t value) { std::atomic_ref<uint64_t>(v).store(value, std::memory_order_release); }

// store(i, ((s0[i] + s1[i]) + s2[i]) + ...) over the sources in rank order, wrapping for int64.
template <class T, class Store>
void SumInRankOrder(const T* const* sources, int size, size_t n, Store store) {
  using Add = std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, T>;
  auto add = [](T a, T b) { return static_cast<T>(static_cast<Add>(a) + static_cast<Add>(b)); };
  const T* s0 = sources[0];
  const T* s1 = sources[1];
  if (size == 2) {
    for (size_t i = 0; i < n; ++i) store(i, add(s0[i], s1[i]));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    T sum = add(s0[i], s1[i]);
    for (int r = 2; r < size; ++r) sum = add(sum, sources[r][i]);
    store(i, sum);
  }
}

}  // namespace

StatusOr<std::unique_ptr<ShmAllReduce>> ShmAllReduce::Create(MPI_Comm comm, size_t slot_bytes) {
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size < 2 || size > kMaxRanks || slot_bytes == 0) return std::unique_ptr<ShmAllReduce>();
  // The ranks sharing this rank's host: all of them, or no segment (every rank sees the same answer).
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int node_size = 0;
  const int rc = MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  MPI_CHECK(rc);
  if (node_size != size) return std::unique_ptr<ShmAllReduce>();

  slot_bytes = (slot_bytes + 63) / 64 * 64;
  const size_t stride = kHeaderBytes + 2 * slot_bytes;
  const size_t mapped_bytes = stride * static_cast<size_t>(size);
  // Rank 0 creates the segment and names it to the others; each maps it; all agree it worked; rank 0
  // unlinks it once every rank holds a mapping.
  char name[kNameBytes] = {};
  int fd = -1;
  if (rank == 0) {
    static std::atomic<int> counter{0};
    std::snprintf(name, sizeof name, "/tpserve-allreduce-%d-%d", static_cast<int>(getpid()), counter++);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(mapped_bytes)) != 0) {
      close(fd);
      shm_unlink(name);
      fd = -1;
    }
    if (fd < 0) name[0] = '\0';
  }
  MPI_CHECK(MPI_Bcast(name, kNameBytes, MPI_CHAR, 0, comm));
  if (rank != 0 && name[0] != '\0') fd = shm_open(name, O_RDWR, 0600);
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  int mapped = base != MAP_FAILED ? 1 : 0, all_mapped = 0;
  const int agreed = MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, comm);
  if (rank == 0 && name[0] != '\0') shm_unlink(name);
  if (agreed != MPI_SUCCESS || !all_mapped) {
    if (base != MAP_FAILED) munmap(base, mapped_bytes);
    MPI_CHECK(agreed);
    if (rank == 0) {
      LOG(WARN) << "no shared-memory all-reduce (a rank could not map " << mapped_bytes
                << " bytes of /dev/shm); sums go through MPI";
    }
    return std::unique_ptr<ShmAllReduce>();
  }
  static_assert(sizeof(Header) == kHeaderBytes);
  return std::unique_ptr<ShmAllReduce>(new ShmAllReduce(base, mapped_bytes, slot_bytes, rank, size));
}

ShmAllReduce::~ShmAllReduce() { munmap(base_, mapped_bytes_); }

ShmAllReduce::Header& ShmAllReduce::header(int rank) const {
  return *reinterpret_cast<Header*>(base_ + static_cast<size_t>(rank) * (kHeaderBytes + 2 * slot_bytes_));
}

char* ShmAllReduce::slot(int rank, uint64_t round) const {
  return reinterpret_cast<char*>(&header(rank)) + kHeaderBytes + (round % 2) * slot_bytes_;
}

int64_t* ShmAllReduce::NextSlot(size_t count) const {
  if (count > slot_bytes_ / sizeof(int64_t)) return nullptr;
  return reinterpret_cast<int64_t*>(slot(rank_, round_ + 1));
}

Status ShmAllReduce::WaitForAll(uint64_t round, const WaitPolicy& policy,
                                std::optional<SteadyClock::time_point> deadline) const {
  auto all_reached = [&]() -> StatusOr<bool> {
    for (int r = 0; r < size_; ++r) {
      if (LoadAcquire(header(r).posted) < round) return false;
    }
    return true;
  };
  return WaitUntil(all_reached, policy, deadline, "shared-memory all-reduce");
}

template <class T, class Consume>
Status ShmAllReduce::SumRounds(const T* data, size_t count, const WaitPolicy& policy,
                               std::optional<SteadyClock::time_point> deadline, Consume consume) {
  const size_t per_round = slot_bytes_ / sizeof(T);
  const T* sources[kMaxRanks];
  for (size_t offset = 0; offset < count; offset += per_round) {
    const size_t n = std::min(per_round, count - offset);
    const uint64_t round = ++round_;
    // This slot last held round − 2, which every rank finished reading before it posted round − 1.
    T* mine = reinterpret_cast<T*>(slot(rank_, round));
    if (mine != data + offset) std::memcpy(mine, data + offset, n * sizeof(T));
    StoreRelease(header(rank_).posted, round);
    RETURN_IF_ERROR(WaitForAll(round, policy, deadline));
    for (int r = 0; r < size_; ++r) sources[r] = reinterpret_cast<const T*>(slot(r, round));
    consume(offset, sources, n);
  }
  return OkStatus();
}

template <class T>
Status ShmAllReduce::SumInPlace(T* data, size_t count, const WaitPolicy& policy,
                                std::optional<SteadyClock::time_point> deadline) {
  return SumRounds(data, count, policy, deadline, [&](size_t offset, const T* const* sources, size_t n) {
    T* out = data + offset;
    SumInRankOrder(sources, size_, n, [out](size_t i, T sum) { out[i] = sum; });
  });
}

Status ShmAllReduce::Sum(float* data, size_t count, const WaitPolicy& policy,
                         std::optional<SteadyClock::time_point> deadline) {
  return SumInPlace(data, count, policy, deadline);
}

Status ShmAllReduce::Sum(int64_t* data, size_t count, const WaitPolicy& policy,
                         std::optional<SteadyClock::time_point> deadline) {
  return SumInPlace(data, count, policy, deadline);
}

Status ShmAllReduce::SumToFloat(const int64_t* data, size_t count, float scale, float* out, int64_t* tail,
                                const WaitPolicy& policy, std::optional<SteadyClock::time_point> deadline) {
  return SumRounds(data, count + 1, policy, deadline, [&](size_t offset, const int64_t* const* sources, size_t n) {
    const size_t values = std::min(n, count - offset);  // the last round ends with the tail
    float* round_out = out + offset;
    SumInRankOrder(sources, size_, values,
                   [round_out, scale](size_t i, int64_t sum) { round_out[i] = static_cast<float>(sum) * scale; });
    if (values < n) {
      const int64_t* last[kMaxRanks];
      for (int r = 0; r < size_; ++r) last[r] = sources[r] + values;
      SumInRankOrder(last, size_, 1, [tail](size_t, int64_t sum) { *tail = sum; });
    }
  });
}

}  // namespace tpserve
