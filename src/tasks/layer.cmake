# tasks layer: finetuning and inference tasks, one namespace each (glue, squad, ner, features): readers, features,
# metrics, writers, evaluation and prediction. Above train (a task hands its batches, head and metric to the
# finetuning loop).
bertrain_add_layer(tasks
  SOURCES
    tasks/glue/glue.cpp
    tasks/glue/metrics.cpp
    tasks/glue/writers.cpp
    tasks/glue/run_classifier.cpp
    tasks/squad/json.cpp
    tasks/squad/squad.cpp
    tasks/squad/predictions.cpp
    tasks/squad/evaluate.cpp
    tasks/squad/run_squad.cpp
    tasks/squad/cmrc2018.cpp
    tasks/ner/tags.cpp
    tasks/ner/reader.cpp
    tasks/ner/features.cpp
    tasks/ner/run_ner.cpp
    tasks/common/finetune_command.cpp
    tasks/features/features.cpp
    tasks/common/batching.cpp
  PUBLIC_DEPS
    bertrain::core
    bertrain::io
    bertrain::models
    bertrain::nn
    bertrain::text
    bertrain::train
  PRIVATE_DEPS
    bertrain::autograd
    bertrain::data
    bertrain::ops
    spdlog::spdlog
    PkgConfig::UTF8PROC
    nlohmann_json::nlohmann_json
)
