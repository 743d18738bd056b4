bertrain_add_layer(autograd SOURCES autograd/variable.cpp PUBLIC_DEPS bertrain::core PRIVATE_DEPS OpenMP::OpenMP_CXX)
