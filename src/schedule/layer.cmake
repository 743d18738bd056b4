bertrain_add_layer(schedule SOURCES schedule/schedule.cpp PUBLIC_DEPS bertrain::core)
