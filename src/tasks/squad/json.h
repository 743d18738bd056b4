// squad_json.h (private): JSON helpers shared by the SQuAD reader, predictions and evaluation: reading a
// whole file, parsing with the byte offset of a syntax error, and typed field access with clear errors.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace bertrain::squad::detail {

/// The bytes of `path`. Throws bertrain::Error naming `what` and the path when it cannot be read.
std::string read_text_file(const std::string& path, const char* what);

/// Parses JSON text. Throws bertrain::Error "<source>: invalid JSON at byte N: ..." on a syntax error.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& source);

/// obj[key], which must exist and be of the wanted kind. `where` completes the message
/// ("question 'abc'", "article 3, paragraph 2"). Throws bertrain::Error otherwise.
const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& source,
                            const std::string& where);
const std::string& string_field(const nlohmann::json& obj, const char* key, const std::string& source,
                                const std::string& where);
const nlohmann::json& array_field(const nlohmann::json& obj, const char* key, const std::string& source,
                                  const std::string& where);
int64_t int_field(const nlohmann::json& obj, const char* key, const std::string& source, const std::string& where);
bool bool_field(const nlohmann::json& obj, const char* key, const std::string& source, const std::string& where);
/// Python's " ".join(s.strip().split()) (the reference's whitespace_tokenize, joined again): runs of Python
/// whitespace become one space, leading and trailing whitespace is dropped.
std::string python_split_join(std::string_view s);

/// Throws unless `v` is an object.
void require_object(const nlohmann::json& v, const std::string& source, const std::string& where);

}  // namespace bertrain::squad::detail
