bertrain_add_layer(ops
  SOURCES ops/matmul.cpp ops/elementwise.cpp ops/norm.cpp ops/index.cpp ops/shape.cpp ops/checkpoint.cpp ops/attention.cpp
          kernels/gemm.cpp kernels/reduce.cpp kernels/vmath.cpp kernels/convert.cpp
  PUBLIC_DEPS bertrain::autograd
  PRIVATE_DEPS bertrain::core DNNL::dnnl Eigen3::Eigen OpenMP::OpenMP_CXX mvec m)
# libmvec calls need errno-free math in this one file (no other semantics change).
set_source_files_properties(kernels/vmath.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno")
