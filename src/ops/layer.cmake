bertrain_add_layer(ops
  SOURCES ops/matmul.cpp ops/elementwise.cpp ops/norm.cpp ops/index.cpp ops/shape.cpp ops/checkpoint.cpp
          kernels/gemm.cpp kernels/reduce.cpp
  PUBLIC_DEPS bertrain::autograd
  PRIVATE_DEPS DNNL::dnnl Eigen3::Eigen OpenMP::OpenMP_CXX)
