// Reading one TOML value by its C++ type; the walk over tables is the
// template in toml_tables.h.
#include "schema/toml_tables.h"

#include <limits>

namespace llm {

toml::table parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    LLM_FAIL("{}:{}: {}", origin, e.source().begin.line, e.description());
  }
}

void read_toml_value(const toml::node& node, int& out, const std::string& key) {
  auto value = node.value_exact<int64_t>();
  LLM_CHECK(value.has_value(), "{}: expected an integer", key);
  LLM_CHECK(*value >= std::numeric_limits<int>::min() && *value <= std::numeric_limits<int>::max(),
            "{}: {} is out of range for a 32-bit integer [{}, {}]", key, *value,
            std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  out = static_cast<int>(*value);
}
void read_toml_value(const toml::node& node, int64_t& out, const std::string& key) {
  auto value = node.value_exact<int64_t>();
  LLM_CHECK(value.has_value(), "{}: expected an integer", key);
  out = *value;
}
void read_toml_value(const toml::node& node, double& out, const std::string& key) {
  LLM_CHECK(node.is_number(), "{}: expected a number", key);
  out = *node.value<double>();
}
void read_toml_value(const toml::node& node, bool& out, const std::string& key) {
  auto value = node.value_exact<bool>();
  LLM_CHECK(value.has_value(), "{}: expected true or false", key);
  out = *value;
}
void read_toml_value(const toml::node& node, std::string& out, const std::string& key) {
  auto value = node.value_exact<std::string>();
  LLM_CHECK(value.has_value(), "{}: expected a string", key);
  out = *value;
}
void read_toml_value(const toml::node& node, SwitchOrPath& out, const std::string& key) {
  if (auto on = node.value_exact<bool>()) {
    out = {*on, ""};
    return;
  }
  auto path = node.value_exact<std::string>();
  LLM_CHECK(path.has_value() && !path->empty(), "{}: expected true, false or a directory", key);
  out = {true, *path};
}
void read_toml_value(const toml::node& node, AutoCount& out, const std::string& key) {
  if (auto text = node.value_exact<std::string>()) {
    LLM_CHECK(*text == "auto", "{}: expected a positive integer or \"auto\", got '{}'", key, *text);
    out.value = 0;
    return;
  }
  auto value = node.value_exact<int64_t>();
  LLM_CHECK(value.has_value() && *value >= 1 && *value <= std::numeric_limits<int>::max(),
            "{}: expected a positive integer or \"auto\"", key);
  out.value = static_cast<int>(*value);
}

}  // namespace llm
