# The f32 -> bf16 rounding of every path over all 2^32 inputs (seconds; OpenMP over the chunks).
bertrain_add_test(bf16_exhaustive_test SOURCES bf16_exhaustive_test.cpp LIBS OpenMP::OpenMP_CXX)
