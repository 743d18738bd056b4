bertrain_add_test(models_test SOURCES models_test.cpp)
