set(_train_sources train/pretrainer.cpp train/checkpoint_dir.cpp train/signals.cpp train/train_state.cpp
  train/train_step.cpp train/step_logger.cpp train/optimizer_factory.cpp train/finetune.cpp train/communicator.cpp
  train/grad_reducer.cpp train/estimate.cpp)
if(BERTRAIN_WITH_MPI)
  list(APPEND _train_sources train/communicator_mpi.cpp)
endif()
bertrain_add_layer(train SOURCES ${_train_sources}
  PUBLIC_DEPS bertrain::core bertrain::data bertrain::io bertrain::models bertrain::nn bertrain::optim bertrain::schedule
  PRIVATE_DEPS bertrain::autograd bertrain::ops bertrain::text spdlog::spdlog nlohmann_json::nlohmann_json)
if(BERTRAIN_WITH_MPI)
  # MPI is private to the train layer: no public header includes mpi.h (tests/project/layering_check.sh checks it).
  target_link_libraries(bertrain_train PRIVATE MPI::MPI_C)
  # The C API only: without these, mpi.h in C++ pulls in the deprecated C++ bindings (libmpi_cxx).
  target_compile_definitions(bertrain_train PRIVATE BERTRAIN_HAVE_MPI=1 OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
endif()
