# Pretraining data: CASES.md C10-C13, HDF5 shards, the loader. The HDF5 test links libhdf5 itself to craft
# NVIDIA-style (int64) and broken files.
bertrain_add_test(data_pretraining_test SOURCES data_pretraining_test.cpp LIBS OpenMP::OpenMP_CXX)
pkg_check_modules(HDF5_TEST REQUIRED IMPORTED_TARGET hdf5)
bertrain_add_test(data_hdf5_test SOURCES data_hdf5_test.cpp LIBS PkgConfig::HDF5_TEST OpenMP::OpenMP_CXX)
bertrain_add_test(data_loader_test SOURCES data_loader_test.cpp)
