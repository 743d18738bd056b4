bertrain_add_layer(train SOURCES train/pretrainer.cpp train/checkpoint_dir.cpp train/signals.cpp
  train/optimizer_factory.cpp train/finetune.cpp
  PUBLIC_DEPS bertrain::io
  PRIVATE_DEPS spdlog::spdlog nlohmann_json::nlohmann_json)
