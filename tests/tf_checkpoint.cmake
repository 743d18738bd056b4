# TensorFlow checkpoints (issue 20): CRC-32C, the tensor-bundle reader and writer, the BERT name mapping
# (CASES.md C33), conversion, `bertrain convert` / `inspect` / `extract-features`. Checkpoints come from
# tests/data/tf_checkpoints; the independent reader list_bundle.py and the value dumps from ../shared/data
# (tests needing them skip with a message when it is absent).
bertrain_add_test(tf_checkpoint_test SOURCES tf_checkpoint_test.cpp LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(tf_checkpoint_test PRIVATE BERTRAIN_SHARED_DATA_DIR="${PROJECT_SOURCE_DIR}/../shared/data")
