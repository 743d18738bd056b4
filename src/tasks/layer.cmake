# tasks layer: finetuning tasks, one namespace each (glue, squad): readers, features, metrics, writers,
# evaluation and prediction. Above train (a task hands its batches, head and metric to the finetuning loop).
bertrain_add_layer(tasks
  SOURCES
    tasks/glue/glue.cpp
    tasks/glue/metrics.cpp
    tasks/glue/writers.cpp
    tasks/squad/json.cpp
    tasks/squad/squad.cpp
    tasks/squad/predictions.cpp
    tasks/squad/evaluate.cpp
  PUBLIC_DEPS
    bertrain::core
    bertrain::text
  PRIVATE_DEPS
    bertrain::data
    bertrain::io
    PkgConfig::UTF8PROC
    nlohmann_json::nlohmann_json
)
