bertrain_add_layer(nn SOURCES nn/module.cpp PUBLIC_DEPS bertrain::core bertrain::autograd bertrain::ops)
