# io layer: safetensors, TF checkpoints, config.json, recipes, checkpoints. The TF bundle index is a LevelDB
# table (Debian's libleveldb, which brings snappy) of protobuf messages compiled from io/tensor_bundle.proto
# (protobuf-lite): both private, no public header includes them.
find_package(leveldb CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
bertrain_add_layer(io
  SOURCES io/safetensors.cpp io/file_util.cpp io/config.cpp io/checkpoint.cpp io/recipe.cpp io/tokenizer_files.cpp io/tf_checkpoint.cpp
    io/tensor_bundle.proto
  PUBLIC_DEPS bertrain::core bertrain::models bertrain::nn bertrain::optim bertrain::schedule
  PRIVATE_DEPS nlohmann_json::nlohmann_json leveldb::leveldb protobuf::libprotobuf-lite)
protobuf_generate(TARGET bertrain_io LANGUAGE cpp)
target_include_directories(bertrain_io PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
# The generated code is not ours: no warnings from it.
set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/io/tensor_bundle.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
