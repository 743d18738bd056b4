# Step-by-step training parity of `bertrain pretrain` with PyTorch (tests/train_parity_test.sh, issue 16): AdamW and
# LAMB in f32 (50 steps, 1e-5) and with --bf16 (20 steps, 2%; skipped where bf16 is unavailable).
set(_tp ${CMAKE_CURRENT_SOURCE_DIR}/train_parity_test.sh)
foreach(c adamw lamb adamw_bf16 lamb_bf16)
  add_test(NAME train_parity_${c} COMMAND ${_tp} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${c})
  set_tests_properties(train_parity_${c} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
# Regenerates tests/data/train_parity with scripts/gen_train_parity.py and compares byte for byte (about 1.5 min).
add_test(NAME train_parity_regen COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/train_parity_regen.sh ${CMAKE_BINARY_DIR}
  ${PROJECT_SOURCE_DIR})
set_tests_properties(train_parity_regen PROPERTIES LABELS slow SKIP_RETURN_CODE 77 TIMEOUT 900)
