# SQuAD (issue 8): reading, doc_stride windows and max context (CASES.md C25), get_final_text (C26),
# write_predictions, the official v1.1/v2.0 metrics and `bertrain squad-evaluate`. The shared dev files are read
# from ../shared/data (skipped with a message when absent).
bertrain_add_test(squad_test SOURCES squad_test.cpp)
target_compile_definitions(squad_test PRIVATE BERTRAIN_SHARED_DATA_DIR="${PROJECT_SOURCE_DIR}/../shared/data")
add_dependencies(squad_test bertrain_cli)
