# Data-parallel tests under `mpirun -np 2` (tests/mpi_test.sh), label "mpi"; in the default run when MPI is built.
# They use the tiny shards of the trainer_data fixture (tests/trainer.cmake). The gradient reducer's unit test
# runs with or without MPI (a fake communicator).
bertrain_add_test(train_reducer_test SOURCES train_reducer_test.cpp)
if(BERTRAIN_WITH_MPI)
  find_program(BERTRAIN_MPIRUN mpirun REQUIRED)
  foreach(c equivalence kill_resume elastic_resume rank_throws)
    add_test(NAME mpi_${c} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpi_test.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${c})
    set_tests_properties(mpi_${c} PROPERTIES LABELS mpi FIXTURES_REQUIRED trainer_shards TIMEOUT 900
      RESOURCE_LOCK mpi_ranks)
  endforeach()
endif()
