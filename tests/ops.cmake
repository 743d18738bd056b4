bertrain_add_test(gradcheck_test SOURCES gradcheck_test.cpp)
bertrain_add_test(ops_test SOURCES ops_test.cpp)
bertrain_add_test(fused_ops_test SOURCES fused_ops_test.cpp LIBS OpenMP::OpenMP_CXX)  # includes kernels/dropout_mask.h
