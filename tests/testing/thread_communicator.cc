#include "tests/testing/thread_communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "common/check.h"

namespace tpserve::testing {

struct ThreadGroup::Shared {
  Shared(int size, std::chrono::milliseconds timeout) : size(size), timeout(timeout), inputs(size), counts(size) {}

  // Blocks until every rank has arrived (a generation-counting barrier).
  Status Arrive() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t generation_on_entry = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return OkStatus();
    }
    if (!cv.wait_for(lock, timeout, [&] { return generation != generation_on_entry; })) {
      return DeadlineExceeded("thread group: a rank did not reach the collective in time");
    }
    return OkStatus();
  }

  const int size;
  const std::chrono::milliseconds timeout;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;          // GUARDED_BY(mu)
  uint64_t generation = 0;  // GUARDED_BY(mu)
  // Published between the two barriers of a collective; slot r is written only by rank r.
  std::vector<const void*> inputs;  // [size]
  std::vector<size_t> counts;       // [size]
};

namespace {

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup::Shared> shared, int rank) : shared_(std::move(shared)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }

  Status AllReduceSum(float* data, size_t count) override { return SumInRankOrder(data, count); }
  Status AllReduceSum(int64_t* data, size_t count) override { return SumInRankOrder(data, count); }

  Status AllGather(const float* in, size_t count, float* out) override {
    const Timer timer(this);
    RETURN_IF_ERROR(Publish(in, count));
    for (int r = 0; r < size(); ++r) {
      if (count > 0) std::memcpy(out + count * r, shared_->inputs[r], count * sizeof(float));
    }
    return shared_->Arrive();
  }

  Status Broadcast(void* data, size_t bytes, int root) override {
    CHECK(root >= 0 && root < size());
    const Timer timer(this);
    RETURN_IF_ERROR(Publish(data, bytes));
    if (rank_ != root && bytes > 0) std::memcpy(data, shared_->inputs[root], bytes);
    return shared_->Arrive();
  }

  Status Barrier() override {
    const Timer timer(this);
    return shared_->Arrive();
  }

  double collective_seconds() const override { return collective_seconds_; }

 private:
  struct Timer {
    explicit Timer(ThreadCommunicator* comm) : comm(comm), start(std::chrono::steady_clock::now()) {}
    ~Timer() { comm->collective_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
    ThreadCommunicator* comm;
    std::chrono::steady_clock::time_point start;
  };

  template <class T>
  Status SumInRankOrder(T* data, size_t count) {
    const Timer timer(this);
    RETURN_IF_ERROR(Publish(data, count));
    std::vector<T> sum(count, T{0});
    for (int r = 0; r < size(); ++r) {
      const T* in = static_cast<const T*>(shared_->inputs[r]);
      for (size_t i = 0; i < count; ++i) sum[i] += in[i];
    }
    RETURN_IF_ERROR(shared_->Arrive());  // everyone has read every input
    if (count > 0) std::memcpy(data, sum.data(), count * sizeof(T));
    return OkStatus();
  }

  // Makes this rank's input visible and waits for all the others'; every rank must pass the
  // same count (a programmer error otherwise, as a mismatched MPI collective would be).
  Status Publish(const void* data, size_t count) {
    shared_->inputs[rank_] = data;
    shared_->counts[rank_] = count;
    RETURN_IF_ERROR(shared_->Arrive());
    for (int r = 0; r < size(); ++r) CHECK_EQ(shared_->counts[r], count) << "rank " << r << " vs rank " << rank_;
    return OkStatus();
  }

  std::shared_ptr<ThreadGroup::Shared> shared_;
  const int rank_;
  double collective_seconds_ = 0.0;
};

}  // namespace

ThreadGroup::ThreadGroup(int size, std::chrono::milliseconds timeout)
    : shared_(std::make_shared<Shared>(size, timeout)) {
  CHECK_GE(size, 1);
  for (int r = 0; r < size; ++r) comms_.push_back(std::make_unique<ThreadCommunicator>(shared_, r));
}

ThreadGroup::~ThreadGroup() = default;

int ThreadGroup::size() const { return shared_->size; }

void ThreadGroup::Run(const std::function<void(Communicator& comm)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 1; r < size(); ++r) threads.emplace_back([&, r] { fn(*comms_[r]); });
  fn(*comms_[0]);
  for (std::thread& t : threads) t.join();
}

}  // namespace tpserve::testing
