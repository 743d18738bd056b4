# Behaviour of `bertrain pretrain` through the binary (tests/trainer_test.sh); the data fixture makes tiny shards.
set(_tt ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test.sh)
add_test(NAME trainer_data COMMAND ${_tt} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} data)
set_tests_properties(trainer_data PROPERTIES FIXTURES_SETUP trainer_shards)
foreach(c accumulation resume_sigterm c32_resume sigkill_checkpoint startup_checks eval_dir_names bf16)
  add_test(NAME trainer_${c} COMMAND ${_tt} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${c})
  set_tests_properties(trainer_${c} PROPERTIES FIXTURES_REQUIRED trainer_shards TIMEOUT 900 RESOURCE_LOCK trainer_dir_${c})
endforeach()
