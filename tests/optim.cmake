bertrain_add_test(optim_test SOURCES optim_test.cpp LIBS nlohmann_json::nlohmann_json OpenMP::OpenMP_CXX)
# Reruns the golden generator with Debian's python3 (python3-torch, numpy) and compares byte for byte with the
# committed tests/data/optim_golden.json. Skipped (exit 77) where that python or torch is missing.
add_test(NAME optim_golden_regen
  COMMAND sh -c "/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || exit 77; /usr/bin/python3 '${PROJECT_SOURCE_DIR}/scripts/gen_optim_golden.py' | cmp - '${CMAKE_CURRENT_SOURCE_DIR}/data/optim_golden.json'")
set_tests_properties(optim_golden_regen PROPERTIES LABELS slow SKIP_RETURN_CODE 77)
