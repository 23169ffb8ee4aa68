// The command line and its option values: argv split into a subcommand,
// options (--name value | --name=value) and config overrides
// (--section.key=value | --section.key value); whole numbers, positive numbers
// and comma lists parsed strictly; "did you mean" suggestions for misspelt
// names. Errors name the option.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llm {

struct CommandLine {
  std::string command = "train";
  std::vector<std::pair<std::string, std::string>> options;  // --name value
  std::vector<std::string> overrides;                        // section.key=value
};

// Splits argv: an optional first word is the subcommand; a name with a dot
// before any '=' is a config override; `flags` are the options without value.
CommandLine parse_command_line(int argc, const char* const* argv,
                               std::span<const std::string_view> flags);

// The whole text as an integer, else an llm::Error naming --option.
long long parse_integer(const std::string& text, const std::string& option);
// The whole text as a number > 0, else an llm::Error naming --option.
double parse_positive_number(const std::string& text, const std::string& option);
// The whole text as a number in [min, max], else an llm::Error naming --option.
double parse_number(const std::string& text, const std::string& option, double min, double max);
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
