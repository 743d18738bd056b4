# Pretraining data: CASES.md C10-C13, HDF5 shards, the loader.
bertrain_add_test(data_pretraining_test SOURCES data_pretraining_test.cpp LIBS OpenMP::OpenMP_CXX)
