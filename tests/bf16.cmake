bertrain_add_test(bf16_test SOURCES bf16_test.cpp)
