# data layer: tokenizers and vocab, pretraining data, HDF5 shards, loaders (DESIGN.md section 1). Knows no autograd.
# One source or dependency per line, so work on different parts of the layer merges line by line.
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(SPM REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5)
find_package(ZLIB REQUIRED)
bertrain_add_layer(data
  SOURCES
    data/unicode.cpp
    data/sha256.cpp
    data/vocab.cpp
    data/tokenizer.cpp
    data/sentencepiece_tokenizer.cpp
    data/pretraining.cpp
    data/hdf5_shard.cpp
    data/loader.cpp
  PUBLIC_DEPS
    bertrain::core
  PRIVATE_DEPS
    PkgConfig::UTF8PROC
    PkgConfig::SPM
    PkgConfig::HDF5
    ZLIB::ZLIB
    OpenMP::OpenMP_CXX
    nlohmann_json::nlohmann_json
)
