# data layer: pretraining instances, HDF5 shards, loaders, batch makers (knows no autograd).
# One source or dependency per line, so work on different parts of the layer merges line by line.
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5)
find_package(ZLIB REQUIRED)
bertrain_add_layer(data
  SOURCES
    data/pretraining.cpp
    data/hdf5_shard.cpp
    data/loader.cpp
    data/synthetic.cpp
    data/create_shards.cpp
  PUBLIC_DEPS
    bertrain::core
  PRIVATE_DEPS
    bertrain::text
    PkgConfig::HDF5
    ZLIB::ZLIB
    OpenMP::OpenMP_CXX
    nlohmann_json::nlohmann_json
)
