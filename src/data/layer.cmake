# data layer: tokenizers, pretraining instances, HDF5 shards, loaders (knows no autograd).
bertrain_add_layer(data
  SOURCES data/pretraining.cpp data/hdf5_shard.cpp data/loader.cpp
  PUBLIC_DEPS bertrain::core)

# Pretraining data, HDF5 shards and the loader (issue 4).
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5)
target_link_libraries(bertrain_data PRIVATE OpenMP::OpenMP_CXX PkgConfig::HDF5 nlohmann_json::nlohmann_json)
