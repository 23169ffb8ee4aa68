// A subcommand's options, declared as the config keys are (config.h): its
// arguments struct lists each option once in visit_fields(), as v(name, field,
// doc, rule), and names its command (kName), says what the command does
// (kAbout), whether it takes config overrides (kTakesOverrides) and, when it
// takes the words after "--" as given, what they are (kAfterDashes, e.g.
// "LAUNCHER ..."). From that one list come the reading of the command line
// (each value through key_values.h, the config's own reader), the
// unknown-option error with its "did you mean", the required options, the
// range checks (range_violation, as config_validate's) and the usage text. How
// a field's type reads: a bool is a flag (--name, or --name=false); a
// std::optional stays empty unless given; a std::vector is a comma list (the
// last one given wins), or, when repeatable, one item per --name. A number
// (each item of a list) must lie in the rule's range. See
// docs/configuration.md#command-options.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "base/cli_values.h"
#include "base/error.h"
#include "schema/key_rules.h"
#include "schema/key_values.h"

namespace llm {

// What an option promises besides its type, default and doc. Declared as
// "DIR" (its value's name in the usage), a Range, OptionRule("K", range),
// and required(...) or repeatable(...) of any of these.
struct OptionRule {
  const char* value = nullptr;  // its value's name in the usage (DIR, FILE); null: from its type
  bool required = false;        // the command refuses to run without it
  bool repeatable = false;      // a std::vector of one item per --name, not a comma list
  Range range;                  // a number, each item of a list, must lie in it

  constexpr OptionRule() = default;
  constexpr OptionRule(Range r) : range(r) {}  // NOLINT: a range alone is a rule
  constexpr OptionRule(const char* v, Range r = {}) : value(v), range(r) {}  // NOLINT: so is a name
};
// `rule`, for an option the command refuses to run without.
constexpr OptionRule required(OptionRule rule) {
  rule.required = true;
  return rule;
}
// `rule`, for a std::vector option given once per item.
constexpr OptionRule repeatable(OptionRule rule) {
  rule.repeatable = true;
  return rule;
}

// One declared option as the usage and the errors show it.
struct OptionSpec {
  std::string name;   // without the leading --
  std::string value;  // "DIR", "N"; empty for a flag
  std::string doc;    // what it means, with its default and range appended
  bool required = false;
};

// A subcommand as the usage shows it and the command line is checked against.
struct CommandSpec {
  std::string name;
  std::string about;
  bool takes_overrides = false;
  std::vector<OptionSpec> options;
  std::string after_dashes;  // what follows "--" in the usage (LAUNCHER ...); empty: nothing may

  // The names of its options that take no value, for parse_command_line.
  std::vector<std::string> flags() const;
};

// The command's usage: its synopsis (its required options, [options], the
// overrides it takes), what it does, then one line per option with its doc.
std::string command_usage(const CommandSpec& spec);

// Refuses, naming the command, an option `spec` does not declare (with the
// nearest declared one), overrides when it takes none, a required option not
// given, and words after "--" unless it takes them (then they are required).
void check_command_line(const CommandSpec& spec, const CommandLine& line);

namespace option_values {

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsEnumList : std::false_type {};
template <NamedEnum E>
struct IsEnumList<std::vector<E>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

// The usage's name for a value of type T when the rule gives none.
template <class T>
std::string value_name() {
  if constexpr (IsEnumList<T>::value) {
    return "NAME,NAME";  // the choices follow the doc (list_choices)
  } else if constexpr (IsVector<T>::value || IsOptional<T>::value) {
    const std::string item = value_name<typename T::value_type>();
    return IsVector<T>::value ? fmt::format("{},{}", item, item) : item;
  } else if constexpr (NamedEnum<T>) {
    std::string names;
    for (const EnumName<T>& entry : enum_names(T{}))
      names += fmt::format("{}{}", names.empty() ? "" : "|", entry.name);
    return names;
  } else if constexpr (std::is_same_v<T, ByteSize>) {
    return "SIZE";
  } else if constexpr (std::is_same_v<T, Duration>) {
    return "DURATION";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "X";
  } else if constexpr (std::is_integral_v<T>) {
    return "N";
  } else {
    return "TEXT";
  }
}

// "choices: a, b or c" for a list of named enums, whose value name cannot
// hold them; else empty.
template <class T>
std::string list_choices() {
  if constexpr (IsEnumList<T>::value)
    return fmt::format("choices: {}", enum_choices<typename T::value_type>());
  return "";
}

// The default as the usage shows it; empty when there is none to show (a
// flag, an empty text or list, an unset optional).
template <class T>
std::string default_text(const T& value) {
  if constexpr (std::is_same_v<T, bool> || IsOptional<T>::value || std::is_same_v<T, ByteSize>) {
    return "";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<T, Duration>) {
    return fmt::format("{}s", value.seconds);
  } else if constexpr (IsVector<T>::value) {
    std::string text;
    for (const auto& item : value)
      text += fmt::format("{}{}", text.empty() ? "" : ",", default_text(item));
    return text;
  } else if constexpr (NamedEnum<T>) {
    return to_string(value);
  } else {
    std::ostringstream text;
    write_key_value(text, value);
    return text.str();
  }
}

// Reads one value into `out`, then checks a number against `rule`'s range.
template <class T>
void read_checked(const std::string& text, T& out, const OptionRule& rule,
                  const std::string& option) {
  read_key_text(text, out, option);
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    const std::string violation = range_violation(option, out, rule.range);
    LLM_CHECK(violation.empty(), "{}", violation);
  }
}

// Reads the text given to --name into its field, by the field's type.
template <class T>
void read_option(const std::string& text, T& field, const OptionRule& rule,
                 const std::string& option) {
  if constexpr (std::is_same_v<T, bool>) {
    if (text.empty()) {
      field = true;
      return;
    }
    read_checked(text, field, rule, option);
  } else if constexpr (IsOptional<T>::value) {
    typename T::value_type value{};
    read_checked(text, value, rule, option);
    field = value;
  } else if constexpr (IsVector<T>::value) {
    if (!rule.repeatable) field.clear();
    for (const std::string& item : rule.repeatable ? std::vector{text} : split_commas(text))
      read_checked(item, field.emplace_back(), rule, option);
  } else {
    read_checked(text, field, rule, option);
  }
}

}  // namespace option_values

// The spec of the command whose arguments struct is Arguments.
template <class Arguments>
CommandSpec command_spec() {
  CommandSpec spec{Arguments::kName, Arguments::kAbout, Arguments::kTakesOverrides, {}, {}};
  if constexpr (requires { Arguments::kAfterDashes; }) spec.after_dashes = Arguments::kAfterDashes;
  const Arguments defaults;
  visit_keys<OptionRule>(
      defaults, [&](const char* name, const auto& field, const char* doc, const OptionRule& rule) {
        using T = std::decay_t<decltype(field)>;
        OptionSpec option{name, "", doc, rule.required};
        if constexpr (!std::is_same_v<T, bool>)
          option.value = rule.value ? rule.value : option_values::value_name<T>();
        std::string notes;
        if (rule.required) notes = "required";
        if (const std::string shown = option_values::default_text(field); !shown.empty())
          notes = fmt::format("default {}", shown);
        for (const std::string& note :
             {rule.range.unbounded() ? "" : rule.range.text(), option_values::list_choices<T>()}) {
          if (!note.empty()) notes += fmt::format("{}{}", notes.empty() ? "" : "; ", note);
        }
        if (!notes.empty()) option.doc += fmt::format(" ({})", notes);
        spec.options.push_back(option);
      });
  return spec;
}

// The command line's options read into Arguments' fields, as declared;
// errors name the option (check_command_line's, then each value's).
template <class Arguments>
Arguments parse_arguments(const CommandLine& line) {
  check_command_line(command_spec<Arguments>(), line);
  Arguments arguments;
  visit_keys<OptionRule>(
      arguments, [&](const char* name, auto& field, const char*, const OptionRule& rule) {
        for (const auto& [given, text] : line.options) {
          if (given == name)
            option_values::read_option(text, field, rule, fmt::format("--{}", given));
        }
      });
  return arguments;
}

}  // namespace llm
