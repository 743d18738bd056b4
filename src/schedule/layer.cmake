bertrain_add_layer(schedule SOURCES schedule/schedule.cpp PRIVATE_DEPS bertrain::core)
