bertrain_add_test(schedule_test SOURCES schedule_test.cpp)
# The same lr settings through pretrain, run-classifier, run-squad and LrSchedule (runs the CLI).
bertrain_add_test(schedule_entry_points_test SOURCES schedule_entry_points_test.cpp LIBS nlohmann_json::nlohmann_json)
add_dependencies(schedule_entry_points_test bertrain_cli)
