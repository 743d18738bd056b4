# GLUE readers, classifier featurization, metrics and writers (issue 7; CASES.md C13 classifier part, C29).
bertrain_add_test(glue_test SOURCES glue_test.cpp)
