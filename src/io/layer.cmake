bertrain_add_layer(io
  SOURCES io/safetensors.cpp io/file_util.cpp io/config.cpp io/checkpoint.cpp io/recipe.cpp io/tokenizer_files.cpp
  PUBLIC_DEPS bertrain::core bertrain::models bertrain::nn bertrain::optim bertrain::schedule
  PRIVATE_DEPS nlohmann_json::nlohmann_json)
