# Smoke tests of `bertrain bench train` and scripts/bench_torch.py (tests/bench_test.sh): fields, FLOP formula,
# sane values. Speed itself is measured by scripts/bench_compare.sh, not by tests (DESIGN.md section 9).
set(_bt ${CMAKE_CURRENT_SOURCE_DIR}/bench_test.sh)
add_test(NAME bench_train_smoke COMMAND ${_bt} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} train)
add_test(NAME bench_train_bf16_smoke COMMAND ${_bt} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} train_bf16)
add_test(NAME bench_torch_smoke COMMAND ${_bt} ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} torch)
set_tests_properties(bench_train_smoke bench_train_bf16_smoke bench_torch_smoke PROPERTIES LABELS fast TIMEOUT 120)
set_tests_properties(bench_torch_smoke PROPERTIES SKIP_RETURN_CODE 77)
