# Multi-rank tests, run by ctest under mpirun (see tpserve_mpi_test in cmake/tpserve.cmake).
# Each binary links mpi_gtest_main.cc (MPI_Init + GoogleTest; rank 0 reports).
set(MPI_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})

foreach(np 2 3 4)
  tpserve_mpi_test(communicator_mpi_test ${np}
                   SOURCES ${MPI_TEST_DIR}/communicator_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_comm)
endforeach()

foreach(np 2 3 4)
  tpserve_mpi_test(group_mpi_test ${np}
                   SOURCES ${MPI_TEST_DIR}/group_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_worker)
endforeach()

foreach(np 2 3 4)
  tpserve_mpi_test(tensor_parallel_mpi_test ${np}
                   SOURCES ${MPI_TEST_DIR}/tensor_parallel_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_testing)
endforeach()
