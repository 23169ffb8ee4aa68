// Strict parsing of command-line option values (see cli_values.h).
#include "runtime/cli_values.h"

#include <sstream>

#include "runtime/error.h"

namespace llm {

long long parse_integer(const std::string& text, const std::string& option) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LLM_CHECK(used == text.size() && !text.empty(), "--{}: expected an integer, got '{}'", option, text);
  return value;
}

double parse_positive_number(const std::string& text, const std::string& option) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LLM_CHECK(used == text.size() && !text.empty() && value > 0,
            "--{}: expected a positive number, got '{}'", option, text);
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
