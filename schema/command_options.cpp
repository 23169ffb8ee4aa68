// A command's usage and the check of its command line, from its options'
// declarations (see command_options.h).
#include "schema/command_options.h"

#include <algorithm>
#include <sstream>

namespace llm {
namespace {

constexpr size_t kUsageWidth = 100;
constexpr size_t kAboutIndent = 6;
constexpr size_t kDocColumn = 30;  // where an option's doc starts

// `text` in lines of at most kUsageWidth columns, each after `indent` spaces
// (the first line after `first_line_used` columns already written instead).
std::string wrap(const std::string& text, size_t indent, size_t first_line_used) {
  std::istringstream words(text);
  std::string out, word;
  size_t column = first_line_used;
  bool line_empty = true;
  while (words >> word) {
    if (!line_empty && column + 1 + word.size() > kUsageWidth) {
      out += fmt::format("\n{:{}}", "", indent);
      column = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    line_empty = false;
  }
  return out + "\n";
}

std::string option_text(const OptionSpec& option) {
  return fmt::format("--{}{}{}", option.name, option.value.empty() ? "" : " ", option.value);
}

}  // namespace

std::vector<std::string> CommandSpec::flags() const {
  std::vector<std::string> names;
  for (const OptionSpec& option : options) {
    if (option.value.empty()) names.push_back(option.name);
  }
  return names;
}

std::string command_usage(const CommandSpec& spec) {
  const bool is_default = spec.name == CommandLine{}.command;
  std::string synopsis = is_default ? fmt::format("  ./train [{}]", spec.name)
                                    : fmt::format("  ./train {}", spec.name);
  bool has_optional = false;
  for (const OptionSpec& option : spec.options) {
    if (option.required)
      synopsis += fmt::format(" {}", option_text(option));
    else
      has_optional = true;
  }
  if (has_optional) synopsis += " [options]";
  if (spec.takes_overrides) synopsis += " [--section.key=value ...]";
  if (!spec.after_dashes.empty()) synopsis += fmt::format(" -- {}", spec.after_dashes);
  std::string usage = synopsis + "\n" + std::string(kAboutIndent, ' ') +
                      wrap(spec.about, kAboutIndent, kAboutIndent);
  for (const OptionSpec& option : spec.options) {
    std::string line = std::string(kAboutIndent, ' ') + option_text(option);
    if (line.size() + 1 >= kDocColumn)
      line += fmt::format("\n{:{}}", "", kDocColumn);
    else
      line.resize(kDocColumn, ' ');
    usage += line + wrap(option.doc, kDocColumn, kDocColumn);
  }
  return usage;
}

void check_command_line(const CommandSpec& spec, const CommandLine& line) {
  std::vector<std::string> names;
  for (const OptionSpec& option : spec.options) names.push_back(option.name);
  for (const auto& [name, value] : line.options) {
    LLM_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
              "./train {}: unknown option --{}{} (see ./train --help)", spec.name, name,
              did_you_mean(name, names));
  }
  LLM_CHECK(spec.takes_overrides || line.overrides.empty(),
            "./train {} takes no config overrides (--{})", spec.name, line.overrides.front());
  for (const OptionSpec& option : spec.options) {
    LLM_CHECK(!option.required || line.given(option.name),
              "./train {}: {} is required (see ./train --help)", spec.name, option_text(option));
  }
  if (spec.after_dashes.empty()) {
    LLM_CHECK(line.after_dashes.empty(), "./train {} takes nothing after -- (see ./train --help)",
              spec.name);
  } else {
    LLM_CHECK(!line.after_dashes.empty(), "./train {}: {} goes after -- (see ./train --help)",
              spec.name, spec.after_dashes);
  }
}

}  // namespace llm
