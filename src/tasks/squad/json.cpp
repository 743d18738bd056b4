// squad_json.cpp: JSON helpers for the SQuAD reader, predictions and evaluation (see squad_json.h).
#include "tasks/squad/json.h"

#include <fstream>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/core/json_limits.h"

namespace bertrain::squad::detail {

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in.good(), what, " '", path, "' cannot be opened");
  std::ostringstream s;
  s << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), what, " '", path, "': read error");
  return s.str();
}

template <class Json>
Json parse_json(std::string_view text, const std::string& source) {
  check_json_depth(text, source);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based (the byte nlohmann stopped at); report the 0-based offset as well as its message.
    throw Error(::bertrain::detail::str_cat(source, ": invalid JSON at byte offset ", e.byte == 0 ? 0 : e.byte - 1, ": ",
                                e.what()));
  } catch (const nlohmann::json::exception& e) {  // the parser's other errors (406: a number beyond double, 1e400)
    throw Error(::bertrain::detail::str_cat(source, ": invalid JSON: ", e.what()));
  }
}
template nlohmann::json parse_json<nlohmann::json>(std::string_view, const std::string&);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view, const std::string&);

void require_object(const nlohmann::json& v, const std::string& source, const std::string& where) {
  BERTRAIN_CHECK(v.is_object(), source, ": ", where, ": expected a JSON object, got ", v.type_name());
}

const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& source,
                            const std::string& where) {
  require_object(obj, source, where);
  auto it = obj.find(key);
  BERTRAIN_CHECK(it != obj.end(), source, ": ", where, ": missing field \"", key, "\"");
  return *it;
}

const std::string& string_field(const nlohmann::json& obj, const char* key, const std::string& source,
                                const std::string& where) {
  const auto& v = field(obj, key, source, where);
  BERTRAIN_CHECK(v.is_string(), source, ": ", where, ": field \"", key, "\" should be a string, got ", v.type_name());
  return v.get_ref<const std::string&>();
}

const nlohmann::json& array_field(const nlohmann::json& obj, const char* key, const std::string& source,
                                  const std::string& where) {
  const auto& v = field(obj, key, source, where);
  BERTRAIN_CHECK(v.is_array(), source, ": ", where, ": field \"", key, "\" should be an array, got ", v.type_name());
  return v;
}

int64_t int_field(const nlohmann::json& obj, const char* key, const std::string& source, const std::string& where) {
  const auto& v = field(obj, key, source, where);
  BERTRAIN_CHECK(v.is_number_integer(), source, ": ", where, ": field \"", key, "\" should be an integer, got ",
                 v.dump());
  return v.get<int64_t>();
}

bool bool_field(const nlohmann::json& obj, const char* key, const std::string& source, const std::string& where) {
  const auto& v = field(obj, key, source, where);
  BERTRAIN_CHECK(v.is_boolean(), source, ": ", where, ": field \"", key, "\" should be true or false, got ",
                 v.dump());
  return v.get<bool>();
}

}  // namespace bertrain::squad::detail
