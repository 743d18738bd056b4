# Tokenizer and vocab tests (data layer): CASES.md C01-C08, vocab validation, golden outputs, CLI.
bertrain_add_test(tokenizer_test SOURCES tokenizer_test.cpp)
bertrain_add_test(sentencepiece_test SOURCES sentencepiece_test.cpp)
add_dependencies(sentencepiece_test bertrain_cli)
