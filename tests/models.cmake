bertrain_add_test(models_test SOURCES models_test.cpp)
bertrain_add_test(parity_test SOURCES parity_test.cpp)
