# io layer: safetensors, TF checkpoints, config.json, recipes, checkpoints. The TF bundle index is a LevelDB
# table (Debian's libleveldb, which brings snappy), private: no public header includes it.
#
# Its values are protobuf messages (io/tensor_bundle.proto), encoded and decoded by io/tf_bert.cpp io/tensor_bundle_codec.cpp
# rather than by protobuf's C++ runtime: Debian's libsentencepiece.so (text layer) exports its own bundled,
# older copy of protobuf-lite's symbols, and in one process the dynamic linker binds every caller to whichever
# copy it meets first (measured: `bertrain inspect` crashed inside libsentencepiece with protoc-generated code;
# the static libprotobuf-lite.a cannot go into a shared library, its TLS is local-exec). protoc still compiles
# the .proto: tests/io/tf_checkpoint.cmake builds a test without sentencepiece that checks the codec against it.
# PyTorch's zip checkpoints (pytorch_model.bin) are read through Debian's libzip, also private, found by pkg-config:
# libzip-dev's CMake config names the zipcmp/zipmerge/ziptool programs, which Debian ships in other packages.
find_package(leveldb CONFIG REQUIRED)
pkg_check_modules(ZIP REQUIRED IMPORTED_TARGET libzip)
find_package(Snappy CONFIG REQUIRED)  # the bounds check of snappy blocks before LevelDB reads them (tf_checkpoint.cpp)
bertrain_add_layer(io
  SOURCES io/safetensors.cpp io/file_util.cpp io/config.cpp io/checkpoint.cpp io/recipe.cpp io/tokenizer_files.cpp io/checkpoint_files.cpp io/tf_checkpoint.cpp
    io/tf_bert.cpp io/tensor_bundle_codec.cpp io/tf_checkpoint_state.cpp io/tensorboard.cpp io/torch_checkpoint.cpp io/weights_file.cpp io/onnx.cpp
  PUBLIC_DEPS bertrain::core bertrain::models bertrain::nn bertrain::optim bertrain::schedule
  PRIVATE_DEPS nlohmann_json::nlohmann_json leveldb::leveldb Snappy::snappy PkgConfig::ZIP)
