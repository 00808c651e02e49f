#include "worker/group_launch.h"

#include <algorithm>
#include <cstdlib>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(GroupLaunchTest, MpirunCommandRunsThisExecutableWithItsArguments) {
  unsetenv("TPSERVE_MPIRUN");
  unsetenv("TPSERVE_MPIRUN_ARGS");
  char arg0[] = "tpserve-run", arg1[] = "--tp", arg2[] = "3", arg3[] = "--prompt", arg4[] = "two words";
  char* argv[] = {arg0, arg1, arg2, arg3, arg4};
  std::vector<std::string> command = MpirunCommand(3, 5, argv);
  ASSERT_GE(command.size(), 8u);
  EXPECT_EQ(command[0], "mpirun");
  auto np = std::find(command.begin(), command.end(), "-np");
  ASSERT_NE(np, command.end());
  ASSERT_NE(np + 1, command.end());
  EXPECT_EQ(*(np + 1), "3");
  // The executable is this process's own path (so a relative argv[0] still works), then argv[1..].
  ASSERT_EQ(command.end() - (np + 2), 5);
  EXPECT_NE((np + 2)->find('/'), std::string::npos) << *(np + 2);
  EXPECT_EQ(std::vector<std::string>(np + 3, command.end()),
            (std::vector<std::string>{"--tp", "3", "--prompt", "two words"}));
  EXPECT_NE(std::find(command.begin(), command.end(), "--oversubscribe"), command.end());
  EXPECT_NE(std::find(command.begin(), command.end(), "mpi_yield_when_idle"), command.end());
}

TEST(GroupLaunchTest, EnvironmentOverridesTheLauncher) {
  setenv("TPSERVE_MPIRUN", "/opt/ompi/bin/mpirun", 1);
  setenv("TPSERVE_MPIRUN_ARGS", "--mca btl self,tcp  --hostfile h.txt", 1);
  char arg0[] = "x";
  char* argv[] = {arg0};
  std::vector<std::string> command = MpirunCommand(2, 1, argv);
  EXPECT_EQ(command[0], "/opt/ompi/bin/mpirun");
  auto hostfile = std::find(command.begin(), command.end(), "--hostfile");
  ASSERT_NE(hostfile, command.end());
  EXPECT_EQ(*(hostfile + 1), "h.txt");
  EXPECT_LT(hostfile - command.begin(), std::find(command.begin(), command.end(), "-np") - command.begin());
  unsetenv("TPSERVE_MPIRUN");
  unsetenv("TPSERVE_MPIRUN_ARGS");
}

TEST(GroupLaunchTest, ThreadsPerRankNeverZero) {
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000", 1);
  EXPECT_EQ(LocalRanksOnHost(), 1000);
  EXPECT_EQ(DefaultThreadsPerRank(), 1);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_EQ(LocalRanksOnHost(), 1);
  EXPECT_GE(DefaultThreadsPerRank(), 1);
}

}  // namespace
}  // namespace tpserve
