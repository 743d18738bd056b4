# io: safetensors, config.json, model checkpoints and `bertrain inspect` (the test runs the CLI).
bertrain_add_test(io_test SOURCES io_test.cpp LIBS nlohmann_json::nlohmann_json)
add_dependencies(io_test bertrain_cli)
