# Project-level checks: layering (and a copy with a planted back-edge, which must fail), and the consumer
# project built against the installed package (label slow).
add_test(NAME layering COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/layering_check.sh ${PROJECT_SOURCE_DIR})
add_test(NAME layering_detects_back_edge COMMAND bash -c
  "t=$(mktemp -d) && mkdir -p $t/include/bertrain/core $t/src && echo '#include \"bertrain/nn/module.h\"' > $t/include/bertrain/core/bad.h && ${CMAKE_CURRENT_SOURCE_DIR}/layering_check.sh $t; r=$?; rm -rf $t; exit $r")
set_tests_properties(layering_detects_back_edge PROPERTIES WILL_FAIL TRUE)
add_test(NAME consumer_installed_package COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/consumer_test.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(consumer_installed_package PROPERTIES LABELS slow TIMEOUT 600)
