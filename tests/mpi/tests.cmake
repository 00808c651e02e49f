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

foreach(np 2 3 4)  # sampler engineer: the vocabulary-parallel sampler against the gathered reference
  tpserve_mpi_test(distributed_sampler_mpi_test ${np}
                   SOURCES ${MPI_TEST_DIR}/distributed_sampler_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_testing)
endforeach()

foreach(np 2 3 4)
  tpserve_mpi_test(tensor_parallel_mpi_test ${np}
                   SOURCES ${MPI_TEST_DIR}/tensor_parallel_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_testing)
endforeach()

foreach(np 2 3)  # prompt logprobs: the broadcast plan's scored rows, against forcing and one rank
  tpserve_mpi_test(prompt_logprobs_mpi_test ${np}
                   SOURCES ${MPI_TEST_DIR}/prompt_logprobs_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_testing)
endforeach()

# A rank killed mid-generation ends the job: a plain test that launches mpirun itself.
add_executable(group_kill_helper ${MPI_TEST_DIR}/group_kill_helper_main.cc)
target_link_libraries(group_kill_helper PRIVATE tpserve_worker)
add_executable(rank_kill_test ${MPI_TEST_DIR}/rank_kill_test.cc)
target_link_libraries(rank_kill_test PRIVATE GTest::gtest GTest::gtest_main)
target_compile_definitions(rank_kill_test PRIVATE TPSERVE_MPIRUN="${MPIEXEC_EXECUTABLE}"
                           TPSERVE_KILL_HELPER="$<TARGET_FILE:group_kill_helper>")
add_dependencies(rank_kill_test group_kill_helper)
add_test(NAME rank_kill_test COMMAND rank_kill_test)
set_tests_properties(rank_kill_test PROPERTIES LABELS mpi TIMEOUT 300)

# NCCL communicator on device buffers: built where CUDA+NCCL are found; skips without enough GPUs.
if(TARGET tpserve_comm_nccl)
  foreach(np 1 2)
    tpserve_mpi_test(nccl_communicator_mpi_test ${np}
                     SOURCES ${MPI_TEST_DIR}/nccl_communicator_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                     LIBS tpserve_comm_nccl)
    set_property(TEST nccl_communicator_mpi_test_np${np} APPEND PROPERTY LABELS gpu)
  endforeach()
  # The CUDA executor as a TP 2 NCCL group against the CPU engine (skips without a GPU per rank).
  tpserve_mpi_test(cuda_executor_mpi_test 2
                   SOURCES ${MPI_TEST_DIR}/cuda_executor_mpi_test.cc ${MPI_TEST_DIR}/mpi_gtest_main.cc
                   LIBS tpserve_worker_cuda tpserve_testing)
  set_property(TEST cuda_executor_mpi_test_np2 APPEND PROPERTY LABELS gpu)
endif()

# The same group split across two network namespaces (deploy/netns-*.sh) gives the same ids as on
# one host. Needs root and iproute2 (skipped otherwise).
if(TARGET tpserve-run)
  add_test(NAME netns_two_host_test
           COMMAND ${CMAKE_SOURCE_DIR}/deploy/netns-test.sh $<TARGET_FILE:tpserve-run>
                   ${CMAKE_SOURCE_DIR}/models/SmolLM2-135M-Instruct.Q4_1.gguf)
  set_tests_properties(netns_two_host_test PROPERTIES LABELS "mpi;netns" SKIP_RETURN_CODE 77 TIMEOUT 300)
  # Cutting that link mid-generation ends both ranks within seconds (the group heartbeat).
  add_test(NAME netns_cut_test
           COMMAND ${MPI_TEST_DIR}/netns_cut_test.sh $<TARGET_FILE:tpserve-run>
                   ${CMAKE_SOURCE_DIR}/models/SmolLM2-135M-Instruct.Q4_1.gguf)
  set_tests_properties(netns_cut_test PROPERTIES LABELS "mpi;netns" SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()

# The real model prints the same ids at --tp 2, 3 and 4 as at --tp 1 (greedy and seeded sampling).
# Skipped when the model has not been fetched. Not in the sanitizer build: that build is the portable
# (scalar) one, where 16 runs of 64 SmolLM2 tokens under ASan outlast any sane timeout; the numerics are
# the release build's to check (and the MPI tests above cover the same paths under the sanitizers).
if(TARGET tpserve-run AND NOT TPSERVE_SANITIZE)
  add_test(NAME tp_equality_test
           COMMAND ${MPI_TEST_DIR}/../testing/ids_equality_test.sh tp $<TARGET_FILE:tpserve-run>
                   ${CMAKE_SOURCE_DIR}/models/SmolLM2-135M-Instruct.Q4_1.gguf)
  set_tests_properties(tp_equality_test PROPERTIES LABELS mpi SKIP_RETURN_CODE 77 TIMEOUT 600)
  # The same for Gemma 3 270M Q4_K_M (scripts/fetch-model.sh gemma3): 4 query heads and one KV head,
  # held by every rank at --tp 4; sliding-window and global layers; K-quant and Q5_0 weights.
  add_test(NAME tp_equality_gemma3_test
           COMMAND ${MPI_TEST_DIR}/../testing/ids_equality_test.sh tp $<TARGET_FILE:tpserve-run>
                   ${CMAKE_SOURCE_DIR}/models/gemma-3-270m-q4_k_m.gguf)
  set_tests_properties(tp_equality_gemma3_test PROPERTIES LABELS mpi SKIP_RETURN_CODE 77 TIMEOUT 600)
  # The same on a synthetic Q4_K_M model (K-quants and their fallbacks mixed in one file).
  add_test(NAME quant_tp_equality_test
           COMMAND ${MPI_TEST_DIR}/quant_tp_equality_test.sh $<TARGET_FILE:tpserve-mkmodel> $<TARGET_FILE:tpserve-run>)
  set_tests_properties(quant_tp_equality_test PROPERTIES LABELS mpi TIMEOUT 600)
endif()
