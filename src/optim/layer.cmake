bertrain_add_layer(optim
  SOURCES optim/optimizer.cpp optim/clip.cpp optim/adamw.cpp optim/lamb.cpp optim/lars.cpp optim/sgd.cpp
  PUBLIC_DEPS bertrain::core bertrain::autograd
  PRIVATE_DEPS OpenMP::OpenMP_CXX)
# sqrt in the update loops vectorises only without errno; no result changes (no -ffast-math).
target_compile_options(bertrain_optim PRIVATE -fno-math-errno)
