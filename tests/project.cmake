# Project-level checks: layering (and a copy with a planted back-edge, which must fail), and the consumer
# project built against the installed package (label slow).
add_test(NAME layering COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/layering_check.sh ${PROJECT_SOURCE_DIR})
add_test(NAME layering_detects_back_edge COMMAND bash -c
  "t=$(mktemp -d) && mkdir -p $t/include/bertrain/core $t/src && echo '#include \"bertrain/nn/module.h\"' > $t/include/bertrain/core/bad.h && ${CMAKE_CURRENT_SOURCE_DIR}/layering_check.sh $t; r=$?; rm -rf $t; exit $r")
set_tests_properties(layering_detects_back_edge PROPERTIES WILL_FAIL TRUE)
# A copy of the tree whose train target no longer declares the data layer its sources include: must fail.
add_test(NAME layering_detects_undeclared_dependency COMMAND bash -c
  "t=$(mktemp -d) && cp -r ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src $t/ && sed -i 's/bertrain::data //' $t/src/train/layer.cmake && ${CMAKE_CURRENT_SOURCE_DIR}/layering_check.sh $t 2>&1 | grep 'src/train/layer.cmake declares'; r=$?; rm -rf $t; exit $r")
add_test(NAME consumer_installed_package COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/consumer_test.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(consumer_installed_package PROPERTIES LABELS slow TIMEOUT 600)
