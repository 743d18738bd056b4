bertrain_add_layer(models SOURCES models/bert_config.cpp models/bert.cpp PUBLIC_DEPS bertrain::nn)
