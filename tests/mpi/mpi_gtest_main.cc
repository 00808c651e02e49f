// main() for GoogleTest binaries run under mpirun: MPI_Init, every rank runs every test, rank 0
// prints the usual report, other ranks print only their failures (prefixed with the rank), and
// the exit code is non-zero on every rank if any rank failed.
#include <cstdio>

#include <gtest/gtest.h>
#include <mpi.h>

// LeakSanitizer off in MPI test binaries: Open MPI's dlopen'ed transport components leave
// allocations behind at MPI_Finalize whose stacks cannot be symbolised after dlclose (so
// tests/lsan.supp cannot name them). Our own code's leaks are checked by the non-MPI test binaries.
extern "C" int __lsan_is_turned_off() { return 1; }

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "another rank failed\n");
  MPI_Finalize();
  return any_failed;
}
