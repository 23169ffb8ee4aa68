// The project's one TOML reader: fills a struct that lists its tables with
// visit_tables() and each table's keys with visit_fields() (train configs,
// hardware profiles). Values are read by type, named enums by their name
// table, so no caller compares strings after reading. Invariant: a key or
// table the struct does not list is an error naming the origin and the key
// (with a "did you mean"), never ignored.
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schema/config.h"
#include "schema/key_rules.h"
#include "base/cli_values.h"
#include "base/error.h"

namespace llm {

// Parses TOML text; a syntax error is "origin:line: what".
toml::table parse_toml(const std::string& text, const std::string& origin);

// One value from a TOML node; `key` names it in errors ("file: table.key").
void read_toml_value(const toml::node& node, int& out, const std::string& key);
void read_toml_value(const toml::node& node, int64_t& out, const std::string& key);
void read_toml_value(const toml::node& node, double& out, const std::string& key);
void read_toml_value(const toml::node& node, bool& out, const std::string& key);
void read_toml_value(const toml::node& node, std::string& out, const std::string& key);
void read_toml_value(const toml::node& node, AutoCount& out, const std::string& key);
void read_toml_value(const toml::node& node, SwitchOrPath& out, const std::string& key);
template <NamedEnum E>
void read_toml_value(const toml::node& node, E& out, const std::string& key) {
  auto value = node.value_exact<std::string>();
  LLM_CHECK(value.has_value(), "{}: expected a string: {}", key, enum_choices<E>());
  out = parse_enum<E>(*value, key);
}

// Whether a table or key the struct lists may be left out of the file.
enum class Omitted { keeps_default, is_error };

// Reads `root` into `tables`. A struct that also has visit_fields() takes
// those keys from the top level, beside its tables. Tables are visited, and
// read, in visit_tables() order, so a later table's presence may depend on
// an earlier table's values.
template <class Tables>
void read_toml_tables(Tables& tables, const toml::table& root, const std::string& origin,
                      Omitted omitted) {
  std::vector<std::string> all_keys;  // "table.key", for suggestions
  tables.visit_tables([&](const char* table_name, auto& section) {
    visit_keys(section, [&](const char* key, auto&, const char*, const KeyRule&) {
      all_keys.push_back(fmt::format("{}.{}", table_name, key));
    });
  });
  // A misspelt key is named as unknown before its correct spelling as missing.
  auto read_keys = [&](auto& section, const toml::table& table, const std::string& prefix) {
    std::vector<std::string> keys;
    visit_keys(section,
               [&](const char* key, auto&, const char*, const KeyRule&) { keys.push_back(key); });
    if (!prefix.empty()) {
      for (auto&& [key, value] : table) {
        const std::string name = prefix + std::string(key.str());
        LLM_CHECK(std::find(keys.begin(), keys.end(), key.str()) != keys.end(),
                  "{}: unknown key '{}'{}", origin, name, unknown_key_hint(name, all_keys));
      }
    }
    visit_keys(section, [&](const char* key, auto& field, const char*, const KeyRule&) {
      const std::string name = prefix + key;
      if (const toml::node* value = table.get(key)) {
        read_toml_value(*value, field, fmt::format("{}: {}", origin, name));
      } else {
        LLM_CHECK(omitted == Omitted::keeps_default, "{}: missing key '{}'", origin, name);
      }
    });
    return keys;
  };
  std::vector<std::string> known;  // top-level names: the struct's own keys, then its tables
  if constexpr (requires { tables.visit_fields([](auto&&...) {}); }) {
    known = read_keys(tables, root, "");
  }
  tables.visit_tables([&](const char* table_name, auto& section) {
    known.push_back(table_name);
    const toml::node* node = root.get(table_name);
    if (!node) {
      LLM_CHECK(omitted == Omitted::keeps_default, "{}: missing table [{}]", origin, table_name);
      return;
    }
    const toml::table* table = node->as_table();
    LLM_CHECK(table, "{}: [{}] must be a table", origin, table_name);
    read_keys(section, *table, std::string(table_name) + ".");
  });
  for (auto&& [key, value] : root) {
    const std::string name(key.str());
    LLM_CHECK(std::find(known.begin(), known.end(), name) != known.end(),
              "{}: unknown table or key '{}'{}", origin, name, did_you_mean(name, known));
  }
}

}  // namespace llm
