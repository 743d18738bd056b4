bertrain_add_layer(io SOURCES io/recipe.cpp
  PUBLIC_DEPS bertrain::models bertrain::data
  PRIVATE_DEPS nlohmann_json::nlohmann_json)
