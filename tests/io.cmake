# io: safetensors, config.json, model checkpoints and `bertrain inspect` (the test runs the CLI).
bertrain_add_test(io_test SOURCES io_test.cpp LIBS nlohmann_json::nlohmann_json)
add_dependencies(io_test bertrain_cli)

# Compatibility with transformers' conventions, checked by a torch-only script (transformers is not in Debian).
add_executable(hf_compat_roundtrip hf_compat_roundtrip.cpp)
target_link_libraries(hf_compat_roundtrip PRIVATE bertrain::bertrain)
add_test(NAME hf_compat COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/hf_compat_test.sh $<TARGET_FILE:hf_compat_roundtrip>
         ${PROJECT_SOURCE_DIR})
# The golden reference files are reproducible by their generator.
add_test(NAME golden_reproducible COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/golden_reproducible.sh ${PROJECT_SOURCE_DIR})
# The bad-input cases under AddressSanitizer + UBSan, in their own build directory (label slow).
add_test(NAME io_asan COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io_asan_test.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/asan-io)
set_tests_properties(io_asan PROPERTIES LABELS slow TIMEOUT 1800)
# Every option of LambOptions / AdamWOptions / LrScheduleOptions through a recipe key and a pretrain flag.
bertrain_add_test(recipe_options_test SOURCES recipe_options_test.cpp LIBS nlohmann_json::nlohmann_json)
add_dependencies(recipe_options_test bertrain_cli)
