# TensorFlow checkpoints (issue 20): CRC-32C, the tensor-bundle reader and writer, the BERT name mapping
# (CASES.md C33), conversion, `bertrain convert` / `inspect` / `extract-features`. Checkpoints come from
# tests/data/tf_checkpoints; the independent reader list_bundle.py and the value dumps from ../shared/data
# (tests needing them skip with a message when it is absent).
bertrain_add_test(tf_checkpoint_test SOURCES tf_checkpoint_test.cpp LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(tf_checkpoint_test PRIVATE BERTRAIN_SHARED_DATA_DIR="${PROJECT_SOURCE_DIR}/../shared/data")

# The protobuf codec of the bundle messages against protoc's code for src/io/tensor_bundle.proto. Not through
# bertrain_add_test: it must not link the text layer (libsentencepiece's bundled protobuf would clash).
find_package(Protobuf)
find_package(leveldb CONFIG REQUIRED)
if(Protobuf_FOUND)
  add_executable(tf_bundle_codec_test tf_bundle_codec_test.cpp ${PROJECT_SOURCE_DIR}/src/io/tensor_bundle.proto)
  protobuf_generate(TARGET tf_bundle_codec_test LANGUAGE cpp APPEND_PATH)
  target_include_directories(tf_bundle_codec_test PRIVATE ${CMAKE_CURRENT_BINARY_DIR} ${PROJECT_SOURCE_DIR}/src
    ${Protobuf_INCLUDE_DIRS})
  target_link_libraries(tf_bundle_codec_test PRIVATE bertrain::io leveldb::leveldb protobuf::libprotobuf-lite
    GTest::gtest GTest::gtest_main)
  target_compile_definitions(tf_bundle_codec_test PRIVATE BERTRAIN_TEST_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data")
  set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/tensor_bundle.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
  gtest_discover_tests(tf_bundle_codec_test DISCOVERY_TIMEOUT 60)
else()
  message(STATUS "bertrain: protobuf not found, tf_bundle_codec_test not built")
endif()
