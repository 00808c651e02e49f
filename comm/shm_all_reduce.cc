#include "comm/shm_all_reduce.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace tpserve {

// A slot's header, on its own cache lines so that one rank's stores do not evict the lines another
// rank polls. `posted`: the last round whose values are in the slot; `done`: the last round this rank
// finished reading every slot of.
struct alignas(128) ShmAllReduce::Header {
  uint64_t posted;
  alignas(64) uint64_t done;
};

namespace {

constexpr size_t kHeaderBytes = 128;
constexpr size_t kNameBytes = 64;
constexpr int kMaxRanks = 64;  // of one host

uint64_t LoadAcquire(const uint64_t& v) { return std::atomic_ref<const uint64_t>(v).load(std::memory_order_acquire); }
void StoreRelease(uint64_t& v, uint64_t value) { std::atomic_ref<uint64_t>(v).store(value, std::memory_order_release); }

// out[i] = (((s0[i] + s1[i]) + s2[i]) + ...) over the slots in rank order (wrapping for int64). out is
// none of the sources (this rank's own values are read from its slot too: out is written before the
// third source is read).
template <class T>
void AddInRankOrder(T* out, const T* const* sources, int size, size_t n) {
  using Add = std::conditional_t<std::is_same_v<T, int64_t>, uint64_t, T>;
  auto add = [](T a, T b) { return static_cast<T>(static_cast<Add>(a) + static_cast<Add>(b)); };
  const T* s0 = sources[0];
  const T* s1 = sources[1];
  for (size_t i = 0; i < n; ++i) out[i] = add(s0[i], s1[i]);
  for (int r = 2; r < size; ++r) {
    const T* s = sources[r];
    for (size_t i = 0; i < n; ++i) out[i] = add(out[i], s[i]);
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
  const size_t stride = kHeaderBytes + slot_bytes;
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
  return *reinterpret_cast<Header*>(base_ + static_cast<size_t>(rank) * (kHeaderBytes + slot_bytes_));
}

char* ShmAllReduce::slot(int rank) const {
  return base_ + static_cast<size_t>(rank) * (kHeaderBytes + slot_bytes_) + kHeaderBytes;
}

Status ShmAllReduce::WaitForAll(uint64_t Header::*field, uint64_t round, const WaitPolicy& policy,
                                std::optional<SteadyClock::time_point> deadline, const char* what) const {
  auto all_reached = [&]() -> StatusOr<bool> {
    for (int r = 0; r < size_; ++r) {
      if (LoadAcquire(header(r).*field) < round) return false;
    }
    return true;
  };
  return WaitUntil(all_reached, policy, deadline, what);
}

template <class T>
Status ShmAllReduce::SumOf(T* data, size_t count, const WaitPolicy& policy,
                           std::optional<SteadyClock::time_point> deadline) {
  const size_t per_round = slot_bytes_ / sizeof(T);
  const T* sources[kMaxRanks];
  for (size_t offset = 0; offset < count; offset += per_round) {
    const size_t n = std::min(per_round, count - offset);
    const uint64_t round = ++round_;
    T* out = data + offset;
    // The slots are free once every rank has read the previous round out of them.
    RETURN_IF_ERROR(WaitForAll(&Header::done, round - 1, policy, deadline, "shared-memory all-reduce (slot reuse)"));
    std::memcpy(slot(rank_), out, n * sizeof(T));
    StoreRelease(header(rank_).posted, round);
    RETURN_IF_ERROR(WaitForAll(&Header::posted, round, policy, deadline, "shared-memory all-reduce"));
    for (int r = 0; r < size_; ++r) sources[r] = reinterpret_cast<const T*>(slot(r));
    AddInRankOrder(out, sources, size_, n);
    StoreRelease(header(rank_).done, round);
  }
  return OkStatus();
}

Status ShmAllReduce::Sum(float* data, size_t count, const WaitPolicy& policy,
                         std::optional<SteadyClock::time_point> deadline) {
  return SumOf(data, count, policy, deadline);
}

Status ShmAllReduce::Sum(int64_t* data, size_t count, const WaitPolicy& policy,
                         std::optional<SteadyClock::time_point> deadline) {
  return SumOf(data, count, policy, deadline);
}

}  // namespace tpserve
