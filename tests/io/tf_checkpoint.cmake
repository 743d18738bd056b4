# TensorFlow checkpoints, included from tests/io/CMakeLists.txt: the tensor-bundle reader and writer,
# the BERT name mapping (CASES.md C33), conversion both ways, load_model from a TF prefix, the bad-input cases and
# `bertrain convert` / `inspect`. Checkpoints come from tests/fixtures/tf_checkpoints; the independent reader
# list_bundle.py and the value dump from ../shared/data (tests needing them skip with a message when it is absent).
# CRC-32C is tested in tests/core, extract-features in tests/tasks, --init_checkpoint PREFIX in tests/tools.
find_package(leveldb CONFIG REQUIRED)
set(_bertrain_shared BERTRAIN_SHARED_DATA_DIR="${PROJECT_SOURCE_DIR}/../shared/data")

bertrain_add_test(tf_checkpoint_test SOURCES tf_checkpoint_test.cpp LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(tf_checkpoint_test PRIVATE ${_bertrain_shared})

bertrain_add_test(tf_bert_test SOURCES tf_bert_test.cpp LIBS nlohmann_json::nlohmann_json leveldb::leveldb)
target_compile_definitions(tf_bert_test PRIVATE ${_bertrain_shared})
add_dependencies(tf_bert_test bertrain_cli)

# The independent PyTorch forward's expected values are reproducible by their generator (Debian's python3 with torch, and the value
# dump in ../shared): regenerated and compared byte for byte. Skipped (77) where either is missing.
add_test(NAME tf_golden_regen
  COMMAND sh -c "/usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f '${PROJECT_SOURCE_DIR}/../shared/data/tf_checkpoints/keras_bert_tiny/bert_model.ckpt.entries.json' ] || exit 77; /usr/bin/python3 '${PROJECT_SOURCE_DIR}/tests/io/gen_tf_golden.py' --out - | cmp - '${PROJECT_SOURCE_DIR}/tests/fixtures/tf_checkpoints/golden_tiny_bert.json'")
set_tests_properties(tf_golden_regen PROPERTIES LABELS slow SKIP_RETURN_CODE 77)

# The protobuf codec of the bundle messages against protoc's code for src/io/tensor_bundle.proto. Not through
# bertrain_add_test: it must not link the text layer (libsentencepiece's bundled protobuf would clash).
find_package(Protobuf)
if(Protobuf_FOUND)
  add_executable(tf_bundle_codec_test tf_bundle_codec_test.cpp ${PROJECT_SOURCE_DIR}/src/io/tensor_bundle.proto)
  protobuf_generate(TARGET tf_bundle_codec_test LANGUAGE cpp APPEND_PATH)
  target_include_directories(tf_bundle_codec_test PRIVATE ${CMAKE_CURRENT_BINARY_DIR} ${PROJECT_SOURCE_DIR}/src
    ${Protobuf_INCLUDE_DIRS})
  target_link_libraries(tf_bundle_codec_test PRIVATE bertrain::io leveldb::leveldb protobuf::libprotobuf-lite
    GTest::gtest GTest::gtest_main)
  target_compile_definitions(tf_bundle_codec_test PRIVATE BERTRAIN_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures")
  set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/tensor_bundle.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
  gtest_discover_tests(tf_bundle_codec_test DISCOVERY_TIMEOUT 600)
  # The `checkpoint` file reader against protobuf's TextFormat (the full runtime: the text format is not in lite).
  add_executable(tf_checkpoint_state_test tf_checkpoint_state_test.cpp checkpoint_state.proto)
  protobuf_generate(TARGET tf_checkpoint_state_test LANGUAGE cpp APPEND_PATH)
  target_include_directories(tf_checkpoint_state_test PRIVATE ${CMAKE_CURRENT_BINARY_DIR} ${Protobuf_INCLUDE_DIRS})
  target_link_libraries(tf_checkpoint_state_test PRIVATE bertrain::io protobuf::libprotobuf GTest::gtest GTest::gtest_main)
  set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/checkpoint_state.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
  gtest_discover_tests(tf_checkpoint_state_test DISCOVERY_TIMEOUT 600)
else()
  message(STATUS "bertrain: protobuf not found, tf_bundle_codec_test and tf_checkpoint_state_test not built")
endif()
