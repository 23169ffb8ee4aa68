// Config parsing, overrides, imports and dumping. Every table walks its own
// visit_fields() list, so adding a key is one line in config.h.
#include "schema/config.h"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "schema/config_validate.h"
#include "schema/key_origin.h"
#include "schema/toml_tables.h"
#include "base/cli_values.h"
#include "base/error.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// --- reading one value from override text ------------------------------------

template <class T>
std::string integer_range() {
  return fmt::format("[{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
}

template <class T>
T parse_number(const std::string& text, const std::string& key, const char* what) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if constexpr (std::is_integral_v<T>) {
    LLM_CHECK(ec != std::errc::result_out_of_range,
              "{}: {} is out of range for a {}-bit integer {}", key, text, 8 * sizeof(T),
              integer_range<T>());
  }
  LLM_CHECK(ec == std::errc() && ptr == end && !text.empty(), "{}: expected {}, got '{}'", key,
            what, text);
  return value;
}

void read_text(const std::string& text, int& out, const std::string& key) {
  out = parse_number<int>(text, key, "an integer");
}
void read_text(const std::string& text, int64_t& out, const std::string& key) {
  out = parse_number<int64_t>(text, key, "an integer");
}
void read_text(const std::string& text, double& out, const std::string& key) {
  out = parse_number<double>(text, key, "a number");
}
void read_text(const std::string& text, bool& out, const std::string& key) {
  LLM_CHECK(text == "true" || text == "false", "{}: expected true or false, got '{}'", key, text);
  out = text == "true";
}
void read_text(const std::string& text, std::string& out, const std::string&) { out = text; }
void read_text(const std::string& text, AutoCount& out, const std::string& key) {
  if (text == "auto") {
    out.value = 0;
    return;
  }
  out.value = parse_number<int>(text, key, "a positive integer or auto");
  LLM_CHECK(out.value >= 1, "{}: expected a positive integer or auto, got '{}'", key, text);
}
void read_text(const std::string& text, SwitchOrPath& out, const std::string& key) {
  LLM_CHECK(!text.empty(), "{}: expected true, false or a directory", key);
  if (text == "true" || text == "false")
    out = {text == "true", ""};
  else
    out = {true, text};
}
template <NamedEnum E>
void read_text(const std::string& text, E& out, const std::string& key) {
  out = parse_enum<E>(text, key);
}

// --- walking the tables --------------------------------------------------------

// Every key as "table.key", for "did you mean" suggestions.
std::vector<std::string> all_keys(const Config& config) {
  std::vector<std::string> keys;
  config.visit_tables([&](const char* table_name, auto& section) {
    visit_keys(section, [&](const char* key, auto&, const char*, const KeyRule&) {
      keys.push_back(fmt::format("{}.{}", table_name, key));
    });
  });
  return keys;
}

void apply_override(Config& config, const std::string& assignment) {
  const std::string origin = fmt::format("command line --{}", assignment);
  size_t eq = assignment.find('=');
  size_t dot = assignment.find('.');
  LLM_CHECK(eq != std::string::npos && dot != std::string::npos && dot < eq,
            "{}: expected --section.key=value or --section.key value", origin);
  std::string table_name = assignment.substr(0, dot);
  std::string key = assignment.substr(dot + 1, eq - dot - 1);
  std::string text = assignment.substr(eq + 1);
  bool found = false;
  config.visit_tables([&](const char* name, auto& section) {
    if (table_name != name) return;
    visit_keys(section, [&](const char* field_key, auto& field, const char*, const KeyRule&) {
      if (key != field_key) return;
      read_text(text, field, fmt::format("command line --{}.{}", table_name, key));
      found = true;
    });
  });
  const std::string name = assignment.substr(0, eq);
  LLM_CHECK(found, "{}: unknown key '{}'{}", origin, name,
            unknown_key_hint(name, all_keys(config)));
}

void write_value(std::ostream& out, int value) { out << value; }
void write_value(std::ostream& out, int64_t value) { out << value; }
void write_value(std::ostream& out, bool value) { out << (value ? "true" : "false"); }
// The shortest text that reads back as the same double (0.003, not
// 0.0030000000000000001), always a TOML float (1.0, not 1).
void write_value(std::ostream& out, double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  out << text;
}
void write_value(std::ostream& out, AutoCount value) {
  if (value.automatic())
    out << "\"auto\"";
  else
    out << value.value;
}
void write_value(std::ostream& out, const std::string& value) {
  out << toml::value<std::string>(value);
}
void write_value(std::ostream& out, const SwitchOrPath& value) {
  if (value.path.empty())
    write_value(out, value.on);
  else
    write_value(out, value.path);
}
template <NamedEnum E>
void write_value(std::ostream& out, E value) {
  out << toml::value<std::string>(to_string(value));
}

fs::path find_config_file(const std::string& path_or_name) {
  for (fs::path candidate : {fs::path(path_or_name), fs::path("configs") / path_or_name,
                             fs::path("configs") / (path_or_name + ".toml")}) {
    if (fs::is_regular_file(candidate)) return candidate;
  }
  LLM_FAIL("config '{}' not found (looked for it as given and in configs/)", path_or_name);
}

}  // namespace

std::string Config::run_dir() const {
  return checkpoint.dir.empty() ? (fs::path("checkpoints") / name).string() : checkpoint.dir;
}

Config config_parse(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides, ConfigImport import) {
  Config config;
  config.path = origin;
  config.name = fs::path(origin).stem().string();
  const toml::table root = parse_toml(toml_text, origin);
  read_toml_tables(config, root, origin, Omitted::keeps_default);
  for (auto&& [table_name, table] : root) {  // every table is one read_toml_tables knows
    for (auto&& [key, value] : *table.as_table())
      config.file_keys.insert(fmt::format("{}.{}", table_name.str(), key.str()));
  }
  config_apply_overrides(config, overrides);
  if (import) import(config);
  config_validate(config);
  return config;
}

void config_apply_overrides(Config& config, const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) apply_override(config, assignment);
  config.overrides.insert(config.overrides.end(), overrides.begin(), overrides.end());
}

CommBackend Config::comm() const {
  if (parallel.comm != CommBackend::automatic) return parallel.comm;
  return device() == Device::cuda ? CommBackend::nccl : CommBackend::mpi;
}

Config config_load(const std::string& path_or_name, const std::vector<std::string>& overrides,
                   ConfigImport import) {
  fs::path path = find_config_file(path_or_name);
  std::ifstream in(path);
  LLM_CHECK(in, "{}: cannot read", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return config_parse(text.str(), path.string(), overrides, import);
}

namespace {

// `table`'s key `key` as the dumped config writes it, through `visit`.
template <class Table, class Visit>
void visit_key(Table& table, std::string_view key, Visit&& visit) {
  bool found = false;
  visit_keys(table, [&](const char* name, auto& field, const char*, const KeyRule&) {
    if (key != name) return;
    visit(field);
    found = true;
  });
  LLM_CHECK(found, "no key '{}' in this table", key);
}

}  // namespace

std::string config_model_value(const ModelConfig& model, std::string_view key) {
  std::ostringstream text;
  visit_key(model, key, [&](const auto& value) { write_value(text, value); });
  return text.str();
}

void config_import_model(Config& config, const ModelConfig& source,
                         std::span<const std::string_view> keys, const std::string& origin) {
  for (std::string_view key : keys) {
    const std::string name = fmt::format("model.{}", key);
    visit_key(source, key, [&](const auto& theirs) {
      visit_key(config.model, key, [&](auto& ours) {
        if constexpr (std::is_same_v<std::decay_t<decltype(ours)>,
                                     std::decay_t<decltype(theirs)>>) {
          if (const std::optional<std::string> set_at = config_user_origin(config, name)) {
            if (ours == theirs) return;
            LLM_FAIL("{}: {} = {} but {} says {}; leave {} out to take the checkpoint's", *set_at,
                     name, config_model_value(config.model, key), origin,
                     config_model_value(source, key), name);
          }
          ours = theirs;
          config.imported[name] = origin;
        }
      });
    });
  }
}

namespace {

// The type of a key's value, as the reference table names it.
const char* type_name(int) { return "integer"; }
const char* type_name(int64_t) { return "integer"; }
const char* type_name(bool) { return "bool"; }
const char* type_name(double) { return "float"; }
const char* type_name(const std::string&) { return "string"; }
const char* type_name(AutoCount) { return "integer or \"auto\""; }
const char* type_name(const SwitchOrPath&) { return "bool or a directory"; }
template <NamedEnum E>
std::string type_name(E) {
  return "one of " + enum_choices<E>();
}

const char* on_resume_text(OnResume on_resume) {
  switch (on_resume) {
    case OnResume::same_trajectory:
      return "same run";
    case OnResume::changes_trajectory:
      return "changes the run";
    case OnResume::changes_model:
      return "refused";
  }
  return "?";
}

std::string escape_table_cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
    text.replace(at, 1, "\\|");
  }
  return text;
}

}  // namespace

std::string config_reference() {
  const Config defaults;
  std::ostringstream out;
  out << "| key | type | default | range | on resume | meaning |\n|---|---|---|---|---|---|\n";
  defaults.visit_tables([&](const char* table_name, const auto& section) {
    visit_keys(
        section, [&](const char* key, const auto& field, const char* doc, const KeyRule& rule) {
          std::ostringstream value;
          write_value(value, field);
          const std::string range = rule.range.unbounded() ? "" : rule.range.text();
          const OnResume on_resume =
              rule.has_on_resume ? rule.on_resume : std::decay_t<decltype(section)>::kOnResume;
          out << "| `" << table_name << "." << key << "` | " << escape_table_cell(type_name(field))
              << " | `" << value.str() << "` | " << range << " | " << on_resume_text(on_resume)
              << " | " << escape_table_cell(doc) << " |\n";
        });
  });
  return out.str();
}

std::string config_to_toml(const Config& config) {
  std::ostringstream out;
  config.visit_tables([&](const char* table_name, const auto& section) {
    out << "[" << table_name << "]\n";
    visit_keys(section, [&](const char* key, const auto& field, const char*, const KeyRule&) {
      out << key << " = ";
      write_value(out, field);
      out << "\n";
    });
    out << "\n";
  });
  return out.str();
}

std::optional<OnResume> config_key_on_resume(std::string_view key) {
  std::optional<OnResume> found;
  const Config defaults;
  defaults.visit_tables([&](const char* table_name, const auto& section) {
    visit_keys(section, [&](const char* name, const auto&, const char*, const KeyRule& rule) {
      if (key != fmt::format("{}.{}", table_name, name)) return;
      found = rule.has_on_resume ? rule.on_resume : std::decay_t<decltype(section)>::kOnResume;
    });
  });
  return found;
}

std::optional<std::string> renamed_key(std::string_view key) {
  static const std::pair<std::string_view, std::string_view> kRenamed[] = {
      {"training.activation_checkpointing", "training.recompute"},
      {"training.checkpoint_every", "training.recompute_every"},
  };
  for (const auto& [old_name, new_name] : kRenamed)
    if (key == old_name) return std::string(new_name);
  return std::nullopt;
}

std::string unknown_key_hint(const std::string& name, const std::vector<std::string>& known) {
  if (const std::optional<std::string> renamed = renamed_key(name))
    return fmt::format(" (renamed '{}')", *renamed);
  return did_you_mean(name, known);
}

}  // namespace llm
