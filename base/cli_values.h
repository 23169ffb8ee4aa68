// The command line: argv split into a subcommand, options (--name value |
// --name=value) and config overrides (--section.key=value | --section.key
// value); durations and comma lists; "did you mean" suggestions for misspelt
// names. Errors name the option. The options' values are read as their
// command declares them (schema/command_options.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llm {

struct CommandLine {
  std::string command = "train";
  std::vector<std::pair<std::string, std::string>> options;  // --name value
  std::vector<std::string> overrides;                        // section.key=value
  std::vector<std::string> after_dashes;                     // the words after "--", as given

  // Whether --option was given (once or more).
  bool given(std::string_view option) const;
};

// The options of `command` that take no value.
using FlagsOf = std::function<std::vector<std::string>(const std::string& command)>;

// Splits argv: an optional first word is the subcommand; a name with a dot
// before any '=' is a config override; the subcommand's flags_of() are the
// options without value; the words after "--" are kept as given.
CommandLine parse_command_line(int argc, const char* const* argv, const FlagsOf& flags_of);

// A duration such as "90s", "10min", "1.5h" or "500ms" in seconds (> 0),
// else an llm::Error naming `key`.
double parse_duration_seconds(const std::string& text, const std::string& key);
// "a,b,,c" -> {a, b, c} (empty items dropped).
std::vector<std::string> split_commas(const std::string& text);

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(std::string_view a, std::string_view b);
// " (did you mean 'x'?)" for the candidate closest to `word` when it is close
// (at most max(2, |word| / 5) edits), else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace llm
