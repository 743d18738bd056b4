# Pretraining data: CASES.md C10-C13, HDF5 shards, the loader. The HDF5 test links libhdf5 itself to craft
# NVIDIA-style (int64) and broken files.
bertrain_add_test(data_pretraining_test SOURCES data_pretraining_test.cpp LIBS OpenMP::OpenMP_CXX)
pkg_check_modules(HDF5_TEST REQUIRED IMPORTED_TARGET hdf5)
bertrain_add_test(data_hdf5_test SOURCES data_hdf5_test.cpp LIBS PkgConfig::HDF5_TEST OpenMP::OpenMP_CXX)
bertrain_add_test(data_loader_test SOURCES data_loader_test.cpp)

# End to end through the CLI (needs the tokenizer) and h5py (Debian's python3-h5py): NVIDIA keys, dtypes,
# shapes; 1 vs 2 threads byte-identical; a missing input is fatal.
add_test(NAME create_pretraining_data_h5py
  COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_create_pretraining_data.sh $<TARGET_FILE:bertrain_cli>
          ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/create_pretraining_data_check)
