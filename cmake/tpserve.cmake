# tpserve_library(NAME DEPS...): one static library per folder, built from every .cc in it
# except files ending in _main.cc (those are executables, declared explicitly).
function(tpserve_library name)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  list(FILTER srcs EXCLUDE REGEX "_main\\.cc$")
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_link_libraries(${name} PUBLIC ${ARGN})
  else()  # a folder whose sources are still to come
    add_library(${name} INTERFACE)
    target_link_libraries(${name} INTERFACE ${ARGN})
  endif()
endfunction()

# tpserve_gtest(NAME SOURCES... LIBS ...): one GoogleTest binary registered with CTest.
function(tpserve_gtest name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} LABELS "${T_LABELS}")
endfunction()

# tpserve_mpi_test(NAME NP SOURCES... LIBS ...): a GoogleTest binary run under mpirun with NP ranks.
function(tpserve_mpi_test name np)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT TARGET ${name})
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest MPI::MPI_CXX)
  endif()
  add_test(NAME ${name}_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root
                   --mca mpi_yield_when_idle 1 --mca btl self,tcp --mca btl_tcp_if_include lo
                   -np ${np} $<TARGET_FILE:${name}>)
  set_tests_properties(${name}_np${np} PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} LABELS mpi
                       TIMEOUT 600 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()
