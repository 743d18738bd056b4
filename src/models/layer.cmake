bertrain_add_layer(models SOURCES models/bert_config.cpp PUBLIC_DEPS bertrain::nn)
