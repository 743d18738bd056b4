# Files claiming more than they hold (2^60 elements, JSON nested 10^6 deep, disagreeing shard shapes) are refused
# in one line without allocating the claim. Links libhdf5 itself to write shards with unwritten datasets.
pkg_check_modules(HDF5_LIMITS REQUIRED IMPORTED_TARGET hdf5)
bertrain_add_test(resource_limits_test SOURCES resource_limits_test.cpp LIBS PkgConfig::HDF5_LIMITS)
