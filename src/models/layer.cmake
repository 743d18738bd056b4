bertrain_add_layer(models SOURCES models/bert_config.cpp models/bert.cpp models/flops.cpp PUBLIC_DEPS bertrain::core bertrain::nn)
# `#pragma omp simd` (the masked-LM accuracy's argmax) without the OpenMP runtime.
set_source_files_properties(models/bert.cpp PROPERTIES COMPILE_OPTIONS "-fopenmp-simd")
