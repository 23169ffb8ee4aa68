// The command line, strict option values and name suggestions (see cli_values.h).
#include "base/cli_values.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <utility>

#include "base/error.h"

namespace llm {

CommandLine parse_command_line(int argc, const char* const* argv,
                               std::span<const std::string_view> flags) {
  CommandLine line;
  int i = 1;
  if (i < argc && argv[i][0] != '-') line.command = argv[i++];
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    LLM_CHECK(arg.rfind("--", 0) == 0, "unexpected argument '{}' (see ./train --help)", arg);
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const bool has_value = eq != std::string::npos;
    const bool is_flag = std::find(flags.begin(), flags.end(), name) != flags.end();
    std::string value;
    if (has_value) {
      value = arg.substr(eq + 1);
    } else if (!is_flag) {
      LLM_CHECK(i + 1 < argc, "option --{} needs a value (--{}=VALUE or --{} VALUE)", name, name,
                name);
      value = argv[++i];
    }
    if (name.find('.') != std::string::npos) {
      line.overrides.push_back(name + "=" + value);
    } else {
      line.options.emplace_back(name, value);
    }
  }
  return line;
}

long long parse_integer(const std::string& text, const std::string& option) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LLM_CHECK(used == text.size() && !text.empty(), "--{}: expected an integer, got '{}'", option,
            text);
  return value;
}

namespace {

// The whole text as a double, or NaN.
double whole_number(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  return used == text.size() && !text.empty() ? value : NAN;
}

}  // namespace

double parse_positive_number(const std::string& text, const std::string& option) {
  const double value = whole_number(text);
  LLM_CHECK(value > 0, "--{}: expected a positive number, got '{}'", option, text);
  return value;
}

double parse_number(const std::string& text, const std::string& option, double min, double max) {
  const double value = whole_number(text);
  LLM_CHECK(value >= min && value <= max, "--{}: expected a number from {} to {}, got '{}'", option,
            min, max, text);
  return value;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace llm

namespace llm {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, word.size() / 5) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = &candidate;
      best_distance = distance;
    }
  }
  return best ? " (did you mean '" + *best + "'?)" : "";
}

double parse_duration_seconds(const std::string& text, const std::string& key) {
  static const std::pair<const char*, double> kUnits[] = {
      {"ms", 1e-3}, {"s", 1}, {"min", 60}, {"h", 3600}};
  for (const auto& [unit, seconds] : kUnits) {
    const std::string_view suffix(unit);
    if (text.size() <= suffix.size() ||
        text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string number = text.substr(0, text.size() - suffix.size());
    if (number.find_first_not_of("0123456789.") != std::string::npos) continue;  // "10m" + "s"?
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (end == number.c_str() + number.size() && value > 0) return value * seconds;
  }
  LLM_FAIL("{}: expected a positive duration such as 90s, 10min, 1h or 500ms, got '{}'", key, text);
}

}  // namespace llm
