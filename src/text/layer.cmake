# text layer: Unicode, UTF-8, vocabularies, the BERT basic + WordPiece tokenizer, sentencepiece (knows no tensors).
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(SPM REQUIRED IMPORTED_TARGET sentencepiece)
bertrain_add_layer(text
  SOURCES
    text/unicode.cpp
    text/vocab.cpp
    text/tokenizer.cpp
    text/sentencepiece_tokenizer.cpp
    text/char_vocab.cpp
  PRIVATE_DEPS
    bertrain::core
    PkgConfig::UTF8PROC
    PkgConfig::SPM
)
